#include "hbmscope/json_report.hpp"

#include <cmath>

#include "hbmscope/config.hpp"

namespace hbmscope {

nlohmann::json shape_to_json(const Shape& s) {
  return {
      {"batch", s.batch},
      {"heads", s.heads},
      {"kv_heads", s.kv_heads},
      {"seq_q", s.seq_q},
      {"seq_kv", s.seq_kv},
      {"head_dim", s.head_dim},
      {"dtype", std::string(dtype_name(s.dtype))},
      {"elem_bytes", elem_bytes(s.dtype)},
      {"block_rows", s.block_rows},
      {"block_cols", s.block_cols},
      {"causal", s.causal},
      {"pass", std::string(pass_name(s.pass))},
  };
}

nlohmann::json l2_sim_to_json(const L2SimDetail& d) {
  auto variant = [](const L2SimDetail::Variant& v, const char* min_name) {
    return nlohmann::json{{"read_bytes", v.read_bytes},
                          {"write_bytes", v.write_bytes},
                          {"hit_rate", v.hit_rate},
                          {min_name, v.l2_bytes_to_min}};
  };
  nlohmann::json flash = variant(d.flash, "l2_bytes_to_floor");
  flash["heads_per_wave"] = d.heads_per_wave;
  flash["kv_heads_per_wave"] = d.kv_heads_per_wave;
  flash["waves"] = d.waves;
  return {{"l2_bytes", d.l2_bytes},
          {"sm_count", d.sm_count},
          {"ctas_per_sm", d.ctas_per_sm},
          {"order", d.order},
          {"q_o_allocate", d.q_o_allocate},
          {"flash", flash},
          {"standard", variant(d.standard, "l2_bytes_to_min")}};
}

nlohmann::json measurement_to_json(const KernelMeasurement& m) {
  nlohmann::json j = {
      {"kernel", m.kernel},
      {"variant", m.variant},
      {"status", status_name(m.status)},
      {"reason", m.reason},
      {"rel_error", m.rel_error},
      {"validated_on", m.validated_on},
      {"model_bytes", m.model_bytes},
      {"time_s",
       {{"median", m.timing.median},
        {"min", m.timing.min},
        {"max", m.timing.max},
        {"rel_spread", m.timing.rel_spread},
        {"warm_median", m.timing.warm_median},
        {"samples", m.timing.samples}}},
      {"bandwidth_Bps", m.bandwidth},
      {"copy_fraction", m.copy_fraction},
      {"tflops", m.tflops},
      {"predicted_s", {{"copy", m.predicted_copy}, {"peak", m.predicted_peak}}},
      {"measured_over_predicted", m.measured_over_predicted},
  };
  // JSON has no NaN: a failed comparison's error is null.
  if (!std::isfinite(m.rel_error)) j["rel_error"] = nullptr;
  if (m.kernel == "flash") {
    j["block_rows"] = m.block_rows;
    j["block_cols"] = m.block_cols;
    j["lse_rel_error"] = std::isfinite(m.lse_rel_error) ? nlohmann::json(m.lse_rel_error) : nlohmann::json();
  }
  return j;
}

nlohmann::json device_to_json(const DeviceReport& d) {
  const DeviceInfo& i = d.info;
  return {
      {"name", i.name},
      {"index", i.index},
      {"compute_capability", std::to_string(i.cc_major) + "." + std::to_string(i.cc_minor)},
      {"sm_count", i.sm_count},
      {"l2_bytes", i.l2_bytes},
      {"memory_clock_khz", i.memory_clock_khz},
      {"bus_width_bits", i.bus_width_bits},
      {"peak_bandwidth_Bps", i.peak_bandwidth},
      {"total_memory", i.total_memory},
      {"free_memory", i.free_memory},
      {"driver_version", i.driver_version},
      {"runtime_version", i.runtime_version},
      {"copy", measurement_to_json(d.copy)},
  };
}

nlohmann::json report_to_json(const Report& r) {
  nlohmann::json rows = nlohmann::json::array();
  for (const Row& row : r.rows) {
    nlohmann::json bytes = nlohmann::json::object();
    nlohmann::json inten = nlohmann::json::object();
    for (const auto& v : row.variants) {
      bytes[v.id] = v.bytes;
      inten[v.id] = v.intensity;
    }
    nlohmann::json j = {{"shape", shape_to_json(row.shape)},
                        {"bytes", bytes},
                        {"flops", row.flops},
                        {"intensity", inten}};
    if (row.l2_sim) j["l2_sim"] = l2_sim_to_json(*row.l2_sim);
    if (r.device || !row.measurements.empty()) {
      nlohmann::json ms = nlohmann::json::array();
      for (const auto& m : row.measurements) ms.push_back(measurement_to_json(m));
      j["measurements"] = ms;
    }
    rows.push_back(j);
  }
  nlohmann::json out = {
      {"schema", std::string(report_schema)},
      {"tool", {{"name", "hbmscope"}, {"version", config::version}}},
      {"command", r.command},
      {"rows", rows},
  };
  if (r.device) out["device"] = device_to_json(*r.device);
  return out;
}

}  // namespace hbmscope
