// `compare`'s output: the comparison as a table or Markdown (the metric's A,
// B and B/A, then the other numbers that differ), CSV or JSON. Reading and
// matching the reports is compare.cpp.
#include <cmath>
#include <cstdio>

#include "hbmscope/compare.hpp"
#include "hbmscope/csv.hpp"
#include "hbmscope/json_report.hpp"

namespace hbmscope {

namespace {

std::string fmt_ratio(double r) {
  if (std::isnan(r)) return "-";
  if (std::isinf(r)) return "inf";
  char b[32];
  std::snprintf(b, sizeof b, "%.3f", r);
  return b;
}

std::string shape_text(const std::string& label, const Shape& s) {
  return (label.empty() ? "" : label + ": ") + describe(s);
}


}  // namespace

namespace {

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : sep) + x;
  return s;
}

std::string header_line(const Comparison& c) {
  std::string h = "Compare A = " + c.a_name + " with B = " + c.b_name + "\n";
  h += "Rows matched on " + join(c.match, ", ") + "\n";
  if (!c.differences.empty()) h += "A and B differ in " + join(c.differences, "; ") + "\n";
  char thr[32];
  std::snprintf(thr, sizeof thr, "%g", c.threshold_pct);
  if (c.metric.empty())
    h += "No number both reports hold: no verdict\n";
  else
    h += "Verdict on " + c.metric + (c.higher_is_better ? " (higher is better)" : " (lower is better)") +
         ": SAME within " + thr + "%, ratios B/A\n";
  if (!c.hint.empty()) h += "Note: " + c.hint + "\n";
  return h;
}

}  // namespace

std::string render_comparison(const Comparison& c, Format format) {
  if (format == Format::json) {
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
  if (format == Format::csv) {
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
  // table and md: A, B and B/A of the metric, then one ratio column per other
  // shown number.
  std::vector<std::string> head{"Shape"};
  bool b_shapes = false;
  for (const auto& r : c.rows) b_shapes = b_shapes || !(r.b_shape == r.shape);
  if (b_shapes) head.push_back("B's shape");
  const bool metric_first = !c.shown.empty() && c.columns[c.shown[0]] == c.metric;
  if (metric_first) {
    head.push_back("A " + c.metric);
    head.push_back("B " + c.metric);
  }
  for (auto i : c.shown) head.push_back("B/A " + c.columns[i]);
  head.push_back("Verdict");
  const auto value = [](double v) {
    if (std::isnan(v)) return std::string("-");
    char b[32];
    std::snprintf(b, sizeof b, "%.6g", v);
    return std::string(b);
  };
  std::vector<std::vector<std::string>> cells;
  cells.reserve(c.rows.size());
  for (const auto& r : c.rows) {
    std::vector<std::string> line{shape_text(r.label, r.shape)};
    if (b_shapes) line.push_back(r.b_shape == r.shape ? std::string("same") : describe(r.b_shape));
    if (metric_first) {
      line.push_back(value(r.a[c.shown[0]]));
      line.push_back(value(r.b[c.shown[0]]));
    }
    for (auto i : c.shown) line.push_back(fmt_ratio(ratio(r.a[i], r.b[i])));
    line.push_back(r.verdict);
    cells.push_back(std::move(line));
  }
  std::string out = header_line(c);
  if (c.shown.size() < c.columns.size())
    out += std::to_string(c.columns.size() - c.shown.size()) + " more numbers within the threshold in every row " +
           "(--metrics all shows them; --format json holds them all)\n";
  out += "\n";
  std::vector<bool> right(head.size(), true);
  right[0] = false;
  if (b_shapes) right[1] = false;
  if (format == Format::md) {
    std::string md;
    std::size_t pos = 0;
    while (pos < out.size()) {  // each header line in bold
      const std::size_t nl = out.find('\n', pos);
      const std::string line = out.substr(pos, nl - pos);
      md += line.empty() ? "\n" : "**" + line + "**  \n";
      pos = nl + 1;
    }
    out = md;
  }
  out += render_grid(head, cells, right, format);
  out += '\n';  // not "\n" + ...: GCC 12 warns wrongly on that here (-Wrestrict)
  out += std::to_string(c.rows.size()) + " rows matched: " + std::to_string(c.faster) + " FASTER, " +
         std::to_string(c.slower) + " SLOWER, " + std::to_string(c.same) + " SAME\n";
  auto list = [&](const char* which, const std::string& name, const auto& v) {
    if (v.empty()) return;
    out += "Only in " + std::string(which) + " (" + name + "), " + std::to_string(v.size()) + " rows:\n";
    std::size_t n = 0;
    for (const auto& [l, s] : v) {
      if (++n > 1000) {
        out += "  ... and " + std::to_string(v.size() - 1000) + " more (--format json lists them all)\n";
        break;
      }
      out += "  " + shape_text(l, s) + "\n";
    }
  };
  list("A", c.a_name, c.only_a);
  list("B", c.b_name, c.only_b);
  return out;
}

}  // namespace hbmscope
