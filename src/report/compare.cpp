#include "hbmscope/compare.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>

#include "hbmscope/error.hpp"
#include "hbmscope/json_report.hpp"
#include "json_check.hpp"

namespace hbmscope {

namespace {

using Flat = std::vector<std::pair<std::string, double>>;

void flatten(const nlohmann::json& j, const std::string& prefix, Flat& out) {
  if (j.is_number()) {
    out.emplace_back(prefix, j.get<double>());
  } else if (j.is_object()) {
    for (const auto& [k, v] : j.items()) {
      if (prefix.empty() && (k == "shape" || k == "label")) continue;
      flatten(v, prefix.empty() ? k : prefix + "." + k, out);
    }
  } else if (j.is_array()) {
    // A list of plain numbers is a distribution (timing samples): not compared
    // element by element.
    if (!j.empty() && std::all_of(j.begin(), j.end(), [](const auto& x) { return x.is_number(); })) return;
    // Objects named by a "kernel" or "variant" field are matched by that name,
    // not by position: measurements[flash].time_s.median.
    std::map<std::string, int> seen;
    for (std::size_t i = 0; i < j.size(); ++i) {
      std::string name = std::to_string(i);
      for (const char* k : {"kernel", "variant", "id"})
        if (j[i].is_object() && j[i].contains(k) && j[i][k].is_string()) {
          name = j[i][k].get<std::string>();
          break;
        }
      if (const int n = seen[name]++; n > 0) name += "#" + std::to_string(n + 1);
      flatten(j[i], prefix + "[" + name + "]", out);
    }
  }
}

struct Keyed {
  std::string key;  // label + canonical shape
  std::string label;
  Shape shape;
  Flat numbers;
};

std::vector<Keyed> keyed_rows(const nlohmann::json& j, std::string_view name) {
  (void)report_from_json(j, name);  // every field this version knows is well formed
  std::vector<Keyed> out;
  std::map<std::string, std::size_t> seen;
  const auto& rows = j["rows"];
  for (std::size_t i = 0; i < rows.size(); ++i) {
    Keyed k;
    k.label = rows[i].value("label", std::string());
    k.shape = shape_from_json(rows[i]["shape"], name, "rows[" + std::to_string(i) + "].shape");
    // The shape as written (all its fields, including any this version does not
    // know) identifies the row.
    k.key = k.label + "\n" + rows[i]["shape"].dump();
    if (seen.count(k.key))
      throw Error(std::string(name) + ": rows[" + std::to_string(i) + "] repeats the shape of rows[" +
                  std::to_string(seen[k.key]) + "] (" + describe(k.shape) + ")");
    seen[k.key] = i;
    flatten(rows[i], "", k.numbers);
    out.push_back(std::move(k));
  }
  return out;
}

bool higher_better(const std::string& metric) {
  for (const char* w : {"per_s", "tflops", "throughput", "bandwidth", "utilization", "Bps", "copy_fraction"})
    if (metric.find(w) != std::string::npos) return true;
  return false;
}

std::string choose_metric(const std::vector<std::string>& cols) {
  auto has = [&](const std::string& c) { return std::find(cols.begin(), cols.end(), c) != cols.end(); };
  // A measured time first (the median of `measure`'s flash kernel, else of any
  // kernel), then the roofline prediction, then bytes.
  const auto measured_time = [](const std::string& c) {
    const std::string tail = "time_s.median";
    return c.rfind("measure", 0) == 0 && c.size() >= tail.size() &&
           c.compare(c.size() - tail.size(), tail.size(), tail) == 0;
  };
  for (const auto& c : cols)
    if (measured_time(c) && c.find("[flash") != std::string::npos) return c;
  for (const auto& c : cols)
    if (measured_time(c)) return c;
  for (const char* c : {"prediction.flash_no_l2.seconds", "bytes.flash_no_l2"})
    if (has(c)) return c;
  // Decode reports: the flash-decoding kernel's time, else its bytes.
  for (const char* c : {"prediction.decode_split.seconds", "bytes.decode_split"})
    if (has(c)) return c;
  return cols.empty() ? std::string() : cols.front();
}

std::string fmt_ratio(double r) {
  if (std::isnan(r)) return "-";
  if (std::isinf(r)) return "inf";
  char b[32];
  std::snprintf(b, sizeof b, "%.3f", r);
  return b;
}

std::string fmt_g(double v) {
  if (std::isnan(v)) return "";
  char b[40];
  std::snprintf(b, sizeof b, "%.17g", v);
  return b;
}

std::string shape_text(const std::string& label, const Shape& s) {
  return (label.empty() ? "" : label + ": ") + describe(s);
}

}  // namespace

double ratio(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<double>::quiet_NaN();
  if (a == 0) return b == 0 ? 1.0 : std::numeric_limits<double>::infinity();
  return b / a;
}

Comparison compare_reports(const nlohmann::json& a, std::string_view a_name, const nlohmann::json& b,
                           std::string_view b_name, const CompareOptions& opt) {
  if (!(opt.threshold_pct >= 0 && opt.threshold_pct < 100))
    throw Error("--threshold: " + (std::isnan(opt.threshold_pct) ? std::string("nan") : fmt_g(opt.threshold_pct)) + " is not a percentage in [0, 100)");
  if (a.is_object() && b.is_object() && a.contains("schema") && b.contains("schema") &&
      a["schema"] != b["schema"])
    throw Error(std::string(a_name) + " and " + std::string(b_name) + " have different schemas (" +
                json_check::brief(a["schema"]) + " vs " + json_check::brief(b["schema"]) + ")");
  const auto ra = keyed_rows(a, a_name);
  const auto rb = keyed_rows(b, b_name);
  std::map<std::string, const Keyed*> in_b;
  for (const auto& r : rb) in_b[r.key] = &r;

  Comparison c;
  c.a_name = a_name;
  c.b_name = b_name;
  c.threshold_pct = opt.threshold_pct;
  std::map<std::string, bool> matched_b;
  std::vector<std::pair<const Keyed*, const Keyed*>> pairs;
  for (const auto& r : ra) {
    const auto it = in_b.find(r.key);
    if (it == in_b.end()) {
      c.only_a.emplace_back(r.label, r.shape);
      continue;
    }
    matched_b[r.key] = true;
    pairs.emplace_back(&r, it->second);
  }
  for (const auto& r : rb)
    if (!matched_b.count(r.key)) c.only_b.emplace_back(r.label, r.shape);

  // Columns: every number that both rows of some pair hold, in A's order.
  std::map<std::string, bool> col_seen;
  for (const auto& [x, y] : pairs) {
    std::map<std::string, bool> in_y;
    for (const auto& [p, v] : y->numbers) in_y[p] = true;
    for (const auto& [p, v] : x->numbers)
      if (in_y.count(p) && !col_seen.count(p)) {
        col_seen[p] = true;
        c.columns.push_back(p);
      }
  }
  // JSON objects list keys alphabetically; put variants in the model's order.
  const auto sort_key = [](const std::string& p) {
    std::string k = p;
    for (const auto& [id, r] : {std::pair<const char*, const char*>{"standard", "0"}, {"flash_no_l2", "1"}, {"floor", "2"}}) {
      const std::string part = std::string(".") + id;
      const auto at = k.find(part);
      if (at != std::string::npos && (at + part.size() == k.size() || k[at + part.size()] == '.'))
        k.insert(at + 1, r);
    }
    return k;
  };
  std::stable_sort(c.columns.begin(), c.columns.end(),
                   [&](const std::string& x, const std::string& y) { return sort_key(x) < sort_key(y); });
  c.metric = opt.metric.empty() ? choose_metric(c.columns) : opt.metric;
  if (!opt.metric.empty() && !col_seen.count(opt.metric)) {
    std::string list;
    for (const auto& col : c.columns) list += (list.empty() ? "" : ", ") + col;
    throw Error("--metric: '" + opt.metric + "' is not a number both reports hold (" +
                (list.empty() ? std::string("none") : list) + ")");
  }
  c.higher_is_better = higher_better(c.metric);
  const double t = opt.threshold_pct / 100.0;
  for (const auto& [x, y] : pairs) {
    ComparedRow row;
    row.label = x->label;
    row.shape = x->shape;
    auto find = [](const Flat& f, const std::string& p) {
      for (const auto& [k, v] : f)
        if (k == p) return v;
      return std::numeric_limits<double>::quiet_NaN();
    };
    for (const auto& col : c.columns) {
      row.a.push_back(find(x->numbers, col));
      row.b.push_back(find(y->numbers, col));
    }
    const double r = ratio(find(x->numbers, c.metric), find(y->numbers, c.metric));
    if (std::isnan(r)) row.verdict = "-";
    else if (c.higher_is_better) row.verdict = r > 1 + t ? "FASTER" : r < 1 - t ? "SLOWER" : "SAME";
    else row.verdict = r < 1 - t ? "FASTER" : r > 1 + t ? "SLOWER" : "SAME";
    c.rows.push_back(std::move(row));
  }
  return c;
}

std::string render_comparison(const Comparison& c, Format format) {
  std::size_t faster = 0, slower = 0, same = 0;
  for (const auto& r : c.rows) {
    faster += r.verdict == "FASTER";
    slower += r.verdict == "SLOWER";
    same += r.verdict == "SAME";
  }
  char thr[32];
  std::snprintf(thr, sizeof thr, "%g", c.threshold_pct);
  if (format == Format::json) {
    nlohmann::json j = {{"schema", "hbmscope.compare/1"},
                        {"a", c.a_name},
                        {"b", c.b_name},
                        {"metric", c.metric},
                        {"higher_is_better", c.higher_is_better},
                        {"threshold_pct", c.threshold_pct},
                        {"columns", c.columns}};
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& r : c.rows) {
      nlohmann::json ratios = nlohmann::json::object();
      for (std::size_t i = 0; i < c.columns.size(); ++i) {
        const double q = ratio(r.a[i], r.b[i]);
        if (!std::isnan(q)) ratios[c.columns[i]] = std::isinf(q) ? nlohmann::json("inf") : nlohmann::json(q);
      }
      nlohmann::json row = {{"shape", shape_to_json(r.shape)}, {"ratios", ratios}, {"verdict", r.verdict}};
      if (!r.label.empty()) row["label"] = r.label;
      rows.push_back(row);
    }
    j["rows"] = rows;
    auto only = [](const auto& v) {
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
    j["summary"] = {{"matched", c.rows.size()}, {"faster", faster}, {"slower", slower}, {"same", same}};
    return j.dump(2) + "\n";
  }
  if (format == Format::csv) {
    std::string out = "label,shape";
    for (const auto& col : c.columns) out += ",a:" + col + ",b:" + col + ",ratio:" + col;
    out += ",verdict\n";
    for (const auto& r : c.rows) {
      out += "\"" + r.label + "\",\"" + describe(r.shape) + "\"";
      for (std::size_t i = 0; i < c.columns.size(); ++i)
        out += "," + fmt_g(r.a[i]) + "," + fmt_g(r.b[i]) + "," + fmt_g(ratio(r.a[i], r.b[i]));
      out += "," + r.verdict + "\n";
    }
    return out;
  }
  // table and md: one ratio column per shared number.
  std::vector<std::string> head{"Shape"};
  for (const auto& col : c.columns) head.push_back("B/A " + col);
  head.push_back("Verdict");
  std::vector<std::vector<std::string>> cells;
  for (const auto& r : c.rows) {
    std::vector<std::string> line{shape_text(r.label, r.shape)};
    for (std::size_t i = 0; i < c.columns.size(); ++i) line.push_back(fmt_ratio(ratio(r.a[i], r.b[i])));
    line.push_back(r.verdict);
    cells.push_back(line);
  }
  std::string out = "Compare A = " + c.a_name + " with B = " + c.b_name + ": ratios B/A; verdict on " +
                    c.metric + (c.higher_is_better ? " (higher is better)" : " (lower is better)") +
                    ", SAME within " + thr + "%\n\n";
  std::vector<bool> right(head.size(), true);
  right[0] = false;
  if (format == Format::md) out = "**" + out.substr(0, out.size() - 2) + "**\n\n";
  out += render_grid(head, cells, right, format);
  out += "\n" + std::to_string(c.rows.size()) + " rows matched: " + std::to_string(faster) + " FASTER, " +
         std::to_string(slower) + " SLOWER, " + std::to_string(same) + " SAME\n";
  auto list = [&](const char* which, const std::string& name, const auto& v) {
    if (v.empty()) return;
    out += "Only in " + std::string(which) + " (" + name + "), " + std::to_string(v.size()) + " rows:\n";
    for (const auto& [l, s] : v) out += "  " + shape_text(l, s) + "\n";
  };
  list("A", c.a_name, c.only_a);
  list("B", c.b_name, c.only_b);
  return out;
}

}  // namespace hbmscope
