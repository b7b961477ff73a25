#include <algorithm>
#include <cstdio>

#include "hbmscope/csv.hpp"
#include "hbmscope/printers.hpp"
#include "printers_internal.hpp"

namespace hbmscope {

std::string render_devices(const std::vector<DeviceSpec>& devices, bool detail, Format format) {
  std::string out;
  if (format == Format::csv) {
    out = "device,name,memory,memory_bandwidth_bytes_per_s,l2_bytes,sm_count,peak_bf16,peak_fp16,"
          "peak_fp32,peak_fp8\n";
    for (const auto& d : devices)
      out += csv_line({d.id, d.name, d.memory, csv_number(d.bandwidth), std::to_string(d.l2_bytes),
                       std::to_string(d.sm_count), csv_number(d.peak.bf16), csv_number(d.peak.fp16),
                       csv_number(d.peak.fp32), csv_number(d.peak.fp8)});
    return out;
  }
  auto rate = [](double v) { return v > 0 ? format_flop_rate(v) : std::string("-"); };
  const std::vector<std::string> head{"Device, aliases", "Name", "Memory", "Bandwidth", "L2", "SMs",
                                      "BF16 dense", "FP16 dense", "FP32", "FP8 dense", "Ridge (bf16)"};
  std::vector<std::vector<std::string>> rows;
  for (const auto& d : devices)
    rows.push_back({[&d] {
                      std::string n = d.id;
                      for (const auto& a : d.aliases)
                        if (a != d.id) n += ", " + a;
                      return n;
                    }(),
                    d.name, d.memory, format_bandwidth(d.bandwidth),
                    format_bytes(d.l2_bytes, Units::binary), std::to_string(d.sm_count),
                    rate(d.peak.bf16), rate(d.peak.fp16), rate(d.peak.fp32), rate(d.peak.fp8),
                    d.peak.bf16 > 0 ? format_intensity(d.peak.bf16 / d.bandwidth) : std::string("-")});
  std::vector<bool> right(head.size(), true);
  right[0] = right[1] = right[2] = false;
  if (format != Format::md)
    out = "GPU presets for --device (dense peaks, datasheet bandwidth; `hbmscope devices NAME` for "
          "sources)\n\n";
  // Wider than a 120-column terminal: the memory figures and the peaks in two
  // tables, each with the device column.
  out += printing::render_grid_parts(head, rows, right, format, 120, {{0, 1, 2, 3, 4, 5}, {0, 6, 7, 8, 9, 10}});
  if (detail && !devices.empty()) {
    out += "\nSources:\n";
    for (const auto& [k, v] : devices.front().sources) out += "  " + k + ": " + v + "\n";
    if (devices.front().sources.empty()) out += "  (none given)\n";
  }
  return out;
}

}  // namespace hbmscope
