#include "hbmscope/sweep_config.hpp"

#include <algorithm>
#include <filesystem>
#include <map>
#include <unordered_set>

#include "embedded.hpp"
#include "hbmscope/hf_config.hpp"
#include "hbmscope/whole_model.hpp"
#include "../report/json_check.hpp"

namespace hbmscope {

namespace jc = json_check;

namespace {

constexpr std::string_view sweep_schema = "hbmscope.sweep/1";
constexpr const char* int_form =
    "a positive integer, a string such as \"4K:128K:x2\" or \"1024,4096\", or a non-empty array of "
    "them";

// parse_int_axis's messages start "--OPTION: "; the config names the key instead.
[[noreturn]] void rethrow_as_key(const Error& e, std::string_view origin) {
  std::string m = e.what();
  if (m.rfind("--", 0) == 0) m.erase(0, 2);
  throw Error(std::string(origin) + ": " + m);
}

std::vector<std::uint64_t> int_items(const nlohmann::json& v, std::string_view origin,
                                     const std::string& key) {
  try {
    if (v.is_number_unsigned()) {
      if (v.get<std::uint64_t>() == 0) jc::fail(origin, key, "positive values", v);
      return {v.get<std::uint64_t>()};
    }
    if (v.is_string()) return parse_int_axis(v.get<std::string>(), key);
  } catch (const Error& e) {
    if (std::string(e.what()).rfind("--", 0) == 0) rethrow_as_key(e, origin);
    throw;
  }
  jc::fail(origin, key, int_form, v);
}

std::vector<std::uint64_t> int_axis(const nlohmann::json& v, std::string_view origin,
                                    const std::string& key) {
  if (!v.is_array()) return int_items(v, origin, key);
  if (v.empty()) jc::fail(origin, key, int_form, v);
  std::vector<std::uint64_t> out;
  for (std::size_t i = 0; i < v.size(); ++i) {
    const auto items = int_items(v[i], origin, key + "[" + std::to_string(i) + "]");
    out.insert(out.end(), items.begin(), items.end());
    // Each item is capped by its parser; their concatenation is capped here,
    // as it grows, so that 40 long ranges cost no more than one.
    if (out.size() > max_sweep_shapes)
      jc::fail_text(origin, key, "has too many values (a sweep has at most " + std::to_string(max_sweep_shapes) +
                                     " shapes)");
  }
  return out;
}

std::uint64_t single_count(const nlohmann::json& v, std::string_view origin, const std::string& key) {
  const auto items = (v.is_number_unsigned() || v.is_string())
                         ? int_items(v, origin, key)
                         : std::vector<std::uint64_t>{};
  if (items.size() != 1) jc::fail(origin, key, "one positive integer such as 4096 or \"4K\"", v);
  return items[0];
}

// A string axis: one string or a non-empty array of them, each parsed by
// parse(text, key) (the command line's parser, so both accept the same lists).
template <class T, class Parse>
std::vector<T> string_axis(const nlohmann::json& v, std::string_view origin, const std::string& key,
                           const char* form, Parse parse) {
  std::vector<T> out;
  auto one = [&](const nlohmann::json& x, const std::string& k) {
    if (!x.is_string()) jc::fail(origin, k, form, x);
    try {
      const auto items = parse(x.get<std::string>(), k);
      out.insert(out.end(), items.begin(), items.end());
      if (out.size() > max_sweep_shapes)
        jc::fail_text(origin, key, "has too many values (a sweep has at most " +
                                       std::to_string(max_sweep_shapes) + " shapes)");
    } catch (const Error& e) {
      rethrow_as_key(e, origin);
    }
  };
  if (v.is_array()) {
    if (v.empty()) jc::fail(origin, key, form, v);
    for (std::size_t i = 0; i < v.size(); ++i) one(v[i], key + "[" + std::to_string(i) + "]");
  } else {
    one(v, key);
  }
  return out;
}

std::vector<Dtype> dtype_axis(const nlohmann::json& v, std::string_view origin, const std::string& key) {
  return string_axis<Dtype>(v, origin, key,
                            "a dtype (\"fp32\", \"fp16\", \"bf16\", \"fp8\") or a non-empty array of them",
                            parse_dtype_axis);
}

std::vector<Pass> pass_axis(const nlohmann::json& v, std::string_view origin, const std::string& key) {
  return string_axis<Pass>(v, origin, key,
                           "a pass (\"fwd\", \"bwd\", \"fwdbwd\") or a non-empty array of them",
                           parse_pass_axis);
}

std::vector<bool> causal_axis(const nlohmann::json& v, std::string_view origin, const std::string& key) {
  constexpr const char* form = "true, false or a non-empty array of them such as [false, true]";
  if (v.is_boolean()) return {v.get<bool>()};
  if (!v.is_array() || v.empty()) jc::fail(origin, key, form, v);
  std::vector<bool> out;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (!v[i].is_boolean()) jc::fail(origin, key + "[" + std::to_string(i) + "]", "true or false", v[i]);
    out.push_back(v[i].get<bool>());
  }
  return out;
}

std::vector<std::pair<std::uint64_t, std::uint64_t>> points_axis(const nlohmann::json& v,
                                                                 std::string_view origin,
                                                                 const std::string& key) {
  constexpr const char* form = "a non-empty array of [seq, head_dim] pairs such as [[4096, 64], [\"8K\", 128]]";
  if (!v.is_array() || v.empty()) jc::fail(origin, key, form, v);
  std::vector<std::pair<std::uint64_t, std::uint64_t>> out;
  for (std::size_t i = 0; i < v.size(); ++i) {
    const std::string k = key + "[" + std::to_string(i) + "]";
    if (!v[i].is_array() || v[i].size() != 2) jc::fail(origin, k, "a pair [seq, head_dim]", v[i]);
    out.emplace_back(single_count(v[i][0], origin, k + "[0]"), single_count(v[i][1], origin, k + "[1]"));
  }
  return out;
}

// window, chunk, head_dim_v: an integer axis whose values may be 0 or "none"
// (no window, no chunk, DV = d).
std::vector<std::uint64_t> int_axis_or_none(const nlohmann::json& v, std::string_view origin, const std::string& key) {
  constexpr const char* form = "a non-negative integer (0: none), a string such as \"0,4096\", or a non-empty array of them";
  auto items = [&](const nlohmann::json& x, const std::string& k) -> std::vector<std::uint64_t> {
    if (x.is_number_unsigned() || (x.is_number_integer() && x.get<std::int64_t>() == 0))
      return {x.get<std::uint64_t>()};
    if (!x.is_string()) jc::fail(origin, k, form, x);
    try {
      return parse_int_axis_or_none(x.get<std::string>(), k);
    } catch (const Error& e) {
      rethrow_as_key(e, origin);
    }
  };
  if (!v.is_array()) return items(v, key);
  if (v.empty()) jc::fail(origin, key, form, v);
  std::vector<std::uint64_t> out;
  for (std::size_t i = 0; i < v.size(); ++i) {
    const auto x = items(v[i], key + "[" + std::to_string(i) + "]");
    out.insert(out.end(), x.begin(), x.end());
    if (out.size() > max_sweep_shapes)
      jc::fail_text(origin, key, "has too many values (a sweep has at most " + std::to_string(max_sweep_shapes) +
                                     " shapes)");
  }
  return out;
}

// seq_lens: ragged prefill batches, each an array of items L (a number or a
// string such as "4K") or "Q:KV".
std::vector<SeqList> seq_lens_axis(const nlohmann::json& v, std::string_view origin, const std::string& key) {
  constexpr const char* form = "a non-empty array of ragged batches such as [[512, \"4K\", \"1K:8K\"]]";
  if (!v.is_array() || v.empty()) jc::fail(origin, key, form, v);
  std::vector<SeqList> out;
  for (std::size_t i = 0; i < v.size(); ++i) {
    const std::string p = key + "[" + std::to_string(i) + "]";
    if (!v[i].is_array() || v[i].empty()) jc::fail(origin, p, "a non-empty array of sequences (L or \"Q:KV\")", v[i]);
    if (v[i].size() > max_context_lengths)
      jc::fail_text(origin, p, "more than " + std::to_string(max_context_lengths) + " sequences");
    std::vector<SeqLen> batch;
    for (std::size_t n = 0; n < v[i].size(); ++n) {
      const std::string k = p + "[" + std::to_string(n) + "]";
      const auto& x = v[i][n];
      if (x.is_number_unsigned()) {
        const std::uint64_t l = single_count(x, origin, k);
        batch.push_back({l, l});
        continue;
      }
      if (!x.is_string()) jc::fail(origin, k, "a sequence length such as 4096, \"4K\" or \"1K:8K\" (Q:KV)", x);
      try {
        const auto items = parse_seq_len_items(x.get<std::string>(), k);
        batch.insert(batch.end(), items.begin(), items.end());
      } catch (const Error& e) {
        rethrow_as_key(e, origin);
      }
    }
    out.emplace_back(std::move(batch));
  }
  return out;
}

const std::initializer_list<std::string_view> axis_keys = {
    "batch", "heads", "kv_heads", "seq", "seq_kv", "head_dim", "points",
    "dtype", "block_rows", "block_cols", "causal", "pass",
    "decode", "context_lengths", "splits", "page_size", "model_config",
    "window", "chunk", "head_dim_v", "kv_dtype", "latent_kv", "seq_lens"};

SweepAxes model_axes_from(const std::map<std::string, std::pair<nlohmann::json, std::string>>& fields,
                          std::string_view origin, const std::string& where);

// `fields` maps each axis key to (value, path of the key for messages).
SweepAxes axes_from(const std::map<std::string, std::pair<nlohmann::json, std::string>>& fields,
                    std::string_view origin, const std::string& where) {
  SweepAxes a;
  const bool has_points = fields.count("points") != 0;
  if (fields.count("model_config")) return model_axes_from(fields, origin, where);
  if (!has_points && ((fields.count("seq") == 0 && fields.count("seq_lens") == 0) || fields.count("head_dim") == 0))
    jc::fail_text(origin, where.empty() ? "(top level)" : where,
                  "needs both 'seq' (or 'seq_lens') and 'head_dim', or 'points'");
  for (const auto& [k, vp] : fields) {
    const auto& [v, path] = vp;
    if (k == "batch") a.batch = int_axis(v, origin, path);
    else if (k == "heads") a.heads = int_axis(v, origin, path);
    else if (k == "kv_heads") a.kv_heads = int_axis(v, origin, path);
    else if (k == "seq") a.seq = int_axis(v, origin, path);
    else if (k == "seq_kv") a.seq_kv = int_axis(v, origin, path);
    else if (k == "head_dim") a.head_dim = int_axis(v, origin, path);
    else if (k == "points") a.seq_head_dim = points_axis(v, origin, path);
    else if (k == "dtype") a.dtype = dtype_axis(v, origin, path);
    else if (k == "block_rows") a.block_rows = int_axis(v, origin, path);
    else if (k == "block_cols") a.block_cols = int_axis(v, origin, path);
    else if (k == "causal") a.causal = causal_axis(v, origin, path);
    else if (k == "pass") a.pass = pass_axis(v, origin, path);
    else if (k == "decode") {
      if (!v.is_boolean()) jc::fail(origin, path, "true or false", v);
      a.decode = v.get<bool>();
    } else if (k == "context_lengths") {
      constexpr const char* form = "a non-empty array of ragged batches such as [[512, 4096, \"128K\"]]";
      if (!v.is_array() || v.empty()) jc::fail(origin, path, form, v);
      for (std::size_t i = 0; i < v.size(); ++i) {
        const std::string p = path + "[" + std::to_string(i) + "]";
        if (!v[i].is_array() || v[i].empty()) jc::fail(origin, p, "a non-empty array of context lengths", v[i]);
        std::vector<std::uint64_t> batch;
        for (std::size_t n = 0; n < v[i].size(); ++n)
          batch.push_back(single_count(v[i][n], origin, p + "[" + std::to_string(n) + "]"));
        a.context_lengths.emplace_back(batch);
      }
    } else if (k == "splits") a.splits = int_axis(v, origin, path);
    else if (k == "page_size") a.page_size = int_axis(v, origin, path);
    else if (k == "window") a.window = int_axis_or_none(v, origin, path);
    else if (k == "chunk") a.chunk = int_axis_or_none(v, origin, path);
    else if (k == "head_dim_v") a.head_dim_v = int_axis_or_none(v, origin, path);
    else if (k == "kv_dtype")
      a.kv_dtype = string_axis<std::optional<Dtype>>(
          v, origin, path, "a dtype (\"fp32\", \"fp16\", \"bf16\", \"fp8\"), \"same\", or a non-empty array of them",
          parse_kv_dtype_axis);
    else if (k == "latent_kv") {
      if (!v.is_boolean()) jc::fail(origin, path, "true or false", v);
      a.latent_kv = v.get<bool>();
    } else if (k == "seq_lens") a.seq_lens = seq_lens_axis(v, origin, path);
  }
  if (!a.seq_lens.empty()) {
    if (a.decode)
      jc::fail_text(origin, where.empty() ? "(top level)" : where,
                    "seq_lens are prefill sequences; a decode batch is context_lengths");
    if (fields.count("batch") || fields.count("seq") || fields.count("seq_kv"))
      jc::fail_text(origin, where.empty() ? "(top level)" : where,
                    "seq_lens gives the batch, seq and seq_kv: drop 'batch', 'seq' and 'seq_kv'");
  }
  a.dtype_given = fields.count("dtype") != 0;
  if (!a.context_lengths.empty() || fields.count("splits") || fields.count("page_size")) {
    if (!a.decode)
      jc::fail_text(origin, where.empty() ? "(top level)" : where,
                    "context_lengths, splits and page_size need \"decode\": true");
    if (!a.context_lengths.empty() && (fields.count("batch") || fields.count("seq_kv")))
      jc::fail_text(origin, where.empty() ? "(top level)" : where,
                    "context_lengths gives the batch and seq_kv: drop 'batch' and 'seq_kv'");
  }
  return a;
}

bool looks_like_path(std::string_view s) {
  return s.find('/') != std::string_view::npos ||
         (s.size() > 5 && s.substr(s.size() - 5) == ".json");
}

// A group of whole models (docs/sweep-config.md): "model_config" names shipped
// models or config.json files (relative to the sweep config's folder); the
// models give heads and head dims, so those keys are refused; the step is
// "seq" (prefill) or "decode" with "seq_kv" or "context_lengths".
SweepAxes model_axes_from(const std::map<std::string, std::pair<nlohmann::json, std::string>>& fields,
                          std::string_view origin, const std::string& where) {
  const auto& [mv, mpath] = fields.at("model_config");
  for (const char* k : {"heads", "kv_heads", "head_dim", "points", "head_dim_v", "window", "chunk", "latent_kv"})
    if (fields.count(k))
      jc::fail_text(origin, fields.at(k).second, "the model config gives it (model_config): drop the key");
  const bool decode = fields.count("decode") && fields.at("decode").first == true;
  const bool ragged = fields.count("seq_lens") != 0;  // a ragged prefill batch gives its own seq
  if (!decode && !fields.count("seq") && !ragged)
    jc::fail_text(origin, where.empty() ? "(top level)" : where,
                  "a model_config group needs 'seq' or 'seq_lens' (a prefill) or \"decode\": true (a decode step)");
  auto rest = fields;
  rest.erase("model_config");
  if (!rest.count("seq") && !ragged) rest["seq"] = {nlohmann::json(std::uint64_t{1}), where + ".seq"};  // a decode step's one new token
  rest["head_dim"] = {nlohmann::json(std::uint64_t{128}), where + ".head_dim"};  // unused: each layer's comes from its model
  SweepAxes a = axes_from(rest, origin, where);
  std::vector<std::string> names;
  if (mv.is_string()) names.push_back(mv.get<std::string>());
  else if (mv.is_array() && !mv.empty() && mv.size() <= 64 && std::all_of(mv.begin(), mv.end(), [](const auto& x) { return x.is_string(); }))
    for (const auto& x : mv) names.push_back(x.get<std::string>());
  else
    jc::fail(origin, mpath, "a model (a shipped name or a config.json path) or a non-empty array of at most 64", mv);
  const std::filesystem::path folder = std::filesystem::path(std::string(origin)).parent_path();
  for (const auto& n : names) {
    std::string arg = n;
    if (looks_like_path(n) && std::filesystem::path(n).is_relative() && !folder.empty()) arg = (folder / n).string();
    try {
      auto m = std::make_shared<const ModelConfig>(find_model_config(arg, mpath));
      for (const auto& x : a.model_config)
        if (x->id == m->id) jc::fail_text(origin, mpath, "'" + jc::printable(m->id) + "' is named twice");
      a.model_config.push_back(std::move(m));
    } catch (const Error& e) {
      const std::string msg = e.what();
      if (msg.rfind(std::string(origin), 0) == 0) throw;
      throw Error(std::string(origin) + ": " + msg);
    }
  }
  return a;
}

struct ShapeHash {
  std::size_t operator()(const Shape& s) const {
    std::size_t h = 1469598103934665603ull;
    for (std::uint64_t v : {s.batch, s.heads, s.kv_heads, s.seq_q, s.seq_kv, s.head_dim,
                            static_cast<std::uint64_t>(s.dtype), s.block_rows, s.block_cols,
                            static_cast<std::uint64_t>(s.causal), static_cast<std::uint64_t>(s.pass)})
      h = (h ^ v) * 1099511628211ull;
    return h;
  }
};

}  // namespace

