#include "hbmscope/plot.hpp"

#include <algorithm>
#include <iterator>
#include <optional>
#include <cstdio>
#include <string_view>
#include <tuple>
#include <map>
#include <vector>

#include "hbmscope/error.hpp"
#include "hbmscope/printers.hpp"

namespace hbmscope {

PlotTerminal plot_terminal_for(const std::string& target) {
  auto ends = [&](const char* ext) {
    const std::string e(ext);
    return target.size() > e.size() && target.compare(target.size() - e.size(), e.size(), e) == 0;
  };
  if (target == "-") return PlotTerminal::dumb;
  if (ends(".svg") || ends(".SVG")) return PlotTerminal::svg;
  if (ends(".png") || ends(".PNG")) return PlotTerminal::png;
  throw UsageError("--plot: '" + target + "' must end in .svg or .png, or be '-' for the terminal");
}

// Single quotes: gnuplot substitutes backticks and escapes inside double
// quotes, and macros (@name) outside quotes, but nothing inside single quotes.
// A raw line break would end the string and start a new command, so control
// characters become spaces. Titles only: no file name is in the script.
std::string gnuplot_quoted(std::string_view s) {
  std::string r = "'";
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '\'') r += "''";
    else if (u < 0x20 || u == 0x7f) r += ' ';
    else r += c;
  }
  return r + "'";
}

