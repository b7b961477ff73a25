// Writing a report as JSON (schema in docs/report-schema.md). The reader is
// json_report_read.cpp.
#include "hbmscope/json_report.hpp"

#include <cmath>

#include "hbmscope/config.hpp"
#include "hbmscope/l2_sim.hpp"
#include "hbmscope/model.hpp"

namespace hbmscope {

nlohmann::json shape_to_json(const Shape& s) {
  nlohmann::json j = {
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
  // Attention as served (schema /3): only where set, so that other rows keep
  // the keys they had (compare and merge match rows on the keys written).
  if (s.window != 0) j["window"] = s.window;
  if (s.chunk != 0) j["chunk"] = s.chunk;
  if (s.head_dim_v != 0) j["head_dim_v"] = s.head_dim_v;
  if (s.kv_dtype) {
    j["kv_dtype"] = std::string(dtype_name(*s.kv_dtype));
    j["kv_elem_bytes"] = elem_bytes(*s.kv_dtype);
  }
  if (s.latent_kv) j["latent_kv"] = true;
  if (ragged_prefill(s)) {
    nlohmann::json items = nlohmann::json::array();
    for (const SeqLen& x : s.seq_lens) items.push_back({x.q, x.kv});
    j["seq_lens"] = std::move(items);
    if (const auto q = s.seq_lens.total_q()) j["query_tokens"] = *q;
  }
  if (s.decode) {  // decode rows only: prefill shapes keep their keys
    j["decode"] = true;
    j["splits"] = s.splits;
    j["page_size"] = s.page_size;
    j["context_tokens"] = total_context(s);
    if (!s.context_lengths.empty()) j["context_lengths"] = s.context_lengths.kv_lengths();
  }
  return j;
}

nlohmann::json l2_sim_to_json(const L2SimDetail& d) {
  auto variant = [](const L2SimDetail::Variant& v, const char* min_name) {
    return nlohmann::json{{"read_bytes", v.read_bytes},
                          {"write_bytes", v.write_bytes},
                          {"hit_rate", v.hit_rate},
                          {min_name, v.l2_bytes_to_min}};
  };
  if (!d.decode.empty()) {  // a decode row: its decode simulations only
    nlohmann::json per = nlohmann::json::object();
    for (const auto& x : d.decode) {
      per[x.id] = variant(x.sim, "l2_bytes_to_min");
      per[x.id]["splits"] = x.splits;
      per[x.id]["waves"] = x.waves;
    }
    return {{"l2_bytes", d.l2_bytes},     {"sm_count", d.sm_count}, {"ctas_per_sm", d.ctas_per_sm},
            {"order", d.order},           {"q_o_allocate", d.q_o_allocate}, {"decode", per}};
  }
  nlohmann::json flash = variant(d.flash, "l2_bytes_to_floor");
  flash["heads_per_wave"] = d.heads_per_wave;
  flash["kv_heads_per_wave"] = d.kv_heads_per_wave;
  flash["waves"] = d.waves;
  nlohmann::json j = {{"l2_bytes", d.l2_bytes},
                      {"sm_count", d.sm_count},
                      {"ctas_per_sm", d.ctas_per_sm},
                      {"order", d.order},
                      {"q_o_allocate", d.q_o_allocate},
                      {"flash", flash}};
  if (d.has_standard) j["standard"] = variant(d.standard, "l2_bytes_to_min");
  return j;
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
  if (m.dram_read_bytes) j["dram_read_bytes"] = *m.dram_read_bytes;
  if (m.dram_write_bytes) j["dram_write_bytes"] = *m.dram_write_bytes;
  if (!m.counters.empty()) j["counters"] = m.counters;
  // JSON has no NaN: a failed comparison's error is null.
  if (!std::isfinite(m.rel_error)) j["rel_error"] = nullptr;
  if (m.kernel == "flash" || m.kernel == "flash_v1") {
    j["block_rows"] = m.block_rows;
    j["block_cols"] = m.block_cols;
    j["lse_rel_error"] = std::isfinite(m.lse_rel_error) ? nlohmann::json(m.lse_rel_error) : nlohmann::json();
    if (m.warps) j["warps"] = m.warps;
  }
  if (m.output_fits_l2) j["output_fits_l2"] = true;
  if (m.kernel == "decode" || m.kernel == "decode_paged") {
    j["splits"] = m.splits;
    j["page_size"] = m.page_size;
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

nlohmann::json device_spec_to_json(const DeviceSpec& d) {
  auto peak = [](double v) { return v > 0 ? nlohmann::json(v) : nlohmann::json(nullptr); };
  nlohmann::json sources = nlohmann::json::object();
  for (const auto& [k, v] : d.sources) sources[k] = v;
  return {
      {"id", d.id},
      {"name", d.name},
      {"memory", d.memory},
      {"memory_bandwidth_bytes_per_s", d.bandwidth},
      {"l2_bytes", d.l2_bytes},
      {"sm_count", d.sm_count},
      {"memory_bytes", d.memory_bytes},
      {"peak_flops_dense",
       {{"fp32", peak(d.peak.fp32)},
        {"fp16", peak(d.peak.fp16)},
        {"bf16", peak(d.peak.bf16)},
        {"fp8", peak(d.peak.fp8)}}},
      {"sources", sources},
  };
}

nlohmann::json model_layers_to_json(const ModelLayers& m) {
  nlohmann::json kv = {{"bytes_per_token", m.kv_bytes_per_token}, {"bytes", m.kv_cache_bytes}};
  if (m.kind != total_kind) kv["tokens"] = m.kv_cache_tokens;
  nlohmann::json j = {{"config", m.config}, {"layer_kind", m.kind}, {"layers", m.layers}, {"kv_cache", kv}};
  if (m.mixed_masks) j["mask"] = "mixed";
  return j;
}

namespace {

nlohmann::json row_to_json(const Row& row, bool with_measurements) {
  {
    nlohmann::json bytes = nlohmann::json::object();
    nlohmann::json inten = nlohmann::json::object();
    nlohmann::json pred = nlohmann::json::object();
    for (const auto& v : row.variants) {
      bytes[v.id] = v.bytes;
      inten[v.id] = v.intensity;
      if (v.prediction) {
        pred[v.id] = {{"seconds", v.prediction->seconds},
                      {"memory_seconds", v.prediction->memory_seconds},
                      {"compute_seconds", v.prediction->compute_seconds},
                      {"bound", std::string(bound_name(v.prediction->bound))}};
        if (v.prediction->footprint_bytes > 0) {
          pred[v.id]["footprint_bytes"] = v.prediction->footprint_bytes;
          pred[v.id]["fits_in_memory"] = v.prediction->fits_in_memory;
        }
      }
    }
    nlohmann::json j = {{"shape", shape_to_json(row.shape)},
                        {"bytes", bytes},
                        {"flops", row.flops},
                        {"intensity", inten}};
    if (!row.label.empty()) j["label"] = row.label;
    if (row.shape.decode) {
      nlohmann::json kv = nlohmann::json::object(), per = nlohmann::json::object();
      for (const auto& v : row.variants) {
        if (!v.decode) continue;
        kv[v.id] = v.decode->kv;
        per[v.id] = {{"splits", v.splits},
                     {"kv_bytes", v.decode->kv},
                     {"q_bytes", v.decode->q},
                     {"o_bytes", v.decode->o},
                     {"partial_bytes", v.decode->partials},
                     {"block_table_bytes", v.decode->block_table}};
      }
      j["kv_bytes"] = kv;
      j["decode"] = {{"sm_count", row.decode_sm_count}, {"variants", per}};
    }
    if (row.model_layers) j["model"] = model_layers_to_json(*row.model_layers);
    if (row.l2_sim) j["l2_sim"] = l2_sim_to_json(*row.l2_sim);
    if (with_measurements || !row.measurements.empty()) {
      nlohmann::json ms = nlohmann::json::array();
      for (const auto& m : row.measurements) ms.push_back(measurement_to_json(m));
      j["measurements"] = ms;
    }
    if (!pred.empty()) {
      j["prediction"] = pred;
      j["ridge_point"] = row.ridge_point;
    }
    return j;
  }
}

// Everything but the rows.
nlohmann::json report_header_json(const Report& r) {
  nlohmann::json out = {
      {"schema", std::string(report_schema)},
      {"tool", {{"name", "hbmscope"}, {"version", config::version}}},
      {"command", r.command},
  };
  if (r.roofline) {
    const RooflineInfo& rl = *r.roofline;
    out["roofline"] = {{"device", device_spec_to_json(rl.device)},
                       {"bandwidth_fraction", rl.bandwidth_fraction},
                       {"effective_bandwidth_bytes_per_s", rl.device.bandwidth * rl.bandwidth_fraction}};
  }
  if (r.device) out["device"] = device_to_json(*r.device);
  if (r.shard)
    out["shard"] = {{"index", r.shard->index},
                    {"count", r.shard->count},
                    {"total_rows", r.shard->total_rows}};
  out["rows"] = nlohmann::json::array();
  return out;
}

}  // namespace

nlohmann::json report_to_json(const Report& r) {
  nlohmann::json out = report_header_json(r);
  for (const Row& row : r.rows) out["rows"].push_back(row_to_json(row, r.device.has_value()));
  return out;
}

JsonReportText::JsonReportText(const Report& head) {
  // The header as dump(2) writes it, the rows spliced into its empty array:
  // the same text as report_to_json(r).dump(2), without a tree of the rows.
  const std::string h = report_header_json(head).dump(2);
  const std::string slot = "\"rows\": []";
  const std::size_t at = h.find(slot);
  open_ = h.substr(0, at + slot.size() - 1);
  tail_ = h.substr(at + slot.size()) + "\n";
  with_measurements_ = head.device.has_value();
}

std::string JsonReportText::row(const Row& r) {
  const std::string row = row_to_json(r, with_measurements_).dump(2);
  std::string out = rows_++ ? ",\n    " : "\n    ";
  out.reserve(out.size() + row.size() + row.size() / 8);
  for (char c : row) {
    out += c;
    if (c == '\n') out += "    ";
  }
  return out;
}

std::string JsonReportText::close() const { return (rows_ ? "\n  ]" : "]") + tail_; }

std::string report_json_text(const Report& r) {
  // Row by row, so that a sweep of millions of rows never holds them all as
  // JSON values; the text is the same as report_to_json(r).dump(2).
  JsonReportText text(r);
  std::string out = text.open();
  for (const Row& row : r.rows) out += text.row(row);
  return out + text.close();
}

}  // namespace hbmscope