SweepConfig sweep_config_from_json(const nlohmann::json& j, std::string_view origin) {
  if (!j.is_object()) jc::fail(origin, "(top level)", "a JSON object", j);
  // Labels, variant ids, axis strings and the description reach tables and messages.
  jc::require_printable_strings(j, origin);
  jc::only_keys(j, origin, "", {"schema", "description", "variants", "axes", "groups"});
  if (j.contains("schema") && j["schema"] != sweep_schema)
    jc::fail(origin, "schema", "\"hbmscope.sweep/1\"", j["schema"]);
  SweepConfig c;
  if (j.contains("description")) {
    if (!j["description"].is_string()) jc::fail(origin, "description", "a string", j["description"]);
    c.description = j["description"].get<std::string>();
  }
  if (j.contains("variants")) {
    const auto& v = j["variants"];
    constexpr const char* form = "a non-empty array of variant ids such as [\"flash_no_l2\", \"floor\"]";
    if (!v.is_array() || v.empty()) jc::fail(origin, "variants", form, v);
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (!v[i].is_string() || v[i].get<std::string>().empty())
        jc::fail(origin, "variants[" + std::to_string(i) + "]", "a variant id (a string)", v[i]);
      c.variants.push_back(v[i].get<std::string>());
    }
  }
  if (!j.contains("axes") && !j.contains("groups"))
    jc::fail_text(origin, "(top level)", "needs 'axes', 'groups' or both");

  std::map<std::string, std::pair<nlohmann::json, std::string>> common;
  if (j.contains("axes")) {
    const auto& a = j["axes"];
    if (!a.is_object()) jc::fail(origin, "axes", "an object of axes", a);
    jc::only_keys(a, origin, "axes", axis_keys);
    for (const auto& [k, v] : a.items()) common[k] = {v, "axes." + k};
    if (common.count("points") && (common.count("seq") || common.count("head_dim")))
      jc::fail_text(origin, "axes", "give 'points' or 'seq' and 'head_dim', not both");
  }
  if (!j.contains("groups")) {
    c.groups.push_back({"", axes_from(common, origin, "axes")});
    return c;
  }
  const auto& g = j["groups"];
  if (!g.is_array() || g.empty()) jc::fail(origin, "groups", "a non-empty array of objects", g);
  for (std::size_t i = 0; i < g.size(); ++i) {
    const std::string where = "groups[" + std::to_string(i) + "]";
    if (!g[i].is_object()) jc::fail(origin, where, "an object of axes", g[i]);
    std::vector<std::string_view> allowed(axis_keys);
    allowed.push_back("label");
    for (const auto& [k, v] : g[i].items()) {
      bool ok = false;
      for (auto a : allowed) ok |= k == a;
      if (!ok)
        jc::fail_text(origin, where + "." + k, "unknown key (known: label and the axes: batch, heads, "
                                               "kv_heads, seq, seq_kv, head_dim, points, dtype, "
                                               "block_rows, block_cols, causal, pass, decode, "
                                               "context_lengths, splits, page_size, model_config)");
    }
    if (g[i].contains("points") && (g[i].contains("seq") || g[i].contains("head_dim")))
      jc::fail_text(origin, where, "give 'points' or 'seq' and 'head_dim', not both");
    auto fields = common;
    for (const auto& [k, v] : g[i].items()) {
      if (k == "label") continue;
      // A group's own seq/head_dim replace inherited points, and the reverse.
      if (k == "points") fields.erase("seq"), fields.erase("head_dim");
      if (k == "seq" || k == "head_dim") fields.erase("points");
      fields[k] = {v, where + "." + k};
    }
    SweepGroup group;
    if (g[i].contains("label")) {
      if (!g[i]["label"].is_string()) jc::fail(origin, where + ".label", "a string", g[i]["label"]);
      group.label = g[i]["label"].get<std::string>();
    }
    group.axes = axes_from(fields, origin, where);
    c.groups.push_back(std::move(group));
  }
  return c;
}

