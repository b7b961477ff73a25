// A reconciliation as JSON (the report schema's rows, each with its call, and
// a top-level "reconcile" object: docs/report-schema.md) and as CSV (one line
// per call, raw numbers, every variant's counted / model ratios).
#include <cmath>

#include "hbmscope/csv.hpp"
#include "hbmscope/json_report.hpp"
#include "hbmscope/reconcile_report.hpp"
#include "json_check.hpp"

namespace hbmscope {

namespace {

nlohmann::json opt_num(const std::optional<double>& v) {
  return v && std::isfinite(*v) ? nlohmann::json(*v) : nlohmann::json();
}
nlohmann::json opt_u(const std::optional<std::uint64_t>& v) { return v ? nlohmann::json(*v) : nlohmann::json(); }

std::string csv_num(const std::optional<double>& v) { return v && std::isfinite(*v) ? csv_number(*v) : ""; }
std::string csv_u(const std::optional<std::uint64_t>& v) { return v ? std::to_string(*v) : ""; }

const ModelBytesRW* variant(const ReconciledCall& c, std::string_view id) {
  for (const auto& v : c.model)
    if (v.id == id) return &v;
  return nullptr;
}

std::vector<std::string> kernel_list(const std::string& joined) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= joined.size()) {
    const std::size_t plus = std::min(joined.find(" + ", start), joined.size());
    out.push_back(joined.substr(start, plus - start));
    start = plus + 3;
  }
  return out;
}

}  // namespace

const std::vector<std::string>& reconcile_variant_ids() {
  static const std::vector<std::string> ids = {"standard",     "standard_l2_sim", "flash_no_l2",  "flash_l2_sim",
                                               "floor",        "decode_floor",    "decode_split", "decode_paged",
                                               "decode_split_unpacked"};
  return ids;
}

nlohmann::json reconciled_call_to_json(const ReconciledCall& c) {
  nlohmann::json model = nlohmann::json::array();
  for (const auto& v : c.model) {
    nlohmann::json m = {{"variant", v.id},
                        {"bytes", v.total},
                        {"read_bytes", opt_u(v.reads)},
                        {"write_bytes", opt_u(v.writes)},
                        {"counted_over_reads", opt_num(v.counted_over_reads)},
                        {"counted_over_total", opt_num(v.counted_over_total)}};
    if (v.splits) m["splits"] = v.splits;
    if (v.l2_hit_rate) m["l2_hit_rate"] = opt_num(v.l2_hit_rate);
    model.push_back(std::move(m));
  }
  nlohmann::json j = {
      {"index", c.index},
      {"kind", std::string(call_kind_name(c.kind))},
      {"kernels", kernel_list(c.kernels)},
      {"source", c.source},
      {"origin", c.origin},
      {"shape_from", c.shape_from},
      {"shape", c.shape ? shape_to_json(*c.shape) : nlohmann::json()},
      {"counted",
       {{"read_bytes", opt_u(c.read_bytes)},
        {"write_bytes", opt_u(c.write_bytes)},
        {"total_bytes", opt_u(c.total_bytes)}}},
      {"seconds", opt_num(c.seconds)},
      {"time_from", std::string(time_source_name(c.time_from))},
      {"l2_hit_rate", opt_num(c.l2_hit_rate)},
      {"flops", c.flops},
      {"achieved_bandwidth_Bps", opt_num(c.achieved_bandwidth)},
      {"model_bandwidth_Bps", opt_num(c.model_bandwidth)},
      {"pct_of_peak", opt_num(c.pct_of_peak)},
      {"model", model},
      {"judged_against", c.judged_against},
      {"reads_over_model", opt_num(c.reads_over_model)},
      {"position", opt_num(c.position)},
      {"sim_position", opt_num(c.sim_position)},
      {"time_over_roofline", opt_num(c.time_over_roofline)},
      {"verdict", std::string(verdict_name(c.verdict))},
      {"verdict_text", c.verdict_text},
      {"notes", c.notes},
  };
  if (c.splits) {
    j["splits"] = c.splits;
    j["splits_from"] = c.splits_from;
  }
  if (c.geometry_warning) j["geometry_warning"] = *c.geometry_warning;
  if (c.roofline)
    j["roofline"] = {{"seconds", c.roofline->seconds},
                     {"memory_seconds", c.roofline->memory_seconds},
                     {"compute_seconds", c.roofline->compute_seconds},
                     {"bound", std::string(bound_name(c.roofline->bound))}};
  return j;
}

