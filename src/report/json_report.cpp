#include "hbmscope/json_report.hpp"

#include <cmath>

#include <algorithm>

#include "hbmscope/config.hpp"
#include "hbmscope/model.hpp"
#include "json_check.hpp"

namespace hbmscope {

namespace jc = json_check;

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
      {"peak_flops_dense",
       {{"fp32", peak(d.peak.fp32)},
        {"fp16", peak(d.peak.fp16)},
        {"bf16", peak(d.peak.bf16)},
        {"fp8", peak(d.peak.fp8)}}},
      {"sources", sources},
  };
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
      if (v.prediction)
        pred[v.id] = {{"seconds", v.prediction->seconds},
                      {"memory_seconds", v.prediction->memory_seconds},
                      {"compute_seconds", v.prediction->compute_seconds},
                      {"bound", std::string(bound_name(v.prediction->bound))}};
    }
    nlohmann::json j = {{"shape", shape_to_json(row.shape)},
                        {"bytes", bytes},
                        {"flops", row.flops},
                        {"intensity", inten}};
    if (!row.label.empty()) j["label"] = row.label;
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

std::string report_json_text(const Report& r) {
  // Row by row, so that a sweep of millions of rows never holds them all as
  // JSON values; the text is the same as report_to_json(r).dump(2).
  std::string head = report_header_json(r).dump(2);
  const std::string slot = "\"rows\": []";
  const std::size_t at = head.find(slot);
  std::string out = head.substr(0, at + slot.size() - 1);
  if (r.rows.empty()) {
    out += "]";
  } else {
    out += "\n";
    for (std::size_t i = 0; i < r.rows.size(); ++i) {
      const std::string row = row_to_json(r.rows[i], r.device.has_value()).dump(2);
      out += "    ";
      for (char c : row) {
        out += c;
        if (c == '\n') out += "    ";
      }
      out += i + 1 < r.rows.size() ? ",\n" : "\n";
    }
    out += "  ]";
  }
  out += head.substr(at + slot.size());
  return out + "\n";
}

namespace {

std::uint64_t get_u64(const nlohmann::json& o, std::string_view origin, const std::string& parent,
                      const char* key) {
  const std::string k = parent + "." + key;
  if (!o.contains(key)) jc::fail_text(origin, k, "missing");
  if (!o[key].is_number_unsigned()) jc::fail(origin, k, "a non-negative integer", o[key]);
  return o[key].get<std::uint64_t>();
}

double get_number(const nlohmann::json& o, std::string_view origin, const std::string& k) {
  if (!o.is_number() || !std::isfinite(o.get<double>())) jc::fail(origin, k, "a number", o);
  return o.get<double>();
}

const nlohmann::json& get_object(const nlohmann::json& o, std::string_view origin,
                                 const std::string& parent, const char* key) {
  const std::string k = parent.empty() ? key : parent + "." + key;
  if (!o.contains(key)) jc::fail_text(origin, k, "missing");
  if (!o[key].is_object()) jc::fail(origin, k, "an object", o[key]);
  return o[key];
}

}  // namespace

Shape shape_from_json(const nlohmann::json& j, std::string_view origin, const std::string& key) {
  if (!j.is_object()) jc::fail(origin, key, "a shape object", j);
  Shape s;
  s.batch = get_u64(j, origin, key, "batch");
  s.heads = get_u64(j, origin, key, "heads");
  s.kv_heads = get_u64(j, origin, key, "kv_heads");
  s.seq_q = get_u64(j, origin, key, "seq_q");
  s.seq_kv = get_u64(j, origin, key, "seq_kv");
  s.head_dim = get_u64(j, origin, key, "head_dim");
  s.block_rows = get_u64(j, origin, key, "block_rows");
  s.block_cols = get_u64(j, origin, key, "block_cols");
  if (!j.contains("dtype")) jc::fail_text(origin, key + ".dtype", "missing");
  const auto d = j["dtype"].is_string() ? parse_dtype(j["dtype"].get<std::string>()) : std::nullopt;
  if (!d) jc::fail(origin, key + ".dtype", "one of \"fp32\", \"fp16\", \"bf16\", \"fp8\"", j["dtype"]);
  s.dtype = *d;
  if (!j.contains("causal") || !j["causal"].is_boolean())
    jc::fail(origin, key + ".causal", "true or false", j.value("causal", nlohmann::json()));
  s.causal = j["causal"].get<bool>();
  if (j.contains("pass")) {  // reports written before the backward pass have none: forward
    const auto p = j["pass"].is_string() ? parse_pass(j["pass"].get<std::string>()) : std::nullopt;
    if (!p) jc::fail(origin, key + ".pass", "one of \"fwd\", \"bwd\", \"fwdbwd\"", j["pass"]);
    s.pass = *p;
  }
  try {
    validate(s);
  } catch (const Error& e) {
    jc::fail_text(origin, key, e.what());
  }
  return s;
}