SweepConfig load_sweep_config_file(const std::filesystem::path& path) {
  const auto j = jc::read_json_file(path);
  SweepConfig c = sweep_config_from_json(j, path.string());
  // Shapes that fail validation (heads not a multiple of kv_heads...) are
  // reported now, naming the file (each made and dropped: none is held).
  try {
    for_each_shape(c, [](const Shape&, const std::string&, const ModelConfigRef&) {});
  } catch (const Error& e) {
    throw Error(jc::printable(path.string()) + ": " + e.what());
  }
  return c;
}

std::vector<std::string> preset_sweep_names() {
  std::vector<std::string> r;
  for (std::size_t i = 0; i < embedded::sweep_count; ++i) r.emplace_back(embedded::sweeps[i].name);
  return r;
}

SweepConfig find_sweep_config(std::string_view arg) {
  if (looks_like_path(arg)) return load_sweep_config_file(std::filesystem::path(std::string(arg)));
  std::string known;
  for (std::size_t i = 0; i < embedded::sweep_count; ++i) {
    const auto& f = embedded::sweeps[i];
    if (arg == f.name) {
      const std::string origin = "configs/sweeps/" + std::string(f.name) + ".json";
      return sweep_config_from_json(jc::parse_json_text(f.text, origin), origin);
    }
    known += (known.empty() ? "" : ", ") + std::string(f.name);
  }
  throw UsageError("--config: '" + jc::printable(arg) + "' is not a shipped config (" + known +
              ") nor a .json file");
}

