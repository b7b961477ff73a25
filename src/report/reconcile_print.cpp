// A reconciliation as a table (or Markdown) per call with the verdicts below
// it, and a gnuplot chart of counted against model reads. JSON and CSV:
// reconcile_export.cpp. Printers never compute: every figure is the call's.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "hbmscope/error.hpp"
#include "hbmscope/reconcile_report.hpp"
#include "json_check.hpp"

namespace hbmscope {

namespace {

std::string g3(double v) {
  char b[40];
  std::snprintf(b, sizeof b, "%.3g", v);
  return b;
}

const ModelBytesRW* variant(const ReconciledCall& c, std::string_view id) {
  for (const auto& v : c.model)
    if (v.id == id) return &v;
  return nullptr;
}

// Names come from the input: control characters escaped (every printer's rule).
std::string safe(const std::string& s) { return json_check::printable(s); }

std::string shape_cell(const std::optional<Shape>& s) {
  if (!s) return "-";
  std::string t = std::to_string(s->seq_q) + " × " + std::to_string(s->seq_kv) + " d" + std::to_string(s->head_dim) +
                  " b" + std::to_string(s->batch) + " h" + std::to_string(s->heads);
  if (s->kv_heads != s->heads) (t += "/") += std::to_string(s->kv_heads);
  (t += " ") += dtype_name(s->dtype);
  if (s->causal) t += " causal";
  if (s->decode) t += " decode";
  return t;
}

std::string kernels_cell(const ReconciledCall& c) {
  if (c.kind == CallKind::standard) {
    std::size_t n = 0;
    for (std::size_t start = 0; start <= c.kernels.size(); ++n)
      start = std::min(c.kernels.find(" + ", start), c.kernels.size()) + 3;
    return "GEMM, softmax, GEMM (" + std::to_string(n) + " kernels)";
  }
  const std::size_t plus = c.kernels.find(" + ");
  std::string first = safe(short_kernel_name(plus == std::string::npos ? c.kernels : c.kernels.substr(0, plus)));
  if (first.size() > 48) first = first.substr(0, 45) + "...";
  if (c.launches.size() > 1) first += " +" + std::to_string(c.launches.size() - 1);
  return first;
}

std::string opt_bytes(const std::optional<std::uint64_t>& b, Units u) { return b ? format_bytes(*b, u) : "-"; }

// The table leaves standard_l2_sim to the verdict line (JSON and CSV keep it).
bool in_table(const std::string& id) { return id != "standard_l2_sim"; }

std::string time_cell(const ReconciledCall& c) {
  if (!c.seconds) return "-";
  return (c.time_from == TimeSource::cycles ? "~" : "") + format_seconds(*c.seconds);
}

// A ratio to three figures, trailing zeros kept (1.00×, 0.752×, 64.4×).
std::string ratio(double v) {
  char b[40];
  if (std::fabs(v) >= 100 && std::fabs(v) < 1e15) std::snprintf(b, sizeof b, "%.0f", v);
  else std::snprintf(b, sizeof b, "%#.3g", v);
  return b;
}

// Counted against one variant: its reads (and, with dram__bytes.sum alone, its total).
std::string ratio_cell(const ModelBytesRW* m, bool total_only) {
  if (!m || !m->counted_over_reads) return "-";
  std::string t = ratio(*m->counted_over_reads) + "×";
  if (total_only && m->counted_over_total) t += ", " + ratio(*m->counted_over_total) + "× (r+w)";
  return t;
}

bool wants(const ReconcileView& v, const char* group) {
  return std::find(v.columns.begin(), v.columns.end(), group) != v.columns.end();
}

}  // namespace

std::vector<std::string> reconcile_column_groups(const std::string& text) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    const std::string g = text.substr(start, comma - start);
    start = comma + 1;
    if (g == "all") {
      for (const char* x : {"ratios", "l2", "launch"}) out.emplace_back(x);
    } else if (g == "ratios" || g == "l2" || g == "launch") {
      out.push_back(g);
    } else {
      throw UsageError("--columns: '" + json_check::printable(g) + "' is not one of ratios, l2, launch, all");
    }
  }
  return out;
}