Report report_from_json(const nlohmann::json& j, std::string_view origin) {
  if (!j.is_object()) jc::fail(origin, "(top level)", "a JSON object (an hbmscope report)", j);
  if (!j.contains("schema")) jc::fail_text(origin, "schema", "missing: not an hbmscope report");
  if (j["schema"] != report_schema)
    jc::fail(origin, "schema", "\"" + std::string(report_schema) + "\"", j["schema"]);
  Report r;
  if (j.contains("command")) {
    if (!j["command"].is_string()) jc::fail(origin, "command", "a string", j["command"]);
    r.command = j["command"].get<std::string>();
  }
  if (j.contains("roofline")) {
    const auto& rl = j["roofline"];
    if (!rl.is_object()) jc::fail(origin, "roofline", "an object", rl);
    const auto& d = get_object(rl, origin, "roofline", "device");
    DeviceSpec spec;
    if (!d.contains("name") || !d["name"].is_string())
      jc::fail(origin, "roofline.device.name", "a string", d.value("name", nlohmann::json()));
    spec.name = d["name"].get<std::string>();
    spec.id = d.value("id", spec.name);
    if (d.contains("memory") && d["memory"].is_string()) spec.memory = d["memory"].get<std::string>();
    spec.bandwidth = get_number(d.value("memory_bandwidth_bytes_per_s", nlohmann::json()), origin,
                                "roofline.device.memory_bandwidth_bytes_per_s");
    spec.l2_bytes = get_u64(d, origin, "roofline.device", "l2_bytes");
    spec.sm_count = get_u64(d, origin, "roofline.device", "sm_count");
    const auto& pk = get_object(d, origin, "roofline.device", "peak_flops_dense");
    auto peak = [&](const char* k) {
      if (!pk.contains(k) || pk[k].is_null()) return 0.0;
      return get_number(pk[k], origin, std::string("roofline.device.peak_flops_dense.") + k);
    };
    spec.peak = {peak("fp32"), peak("fp16"), peak("bf16"), peak("fp8")};
    if (d.contains("sources") && d["sources"].is_object())
      for (const auto& [k, v] : d["sources"].items())
        if (v.is_string()) spec.sources[k] = v.get<std::string>();
    const double f = get_number(rl.value("bandwidth_fraction", nlohmann::json()), origin,
                                "roofline.bandwidth_fraction");
    r.roofline = RooflineInfo{spec, f};
  }
  if (j.contains("shard")) {
    const auto& s = j["shard"];
    if (!s.is_object()) jc::fail(origin, "shard", "an object", s);
    r.shard = ShardInfo{get_u64(s, origin, "shard", "index"), get_u64(s, origin, "shard", "count"),
                        get_u64(s, origin, "shard", "total_rows")};
  }
  if (!j.contains("rows") || !j["rows"].is_array())
    jc::fail(origin, "rows", "an array of rows", j.value("rows", nlohmann::json()));
  const auto& rows = j["rows"];
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const std::string k = "rows[" + std::to_string(i) + "]";
    const auto& rj = rows[i];
    if (!rj.is_object()) jc::fail(origin, k, "a row object", rj);
    Row row;
    row.shape = shape_from_json(rj.value("shape", nlohmann::json()), origin, k + ".shape");
    row.flops = get_u64(rj, origin, k, "flops");
    if (rj.contains("label")) {
      if (!rj["label"].is_string()) jc::fail(origin, k + ".label", "a string", rj["label"]);
      row.label = rj["label"].get<std::string>();
    }
    const auto& bytes = get_object(rj, origin, k, "bytes");
    for (const auto& [id, b] : bytes.items()) {
      if (!b.is_number_unsigned()) jc::fail(origin, k + ".bytes." + id, "a non-negative integer", b);
      VariantResult v;
      v.id = id;
      v.bytes = b.get<std::uint64_t>();
      v.intensity = intensity(row.flops, v.bytes);
      if (rj.contains("intensity") && rj["intensity"].is_object() && rj["intensity"].contains(id))
        v.intensity = get_number(rj["intensity"][id], origin, k + ".intensity." + id);
      if (rj.contains("prediction") && rj["prediction"].is_object() && rj["prediction"].contains(id)) {
        const auto& p = rj["prediction"][id];
        const std::string pk = k + ".prediction." + id;
        if (!p.is_object()) jc::fail(origin, pk, "an object", p);
        Prediction pr;
        pr.seconds = get_number(p.value("seconds", nlohmann::json()), origin, pk + ".seconds");
        pr.memory_seconds = get_number(p.value("memory_seconds", nlohmann::json(0.0)), origin, pk + ".memory_seconds");
        pr.compute_seconds = get_number(p.value("compute_seconds", nlohmann::json(0.0)), origin, pk + ".compute_seconds");
        const auto b2 = p.value("bound", nlohmann::json());
        if (b2 != "memory" && b2 != "compute") jc::fail(origin, pk + ".bound", "\"memory\" or \"compute\"", b2);
        pr.bound = b2 == "compute" ? Bound::compute : Bound::memory;
        v.prediction = pr;
      }
      row.variants.push_back(std::move(v));
    }
    // JSON objects come back in key order: restore the model's variant order.
    const auto rank = [](const std::string& id) {
      if (id == "standard") return 0;
      if (id == "flash_no_l2") return 1;
      if (id == "floor") return 2;
      return 3;
    };
    std::stable_sort(row.variants.begin(), row.variants.end(),
                     [&](const auto& a, const auto& b) { return rank(a.id) < rank(b.id); });
    if (rj.contains("ridge_point")) row.ridge_point = get_number(rj["ridge_point"], origin, k + ".ridge_point");
    r.rows.push_back(std::move(row));
  }
  return r;
}

}  // namespace hbmscope