void keep_variants(std::vector<Row>& rows, const std::vector<std::string>& ids, std::string_view where) {
  if (ids.empty()) return;
  std::vector<std::string> present;
  for (const Row& r : rows)
    for (const auto& v : r.variants)
      if (std::find(present.begin(), present.end(), v.id) == present.end()) present.push_back(v.id);
  if (!rows.empty()) check_listed_variants(present, ids, where);
  for (Row& r : rows) keep_listed_variants(r, ids);
}

void check_listed_variants(const std::vector<std::string>& present, const std::vector<std::string>& ids,
                           std::string_view where) {
  for (const auto& id : ids)
    if (std::find(present.begin(), present.end(), id) == present.end()) {
      std::string list;
      for (const auto& p : present) list += (list.empty() ? "" : ", ") + p;
      const std::string msg = std::string(where) + ": '" + id + "' is not a variant of these rows (" + list + ")";
      // On the command line that is an option value that names nothing: exit 2.
      if (where.rfind("--", 0) == 0) throw UsageError(msg);
      throw Error(msg);
    }
}

void keep_listed_variants(Row& r, const std::vector<std::string>& ids) {
  if (ids.empty()) return;
  // A simulated variant stays with the variant it refines, so that a filter
  // written without a device keeps its meaning with one.
  const auto listed = [&](std::string_view id) { return std::find(ids.begin(), ids.end(), id) != ids.end(); };
  const auto keep = [&](const VariantResult& v) {
    return listed(v.id) || (v.id == "flash_l2_sim" && listed("flash_no_l2")) ||
           (v.id == "standard_l2_sim" && listed("standard")) ||
           (v.id.rfind("decode_", 0) == 0 && v.id.size() > 7 && v.id.substr(v.id.size() - 7) == "_l2_sim" &&
            listed(v.id.substr(0, v.id.size() - 7)));
  };
  r.variants.erase(std::remove_if(r.variants.begin(), r.variants.end(),
                                  [&](const VariantResult& v) { return !keep(v); }),
                   r.variants.end());
}