std::string short_kernel_name(const std::string& full) {
  std::string name = full;
  for (const std::string anon = "(anonymous namespace)::"; name.find(anon) != std::string::npos;)
    name.erase(name.find(anon), anon.size());
  for (const std::string anon = "<unnamed>::"; name.find(anon) != std::string::npos;)
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

std::string render_reconcile(const ReconcileView& v, const PrintOptions& o) {
  const Reconciliation& r = v.result;
  if (o.format == Format::json) return reconcile_to_json(v).dump(2) + "\n";
  if (o.format == Format::csv) return reconcile_csv(v);
  std::string out;
  const bool md = o.format == Format::md;
  std::size_t launches = 0;
  for (const auto& in : v.inputs) launches += in.launches;
  std::string from;
  for (const auto& in : v.inputs) from += (from.empty() ? "" : ", ") + safe(in.name) + " (" + in.format + ")";
  out += std::to_string(r.calls.size()) + " attention call(s) from " + std::to_string(launches) + " launch(es) of " +
         from + "\n";
  if (v.report.roofline) {
    const auto& d = v.report.roofline->device;
    out += "Device " + d.name + ": " + format_bandwidth(d.bandwidth) + " peak" +
           (v.report.roofline->bandwidth_fraction < 1
                ? " (roofline at " + g3(v.report.roofline->bandwidth_fraction * 100) + " %)"
                : std::string()) +
           "; roofline time = max(counted bytes / bandwidth, FLOPs / peak)\n";
  } else {
    out += "No --device: no % of peak and no roofline (e.g. --device h100)\n";
  }
  out += "\n";
  const auto& ids = reconcile_variant_ids();
  std::vector<bool> any(ids.size(), false);
  bool any_model_bw = false, any_total = false, any_l2 = false, any_reads = false, any_writes = false;
  for (const auto& c : r.calls) {
    any_reads = any_reads || c.read_bytes;
    any_writes = any_writes || c.write_bytes;
    for (std::size_t i = 0; i < ids.size(); ++i) any[i] = any[i] || (in_table(ids[i]) && variant(c, ids[i]));
    any_model_bw = any_model_bw || c.model_bandwidth;
    any_total = any_total || c.total_bytes;
    any_l2 = any_l2 || c.l2_hit_rate;
  }
  // Count columns no call has are left out when another count stands in
  // (dram__bytes.sum alone).
  const bool reads_col = any_reads || !any_total, writes_col = any_writes || !any_total;
  std::vector<std::string> head = {"Call", "Kind", "Kernel", "Shape"};
  std::vector<bool> right = {true, false, false, false};
  auto col = [&](std::string h, bool rt = true) {
    head.push_back(std::move(h));
    right.push_back(rt);
  };
  if (reads_col) col("Reads counted");
  if (any_total) col("Read+write counted");
  for (std::size_t i = 0; i < ids.size(); ++i)
    if (any[i]) col("Reads: " + ids[i]);
  col("Counted / model");
  if (wants(v, "ratios"))
    for (std::size_t i = 0; i < ids.size(); ++i)
      if (any[i]) col("Counted / " + ids[i]);
  if (writes_col) col("Writes counted");
  for (const char* h : {"Time", "Achieved", "% of peak"}) col(h);
  if (any_model_bw) col("Model bytes / time");
  col("Time / roofline");
  if (wants(v, "l2") && any_l2) col("L2 hit (counted)");
  if (wants(v, "launch")) {
    col("Grid");
    col("Splits", false);
  }
  col("Verdict", false);
  std::vector<std::vector<std::string>> rows;
  for (const auto& c : r.calls) {
    std::vector<std::string> cells = {std::to_string(c.index), std::string(call_kind_name(c.kind)), kernels_cell(c),
                                      shape_cell(c.shape)};
    if (reads_col) cells.push_back(opt_bytes(c.read_bytes, o.units));
    if (any_total) cells.push_back(opt_bytes(c.total_bytes, o.units));
    for (std::size_t i = 0; i < ids.size(); ++i)
      if (any[i]) {
        const auto* m = variant(c, ids[i]);
        cells.push_back(m && m->reads ? format_bytes(*m->reads, o.units) : "-");
      }
    cells.push_back(c.reads_over_model ? ratio(*c.reads_over_model) + "× " + c.judged_against : "-");
    if (wants(v, "ratios"))
      for (std::size_t i = 0; i < ids.size(); ++i)
        if (any[i]) cells.push_back(ratio_cell(variant(c, ids[i]), !c.read_bytes && c.total_bytes));
    if (writes_col) cells.push_back(opt_bytes(c.write_bytes, o.units));
    cells.push_back(time_cell(c));
    cells.push_back(c.achieved_bandwidth ? format_bandwidth(*c.achieved_bandwidth) : "-");
    cells.push_back(c.pct_of_peak ? g3(*c.pct_of_peak) + " %" : "-");
    if (any_model_bw) cells.push_back(c.model_bandwidth ? format_bandwidth(*c.model_bandwidth) : "-");
    cells.push_back(c.time_over_roofline
                        ? ratio(*c.time_over_roofline) + "× (" + std::string(bound_name(c.roofline->bound)) + ")"
                        : "-");
    if (wants(v, "l2") && any_l2) cells.push_back(c.l2_hit_rate ? g3(*c.l2_hit_rate * 100) + " %" : "-");
    if (wants(v, "launch")) {
      cells.push_back(c.grid[0] ? "(" + std::to_string(c.grid[0]) + ", " + std::to_string(c.grid[1]) + ", " +
                                      std::to_string(c.grid[2]) + ")"
                      : c.grid_size ? std::to_string(c.grid_size) + " CTAs"
                                    : "-");
      cells.push_back(c.splits ? std::to_string(c.splits) + " (" + c.splits_from + ")" : "-");
    }
    cells.push_back(std::string(verdict_name(c.verdict)));
    rows.push_back(std::move(cells));
  }
  if (!rows.empty()) out += render_grid(head, rows, right, o.format) + "\n";
  const char* bullet = md ? "- " : "  ";
  if (!r.calls.empty()) out += "Verdicts (reads judged; the floor = every value once, flash_no_l2 = no L2 reuse):\n";
  for (const auto& c : r.calls) {
    out += std::string(bullet) + "call " + std::to_string(c.index) + " (" + safe(c.origin) + "): " + c.verdict_text;
    if (!c.source.empty()) out += " [" + safe(c.source) + "]";
    out += "\n";
    for (const auto& n : c.notes) out += std::string(bullet) + "  " + n + "\n";
    if (c.geometry_warning) out += std::string(bullet) + "  warning: " + *c.geometry_warning + "\n";
  }
  auto listed = [&](const KernelCount& k) {
    std::string t = std::to_string(k.launches);
    if (k.seconds && k.launches) t += ", " + format_seconds(*k.seconds);
    if (k.read_bytes && k.launches) t += ", " + format_bytes(*k.read_bytes, o.units) + " counted";
    return t;
  };
  if (!r.outside.empty()) {
    out += "Launches outside attention calls (launches, time, DRAM bytes counted):\n";
    for (const auto& k : r.outside)
      out += std::string(bullet) + safe(short_kernel_name(k.kernel)) + " (" + std::string(role_name(k.role)) +
             ") × " + listed(k) + "\n";
  }
  if (!r.unmatched.empty()) {
    out +=
        "Kernels matched by no pattern of " + safe(v.kernel_table) + " (pass --kernel-table FILE to classify them):\n";
    for (const auto& k : r.unmatched) out += std::string(bullet) + safe(k.kernel) + " × " + listed(k) + "\n";
  }
  for (const auto& n : r.notes) out += "Note: " + n + "\n";
  return out;
}

std::string reconcile_gnuplot_script(const Reconciliation& r, PlotTerminal terminal) {
  const auto& ids = reconcile_variant_ids();
  std::string counted;
  std::vector<std::string> model(ids.size());
  std::size_t points = 0;
  for (const auto& c : r.calls) {
    const auto count = c.read_bytes ? c.read_bytes : c.total_bytes;
    if (!count || c.model.empty()) continue;
    ++points;
    counted += std::to_string(c.index) + " " + std::to_string(*count) + "\n";
    for (std::size_t i = 0; i < ids.size(); ++i)
      if (const auto* m = variant(c, ids[i]); m && m->reads)
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
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (model[i].empty()) continue;
    s += "$m" + std::to_string(i) + " << EOD\n" + model[i] + "EOD\n";
    plot += ", $m" + std::to_string(i) + " using 1:2 with points pt " + std::to_string(4 + static_cast<int>(i)) +
            " title " + gnuplot_quoted("model " + ids[i]);
  }
  return s + plot + "\n";
}

}  // namespace hbmscope
