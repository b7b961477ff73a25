#include "hbmscope/compare.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <set>
#include <thread>
#include <unordered_map>

#include "hbmscope/csv.hpp"
#include "hbmscope/error.hpp"
#include "hbmscope/json_report.hpp"
#include "json_check.hpp"

namespace hbmscope {

namespace {

// Calls out(path, value) for every number in j, the path built in one buffer
// (appended and cut back) so that a row costs no allocation per number.
template <class Out>
void flatten_into(const nlohmann::json& j, std::string& path, Out& out) {
  const std::size_t mark = path.size();
  if (j.is_number()) {
    out(path, j.get<double>());
  } else if (j.is_object()) {
    for (const auto& [k, v] : j.items()) {
      if (mark == 0 && (k == "shape" || k == "label")) continue;
      if (mark) path += '.';
      path += k;
      flatten_into(v, path, out);
      path.resize(mark);
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
      path.append("[").append(name).append("]");
      flatten_into(j[i], path, out);
      path.resize(mark);
    }
  }
}

// The text of a scalar for a row key, without dump()'s allocation for the
// common types.
void append_scalar(std::string& s, const nlohmann::json& v) {
  char buf[32];
  if (v.is_number_unsigned()) {
    s.append(buf, std::to_chars(buf, buf + sizeof buf, v.get<std::uint64_t>()).ptr);
  } else if (v.is_number_integer()) {
    s.append(buf, std::to_chars(buf, buf + sizeof buf, v.get<std::int64_t>()).ptr);
  } else if (v.is_boolean()) {
    s += v.get<bool>() ? "true" : "false";
  } else if (v.is_string()) {
    s.append("\"").append(v.get_ref<const std::string&>()).append("\"");
  } else {
    s += v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
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

}  // namespace


namespace {

// The shape fields rows can be matched on, and how to read each from a Shape
// (for the axes that differ and the hint when nothing matched).
struct Field {
  const char* name;
  std::string (*text)(const Shape&);
};
const Field shape_fields[] = {
    {"batch", [](const Shape& s) { return std::to_string(s.batch); }},
    {"heads", [](const Shape& s) { return std::to_string(s.heads); }},
    {"kv_heads", [](const Shape& s) { return std::to_string(s.kv_heads); }},
    {"seq_q", [](const Shape& s) { return std::to_string(s.seq_q); }},
    {"seq_kv", [](const Shape& s) { return std::to_string(s.seq_kv); }},
    {"head_dim", [](const Shape& s) { return std::to_string(s.head_dim); }},
    {"dtype", [](const Shape& s) { return std::string(dtype_name(s.dtype)); }},
    {"elem_bytes", [](const Shape& s) { return std::to_string(elem_bytes(s.dtype)); }},
    {"block_rows", [](const Shape& s) { return std::to_string(s.block_rows); }},
    {"block_cols", [](const Shape& s) { return std::to_string(s.block_cols); }},
    {"causal", [](const Shape& s) { return std::string(s.causal ? "true" : "false"); }},
    {"pass", [](const Shape& s) { return std::string(pass_name(s.pass)); }},
    // Decode rows' own fields (absent from prefill rows' JSON, so never in their keys).
    {"decode", [](const Shape& s) { return std::string(s.decode ? "true" : "false"); }},
    {"splits", [](const Shape& s) { return std::to_string(s.splits); }},
    {"page_size", [](const Shape& s) { return std::to_string(s.page_size); }},
    {"context_lengths",
     [](const Shape& s) { return s.context_lengths.text(';'); }},
    // Attention as served (schema /3; absent from rows that do not set them).
    {"window", [](const Shape& s) { return std::to_string(s.window); }},
    {"chunk", [](const Shape& s) { return std::to_string(s.chunk); }},
    // As written: absent (empty) where DV = d and the kv dtype is dtype.
    {"head_dim_v", [](const Shape& s) { return s.head_dim_v ? std::to_string(s.head_dim_v) : std::string(); }},
    {"kv_dtype", [](const Shape& s) { return s.kv_dtype ? std::string(dtype_name(*s.kv_dtype)) : std::string(); }},
    {"kv_elem_bytes",
     [](const Shape& s) { return s.kv_dtype ? std::to_string(elem_bytes(*s.kv_dtype)) : std::string(); }},
    {"latent_kv", [](const Shape& s) { return std::string(s.latent_kv ? "true" : "false"); }},
    {"seq_lens", [](const Shape& s) { return s.seq_lens.text(';'); }},
    {"query_tokens", [](const Shape& s) {
       const auto q = s.seq_lens.total_q();
       return ragged_prefill(s) && q ? std::to_string(*q) : std::string();
     }},
};

// Fields that follow another (elem_bytes dtype, kv_elem_bytes kv_dtype,
// query_tokens seq_lens): matched with it, never named apart from it.
bool derived_field(std::string_view f) { return f == "elem_bytes" || f == "kv_elem_bytes" || f == "query_tokens"; }

// What a row's key is made of.
struct KeySpec {
  bool all = true;                 // every field of the shape as written, less `excluded`
  std::set<std::string> fields;    // all: the excluded ones; else: the matched ones
  bool label = true;
  std::vector<std::string> names;  // for the header

  bool uses(const std::string& f) const { return all ? !fields.count(f) : fields.count(f) > 0; }
};

KeySpec key_spec(const CompareOptions& opt) {
  if (!opt.match.empty() && !opt.ignore.empty())
    throw UsageError("--match and --ignore: give one or the other");
  const auto& known = compare_match_fields();
  const auto expand_names = [&](const std::vector<std::string>& given, const char* option) {
    std::set<std::string> out;
    for (const auto& f : given) {
      if (f == "seq") {
        out.insert({"seq_q", "seq_kv"});
        continue;
      }
      if (std::find(known.begin(), known.end(), f) == known.end()) {
        std::string list;
        for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
        throw UsageError(std::string(option) + ": '" + f + "' is not a field rows are matched on (" + list + ", seq)");
      }
      out.insert(f);
    }
    return out;
  };
  KeySpec k;
  if (!opt.match.empty()) {
    k.all = false;
    k.fields = expand_names(opt.match, "--match");
    k.label = k.fields.erase("label") > 0;
    // elem_bytes follows dtype, kv_elem_bytes kv_dtype, query_tokens seq_lens:
    // matching one means the other.
    if (k.fields.count("dtype")) k.fields.insert("elem_bytes");
    if (k.fields.count("kv_dtype")) k.fields.insert("kv_elem_bytes");
    if (k.fields.count("seq_lens")) k.fields.insert("query_tokens");
    if (k.label) k.names.push_back("label");
    for (const auto& f : known)
      if (k.fields.count(f) && !derived_field(f)) k.names.push_back(f);
  } else {
    k.fields = expand_names(opt.ignore, "--ignore");
    k.label = k.fields.erase("label") == 0;
    if (k.fields.count("dtype")) k.fields.insert("elem_bytes");
    if (k.fields.count("kv_dtype")) k.fields.insert("kv_elem_bytes");
    if (k.fields.count("seq_lens")) k.fields.insert("query_tokens");
    if (k.fields.empty() && k.label) {
      k.names.push_back("label and every shape field");
    } else {
      std::string but;
      if (!k.label) but = "label";
      for (const auto& f : known)
        if (k.fields.count(f) && !derived_field(f)) but += (but.empty() ? "" : ", ") + f;
      k.names.push_back("every field but " + but);
    }
  }
  return k;
}

// One report, reduced as it is read to what compare needs: per row its key,
// label, shape and numbers (by column index), never the JSON tree.
struct Side {
  std::string name;
  std::vector<std::string> columns;
  std::unordered_map<std::string, std::uint32_t> column_index;
  struct R {
    std::string label;
    Shape shape;
    std::vector<double> values;  // by column index; NaN where absent
  };
  std::vector<R> rows;
  std::unordered_map<std::string, std::size_t> by_key;
  std::vector<std::set<std::string>> field_values = std::vector<std::set<std::string>>(std::size(shape_fields));
  nlohmann::json header;
  std::string path;  // scratch

  void add(std::size_t i, const nlohmann::json& rj, const KeySpec& spec) {
    const Row checked = row_from_json(rj, name, i);  // every field this version knows is well formed
    R r;
    r.label = checked.label;
    r.shape = checked.shape;
    // The key: the matched fields as written (also fields this version does
    // not know), and the label.
    std::string key = spec.label ? r.label + "\x1f" : std::string("\x1f");
    for (const auto& [f, v] : rj["shape"].items())
      if (spec.uses(f)) {
        key.append(f).append("=");
        append_scalar(key, v);
        key += '\x1f';
      }
    // Whole-model rows: the model and the kind of layer are part of the key.
    if (checked.model_layers) {
      for (const auto& [f, v] : {std::pair<const char*, const std::string*>{"model_config", &checked.model_layers->config},
                                 {"layer_kind", &checked.model_layers->kind}})
        if (spec.uses(f)) key.append(f).append("=").append(*v).append(1, '\x1f');
      r.label += (r.label.empty() ? "" : " ") + checked.model_layers->config + " " + checked.model_layers->kind;
    }
    const auto [it, fresh] = by_key.try_emplace(std::move(key), rows.size());
    if (!fresh) {
      if (spec.all && spec.fields.empty() && spec.label)
        throw Error(name + ": rows[" + std::to_string(i) + "] repeats the shape of rows[" +
                    std::to_string(it->second) + "] (" + describe(r.shape) + ")");
      std::string on;
      for (const auto& n : spec.names) on += (on.empty() ? "" : ", ") + n;
      throw Error(name + ": rows[" + std::to_string(it->second) + "] and rows[" + std::to_string(i) +
                  "] both match on " + on + " (" + describe(r.shape) +
                  "): match on more fields (--match, --ignore)");
    }
    for (std::size_t f = 0; f < std::size(shape_fields); ++f)
      if (field_values[f].size() < 64) field_values[f].insert(shape_fields[f].text(r.shape));
    r.values.assign(columns.size(), std::numeric_limits<double>::quiet_NaN());
    // A column index per path: one hash lookup per number (never a scan of
    // the row, which made a row of 128k numbers quadratic).
    const auto put = [&](const std::string& p, double v) {
      // hbmscope writes no subnormal figure (its smallest are ratios of
      // 64-bit counts): one is an edited report, and its ratios would read "inf".
      if (std::fpclassify(v) == FP_SUBNORMAL)
        throw Error(name + ": rows[" + std::to_string(i) + "]." + p + ": " + csv_number(v) +
                    " is subnormal, not a figure a report holds");
      auto ci = column_index.find(p);
      if (ci == column_index.end()) {
        ci = column_index.emplace(p, static_cast<std::uint32_t>(columns.size())).first;
        columns.push_back(p);
      }
      if (ci->second >= r.values.size()) r.values.resize(ci->second + 1, std::numeric_limits<double>::quiet_NaN());
      r.values[ci->second] = v;
    };
    path.clear();
    flatten_into(rj, path, put);
    rows.push_back(std::move(r));
  }

  double value(std::size_t row, std::size_t col) const {
    const auto& v = rows[row].values;
    return col < v.size() ? v[col] : std::numeric_limits<double>::quiet_NaN();
  }
};

void check_header(const Side& s) {
  nlohmann::json h = s.header;
  (void)report_from_json(h, s.name);  // schema and every header field (rows were checked one by one)
}

// A header field of both reports that differs, as "what: A vs B".
void header_differences(const Side& a, const Side& b, std::vector<std::string>& out) {
  struct Where {
    const char* what;
    const char* path[3];  // nullptr-terminated when shorter
  };
  static const Where fields[] = {
      {"device", {"roofline", "device", "name"}},
      {"bandwidth fraction", {"roofline", "bandwidth_fraction", nullptr}},
      {"measured on", {"device", "name", nullptr}},
  };
  const auto text = [](const nlohmann::json& h, const Where& w) -> std::string {
    const nlohmann::json* v = &h;
    for (const char* k : w.path) {
      if (!k) break;
      if (!v->is_object() || !v->contains(k)) return "none";
      v = &(*v)[k];
    }
    return v->is_string() ? v->get<std::string>() : json_check::brief(*v);
  };
  for (const auto& w : fields) {
    const std::string x = text(a.header, w), y = text(b.header, w);
    const char* what = w.what;
    if (x != y) out.push_back(std::string(what) + ": " + x + " vs " + y);
  }
}

Comparison compare_sides(Side& sa, Side& sb, const KeySpec& spec, const CompareOptions& opt) {
  check_header(sa);
  check_header(sb);
  Comparison c;
  // File names come from the command line: escaped, they cannot carry a
  // newline or an escape sequence into the table, CSV or JSON.
  c.a_name = json_check::printable(sa.name);
  c.b_name = json_check::printable(sb.name);
  c.threshold_pct = opt.threshold_pct;
  c.match = spec.names;
  header_differences(sa, sb, c.differences);

  std::vector<std::pair<std::size_t, std::size_t>> pairs;
  std::vector<bool> matched_b(sb.rows.size(), false);
  {
    // A's keys in A's order.
    std::vector<const std::string*> a_keys(sa.rows.size());
    for (const auto& [k, i] : sa.by_key) a_keys[i] = &k;
    for (std::size_t i = 0; i < sa.rows.size(); ++i) {
      const auto it = sb.by_key.find(*a_keys[i]);
      if (it == sb.by_key.end()) {
        c.only_a.emplace_back(sa.rows[i].label, sa.rows[i].shape);
        continue;
      }
      matched_b[it->second] = true;
      pairs.emplace_back(i, it->second);
    }
  }
  for (std::size_t j = 0; j < sb.rows.size(); ++j)
    if (!matched_b[j]) c.only_b.emplace_back(sb.rows[j].label, sb.rows[j].shape);
  sa.by_key.clear();
  sb.by_key.clear();

  // Columns: every number that both rows of some pair hold, in A's order.
  std::vector<std::int64_t> a_to_b(sa.columns.size(), -1);
  for (std::size_t k = 0; k < sa.columns.size(); ++k)
    if (const auto it = sb.column_index.find(sa.columns[k]); it != sb.column_index.end())
      a_to_b[k] = it->second;
  std::vector<bool> shared(sa.columns.size(), false);
  for (const auto& [x, y] : pairs)
    for (std::size_t k = 0; k < sa.rows[x].values.size(); ++k)
      if (!shared[k] && a_to_b[k] >= 0 && !std::isnan(sa.rows[x].values[k]) &&
          !std::isnan(sb.value(y, static_cast<std::size_t>(a_to_b[k]))))
        shared[k] = true;
  std::vector<std::size_t> cols;  // A's column indices
  for (std::size_t k = 0; k < sa.columns.size(); ++k)
    if (shared[k]) cols.push_back(k);
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
  std::vector<std::string> keys;
  for (auto k : cols) keys.push_back(sort_key(sa.columns[k]));
  std::vector<std::size_t> order(cols.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) { return keys[x] < keys[y]; });
  std::vector<std::size_t> sorted_cols;
  for (auto i : order) {
    sorted_cols.push_back(cols[i]);
    c.columns.push_back(sa.columns[cols[i]]);
  }
  std::unordered_map<std::string, std::size_t> col_of;
  for (std::size_t i = 0; i < c.columns.size(); ++i) col_of[c.columns[i]] = i;

  if (pairs.empty()) {
    // Nothing to judge: the metric is still named (from A's numbers) for the header.
    c.metric = opt.metric.empty() ? choose_metric(sa.columns) : opt.metric;
  } else {
    c.metric = opt.metric.empty() ? choose_metric(c.columns) : opt.metric;
    if (!opt.metric.empty() && !col_of.count(opt.metric)) {
      std::string list;
      for (const auto& col : c.columns) {
        if (list.size() > 400) {
          list += ", ...";
          break;
        }
        list += (list.empty() ? "" : ", ") + col;
      }
      throw UsageError("--metric: '" + opt.metric + "' is not a number both reports hold (" +
                  (list.empty() ? std::string("none") : list) + ")");
    }
  }
  c.higher_is_better = higher_better(c.metric);
  const double t = opt.threshold_pct / 100.0;
  const auto beyond = [t](double r) { return !std::isnan(r) && (std::isinf(r) || std::fabs(r - 1) > t); };
  std::vector<bool> differs(c.columns.size(), false);
  const auto metric_it = col_of.find(c.metric);
  std::map<std::string, std::set<std::string>> axis_diffs;
  for (const auto& [x, y] : pairs) {
    ComparedRow row;
    row.label = sa.rows[x].label;
    row.shape = sa.rows[x].shape;
    row.b_label = sb.rows[y].label;
    row.b_shape = sb.rows[y].shape;
    row.a.reserve(c.columns.size());
    row.b.reserve(c.columns.size());
    for (std::size_t i = 0; i < c.columns.size(); ++i) {
      const std::size_t k = sorted_cols[i];
      row.a.push_back(sa.value(x, k));
      row.b.push_back(sb.value(y, static_cast<std::size_t>(a_to_b[k])));
      if (!differs[i] && beyond(ratio(row.a.back(), row.b.back()))) differs[i] = true;
    }
    for (const auto& f : shape_fields) {
      const std::string u = f.text(row.shape), v = f.text(row.b_shape);
      if (u != v && !derived_field(f.name) && axis_diffs[f.name].size() < 4)
        axis_diffs[f.name].insert(u + " vs " + v);
    }
    if (row.label != row.b_label && axis_diffs["label"].size() < 4)
      axis_diffs["label"].insert("'" + row.label + "' vs '" + row.b_label + "'");
    const double r = metric_it == col_of.end() ? std::numeric_limits<double>::quiet_NaN()
                                               : ratio(row.a[metric_it->second], row.b[metric_it->second]);
    if (std::isnan(r)) row.verdict = "-";
    else if (c.higher_is_better) row.verdict = r > 1 + t ? "FASTER" : r < 1 - t ? "SLOWER" : "SAME";
    else row.verdict = r < 1 - t ? "FASTER" : r > 1 + t ? "SLOWER" : "SAME";
    c.faster += row.verdict == "FASTER";
    c.slower += row.verdict == "SLOWER";
    c.same += row.verdict == "SAME";
    // The reduced rows are not needed any more: memory goes back as it is used.
    std::vector<double>().swap(sa.rows[x].values);
    std::vector<double>().swap(sb.rows[y].values);
    c.rows.push_back(std::move(row));
  }
  for (const auto& [f, set] : axis_diffs) {
    std::string d;
    for (const auto& v : set) d += (d.empty() ? "" : ", ") + v;
    c.differences.push_back(f + ": " + d);
  }
  // When nothing matched: the fields whose values never meet are named.
  if (pairs.empty() && !sa.rows.empty() && !sb.rows.empty()) {
    std::string apart;
    for (std::size_t f = 0; f < std::size(shape_fields); ++f) {
      if (!spec.uses(shape_fields[f].name) || derived_field(shape_fields[f].name)) continue;
      const auto& x = sa.field_values[f];
      const auto& y = sb.field_values[f];
      if (x.size() >= 64 || y.size() >= 64) continue;
      bool meet = false;
      for (const auto& v : x) meet = meet || y.count(v);
      if (!meet) apart += std::string(apart.empty() ? "" : ",") + shape_fields[f].name;
    }
    if (!apart.empty()) c.hint = "no row matched: the reports differ in " + apart + "; try --ignore " + apart;
  }

  // What table, csv and md show: the verdict metric, the columns asked for,
  // and those that differ beyond the threshold in some row.
  const bool all = std::find(opt.metrics.begin(), opt.metrics.end(), "all") != opt.metrics.end();
  for (const auto& m : opt.metrics)
    if (m != "all" && !col_of.count(m) && !pairs.empty())
      throw UsageError("--metrics: '" + m + "' is not a number both reports hold (see --format json for the list)");
  for (std::size_t i = 0; i < c.columns.size(); ++i) {
    const bool asked = std::find(opt.metrics.begin(), opt.metrics.end(), c.columns[i]) != opt.metrics.end();
    if (c.columns[i] == c.metric || asked || all || differs[i]) c.shown.push_back(i);
  }
  // The metric first.
  std::stable_partition(c.shown.begin(), c.shown.end(), [&](std::size_t i) { return c.columns[i] == c.metric; });
  return c;
}

void check_threshold(const CompareOptions& opt) {
  if (!(opt.threshold_pct >= 0 && opt.threshold_pct < 100))
    throw UsageError("--threshold: " + (std::isnan(opt.threshold_pct) ? std::string("nan") : csv_number(opt.threshold_pct)) +
                " is not a percentage in [0, 100)");
}

void check_schemas(const nlohmann::json& a, std::string_view a_name, const nlohmann::json& b, std::string_view b_name) {
  // Versions 1 and 2 of the report schema compare with each other (2 only adds fields).
  const auto readable = [](const nlohmann::json& s) {
    return s.is_string() && readable_report_schema(s.get_ref<const std::string&>());
  };
  if (a.is_object() && b.is_object() && a.contains("schema") && b.contains("schema") && a["schema"] != b["schema"] &&
      !(readable(a["schema"]) && readable(b["schema"])))
    throw Error(std::string(a_name) + " and " + std::string(b_name) + " have different schemas (" +
                json_check::brief(a["schema"]) + " vs " + json_check::brief(b["schema"]) + ")");
}

}  // namespace

const std::vector<std::string>& compare_match_fields() {
  static const std::vector<std::string> f = [] {
    std::vector<std::string> v{"label"};
    for (const auto& x : shape_fields) v.push_back(x.name);
    v.insert(v.end(), {"model_config", "layer_kind"});  // whole-model rows (rows[].model)
    return v;
  }();
  return f;
}

double ratio(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<double>::quiet_NaN();
  if (a == 0) return b == 0 ? 1.0 : std::numeric_limits<double>::infinity();
  // Infinite only when A is 0: a quotient past the largest double is that double.
  const double q = b / a;
  return std::isinf(q) ? std::copysign(std::numeric_limits<double>::max(), q) : q;
}

Comparison compare_reports(const nlohmann::json& a, std::string_view a_name, const nlohmann::json& b,
                           std::string_view b_name, const CompareOptions& opt) {
  check_threshold(opt);
  const KeySpec spec = key_spec(opt);
  check_schemas(a, a_name, b, b_name);
  const auto side = [&](const nlohmann::json& j, std::string_view name, Side& s) {
    s.name = name;
    if (!j.is_object() || !j.contains("rows") || !j["rows"].is_array()) {
      (void)report_from_json(j, name);  // says what is wrong
      return;
    }
    for (std::size_t i = 0; i < j["rows"].size(); ++i) s.add(i, j["rows"][i], spec);
    s.header = j;
    s.header["rows"] = nlohmann::json::array();
  };
  Side sa, sb;
  side(a, a_name, sa);
  side(b, b_name, sb);
  return compare_sides(sa, sb, spec, opt);
}

Comparison compare_report_files(const std::filesystem::path& a, const std::filesystem::path& b,
                                const CompareOptions& opt) {
  check_threshold(opt);
  const KeySpec spec = key_spec(opt);
  Side sa, sb;
  const auto read = [&](const std::filesystem::path& p, Side& s) {
    s.name = p.string();
    s.header = json_check::read_json_rows(p, [&](std::size_t i, nlohmann::json&& row) { s.add(i, row, spec); });
  };
  // The two reports are read at once, B on a second thread: reading is most
  // of the work, and the sides share nothing until they are matched.
  std::exception_ptr b_error;
  std::thread tb([&] {
    try {
      read(b, sb);
    } catch (...) {
      b_error = std::current_exception();
    }
  });
  std::exception_ptr a_error;
  try {
    read(a, sa);
  } catch (...) {
    a_error = std::current_exception();
  }
  tb.join();
  if (a_error) std::rethrow_exception(a_error);  // A's error first, as a reader would meet them
  if (b_error) std::rethrow_exception(b_error);
  check_schemas(sa.header, sa.name, sb.header, sb.name);
  return compare_sides(sa, sb, spec, opt);
}

}  // namespace hbmscope
