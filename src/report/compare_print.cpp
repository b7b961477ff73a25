// `compare`'s output: a table or Markdown that reads like `model`'s (the
// verdict metric's A, B and B/A with units, then the ratios of the other
// numbers that differ, in blocks that fit 120 columns, with a legend), or
// everything in one table (--wide), CSV or JSON. Reading and matching the
// reports is compare.cpp.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "hbmscope/compare.hpp"
#include "hbmscope/csv.hpp"
#include "hbmscope/json_report.hpp"
#include "printers_internal.hpp"

namespace hbmscope {

namespace {

using printing::grid_width;

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : sep) + x;
  return s;
}

// B/A to three significant figures: 0.714, 1.00, 12.3; "inf" only when A is 0.
std::string fmt_ratio(double r) {
  if (std::isnan(r)) return "-";
  if (std::isinf(r)) return "inf";
  char b[32];
  std::snprintf(b, sizeof b, "%#.3g", r);
  std::string s = b;
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s;
}

bool ends_with(const std::string& s, std::string_view tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

bool starts_with(const std::string& s, std::string_view head) { return s.rfind(head, 0) == 0; }

// A number of a report with the unit its path says it has: "14.4 µs",
// "4.19 MB", "989 TFLOP/s", "95.4 %"; other numbers to four figures.
std::string with_unit(const std::string& path, double v) {
  if (std::isnan(v)) return "-";
  const std::string leaf = path.substr(path.find_last_of('.') == std::string::npos ? 0 : path.find_last_of('.') + 1);
  if (ends_with(leaf, "seconds") || starts_with(leaf, "time_s") || path.find(".time_s.") != std::string::npos ||
      ends_with(leaf, "_s"))
    return format_seconds(v);
  if (leaf == "flops") return format_flops(v >= 0 && v < 1.8e19 ? static_cast<std::uint64_t>(v) : 0);
  if (leaf == "tflops") return format_flop_rate(v * 1e12);
  if (ends_with(leaf, "Bps")) return format_bandwidth(v);
  if (starts_with(path, "intensity.") || leaf == "ridge_point") return format_intensity(v);
  if (leaf == "hit_rate" || leaf == "copy_fraction") {
    char b[32];
    std::snprintf(b, sizeof b, "%.1f %%", 100 * v);
    return b;
  }
  if ((starts_with(path, "bytes.") || starts_with(path, "kv_bytes.") || leaf.find("bytes") != std::string::npos) &&
      v >= 0 && v < 1.8e19)
    return format_bytes(static_cast<std::uint64_t>(v), Units::decimal);
  char b[32];
  std::snprintf(b, sizeof b, "%.4g", v);
  return b;
}

// Which shape fields differ among the matched rows: those get a column, the
// rest one line above the table.
struct Vary : ShapeVaries {
  bool label = false, splits = false, pages = false, b_shape = false, ragged_prefill = false;
};

Vary vary_of(const Comparison& c) {
  Vary v;
  if (c.rows.empty()) return v;
  const ComparedRow& f = c.rows.front();
  for (const auto& r : c.rows) {
    const Shape &a = r.shape, &b = f.shape;
    v.add(b, a);
    v.label |= r.label != f.label;
    v.splits |= a.decode && a.splits != b.splits;
    v.pages |= a.decode && a.page_size != b.page_size;
    v.b_shape |= !(r.b_shape == r.shape) || r.b_label != r.label;
    v.ragged_prefill |= ragged_prefill(a);
  }
  return v;
}

// The fields every matched row shares: "Shapes: Llama-3 8B, batch 1, 32 heads (8 kv heads), bf16, ...".
std::string shared_line(const Comparison& c, const Vary& v) {
  if (c.rows.empty()) return {};
  const ComparedRow& f = c.rows.front();
  const Shape& s = f.shape;
  std::vector<std::string> parts;
  if (!v.label && !f.label.empty()) parts.push_back(f.label);
  if (!v.batch) parts.push_back("batch " + std::to_string(s.batch));
  if (!v.heads)
    parts.push_back(std::to_string(s.heads) + (s.heads == 1 ? " head" : " heads") +
                    (s.kv_heads != s.heads ? " (" + std::to_string(s.kv_heads) + " kv heads)" : ""));
  if (!v.dtype) parts.push_back(std::string(dtype_name(s.dtype)));
  if (!v.blocks)
    parts.push_back(s.decode ? "key blocks of " + std::to_string(s.block_cols)
                             : "blocks " + printing::blocks_label(s));
  if (!v.causal && s.causal) parts.push_back("causal");
  if (!v.pass) parts.push_back(s.decode ? "decode" : printing::pass_label(s.pass) + " pass");
  if (!v.mask && (s.window != 0 || s.chunk != 0)) parts.push_back(printing::mask_label(s));
  if (!v.head_dim_v && s.head_dim_v != 0) parts.push_back("DV " + std::to_string(s.head_dim_v));
  if (!v.kv_dtype && s.kv_dtype) parts.push_back("K and V in " + std::string(dtype_name(*s.kv_dtype)));
  if (!v.latent_kv && s.latent_kv) parts.push_back("latent KV");
  return "Shapes: " + join(parts, ", ") + "\n";
}

// Where B's row differs from A's (rows matched on fewer fields): "fp8", "d 128".
std::string b_delta(const ComparedRow& r) {
  const Shape &a = r.shape, &b = r.b_shape;
  std::vector<std::string> d;
  if (r.b_label != r.label) d.push_back(r.b_label.empty() ? "no label" : r.b_label);
  if (a.seq_q != b.seq_q || a.seq_kv != b.seq_kv || a.head_dim != b.head_dim) d.push_back(printing::seq_label(b));
  if (a.batch != b.batch) d.push_back("batch " + std::to_string(b.batch));
  if (a.heads != b.heads || a.kv_heads != b.kv_heads) d.push_back("heads " + printing::heads_label(b));
  if (a.dtype != b.dtype) d.push_back(std::string(dtype_name(b.dtype)));
  if (a.block_rows != b.block_rows || a.block_cols != b.block_cols) d.push_back(printing::blocks_label(b));
  if (a.causal != b.causal) d.push_back(b.causal ? "causal" : "no mask");
  if (a.pass != b.pass) d.push_back(printing::pass_label(b.pass));
  if (a.splits != b.splits) d.push_back("splits " + std::to_string(b.splits));
  if (a.page_size != b.page_size) d.push_back("pages of " + std::to_string(b.page_size));
  if (!(a.context_lengths == b.context_lengths)) d.push_back("other context lengths");
  return d.empty() ? "same" : join(d, ", ");
}

// The short name of the n-th other number: "[1]".
std::string tag(std::size_t n) {
  std::string t = "[";
  t.append(std::to_string(n + 1)).append("]");
  return t;
}

struct Grid {
  std::vector<std::string> head;
  std::vector<bool> right;
  std::vector<std::vector<std::string>> rows;
  void column(std::string h, bool r, const std::vector<std::string>& cells) {
    head.push_back(std::move(h));
    right.push_back(r);
    if (rows.size() < cells.size()) rows.resize(cells.size());
    for (std::size_t i = 0; i < cells.size(); ++i) rows[i].push_back(cells[i]);
  }
  std::size_t width() const { return grid_width(head, rows); }
};

// The shape columns of every block: the label, sequence × head dim, and the
// fields that differ among rows; B's shape where it differs from A's.
Grid shape_columns(const Comparison& c, const Vary& v) {
  Grid g;
  const auto col = [&](const char* h, bool right, auto cell) {
    std::vector<std::string> cells;
    cells.reserve(c.rows.size());
    for (const auto& r : c.rows) cells.push_back(cell(r));
    g.column(h, right, cells);
  };
  if (v.label) col("Group", false, [](const ComparedRow& r) { return r.label; });
  col("Sequence × head dim", false, [](const ComparedRow& r) { return printing::seq_label(r.shape); });
  if (v.batch) col("Batch", true, [](const ComparedRow& r) { return std::to_string(r.shape.batch); });
  if (v.heads) col("Heads/KV", true, [](const ComparedRow& r) { return printing::heads_label(r.shape); });
  if (v.dtype) col("Dtype", false, [](const ComparedRow& r) { return std::string(dtype_name(r.shape.dtype)); });
  if (v.blocks) col("Br×Bc", true, [](const ComparedRow& r) { return printing::blocks_label(r.shape); });
  if (v.causal) col("Causal", false, [](const ComparedRow& r) { return std::string(r.shape.causal ? "yes" : "no"); });
  if (v.pass) col("Pass", false, [](const ComparedRow& r) { return printing::pass_label(r.shape.pass); });
  if (v.splits) col("Splits", true, [](const ComparedRow& r) { return std::to_string(r.shape.splits); });
  if (v.pages) col("Page", true, [](const ComparedRow& r) { return std::to_string(r.shape.page_size); });
  if (v.mask) col("Mask", false, [](const ComparedRow& r) { return printing::mask_label(r.shape); });
  if (v.head_dim_v) col("DV", true, [](const ComparedRow& r) { return std::to_string(value_head_dim(r.shape)); });
  if (v.kv_dtype)
    col("KV dtype", false, [](const ComparedRow& r) { return std::string(dtype_name(key_value_dtype(r.shape))); });
  if (v.latent_kv) col("Latent KV", false, [](const ComparedRow& r) { return std::string(r.shape.latent_kv ? "yes" : "no"); });
  if (v.ragged_prefill) col("Sequences", false, [](const ComparedRow& r) { return printing::sequences_label(r.shape); });
  if (v.b_shape) col("B's shape", false, [](const ComparedRow& r) { return b_delta(r); });
  return g;
}

std::string header_lines(const Comparison& c) {
  std::string h = "Compare A = " + c.a_name + " with B = " + c.b_name + "\n";
  h += "Rows matched on " + join(c.match, ", ") + "\n";
  if (!c.differences.empty()) h += "A and B differ in " + join(c.differences, "; ") + "\n";
  char thr[32];
  std::snprintf(thr, sizeof thr, "%g", c.threshold_pct);
  if (c.metric.empty())
    h += "No number both reports hold: no verdict\n";
  else
    h += "Verdict on " + c.metric + (c.higher_is_better ? " (higher is better)" : " (lower is better)") +
         ": FASTER or SLOWER beyond " + thr + "%, else SAME\n";
  if (!c.hint.empty()) h += "Note: " + c.hint + "\n";
  return h;
}

// Lines in bold for Markdown (a blank line stays blank).
std::string bold_lines(const std::string& text) {
  std::string md;
  for (std::size_t pos = 0; pos < text.size();) {
    const std::size_t nl = std::min(text.find('\n', pos), text.size());
    const std::string line = text.substr(pos, nl - pos);
    md += line.empty() ? "\n" : "**" + line + "**  \n";
    pos = nl + 1;
  }
  return md;
}

std::string render_table(const Comparison& c, Format format, const CompareTableOptions& opt) {
  const Vary v = vary_of(c);
  const Grid keys = shape_columns(c, v);
  const bool metric_shown = !c.shown.empty() && c.columns[c.shown[0]] == c.metric;
  std::vector<std::size_t> others(c.shown.begin() + (metric_shown ? 1 : 0), c.shown.end());
  const auto ratios = [&](std::size_t k) {
    std::vector<std::string> cells;
    for (const auto& r : c.rows) cells.push_back(fmt_ratio(ratio(r.a[k], r.b[k])));
    return cells;
  };
  const auto values = [&](std::size_t k, bool b_side) {
    std::vector<std::string> cells;
    for (const auto& r : c.rows) cells.push_back(with_unit(c.columns[k], b_side ? r.b[k] : r.a[k]));
    return cells;
  };
  std::vector<std::string> verdicts;
  for (const auto& r : c.rows) verdicts.push_back(r.verdict);

  std::string out = header_lines(c) + shared_line(c, v);
  if (c.shown.size() < c.columns.size())
    out += std::to_string(c.columns.size() - c.shown.size()) +
           (c.columns.size() - c.shown.size() == 1 ? " more number" : " more numbers") +
           " within the threshold in every row (--metrics all shows them; --format json holds them all)\n";
  out += "\n";
  if (format == Format::md) out = bold_lines(out);

  // The verdict's table: A, B and B/A of the metric with units, the verdict last.
  Grid main = keys;
  if (metric_shown) {
    const std::size_t m = c.shown[0];
    main.column(opt.wide ? "A " + c.metric : "A", true, values(m, false));
    main.column(opt.wide ? "B " + c.metric : "B", true, values(m, true));
    main.column(opt.wide ? "B/A " + c.metric : "B/A", true, ratios(m));
  }
  if (opt.wide) {  // every column in one table, named in full
    for (std::size_t k : others) main.column("B/A " + c.columns[k], true, ratios(k));
    others.clear();
  }
  main.column("Verdict", false, verdicts);
  out += render_grid(main.head, main.rows, main.right, format);

  // The other numbers that differ: B/A under short names [1], [2], ... with a
  // legend, in as many blocks as keep each within max_width (Markdown: one).
  if (!others.empty()) {
    std::string caption = "\nB/A of the " + std::to_string(others.size()) + " other number" +
                          (others.size() == 1 ? "" : "s") + " that differ";
    char thr[32];
    std::snprintf(thr, sizeof thr, "%g", c.threshold_pct);
    caption += std::string(" beyond ") + thr + "% in some row";
    // Each column's cells and width once; then as many columns per block as fit.
    std::vector<std::vector<std::string>> cells(others.size());
    std::vector<std::size_t> widths(others.size());
    for (std::size_t n = 0; n < others.size(); ++n) {
      cells[n] = ratios(others[n]);
      widths[n] = printing::width(tag(n));
      for (const auto& x : cells[n]) widths[n] = std::max(widths[n], printing::width(x));
    }
    std::vector<std::vector<std::size_t>> blocks{{}};
    std::size_t used = keys.width();
    for (std::size_t n = 0; n < others.size(); ++n) {
      if (format == Format::table && opt.max_width > 0 && !blocks.back().empty() &&
          used + 3 + widths[n] > opt.max_width) {
        blocks.emplace_back();
        used = keys.width();
      }
      blocks.back().push_back(n);
      used += 3 + widths[n];
    }
    for (std::size_t b = 0; b < blocks.size(); ++b) {
      Grid g = keys;
      for (std::size_t m : blocks[b]) g.column(tag(m), true, cells[m]);
      std::string cap = caption;
      if (blocks.size() > 1) cap.append(" (").append(std::to_string(b + 1)).append(" of ").append(std::to_string(blocks.size())).append(")");
      cap += ":\n";
      out += format == Format::md ? "\n" + bold_lines(cap.substr(1)) + "\n" : cap;
      out += render_grid(g.head, g.rows, g.right, format);
    }
    // The legend, its entries packed into lines of at most max_width.
    std::string legend, line;
    for (std::size_t n = 0; n < others.size(); ++n) {
      const std::string entry = tag(n) + " " + c.columns[others[n]];
      if (format == Format::md) {
        legend += "- " + entry + "\n";
        continue;
      }
      if (!line.empty() && printing::width(line) + 3 + printing::width(entry) > std::max<std::size_t>(opt.max_width, 40)) {
        legend += line + "\n";
        line.clear();
      }
      line += (line.empty() ? "  " : "   ") + entry;
    }
    if (!line.empty()) legend += line + "\n";
    out += "\n" + legend;
  }

  out += '\n';  // not "\n" + ...: GCC 12 warns wrongly on that here (-Wrestrict)
  out += std::to_string(c.rows.size()) + " rows matched: " + std::to_string(c.faster) + " FASTER, " +
         std::to_string(c.slower) + " SLOWER, " + std::to_string(c.same) + " SAME\n";
  const auto list = [&](const char* which, const std::string& name, const auto& rows) {
    if (rows.empty()) return;
    out += "Only in " + std::string(which) + " (" + name + "), " + std::to_string(rows.size()) + " rows:\n";
    std::size_t n = 0;
    for (const auto& [l, s] : rows) {
      if (++n > 1000) {
        out += "  ... and " + std::to_string(rows.size() - 1000) + " more (--format json lists them all)\n";
        break;
      }
      out += "  " + (l.empty() ? "" : l + ": ") + describe(s) + "\n";
    }
  };
  list("A", c.a_name, c.only_a);
  list("B", c.b_name, c.only_b);
  return out;
}

std::string render_json(const Comparison& c) {
  // Row by row: a 1M-row comparison is never one JSON tree.
  nlohmann::json j = {{"schema", "hbmscope.compare/1"},
                      {"a", c.a_name},
                      {"b", c.b_name},
                      {"metric", c.metric},
                      {"higher_is_better", c.higher_is_better},
                      {"threshold_pct", c.threshold_pct},
                      {"match", c.match},
                      {"differences", c.differences},
                      {"columns", c.columns},
                      {"rows", nlohmann::json::array()}};
  const auto only = [](const auto& v) {
    nlohmann::json a = nlohmann::json::array();
    for (const auto& [l, s] : v) {
      nlohmann::json o = {{"shape", shape_to_json(s)}};
      if (!l.empty()) o["label"] = l;
      a.push_back(o);
    }
    return a;
  };
  j["only_in_a"] = only(c.only_a);
  j["only_in_b"] = only(c.only_b);
  j["summary"] = {{"matched", c.rows.size()}, {"faster", c.faster}, {"slower", c.slower}, {"same", c.same}};
  const auto dump = [](const nlohmann::json& v, int indent) {
    return v.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
  };
  std::string head = dump(j, 2);
  const std::string slot = "\"rows\": []";
  const std::size_t at = head.find(slot);
  std::string out = head.substr(0, at + slot.size() - 1);
  // Each row written as text (no JSON tree per row): the column names
  // escaped once, the ratios as the shortest text that reads back the same.
  std::vector<std::string> col_keys;
  for (const auto& col : c.columns) col_keys.push_back(dump(nlohmann::json(col), -1));
  for (std::size_t i = 0; i < c.rows.size(); ++i) {
    const auto& r = c.rows[i];
    std::string ratios = "{";
    for (std::size_t k = 0; k < c.columns.size(); ++k) {
      const double q = ratio(r.a[k], r.b[k]);
      if (std::isnan(q)) continue;
      if (ratios.size() > 1) ratios += ',';
      ratios.append(col_keys[k]).append(":").append(std::isinf(q) ? std::string("\"inf\"") : csv_number(q));
    }
    ratios += "}";
    std::string row = "{";
    if (!r.label.empty()) row.append("\"label\":").append(dump(nlohmann::json(r.label), -1)).append(",");
    row.append("\"shape\":").append(dump(shape_to_json(r.shape), -1));
    if (!(r.b_shape == r.shape)) row.append(",\"b_shape\":").append(dump(shape_to_json(r.b_shape), -1));
    if (r.b_label != r.label) row.append(",\"b_label\":").append(dump(nlohmann::json(r.b_label), -1));
    row.append(",\"ratios\":").append(ratios).append(",\"verdict\":\"").append(r.verdict).append("\"}");
    // One line per row keeps the file small and line-oriented tools useful.
    out.append("\n    ").append(row).append(i + 1 < c.rows.size() ? "," : "\n  ");
  }
  out += head.substr(at + slot.size() - 1);
  return out + "\n";
}

std::string render_csv(const Comparison& c) {
  std::vector<std::string> head{"label", "shape"};
  bool b_shapes = false;
  for (const auto& r : c.rows) b_shapes = b_shapes || !(r.b_shape == r.shape);
  if (b_shapes) head.push_back("b_shape");
  for (auto i : c.shown)
    for (const char* p : {"a:", "b:", "ratio:"}) head.push_back(p + c.columns[i]);
  head.push_back("verdict");
  std::string out = csv_line(head);
  for (const auto& r : c.rows) {
    std::vector<std::string> f{r.label, describe(r.shape)};
    if (b_shapes) f.push_back(describe(r.b_shape));
    for (auto i : c.shown) {
      f.push_back(csv_number(r.a[i]));
      f.push_back(csv_number(r.b[i]));
      f.push_back(csv_number(ratio(r.a[i], r.b[i])));
    }
    f.push_back(r.verdict);
    out += csv_line(f);
  }
  return out;
}

}  // namespace

std::string render_comparison(const Comparison& c, Format format, const CompareTableOptions& options) {
  switch (format) {
    case Format::json: return render_json(c);
    case Format::csv: return render_csv(c);
    case Format::table:
    case Format::md: return render_table(c, format, options);
  }
  return {};
}

}  // namespace hbmscope