namespace {

std::string num(double v) {
  char b[40];
  std::snprintf(b, sizeof b, "%.10g", v);
  return b;
}

std::uint64_t x_of(const Shape& s, PlotAxis x) {
  switch (x) {
    case PlotAxis::seq: return s.seq_q;
    case PlotAxis::seq_kv: return s.seq_kv;
    case PlotAxis::head_dim: return s.head_dim;
    case PlotAxis::batch: return s.batch;
    case PlotAxis::heads: return s.heads;
  }
  return 0;
}

const char* axis_name(PlotAxis x) {
  switch (x) {
    case PlotAxis::seq: return "seq";
    case PlotAxis::seq_kv: return "seq_kv";
    case PlotAxis::head_dim: return "head_dim";
    case PlotAxis::batch: return "batch";
    case PlotAxis::heads: return "heads";
  }
  return "";
}

const char* axis_label(PlotAxis x) {
  switch (x) {
    case PlotAxis::seq: return "sequence length Nq (tokens)";
    case PlotAxis::seq_kv: return "key/value length Nkv (tokens)";
    case PlotAxis::head_dim: return "head dimension d";
    case PlotAxis::batch: return "batch size";
    case PlotAxis::heads: return "query heads H";
  }
  return "";
}

// A row's shape with the x field cleared, and a field that follows it (Nkv =
// Nq, Hkv = H) cleared too: rows with equal keys form one series (one line).
struct SeriesKey {
  std::string label;
  Shape shape;
  bool mixed_masks = false;  // a whole model's total over kinds of different masks (its label says which)
  auto tuple() const {
    const Shape& s = shape;
    return std::tuple(label, s.seq_q, s.seq_kv, s.batch, s.heads, s.kv_heads, s.head_dim,
                      static_cast<int>(s.dtype), s.block_rows, s.block_cols, s.causal,
                      static_cast<int>(s.pass), s.decode, s.page_size, s.splits, s.window, s.chunk,
                      s.head_dim_v, s.kv_dtype ? static_cast<int>(*s.kv_dtype) : -1, s.latent_kv);
  }
  bool operator<(const SeriesKey& o) const { return tuple() < o.tuple(); }
};

bool all_decode(const Report& rep) {
  return !rep.rows.empty() &&
         std::all_of(rep.rows.begin(), rep.rows.end(), [](const Row& r) { return r.shape.decode; });
}

PlotAxis axis_of(const Report& rep, const PlotOptions& opt) {
  return opt.x.value_or(all_decode(rep) ? PlotAxis::seq_kv : PlotAxis::seq);
}

SeriesKey key_of(const Row& r, PlotAxis x) {
  // A whole-model row's series is its model and kind of layer (a line per kind, one for the total).
  SeriesKey k{r.model_layers ? (r.label.empty() ? "" : r.label + " ") + r.model_layers->config + " " + r.model_layers->kind
                             : r.label,
              r.shape, r.model_layers && r.model_layers->mixed_masks};
  Shape& s = k.shape;
  if (x != PlotAxis::seq && x != PlotAxis::seq_kv && s.seq_kv == s.seq_q) s.seq_kv = 0;  // "Nkv = Nq"
  switch (x) {
    case PlotAxis::seq:
      if (s.seq_kv == s.seq_q) s.seq_kv = 0;
      s.seq_q = 0;
      break;
    case PlotAxis::seq_kv:  // a ragged decode batch is plotted at its longest context
      s.seq_kv = 0;
      s.context_lengths.clear();
      break;
    case PlotAxis::head_dim: s.head_dim = 0; break;
    case PlotAxis::batch: s.batch = 0; break;
    case PlotAxis::heads:
      if (s.kv_heads == s.heads) s.kv_heads = 0;
      s.heads = 0;
      break;
  }
  return k;
}

// Which fields differ among the series (each then names its series) and which
// are the same everywhere (the title names those).
struct Varies {
  bool label = false, seq = false, seq_kv = false, d = false, batch = false, heads = false,
       dtype = false, blocks = false, causal = false, pass = false;
  bool mask = false, dv = false, kv_dtype = false, latent = false;  // attention as served
};

Varies varies(const std::vector<SeriesKey>& keys) {
  Varies v;
  const SeriesKey& f = keys.front();
  for (const auto& k : keys) {
    const Shape &a = k.shape, &b = f.shape;
    v.label |= k.label != f.label;
    v.seq |= a.seq_q != b.seq_q;
    v.seq_kv |= a.seq_kv != b.seq_kv;
    v.d |= a.head_dim != b.head_dim;
    v.batch |= a.batch != b.batch;
    v.heads |= a.heads != b.heads || a.kv_heads != b.kv_heads;
    v.dtype |= a.dtype != b.dtype;
    v.blocks |= a.block_rows != b.block_rows || a.block_cols != b.block_cols;
    v.causal |= a.causal != b.causal;
    v.pass |= a.pass != b.pass;
    v.mask |= a.window != b.window || a.chunk != b.chunk;
    v.dv |= a.head_dim_v != b.head_dim_v;
    v.kv_dtype |= a.kv_dtype != b.kv_dtype;
    v.latent |= a.latent_kv != b.latent_kv;
  }
  return v;
}

std::string series_name(const SeriesKey& k, const Varies& v, PlotAxis x) {
  const Shape& s = k.shape;
  std::string n;
  auto add = [&](const std::string& part) { n += (n.empty() ? "" : ", ") + part; };
  if (v.label) add(k.label);
  if (v.seq && x != PlotAxis::seq) add("Nq=" + std::to_string(s.seq_q));
  if (v.seq_kv) add(s.seq_kv ? "Nkv=" + std::to_string(s.seq_kv) : "Nkv=Nq");
  if (v.d && x != PlotAxis::head_dim) add("d=" + std::to_string(s.head_dim));
  if (v.batch && x != PlotAxis::batch) add("batch " + std::to_string(s.batch));
  if (v.heads)
    add(x == PlotAxis::heads ? (s.kv_heads ? "Hkv=" + std::to_string(s.kv_heads) : "Hkv=H")
                             : "H=" + std::to_string(s.heads) + "/" + std::to_string(s.kv_heads));
  if (v.dtype) add(std::string(dtype_name(s.dtype)));
  if (v.blocks) add("Br×Bc=" + std::to_string(s.block_rows) + "×" + std::to_string(s.block_cols));
  if (v.causal) add(s.causal ? "causal" : "full");
  if (v.pass) add(std::string(pass_name(s.pass)));
  if (v.mask && k.mixed_masks) add("mixed masks");
  else if (v.mask) add(s.window ? "window " + std::to_string(s.window) : s.chunk ? "chunk " + std::to_string(s.chunk) : "no window");
  if (v.dv) add("DV=" + std::to_string(s.head_dim_v ? s.head_dim_v : s.head_dim));
  if (v.kv_dtype) add("KV " + std::string(dtype_name(s.kv_dtype.value_or(s.dtype))));
  if (v.latent) add(s.latent_kv ? "latent KV" : "no latent KV");
  return n;
}

// The fields every series shares, for the titles: "batch 1, 32 heads (8 kv
// heads), d 128, bf16, causal, forward pass".
std::string shape_title(const SeriesKey& k, const Varies& v, PlotAxis x) {
  const Shape& s = k.shape;
  std::vector<std::string> parts;
  if (!v.label && !k.label.empty()) parts.push_back(k.label);
  if (!v.batch && x != PlotAxis::batch) parts.push_back("batch " + std::to_string(s.batch));
  if (!v.heads) {
    if (x == PlotAxis::heads)
      parts.push_back(s.kv_heads ? std::to_string(s.kv_heads) + " kv heads" : "kv heads = heads");
    else
      parts.push_back(std::to_string(s.heads) + (s.heads == 1 ? " head" : " heads") +
                      (s.kv_heads != s.heads ? " (" + std::to_string(s.kv_heads) + " kv heads)" : ""));
  }
  if (!v.seq && x != PlotAxis::seq) parts.push_back("Nq " + std::to_string(s.seq_q));
  if (!v.seq_kv && s.seq_kv != 0 && x != PlotAxis::seq_kv) parts.push_back("Nkv " + std::to_string(s.seq_kv));
  if (!v.d && x != PlotAxis::head_dim) parts.push_back("d " + std::to_string(s.head_dim));
  if (!v.dtype) parts.push_back(std::string(dtype_name(s.dtype)));
  if (!v.causal) parts.push_back(s.causal ? "causal" : "no mask");
  if (!v.mask && s.window) parts.push_back("window " + std::to_string(s.window));
  if (!v.mask && s.chunk) parts.push_back("chunk " + std::to_string(s.chunk));
  if (!v.dv && s.head_dim_v) parts.push_back("DV " + std::to_string(s.head_dim_v));
  if (!v.kv_dtype && s.kv_dtype) parts.push_back("KV " + std::string(dtype_name(*s.kv_dtype)));
  if (!v.latent && s.latent_kv) parts.push_back("latent KV (MLA)");
  if (!v.pass)
    parts.push_back(s.pass == Pass::fwd   ? "forward pass"
                    : s.pass == Pass::bwd ? "backward pass"
                                          : "forward + backward");
  std::string t;
  for (const auto& p : parts) t += (t.empty() ? "" : ", ") + p;
  return t;
}

// The simulated variants are drawn first, thick, so that an exact variant on
// the same points (floor under flash_l2_sim, standard under standard_l2_sim)
// shows on top of them, thin and in its own colour, dashes and points.
bool drawn_under(const std::string& id) {
  return id.size() > 7 && id.compare(id.size() - 7, 7, "_l2_sim") == 0;
}

// The rows by series, in the order of their keys; `all` the number of series
// before the cap (the first max_series are kept).
struct Series {
  std::vector<SeriesKey> keys;
  std::vector<std::vector<const Row*>> rows;
  std::size_t all = 0;
  std::vector<SeriesKey> left_out;  // the first few of those past the cap, to name them
};

Series series_of(const Report& rep, PlotAxis xa, std::size_t max_series) {
  std::map<SeriesKey, std::vector<const Row*>> by_key;
  for (const Row& r : rep.rows) by_key[key_of(r, xa)].push_back(&r);
  Series s;
  s.all = by_key.size();
  for (auto& [k, v] : by_key) {
    if (s.keys.size() < std::max<std::size_t>(max_series, 1)) {
      s.keys.push_back(k);
      s.rows.push_back(std::move(v));
    } else if (s.left_out.size() < 5) {
      s.left_out.push_back(k);
    }
  }
  return s;
}

}  // namespace

