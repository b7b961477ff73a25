// The parts of a report that only the printers use (the L2 simulation's detail,
// kernel measurements, the measured device), read back from JSON after
// json_report_read.cpp has checked their types: a table or chart made from a
// report (merge, a sweep run in shards) is then the one the run printed.
#include <charconv>
#include <cmath>
#include <limits>

#include "hbmscope/json_report.hpp"
#include "json_check.hpp"

namespace hbmscope {

namespace {

std::uint64_t u64(const nlohmann::json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_number_unsigned() ? it->get<std::uint64_t>() : 0;
}

// A number; null (NaN, which JSON cannot hold) and absence read as NaN / 0.
double number(const nlohmann::json& j, const char* key, double absent = 0.0) {
  const auto it = j.find(key);
  if (it == j.end()) return absent;
  if (it->is_null()) return std::numeric_limits<double>::quiet_NaN();
  return it->is_number() ? it->get<double>() : absent;
}

std::string text(const nlohmann::json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

L2SimDetail::Variant sim_variant(const nlohmann::json& j, const char* min_key) {
  L2SimDetail::Variant v;
  v.read_bytes = u64(j, "read_bytes");
  v.write_bytes = u64(j, "write_bytes");
  v.hit_rate = number(j, "hit_rate");
  v.l2_bytes_to_min = u64(j, min_key);
  return v;
}

}  // namespace

L2SimDetail l2_sim_from_json(const nlohmann::json& l2, const std::vector<VariantResult>& variants) {
  L2SimDetail d;
  d.l2_bytes = u64(l2, "l2_bytes");
  d.sm_count = static_cast<std::uint32_t>(u64(l2, "sm_count"));
  d.ctas_per_sm = static_cast<std::uint32_t>(u64(l2, "ctas_per_sm"));
  d.order = text(l2, "order");
  d.q_o_allocate = l2.value("q_o_allocate", true);
  if (const auto dec = l2.find("decode"); dec != l2.end() && dec->is_object()) {
    // JSON objects come back in key order: the row's variant order is the run's.
    for (const auto& v : variants)
      if (const auto x = dec->find(v.id); x != dec->end() && x->is_object())
        d.decode.push_back({v.id, u64(*x, "splits"), sim_variant(*x, "l2_bytes_to_min"), u64(*x, "waves")});
    for (const auto& [id, x] : dec->items()) {
      bool known = false;
      for (const auto& s : d.decode) known |= s.id == id;
      if (!known && x.is_object()) d.decode.push_back({id, u64(x, "splits"), sim_variant(x, "l2_bytes_to_min"), u64(x, "waves")});
    }
    return d;
  }
  if (const auto f = l2.find("flash"); f != l2.end() && f->is_object()) {
    d.flash = sim_variant(*f, "l2_bytes_to_floor");
    d.heads_per_wave = number(*f, "heads_per_wave");
    d.kv_heads_per_wave = number(*f, "kv_heads_per_wave");
    d.waves = u64(*f, "waves");
  }
  if (const auto s = l2.find("standard"); s != l2.end() && s->is_object()) d.standard = sim_variant(*s, "l2_bytes_to_min");
  else d.has_standard = false;  // a backward row: standard attention's backward is not simulated
  return d;
}

KernelMeasurement measurement_from_json(const nlohmann::json& j, std::string_view origin, const std::string& path) {
  KernelMeasurement m;
  m.kernel = text(j, "kernel");
  m.variant = text(j, "variant");
  const std::string status = text(j, "status");  // absent: skipped (the checks let it be absent)
  if (status == "ok") m.status = MeasureStatus::ok;
  else if (status == "failed") m.status = MeasureStatus::failed;
  else if (!status.empty() && status != "skipped")
    json_check::fail(origin, path + ".status", "\"ok\", \"failed\" or \"skipped\"", j["status"]);
  m.reason = text(j, "reason");
  m.rel_error = number(j, "rel_error");
  m.lse_rel_error = number(j, "lse_rel_error");
  m.validated_on = text(j, "validated_on");
  m.block_rows = u64(j, "block_rows");
  m.block_cols = u64(j, "block_cols");
  m.splits = u64(j, "splits");
  m.page_size = u64(j, "page_size");
  m.model_bytes = u64(j, "model_bytes");
  if (const auto t = j.find("time_s"); t != j.end() && t->is_object()) {
    m.timing.median = number(*t, "median");
    m.timing.min = number(*t, "min");
    m.timing.max = number(*t, "max");
    m.timing.rel_spread = number(*t, "rel_spread");
    m.timing.warm_median = number(*t, "warm_median");
    if (const auto s = t->find("samples"); s != t->end() && s->is_array())
      for (const auto& x : *s) m.timing.samples.push_back(x.is_number() ? x.get<double>() : std::nan(""));
  }
  m.bandwidth = number(j, "bandwidth_Bps");
  m.copy_fraction = number(j, "copy_fraction");
  m.tflops = number(j, "tflops");
  if (const auto p = j.find("predicted_s"); p != j.end() && p->is_object()) {
    m.predicted_copy = number(*p, "copy");
    m.predicted_peak = number(*p, "peak");
  }
  m.measured_over_predicted = number(j, "measured_over_predicted");
  m.warps = u64(j, "warps");
  m.output_fits_l2 = j.value("output_fits_l2", false);
  if (j.contains("dram_read_bytes")) m.dram_read_bytes = u64(j, "dram_read_bytes");
  if (j.contains("dram_write_bytes")) m.dram_write_bytes = u64(j, "dram_write_bytes");
  m.counters = text(j, "counters");
  return m;
}

DeviceReport device_report_from_json(const nlohmann::json& d, std::string_view origin) {
  DeviceReport r;
  DeviceInfo& i = r.info;
  i.name = text(d, "name");
  i.index = static_cast<int>(u64(d, "index"));
  // "9.0" as the writer makes it; anything else leaves 0.0.
  const std::string cc = text(d, "compute_capability");
  int major = 0, minor = 0;
  const char* const end = cc.data() + cc.size();
  const auto [dot, e1] = std::from_chars(cc.data(), end, major);
  if (e1 == std::errc() && dot != end && *dot == '.') {
    const auto [last, e2] = std::from_chars(dot + 1, end, minor);
    if (e2 == std::errc() && last == end && major >= 0 && minor >= 0) {
      i.cc_major = major;
      i.cc_minor = minor;
    }
  }
  i.sm_count = static_cast<int>(u64(d, "sm_count"));
  i.l2_bytes = u64(d, "l2_bytes");
  i.memory_clock_khz = u64(d, "memory_clock_khz");
  i.bus_width_bits = static_cast<int>(u64(d, "bus_width_bits"));
  i.peak_bandwidth = number(d, "peak_bandwidth_Bps");
  i.total_memory = u64(d, "total_memory");
  i.free_memory = u64(d, "free_memory");
  i.driver_version = static_cast<int>(u64(d, "driver_version"));
  i.runtime_version = static_cast<int>(u64(d, "runtime_version"));
  if (const auto c = d.find("copy"); c != d.end()) r.copy = measurement_from_json(*c, origin, "device.copy");
  return r;
}

}  // namespace hbmscope
