#include "hbmscope/reconcile_report.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "hbmscope/error.hpp"
#include "hbmscope/json_report.hpp"

namespace hbmscope {

namespace {

std::string g3(double v) {
  char b[40];
  std::snprintf(b, sizeof b, "%.3g", v);
  return b;
}

// Shortest text that reads back as the same double.
std::string g17(double v) {
  char b[40];
  const auto r = std::to_chars(b, b + sizeof b, v);
  return std::string(b, r.ptr);
}

const ModelBytesRW* variant(const ReconciledCall& c, std::string_view id) {
  for (const auto& v : c.model)
    if (v.id == id) return &v;
  return nullptr;
}

std::string shape_cell(const std::optional<Shape>& s) {
  if (!s) return "-";
  std::string t = std::to_string(s->seq_q) + " × " + std::to_string(s->seq_kv) + " d" + std::to_string(s->head_dim) +
                  " b" + std::to_string(s->batch) + " h" + std::to_string(s->heads);
  if (s->kv_heads != s->heads) (t += "/") += std::to_string(s->kv_heads);
  (t += " ") += dtype_name(s->dtype);
  if (s->causal) t += " causal";
  return t;
}

std::string kernels_cell(const ReconciledCall& c) {
  if (c.kind == CallKind::standard) {
    std::string t;
    std::size_t n = 0;
    std::size_t start = 0;
    while (start <= c.kernels.size()) {
      const std::size_t plus = std::min(c.kernels.find(" + ", start), c.kernels.size());
      ++n;
      start = plus + 3;
    }
    return "GEMM, softmax, GEMM (" + std::to_string(n) + " kernels)";
  }
  const std::size_t plus = c.kernels.find(" + ");
  std::string first = short_kernel_name(plus == std::string::npos ? c.kernels : c.kernels.substr(0, plus));
  if (first.size() > 48) first = first.substr(0, 45) + "...";
  if (c.launches.size() > 1) first += " +" + std::to_string(c.launches.size() - 1);
  return first;
}

std::string opt_bytes(const std::optional<std::uint64_t>& b, Units u) { return b ? format_bytes(*b, u) : "-"; }

nlohmann::json opt_num(const std::optional<double>& v) {
  return v && std::isfinite(*v) ? nlohmann::json(*v) : nlohmann::json();
}
nlohmann::json opt_u(const std::optional<std::uint64_t>& v) { return v ? nlohmann::json(*v) : nlohmann::json(); }

std::string csv_field(const std::string& f) {
  if (f.find_first_of(",\"\n\r") == std::string::npos) return f;
  std::string r = "\"";
  for (char c : f) r += c == '"' ? std::string("\"\"") : std::string(1, c);
  return r + "\"";
}

std::string csv_num(const std::optional<double>& v) { return v && std::isfinite(*v) ? g17(*v) : ""; }
std::string csv_u(const std::optional<std::uint64_t>& v) { return v ? std::to_string(*v) : ""; }

constexpr const char* model_ids[] = {"standard", "standard_l2_sim", "flash_no_l2", "flash_l2_sim", "floor"};
// The table leaves standard_l2_sim to the verdict line (JSON and CSV keep it).
bool in_table(const char* id) { return std::string_view(id) != "standard_l2_sim"; }

}  // namespace

std::string short_kernel_name(const std::string& full) {
  std::string name = full;
  for (const std::string anon = "(anonymous namespace)::"; name.find(anon) != std::string::npos;)
    name.erase(name.find(anon), anon.size());
  if (name.rfind("void ", 0) == 0) name.erase(0, 5);
  std::string out;
  int depth = 0;
  for (std::size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    if (c == '<') {
      // "operator<" and the like are rare in kernels: a template opens here.
      ++depth;
      continue;
    }
    if (c == '>' && depth > 0) {
      --depth;
      continue;
    }
    if (c == '(' && depth == 0) break;  // parameters
    if (depth == 0) out += c;
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out.empty() ? full : out;
}

nlohmann::json reconciled_call_to_json(const ReconciledCall& c) {
  nlohmann::json model = nlohmann::json::array();
  for (const auto& v : c.model)
    model.push_back({{"variant", v.id}, {"bytes", v.total}, {"read_bytes", opt_u(v.reads)}, {"write_bytes", opt_u(v.writes)}});
  nlohmann::json kernels = nlohmann::json::array();
  std::size_t start = 0;
  while (start <= c.kernels.size()) {
    const std::size_t plus = std::min(c.kernels.find(" + ", start), c.kernels.size());
    kernels.push_back(c.kernels.substr(start, plus - start));
    start = plus + 3;
  }
  nlohmann::json j = {
      {"index", c.index},
      {"kind", std::string(call_kind_name(c.kind))},
      {"kernels", kernels},
      {"source", c.source},
      {"origin", c.origin},
      {"shape_from", c.shape_from},
      {"shape", c.shape ? shape_to_json(*c.shape) : nlohmann::json()},
      {"counted", {{"read_bytes", opt_u(c.read_bytes)}, {"write_bytes", opt_u(c.write_bytes)}}},
      {"seconds", opt_num(c.seconds)},
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
  for (const auto& in : v.inputs) inputs.push_back({{"file", in.name}, {"format", in.format}, {"launches", in.launches}});
  nlohmann::json unmatched = nlohmann::json::array(), outside = nlohmann::json::array();
  for (const auto& k : v.result.unmatched) unmatched.push_back({{"kernel", k.kernel}, {"launches", k.launches}});
  for (const auto& k : v.result.outside)
    outside.push_back({{"kernel", k.kernel}, {"role", std::string(role_name(k.role))}, {"launches", k.launches}});
  j["reconcile"] = {{"inputs", inputs},       {"kernel_table", v.kernel_table}, {"calls", calls},
                    {"unmatched", unmatched}, {"outside", outside},           {"notes", v.result.notes}};
  return j;
}

std::string render_reconcile(const ReconcileView& v, const PrintOptions& o) {
  const Reconciliation& r = v.result;
  if (o.format == Format::json) return reconcile_to_json(v).dump(2) + "\n";
  if (o.format == Format::csv) {
    std::string out =
        "call,kind,kernels,source,origin,shape_from,batch,heads,kv_heads,seq_q,seq_kv,head_dim,dtype,causal,pass,"
        "read_bytes,write_bytes,seconds,achieved_Bps,model_Bps,pct_of_peak";
    for (const char* id : model_ids) out += std::string(",model_") + id + "_bytes,model_" + id + "_read_bytes";
    out += ",judged_against,reads_over_model,position,sim_position,roofline_s,time_over_roofline,verdict\n";
    for (const auto& c : r.calls) {
      out += std::to_string(c.index) + "," + std::string(call_kind_name(c.kind)) + "," + csv_field(c.kernels) + "," +
             csv_field(c.source) + "," + csv_field(c.origin) + "," + c.shape_from;
      if (c.shape) {
        const Shape& s = *c.shape;
        (out += ",") += std::to_string(s.batch) + "," + std::to_string(s.heads) + "," + std::to_string(s.kv_heads) + "," +
               std::to_string(s.seq_q) + "," + std::to_string(s.seq_kv) + "," + std::to_string(s.head_dim) + "," +
               std::string(dtype_name(s.dtype)) + "," + (s.causal ? "1" : "0") + "," + std::string(pass_name(s.pass));
      } else {
        out += ",,,,,,,,,";
      }
      (out += ",") += csv_u(c.read_bytes) + ",";
      out += csv_u(c.write_bytes) + "," + csv_num(c.seconds) + "," + csv_num(c.achieved_bandwidth) + "," + csv_num(c.model_bandwidth) + "," + csv_num(c.pct_of_peak);
      for (const char* id : model_ids) {
        const auto* m = variant(c, id);
        ((out += ",") += m ? std::to_string(m->total) : std::string()) += ",";
        if (m) out += csv_u(m->reads);
      }
      out += "," + c.judged_against + "," + csv_num(c.reads_over_model) + "," + csv_num(c.position) + "," +
             csv_num(c.sim_position) + "," + csv_num(c.roofline ? std::optional<double>(c.roofline->seconds) : std::nullopt) +
             "," + csv_num(c.time_over_roofline) + "," + std::string(verdict_name(c.verdict)) + "\n";
    }
    return out;
  }
  // Table and Markdown.
  std::string out;
  const bool md = o.format == Format::md;
  std::size_t launches = 0;
  for (const auto& in : v.inputs) launches += in.launches;
  std::string from;
  for (const auto& in : v.inputs) from += (from.empty() ? "" : ", ") + in.name + " (" + in.format + ")";
  out += std::to_string(r.calls.size()) + " attention call(s) from " + std::to_string(launches) + " launch(es) of " +
         from + "\n";
  if (v.report.roofline) {
    const auto& d = v.report.roofline->device;
    out += "Device " + d.name + ": " + format_bandwidth(d.bandwidth) + " peak" +
           (v.report.roofline->bandwidth_fraction < 1 ? " (roofline at " + g3(v.report.roofline->bandwidth_fraction * 100) + " %)"
                                                      : std::string()) +
           "; roofline time = max(counted bytes / bandwidth, FLOPs / peak)\n";
  } else {
    out += "No --device: no % of peak and no roofline (e.g. --device h100)\n";
  }
  out += "\n";
  bool any[std::size(model_ids)] = {};
  bool any_model_bw = false;
  for (const auto& c : r.calls) {
    for (std::size_t i = 0; i < std::size(model_ids); ++i)
      any[i] = any[i] || (in_table(model_ids[i]) && variant(c, model_ids[i]));
    any_model_bw = any_model_bw || c.model_bandwidth;
  }
  std::vector<std::string> head = {"Call", "Kind", "Kernel", "Shape", "Reads counted"};
  std::vector<bool> right = {true, false, false, false, true};
  for (std::size_t i = 0; i < std::size(model_ids); ++i)
    if (any[i]) {
      head.push_back(std::string("Reads: ") + model_ids[i]);
      right.push_back(true);
    }
  for (const char* h : {"Counted / model", "Writes counted", "Time", "Achieved", "% of peak"}) {
    head.push_back(h);
    right.push_back(true);
  }
  if (any_model_bw) {
    head.push_back("Model bytes / time");
    right.push_back(true);
  }
  for (const char* h : {"Time / roofline"}) {
    head.push_back(h);
    right.push_back(true);
  }
  head.push_back("Verdict");
  right.push_back(false);
  std::vector<std::vector<std::string>> rows;
  for (const auto& c : r.calls) {
    std::vector<std::string> cells = {std::to_string(c.index), std::string(call_kind_name(c.kind)), kernels_cell(c),
                                      shape_cell(c.shape), opt_bytes(c.read_bytes, o.units)};
    for (std::size_t i = 0; i < std::size(model_ids); ++i)
      if (any[i]) {
        const auto* m = variant(c, model_ids[i]);
        cells.push_back(m && m->reads ? format_bytes(*m->reads, o.units) : "-");
      }
    cells.push_back(c.reads_over_model ? g3(*c.reads_over_model) + "× " + c.judged_against : "-");
    cells.push_back(opt_bytes(c.write_bytes, o.units));
    cells.push_back(c.seconds ? format_seconds(*c.seconds) : "-");
    cells.push_back(c.achieved_bandwidth ? format_bandwidth(*c.achieved_bandwidth) : "-");
    cells.push_back(c.pct_of_peak ? g3(*c.pct_of_peak) + " %" : "-");
    if (any_model_bw) cells.push_back(c.model_bandwidth ? format_bandwidth(*c.model_bandwidth) : "-");
    cells.push_back(c.time_over_roofline ? g3(*c.time_over_roofline) + "× (" +
                                               std::string(bound_name(c.roofline->bound)) + ")"
                                         : "-");
    cells.push_back(std::string(verdict_name(c.verdict)));
    rows.push_back(std::move(cells));
  }
  if (!rows.empty()) out += render_grid(head, rows, right, o.format);
  out += "\n";
  const char* bullet = md ? "- " : "  ";
  if (!r.calls.empty()) out += "Verdicts (reads judged; the floor = every value once, flash_no_l2 = no L2 reuse):\n";
  for (const auto& c : r.calls) {
    out += std::string(bullet) + "call " + std::to_string(c.index) + " (" + c.origin + "): " + c.verdict_text;
    if (!c.source.empty()) out += " [" + c.source + "]";
    out += "\n";
    for (const auto& n : c.notes) out += std::string(bullet) + "  " + n + "\n";
  }
  if (!r.outside.empty()) {
    out += "Launches outside attention calls:\n";
    for (const auto& k : r.outside)
      out += std::string(bullet) + short_kernel_name(k.kernel) + " (" + std::string(role_name(k.role)) + ") × " +
             std::to_string(k.launches) + "\n";
  }
  if (!r.unmatched.empty()) {
    out += "Kernels matched by no pattern of " + v.kernel_table + " (pass --kernel-table FILE to classify them):\n";
    for (const auto& k : r.unmatched)
      out += std::string(bullet) + k.kernel + " × " + std::to_string(k.launches) + "\n";
  }
  for (const auto& n : r.notes) out += "Note: " + n + "\n";
  return out;
}

std::string reconcile_gnuplot_script(const Reconciliation& r, PlotTerminal terminal) {
  std::string counted, model[std::size(model_ids)];
  std::size_t points = 0;
  for (const auto& c : r.calls) {
    if (!c.read_bytes || c.model.empty()) continue;
    ++points;
    counted += std::to_string(c.index) + " " + std::to_string(*c.read_bytes) + "\n";
    for (std::size_t i = 0; i < std::size(model_ids); ++i)
      if (const auto* m = variant(c, model_ids[i]); m && m->reads)
        model[i] += std::to_string(c.index) + " " + std::to_string(*m->reads) + "\n";
  }
  if (points == 0) throw Error("--plot: no call has both counted reads and a shape: nothing to plot");
  std::string s;
  switch (terminal) {
    case PlotTerminal::svg: s += "set terminal svg size 900,560 dynamic background rgb 'white'\n"; break;
    case PlotTerminal::png: s += "set terminal pngcairo size 900,560\n"; break;
    case PlotTerminal::dumb: s += "set terminal dumb size 100,30\n"; break;
  }
  s += "set title " + gnuplot_quoted("DRAM reads: counted vs the model, per attention call") + "\n";
  s += "set xlabel 'attention call'\nset ylabel 'bytes read (log)'\nset logscale y\nset key outside right\n";
  std::size_t last = 0;
  for (const auto& c : r.calls) last = std::max(last, c.index);
  s += "set xtics 1\nset grid\nset xrange [0.5:" + std::to_string(last) + ".5]\n";
  s += "$counted << EOD\n" + counted + "EOD\n";
  std::string plot = "plot $counted using 1:2 with points pt 7 ps 1.5 title 'counted reads'";
  for (std::size_t i = 0; i < std::size(model_ids); ++i) {
    if (model[i].empty()) continue;
    s += "$m" + std::to_string(i) + " << EOD\n" + model[i] + "EOD\n";
    plot += ", $m" + std::to_string(i) + " using 1:2 with points pt " + std::to_string(4 + static_cast<int>(i)) +
            " title " + gnuplot_quoted(std::string("model ") + model_ids[i]);
  }
  return s + plot + "\n";
}

}  // namespace hbmscope