nlohmann::json reconcile_to_json(const ReconcileView& v) {
  nlohmann::json j = report_to_json(v.report);
  // rows[] hold the calls with a shape, in order.
  std::size_t row = 0;
  nlohmann::json calls = nlohmann::json::array();
  for (const auto& c : v.result.calls) {
    nlohmann::json cj = reconciled_call_to_json(c);
    if (c.shape && row < j["rows"].size()) j["rows"][row++]["call"] = cj;
    calls.push_back(std::move(cj));
  }
  nlohmann::json inputs = nlohmann::json::array();
  for (const auto& in : v.inputs)
    inputs.push_back({{"file", in.name}, {"format", in.format}, {"launches", in.launches}});
  auto counts = [](const std::vector<KernelCount>& list, bool with_role) {
    nlohmann::json a = nlohmann::json::array();
    for (const auto& k : list) {
      nlohmann::json e = {{"kernel", k.kernel}, {"launches", k.launches}};
      if (with_role) e["role"] = std::string(role_name(k.role));
      e["seconds"] = opt_num(k.seconds);
      e["read_bytes"] = opt_u(k.read_bytes);
      a.push_back(std::move(e));
    }
    return a;
  };
  j["reconcile"] = {{"inputs", inputs},
                    {"kernel_table", v.kernel_table},
                    {"calls", calls},
                    {"unmatched", counts(v.result.unmatched, false)},
                    {"outside", counts(v.result.outside, true)},
                    {"notes", v.result.notes}};
  return j;
}

std::string reconcile_csv(const ReconcileView& v) {
  std::vector<std::string> head = {"call", "kind", "kernels", "source", "origin", "shape_from", "batch", "heads",
                                   "kv_heads", "seq_q", "seq_kv", "head_dim", "dtype", "causal", "pass", "decode",
                                   "splits", "splits_from", "read_bytes", "write_bytes", "total_bytes", "seconds",
                                   "time_from", "achieved_Bps", "model_Bps", "pct_of_peak", "l2_hit_rate"};
  for (const auto& id : reconcile_variant_ids())
    for (const char* part : {"_bytes", "_read_bytes", "_counted_over_reads", "_counted_over_total"})
      head.push_back("model_" + id + part);
  for (const char* h : {"judged_against", "reads_over_model", "position", "sim_position", "roofline_s",
                        "time_over_roofline", "verdict", "geometry_warning"})
    head.push_back(h);
  std::string out = csv_line(head);
  // Names come from the input: escaped as in every printer (no control
  // character reaches a terminal or a spreadsheet).
  auto text = [](const std::string& s) { return json_check::printable(s); };
  for (const auto& c : v.result.calls) {
    std::vector<std::string> f = {std::to_string(c.index), std::string(call_kind_name(c.kind)), text(c.kernels),
                                  text(c.source), text(c.origin), c.shape_from};
    if (c.shape) {
      const Shape& s = *c.shape;
      for (std::string x : {std::to_string(s.batch), std::to_string(s.heads), std::to_string(s.kv_heads),
                            std::to_string(s.seq_q), std::to_string(s.seq_kv), std::to_string(s.head_dim),
                            std::string(dtype_name(s.dtype)), std::string(s.causal ? "1" : "0"),
                            std::string(pass_name(s.pass)), std::string(s.decode ? "1" : "0")})
        f.push_back(x);
    } else {
      f.insert(f.end(), 10, "");
    }
    f.push_back(c.splits ? std::to_string(c.splits) : "");
    f.push_back(c.splits_from);
    for (std::string x : {csv_u(c.read_bytes), csv_u(c.write_bytes), csv_u(c.total_bytes), csv_num(c.seconds),
                          std::string(time_source_name(c.time_from)), csv_num(c.achieved_bandwidth),
                          csv_num(c.model_bandwidth), csv_num(c.pct_of_peak), csv_num(c.l2_hit_rate)})
      f.push_back(x);
    for (const auto& id : reconcile_variant_ids()) {
      const auto* m = variant(c, id);
      f.push_back(m ? std::to_string(m->total) : "");
      f.push_back(m ? csv_u(m->reads) : "");
      f.push_back(m ? csv_num(m->counted_over_reads) : "");
      f.push_back(m ? csv_num(m->counted_over_total) : "");
    }
    for (std::string x : {c.judged_against, csv_num(c.reads_over_model), csv_num(c.position), csv_num(c.sim_position),
                          csv_num(c.roofline ? std::optional<double>(c.roofline->seconds) : std::nullopt),
                          csv_num(c.time_over_roofline), std::string(verdict_name(c.verdict)),
                          c.geometry_warning ? *c.geometry_warning : std::string()})
      f.push_back(x);
    out += csv_line(f);
  }
  return out;
}

}  // namespace hbmscope