std::optional<PlotAxis> parse_plot_axis(std::string_view s) {
  for (const PlotAxis x : {PlotAxis::seq, PlotAxis::seq_kv, PlotAxis::head_dim, PlotAxis::batch, PlotAxis::heads}) {
    std::string name = axis_name(x), dashed = name;
    for (char& c : dashed)
      if (c == '_') c = '-';
    if (s == name || s == dashed) return x;
  }
  return std::nullopt;
}

std::vector<std::string> plot_notes(const Report& rep, const PlotOptions& opt) {
  const auto ids = variant_ids(rep);
  std::string none;
  for (const auto& id : opt.expected)
    if (std::find(ids.begin(), ids.end(), id) == ids.end()) none += (none.empty() ? "" : ", ") + id;
  std::vector<std::string> notes;
  if (!none.empty()) notes.push_back("no points for " + none + " (not simulated on any shape): not drawn");
  if (rep.rows.empty()) return notes;
  const PlotAxis xa = axis_of(rep, opt);
  const Series series = series_of(rep, xa, opt.max_series);
  const std::vector<SeriesKey>& keys = series.keys;
  std::vector<SeriesKey> every = keys;
  every.insert(every.end(), series.left_out.begin(), series.left_out.end());
  const Varies vary = varies(every);
  std::string gaps;
  for (const auto& id : ids)
    for (std::size_t i = 0; i < keys.size(); ++i) {
      bool any = false;
      for (const Row* r : series.rows[i]) any |= r->variant(id) != nullptr;
      if (!any) {
        const std::string n = series_name(keys[i], vary, xa);
        gaps += (gaps.empty() ? "" : ", ") + id + (n.empty() ? "" : " (" + n + ")");
      }
    }
  if (!gaps.empty()) notes.push_back("no points for " + gaps + ": no line or legend entry");
  if (series.all > keys.size()) {
    std::string named;
    for (const auto& k : series.left_out) named += (named.empty() ? "" : "; ") + series_name(k, vary, xa);
    if (series.all - keys.size() > series.left_out.size())
      named += "; and " + std::to_string(series.all - keys.size() - series.left_out.size()) + " more";
    notes.push_back("drew " + std::to_string(keys.size()) + " of " + std::to_string(series.all) +
                    " series (at most " + std::to_string(keys.size()) + "; left out: " + named +
                    "); plot fewer shapes, or pick the axis that varies most with --x");
  }
  return notes;
}