namespace {

// The sum of the groups' products, before repeats across groups are dropped;
// refused over max_sweep_shapes before anything is made.
std::uint64_t counted_shapes(const SweepConfig& config) {
  std::uint64_t total = 0;
  for (const auto& g : config.groups) {
    std::uint64_t n = shape_count(g.axes);
    if (!g.axes.model_config.empty() && __builtin_mul_overflow(n, g.axes.model_config.size(), &n)) n = UINT64_MAX;
    total = n > UINT64_MAX - total ? UINT64_MAX : total + n;
  }
  if (total > max_sweep_shapes && config.groups.size() > 1)  // one group: for_each_shape(axes) says it
    throw Error("sweep too large: its " + std::to_string(config.groups.size()) + " group(s) make " +
                (total == UINT64_MAX ? std::string("more than 2^64") : std::to_string(total)) +
                " shapes (at most " + std::to_string(max_sweep_shapes) +
                ", counted before repeated shapes are dropped); sweep fewer values");
  return total;
}

}  // namespace

void for_each_shape(const SweepConfig& config, const ShapeVisit& visit) {
  (void)counted_shapes(config);
  if (config.groups.size() == 1) {  // nothing to drop: no shape is held
    const SweepGroup& g = config.groups.front();
    for_each_model_step(g.axes, [&](const Shape& s, const ModelConfigRef& m) { visit(s, g.label, m); });
    return;
  }
  // Rows are identified by (label, shape): two models with the same attention
  // shape both keep their rows, a shape repeated under one label is dropped
  // (the shapes of a config of several groups are held in a set for that). A
  // whole-model point is its (label, model, shape).
  std::map<std::string, std::unordered_set<Shape, ShapeHash>> seen;
  for (const auto& g : config.groups)
    for_each_model_step(g.axes, [&](const Shape& s, const ModelConfigRef& m) {
      if (seen[g.label + (m ? "\x1f" + m->id : std::string())].insert(s).second) visit(s, g.label, m);
    });
}

std::uint64_t shape_count(const SweepConfig& config) {
  const std::uint64_t total = counted_shapes(config);
  if (config.groups.size() == 1) return total;
  std::uint64_t n = 0;
  for_each_shape(config, [&n](const Shape&, const std::string&, const ModelConfigRef&) { ++n; });
  return n;
}

LabelledShapes expand(const SweepConfig& config) {
  const std::uint64_t total = counted_shapes(config);
  LabelledShapes out;
  if (total <= max_sweep_shapes) {
    out.shapes.reserve(static_cast<std::size_t>(total));
    out.labels.reserve(static_cast<std::size_t>(total));
  }
  for_each_shape(config, [&out](const Shape& s, const std::string& label, const ModelConfigRef& m) {
    out.shapes.push_back(s);
    out.labels.push_back(label);
    out.models.push_back(m);
  });
  return out;
}

}  // namespace hbmscope
