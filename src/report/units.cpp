#include <cmath>
#include <cstdio>
#include <string>

#include "hbmscope/printers.hpp"

namespace hbmscope {

namespace {

std::string g3(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

std::string scaled(double v, double base, const char* const* units, int n_units) {
  // No figure is infinite or NaN: one that is says "-" rather than "inf PB/s".
  if (!std::isfinite(v)) return "-";
  int i = 0;
  while (i + 1 < n_units && v >= base) {
    v /= base;
    ++i;
  }
  // %.3g may round 999.7 up to "1e+03": step to the next unit instead.
  if (i + 1 < n_units && g3(v) == g3(base)) {
    v /= base;
    ++i;
  }
  return g3(v) + " " + units[i];
}

}  // namespace

std::optional<Format> parse_format(std::string_view s) {
  if (s == "table") return Format::table;
  if (s == "json") return Format::json;
  if (s == "csv") return Format::csv;
  if (s == "md") return Format::md;
  return std::nullopt;
}

std::optional<Units> parse_units(std::string_view s) {
  if (s == "decimal") return Units::decimal;
  if (s == "binary") return Units::binary;
  if (s == "bytes") return Units::bytes;
  return std::nullopt;
}

std::string format_bytes(std::uint64_t bytes, Units units) {
  static const char* const decimal[] = {"B", "kB", "MB", "GB", "TB", "PB", "EB"};
  static const char* const binary[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  switch (units) {
    case Units::bytes: return std::to_string(bytes) + " B";
    case Units::binary:
      if (bytes < 1024) return std::to_string(bytes) + " B";
      return scaled(static_cast<double>(bytes), 1024.0, binary, 7);
    case Units::decimal:
      if (bytes < 1000) return std::to_string(bytes) + " B";
      return scaled(static_cast<double>(bytes), 1000.0, decimal, 7);
  }
  return {};
}

std::string format_flops(std::uint64_t flops) {
  static const char* const units[] = {"FLOP", "kFLOP", "MFLOP", "GFLOP", "TFLOP", "PFLOP", "EFLOP"};
  return scaled(static_cast<double>(flops), 1000.0, units, 7);
}

std::string format_intensity(double flop_per_byte) {
  if (!std::isfinite(flop_per_byte)) return "-";
  if (flop_per_byte < 1000) return g3(flop_per_byte) + " FLOP/B";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.0f FLOP/B", flop_per_byte);
  return buf;
}

std::string format_seconds(double s) {
  if (!std::isfinite(s)) return "-";
  if (!(s > 0)) return "0 s";
  if (s < 1e-6) return g3(s * 1e9) + " ns";
  if (s < 1e-3) return g3(s * 1e6) + " µs";
  if (s < 1) return g3(s * 1e3) + " ms";
  return g3(s) + " s";
}

std::string format_bandwidth(double bps) {
  static const char* const units[] = {"B/s", "kB/s", "MB/s", "GB/s", "TB/s", "PB/s"};
  return scaled(bps, 1000.0, units, 6);
}

std::string format_flop_rate(double fps) {
  static const char* const units[] = {"FLOP/s", "kFLOP/s", "MFLOP/s", "GFLOP/s", "TFLOP/s", "PFLOP/s", "EFLOP/s"};
  return scaled(fps, 1000.0, units, 7);
}

std::string variant_label(std::string_view id) {
  if (id == "standard") return "Standard attention";
  if (id == "flash_no_l2") return "FlashAttention, no L2 reuse";
  if (id == "floor") return "Every value once (floor)";
  if (id == "flash1_no_l2") return "FlashAttention-1 order, no L2 reuse";
  if (id == "flash_l2_sim") return "FlashAttention, simulated L2";
  if (id == "standard_l2_sim") return "Standard, simulated L2";
  if (id == "decode_floor") return "Decode: KV once (floor)";
  if (id == "decode_split") return "Decode: split-KV, GQA packed";
  if (id == "decode_split_unpacked") return "Decode: split-KV, one CTA per head";
  if (id == "decode_paged") return "Decode: paged KV";
  if (id == "decode_split_l2_sim") return "Decode split, simulated L2";
  if (id == "decode_split_unpacked_l2_sim") return "Decode unpacked, simulated L2";
  if (id == "decode_paged_l2_sim") return "Decode paged, simulated L2";
  return std::string(id);
}

}  // namespace hbmscope