std::string gnuplot_script(const Report& rep, PlotTerminal term) { return gnuplot_script(rep, term, {}); }

std::string gnuplot_script(const Report& rep, PlotTerminal term, const PlotOptions& opt) {
  if (rep.rows.empty()) throw Error("--plot: the report has no rows to plot");
  const PlotAxis xa = axis_of(rep, opt);
  const bool decode = all_decode(rep);
  {
    std::vector<std::uint64_t> xs;
    for (const Row& r : rep.rows) xs.push_back(x_of(r.shape, xa));
    std::sort(xs.begin(), xs.end());
    if (rep.rows.size() > 1 && xs.front() == xs.back()) {
      // Name the axes that do vary, so that the user can pick one.
      std::vector<std::string> vary;
      for (const PlotAxis x : {PlotAxis::seq, PlotAxis::seq_kv, PlotAxis::head_dim, PlotAxis::batch, PlotAxis::heads})
        for (const Row& r : rep.rows)
          if (x_of(r.shape, x) != x_of(rep.rows.front().shape, x)) {
            vary.push_back(axis_name(x));
            break;
          }
      std::string list;
      for (const auto& v : vary) list += (list.empty() ? "" : ", ") + v;
      throw UsageError(std::string("--plot: every row has the same ") + axis_name(xa) + " (" +
                       std::to_string(xs.front()) + "), so the chart would have no line" +
                       (list.empty() ? std::string() : "; choose the axis with --x (" + list + " vary)"));
    }
  }
  const Series series = series_of(rep, xa, opt.max_series);
  const std::vector<SeriesKey>& keys = series.keys;
  std::vector<SeriesKey> every = keys;  // the names say what differs among all series, drawn or not
  every.insert(every.end(), series.left_out.begin(), series.left_out.end());
  const Varies vary = varies(every);
  const std::vector<std::string> ids = variant_ids(rep);
  const bool timed = rep.roofline.has_value();
  const bool dumb = term == PlotTerminal::dumb;

  std::string s = "# Generated by hbmscope: HBM traffic of attention against " + std::string(axis_label(xa)) + ".\n";
  const std::string size = timed ? "900,1000" : "900,560";
  switch (term) {
    case PlotTerminal::svg: s += "set terminal svg size " + size + " dynamic font 'sans,11'\n"; break;
    case PlotTerminal::png: s += "set terminal pngcairo size " + size + " font 'sans,10'\n"; break;
    case PlotTerminal::dumb: s += std::string("set terminal dumb size 110,") + (timed ? "70" : "32") + "\n"; break;
  }
  s += "set termoption noenhanced\n";

  // One data block per series: x, then bytes, seconds and bound (1 =
  // compute) per variant; absent values are NaN. has[i][v]: the series has a
  // point of variant v (else it gets no legend entry).
  std::vector<std::vector<bool>> has(keys.size(), std::vector<bool>(ids.size(), false));
  for (std::size_t i = 0; i < keys.size(); ++i) {
    s += "$s" + std::to_string(i) + " << EOD\n";
    auto rows = series.rows[i];
    std::stable_sort(rows.begin(), rows.end(),
                     [xa](const Row* a, const Row* b) { return x_of(a->shape, xa) < x_of(b->shape, xa); });
    for (const Row* r : rows) {
      s += std::to_string(x_of(r->shape, xa));
      for (std::size_t v = 0; v < ids.size(); ++v) {
        const auto* var = r->variant(ids[v]);
        s += ' ';
        s += var ? num(static_cast<double>(var->bytes)) : std::string("NaN");
        if (var) has[i][v] = true;
      }
      for (const auto& id : ids) {
        const auto* v = r->variant(id);
        s += ' ';
        s += v && v->prediction ? num(v->prediction->seconds) : std::string("NaN");
      }
      for (const auto& id : ids) {
        const auto* v = r->variant(id);
        s += std::string(" ") + (v && v->prediction && v->prediction->bound == Bound::compute ? "1" : "0");
      }
      s += "\n";
    }
    s += "EOD\n";
  }

  // Styles: colour and point type by variant; dashes by variant with one
  // series, else by series; simulated variants first and thick.
  std::vector<std::size_t> order;
  for (std::size_t v = 0; v < ids.size(); ++v)
    if (drawn_under(ids[v])) order.push_back(v);
  for (std::size_t v = 0; v < ids.size(); ++v)
    if (!drawn_under(ids[v])) order.push_back(v);
  static constexpr int point_types[] = {4, 6, 8, 10, 12, 14, 1, 2, 3};
  // The terminal draws no dashes: there a series takes its own point character
  // instead, so that each legend entry (line and point characters) is unique.
  const auto style = [&](std::size_t i, std::size_t v) {
    const int dt = static_cast<int>(keys.size() == 1 ? v % 5 : i % 5) + 1;
    const std::size_t p = dumb && keys.size() > 1 ? i : v;
    return " lt " + std::to_string(v + 1) + " lw " + (drawn_under(ids[v]) ? "4" : "1.5") + " dt " +
           std::to_string(dt) + " pt " + std::to_string(point_types[p % std::size(point_types)]);
  };

  const std::string shape = shape_title(keys.front(), vary, xa);
  const std::string device = timed ? " on " + rep.roofline->device.name : "";
  const auto missing = plot_notes(rep, opt);
  s += "set logscale x 2\nset logscale y 10\nset grid\nset key outside right top\n";
  s += "set xlabel " +
       gnuplot_quoted(decode && xa == PlotAxis::seq_kv ? "context length Nkv (tokens; the longest of a ragged batch)"
                                                       : axis_label(xa)) +
       "\nset format x '%.0f'\n";
  if (!missing.empty()) {
    std::string text;
    for (const auto& m : missing) text += (text.empty() ? "" : "; ") + m;
    s += "set label 1 " + gnuplot_quoted("Note: " + text) + " at screen 0.01, screen 0.01 left\n";
    s += "set bmargin 5\n";
  }
  if (timed) s += "set multiplot layout 2,1\n";
  const std::string what = decode ? "HBM bytes per decode step (reads + writes)" : "HBM bytes (reads + writes)";
  s += "set title " + gnuplot_quoted(what + (shape.empty() ? "" : ": " + shape) + device) + "\n";
  s += "set ylabel 'bytes'\nset format y '%.0s %cB'\n";
  std::string plot = "plot ";
  bool first = true;
  for (std::size_t v : order)
    for (std::size_t i = 0; i < keys.size(); ++i) {
      if (!has[i][v]) continue;
      const std::string sname = series_name(keys[i], vary, xa);
      plot += std::string(first ? "" : ", \\\n     ") + "$s" + std::to_string(i) + " using 1:" +
              std::to_string(2 + v) + " with linespoints" + style(i, v) + " title " +
              gnuplot_quoted(ids[v] + (sname.empty() ? "" : " (" + sname + ")"));
      first = false;
    }
  s += plot + "\n";
  if (timed) {
    const std::size_t n = ids.size();
    s += "set title " +
         gnuplot_quoted("Roofline time" + device + " at " +
                        format_bandwidth(rep.roofline->device.bandwidth * rep.roofline->bandwidth_fraction)) +
         "\n";
    // The shape is in the first chart's title; here the key says what the markers mean.
    if (!dumb) s += "set key title 'filled: compute-bound, open: memory-bound'\n";
    s += "set ylabel 'predicted time'\nset format y '%.0s %cs'\n";
    plot = "plot ";
    first = true;
    for (std::size_t v : order)
      for (std::size_t i = 0; i < keys.size(); ++i) {
        if (!has[i][v]) continue;
        const std::string sname = series_name(keys[i], vary, xa);
        const std::string blk = "$s" + std::to_string(i);
        const std::string t = std::to_string(2 + n + v), b = std::to_string(2 + 2 * n + v);
        const std::string lt = std::to_string(v + 1);
        // The terminal draws each entry with the characters its legend shows:
        // no separate bound markers there (the table says which bound binds).
        plot += std::string(first ? "" : ", \\\n     ") + blk + " using 1:" + t + " with " +
                (dumb ? "linespoints" : "lines") + style(i, v) + " title " +
                gnuplot_quoted(ids[v] + (sname.empty() ? "" : " (" + sname + ")"));
        if (!dumb) {
          plot += ", \\\n     " + blk + " using 1:($" + b + "==0 ? $" + t + " : NaN) with points lt " + lt +
                  " pt 6 notitle";
          plot += ", \\\n     " + blk + " using 1:($" + b + "==1 ? $" + t + " : NaN) with points lt " + lt +
                  " pt 7 notitle";
        }
        first = false;
      }
    s += plot + "\nunset multiplot\n";
  }
  return s;
}

}  // namespace hbmscope
