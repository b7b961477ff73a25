// Hugging Face config.json -> ModelConfig: what each key means and which
// layers are local is documented, with its sources, in docs/models.md.
#include "hbmscope/hf_config.hpp"

#include <algorithm>
#include <array>
#include <cctype>

#include "embedded.hpp"
#include "../report/json_check.hpp"

namespace hbmscope {

namespace jc = json_check;

namespace {

// Keys that mean attention hbmscope cannot count exactly, refused by name.
struct Refused {
  const char* key;
  const char* why;
};
constexpr std::array<Refused, 13> refused_keys{{
    {"index_topk", "DeepSeek sparse attention: the keys each query reads are chosen at run time"},
    {"num_kv_shared_layers", "layers that reuse another layer's KV cache are not modelled"},
    {"global_head_dim", "layers with a head dim of their own are not modelled"},
    {"sparse_attention_config", "sparse attention is not modelled"},
    {"linear_attn_config", "linear attention is not modelled"},
    {"attention_types", "GPT-Neo's per-layer attention list is not read; give layer_types"},
    {"attention_layers", "GPT-Neo's per-layer attention list is not read; give layer_types"},
    {"hybrid_override_pattern", "hybrid state-space and attention layers are not modelled"},
    {"layers_block_type", "hybrid state-space and attention layers are not modelled"},
    {"layer_block_types", "hybrid state-space and attention layers are not modelled"},
    {"attn_layer_indices", "hybrid state-space and attention layers are not modelled"},
    {"attn_layer_period", "hybrid state-space and attention layers are not modelled"},
    {"v_head_dim", "a V head dim without MLA (kv_lora_rank) is not modelled"},
}};

// A value that sets nothing: absent, null, false, 0, "", [] or {}.
bool unset(const nlohmann::json* v) {
  return !v || v->is_null() || (v->is_boolean() && !v->get<bool>()) ||
         (v->is_number_unsigned() && v->get<std::uint64_t>() == 0) ||
         (v->is_number_integer() && v->get<std::int64_t>() == 0) || (v->is_string() && v->get_ref<const std::string&>().empty()) ||
         ((v->is_array() || v->is_object()) && v->empty());
}

// The text part of a config (its text_config, or itself) and checked getters
// whose messages name the key with its path.
struct Part {
  const nlohmann::json& j;
  std::string prefix;  // "text_config." or ""
  std::string_view origin;

  const nlohmann::json* get(const char* k) const {
    const auto it = j.find(k);
    return it == j.end() || it->is_null() ? nullptr : &*it;
  }
  std::string key(const std::string& k) const { return prefix + k; }
  [[noreturn]] void fail(const std::string& k, const char* expected, const nlohmann::json& got) const {
    jc::fail(origin, key(k), expected, got);
  }
  [[noreturn]] void fail_text(const std::string& k, const std::string& why) const { jc::fail_text(origin, key(k), why); }

  std::optional<std::uint64_t> count(const char* k, std::uint64_t max, bool zero_ok = false) const {
    const auto* v = get(k);
    if (!v) return std::nullopt;
    if (!v->is_number_unsigned() || v->get<std::uint64_t>() > max || (!zero_ok && v->get<std::uint64_t>() == 0)) {
      const std::string form = std::string(zero_ok ? "an integer from 0" : "a positive integer") + " up to " +
                               std::to_string(max);
      fail(k, form.c_str(), *v);
    }
    return v->get<std::uint64_t>();
  }
  std::uint64_t required(const char* k, std::uint64_t max) const {
    const auto v = count(k, max);
    if (!v) fail_text(k, "missing (required)");
    return *v;
  }
  std::optional<bool> flag(const char* k) const {
    const auto* v = get(k);
    if (!v) return std::nullopt;
    if (!v->is_boolean()) fail(k, "true or false", *v);
    return v->get<bool>();
  }
  std::optional<std::string> text(const char* k) const {
    const auto* v = get(k);
    if (!v) return std::nullopt;
    if (!v->is_string()) fail(k, "a string", *v);
    jc::require_printable(origin, key(k), v->get_ref<const std::string&>());
    return v->get<std::string>();
  }
};

constexpr std::uint64_t max_dim = std::uint64_t{1} << 24;     // heads, head dims
constexpr std::uint64_t max_span = std::uint64_t{1} << 40;    // windows, chunks (tokens)

std::optional<Dtype> dtype_of(const Part& p, const char* k) {
  const auto t = p.text(k);
  if (!t) return std::nullopt;
  std::string s = *t;
  if (s.rfind("torch.", 0) == 0) s.erase(0, 6);
  if (s == "bfloat16") return Dtype::bf16;
  if (s == "float16" || s == "half") return Dtype::fp16;
  if (s == "float32" || s == "float") return Dtype::fp32;
  if (s == "float8_e4m3fn" || s == "float8_e5m2") return Dtype::fp8;
  if (s == "auto") return std::nullopt;
  p.fail_text(k, "'" + jc::printable(*t) + "' is not a dtype hbmscope models (bfloat16, float16, float32, float8_e4m3fn)");
}

bool one_of(std::string_view t, std::initializer_list<std::string_view> set) {
  return std::find(set.begin(), set.end(), t) != set.end();
}

using Layers = std::vector<LayerAttention>;

void mark_pattern(Layers& l, std::uint64_t period) {  // Gemma 3's rule: every period-th layer is full
  for (std::size_t i = 0; i < l.size(); ++i)
    if ((i + 1) % period != 0) l[i] = LayerAttention::sliding;
}

// Which layers are sliding: layer_types, else sliding_window_pattern, else
// use_sliding_window + max_window_layers, else the model type's rule.
void sliding_layers(const Part& p, const std::string& type, bool window, Layers& l) {
  const std::uint64_t n = l.size();
  const auto use = p.flag("use_sliding_window");
  if (const auto* lt = p.get("layer_types")) {
    if (!lt->is_array() || lt->size() != n)
      p.fail("layer_types", ("an array of " + std::to_string(n) + " layer types (one per layer)").c_str(), *lt);
    for (std::size_t i = 0; i < n; ++i) {
      const auto& v = (*lt)[i];
      const std::string k = "layer_types[" + std::to_string(i) + "]";
      if (!v.is_string()) p.fail(k, "a layer type such as \"full_attention\"", v);
      const std::string& t = v.get_ref<const std::string&>();
      if (t == "full_attention") l[i] = LayerAttention::full;
      else if (t == "sliding_attention") l[i] = LayerAttention::sliding;
      else if (t == "chunked_attention") l[i] = LayerAttention::chunked;
      else
        p.fail_text(k, "'" + jc::printable(t) +
                           "' is not a layer type hbmscope models (full_attention, sliding_attention, chunked_attention)");
    }
    if (use == false && std::find(l.begin(), l.end(), LayerAttention::sliding) != l.end())
      p.fail_text("use_sliding_window", "false, but layer_types has sliding_attention layers");
    return;
  }
  const auto pattern = p.count("sliding_window_pattern", max_model_layers);
  const auto hidden = p.count("_sliding_window_pattern", max_model_layers);
  if (pattern && hidden && *pattern != *hidden)
    p.fail_text("sliding_window_pattern", std::to_string(*pattern) + ", but _sliding_window_pattern is " +
                                              std::to_string(*hidden));
  if (pattern || hidden) return mark_pattern(l, pattern ? *pattern : *hidden);
  if (use) {
    if (!*use) return;
    const auto from = p.count("max_window_layers", max_model_layers, true);
    if (!from) p.fail_text("max_window_layers", "missing (use_sliding_window is true: from which layer?)");
    for (std::size_t i = *from; i < n; ++i) l[i] = LayerAttention::sliding;  // none when it is n or more
    return;
  }
  if (!window) return;
  if (one_of(type, {"mistral", "mixtral"})) return std::fill(l.begin(), l.end(), LayerAttention::sliding);
  if (one_of(type, {"gemma2", "gpt_oss"})) return mark_pattern(l, 2);
  if (one_of(type, {"gemma3", "gemma3_text"})) return mark_pattern(l, 6);
  if (one_of(type, {"qwen2", "qwen2_moe", "qwen3", "qwen3_moe"})) return;  // use_sliding_window defaults to false
  p.fail_text("sliding_window", "set, but nothing says which layers use it (layer_types, sliding_window_pattern, "
                                "use_sliding_window) and hbmscope knows no rule for model_type '" +
                                    jc::printable(type) + "'");
}

// Which layers are chunked (Llama 4): no_rope_layers (1: a RoPE layer, chunked;
// 0: a NoPE layer, global), else every no_rope_layer_interval-th layer global.
void chunked_layers(const Part& p, const std::string& type, Layers& l) {
  const std::uint64_t n = l.size();
  const auto* nr = p.get("no_rope_layers");
  if (nr && !(nr->is_array() && nr->empty())) {
    if (!nr->is_array() || nr->size() != n)
      p.fail("no_rope_layers", ("an array of " + std::to_string(n) + " flags (1: RoPE, 0: NoPE)").c_str(), *nr);
    for (std::size_t i = 0; i < n; ++i) {
      const auto& v = (*nr)[i];
      if (!v.is_number_unsigned() || v.get<std::uint64_t>() > 1)
        p.fail("no_rope_layers[" + std::to_string(i) + "]", "0 or 1", v);
      if (v.get<std::uint64_t>() == 1) {
        if (l[i] != LayerAttention::full)
          p.fail_text("no_rope_layers[" + std::to_string(i) + "]", "a chunked layer that is also sliding");
        l[i] = LayerAttention::chunked;
      }
    }
    return;
  }
  if (!one_of(type, {"llama4", "llama4_text"}))
    p.fail_text("attention_chunk_size", "set, but nothing says which layers are chunked (layer_types, no_rope_layers)");
  const std::uint64_t every = p.count("no_rope_layer_interval", max_model_layers).value_or(4);
  for (std::size_t i = 0; i < n; ++i)
    if ((i + 1) % every != 0) {
      if (l[i] != LayerAttention::full) p.fail_text("attention_chunk_size", "a chunked layer that is also sliding");
      l[i] = LayerAttention::chunked;
    }
}

void read_meta(const nlohmann::json& top, std::string_view origin, ModelConfig& m) {
  const auto it = top.find("_hbmscope");
  if (it == top.end()) return;
  const auto& h = *it;
  if (!h.is_object()) jc::fail(origin, "_hbmscope", "an object {name, source, notes}", h);
  jc::only_keys(h, origin, "_hbmscope", {"name", "source", "notes"});
  jc::require_printable_strings(h, origin, "_hbmscope");
  for (const char* k : {"name", "source"})
    if (h.contains(k) && !h[k].is_string()) jc::fail(origin, std::string("_hbmscope.") + k, "a string", h[k]);
  m.name = h.value("name", m.name);
  m.source = h.value("source", std::string());
  if (h.contains("notes")) {
    const auto& n = h["notes"];
    if (!n.is_array() || n.size() > 64) jc::fail(origin, "_hbmscope.notes", "an array of at most 64 strings", n);
    for (std::size_t i = 0; i < n.size(); ++i) {
      if (!n[i].is_string()) jc::fail(origin, "_hbmscope.notes[" + std::to_string(i) + "]", "a string", n[i]);
      m.notes.push_back(n[i].get<std::string>());
    }
  }
}

}  // namespace

ModelConfig model_config_from_json(const nlohmann::json& j, std::string_view origin, std::string_view id) {
  if (!j.is_object()) jc::fail(origin, "(top level)", "a JSON object (a Hugging Face config.json)", j);
  const auto tc = j.find("text_config");
  const bool nested = tc != j.end() && !tc->is_null();
  if (nested && !tc->is_object()) jc::fail(origin, "text_config", "an object", *tc);
  const Part top{j, "", origin};
  const Part p{nested ? *tc : j, nested ? "text_config." : "", origin};
  ModelConfig m;
  m.id = std::string(id);
  const std::string type = p.text("model_type").value_or(top.text("model_type").value_or(""));
  m.model_type = type;
  m.name = type.empty() ? std::string("config") : type;
  read_meta(j, origin, m);

  for (const Part* part : {&p, &top}) {
    for (const auto& r : refused_keys)
      if (!unset(part->get(r.key)) && !(std::string_view(r.key) == "v_head_dim" && !unset(part->get("kv_lora_rank"))))
        part->fail_text(r.key, r.why);
    if (part->flag("use_bidirectional_attention") == true)
      part->fail_text("use_bidirectional_attention", "true: bidirectional attention is not a causal decoder's");
    if (part->flag("is_causal") == false) part->fail_text("is_causal", "false: hbmscope models causal decoders");
    if (!nested) break;
  }

  const std::uint64_t n = p.required("num_hidden_layers", max_model_layers);
  m.heads = p.required("num_attention_heads", max_dim);
  if (!unset(p.get("kv_lora_rank"))) {
    MlaDims d;
    d.kv_lora_rank = p.required("kv_lora_rank", max_dim);
    d.qk_rope_head_dim = p.required("qk_rope_head_dim", max_dim);
    d.qk_nope_head_dim = p.required("qk_nope_head_dim", max_dim);
    d.v_head_dim = p.required("v_head_dim", max_dim);
    d.q_lora_rank = p.count("q_lora_rank", max_dim, true).value_or(0);
    m.mla = d;
    m.kv_heads = p.count("num_key_value_heads", max_dim).value_or(m.heads);
    m.head_dim = d.qk_nope_head_dim + d.qk_rope_head_dim;
    m.head_dim_v = d.v_head_dim;
  } else {
    m.kv_heads = p.required("num_key_value_heads", max_dim);
    if (const auto hd = p.count("head_dim", max_dim)) {
      m.head_dim = *hd;
    } else {
      if (one_of(type, {"gemma", "gemma2", "gemma3", "gemma3_text"}))
        p.fail_text("head_dim", "missing: for model_type '" + type +
                                    "' transformers' default is not hidden_size / num_attention_heads; give head_dim");
      const auto hidden = p.count("hidden_size", max_dim * max_dim);
      if (!hidden) p.fail_text("head_dim", "missing, and no hidden_size to divide by num_attention_heads");
      if (*hidden % m.heads != 0)
        p.fail_text("hidden_size", std::to_string(*hidden) + " is not a multiple of num_attention_heads (" +
                                       std::to_string(m.heads) + "): give head_dim");
      m.head_dim = *hidden / m.heads;
    }
  }
  if (m.kv_heads > m.heads || m.heads % m.kv_heads != 0)
    p.fail_text("num_key_value_heads", std::to_string(m.kv_heads) + " does not divide num_attention_heads (" +
                                           std::to_string(m.heads) + ")");

  m.window = p.count("sliding_window", max_span).value_or(0);
  m.chunk = p.count("attention_chunk_size", max_span).value_or(0);
  Layers layers(n, LayerAttention::full);
  sliding_layers(p, type, m.window != 0, layers);
  if (m.chunk != 0 && !p.get("layer_types")) chunked_layers(p, type, layers);
  const auto has = [&](LayerAttention a) { return std::find(layers.begin(), layers.end(), a) != layers.end(); };
  if (has(LayerAttention::sliding) && m.window == 0) p.fail_text("sliding_window", "missing, but some layers are sliding");
  if (has(LayerAttention::chunked) && m.chunk == 0)
    p.fail_text("attention_chunk_size", "missing, but some layers are chunked");
  if (!has(LayerAttention::sliding)) m.window = 0;  // set but unused (Qwen's use_sliding_window: false)
  if (!has(LayerAttention::chunked)) m.chunk = 0;
  if (m.mla && (has(LayerAttention::sliding) || has(LayerAttention::chunked)))
    p.fail_text("kv_lora_rank", "MLA with sliding or chunked layers is not modelled");
  m.layers = std::move(layers);

  for (const Part* part : {&p, &top}) {
    const auto a = dtype_of(*part, "torch_dtype"), b = dtype_of(*part, "dtype");
    if (a && b && *a != *b) part->fail_text("dtype", "differs from torch_dtype");
    if (a || b) {
      m.dtype = a ? a : b;
      break;
    }
    if (!nested) break;
  }
  validate(m);
  return m;
}

ModelConfig load_model_config_file(const std::filesystem::path& path) {
  const std::string name = path.string();
  if (jc::printable(name) != name)
    throw Error("model config '" + jc::printable(name) +
                "': a control character or a byte that is not UTF-8 is not allowed in its name (it names the rows)");
  return model_config_from_json(jc::read_json_file(path), name, name);
}

const std::vector<ModelConfig>& preset_model_configs() {
  static const std::vector<ModelConfig> presets = [] {
    std::vector<ModelConfig> v;
    for (std::size_t i = 0; i < embedded::model_count; ++i) {
      const auto& f = embedded::models[i];
      const std::string origin = "configs/models/" + std::string(f.name) + ".json";
      v.push_back(model_config_from_json(jc::parse_json_text(f.text, origin), origin, f.name));
    }
    std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
    return v;
  }();
  return presets;
}

namespace {

std::string normalise(std::string_view s) {
  std::string r;
  for (unsigned char c : s)
    if (std::isalnum(c)) r += static_cast<char>(std::tolower(c));
  return r;
}

}  // namespace

ModelConfig find_model_config(std::string_view arg, std::string_view option) {
  const bool path = arg.find('/') != std::string_view::npos ||
                    (arg.size() > 5 && arg.substr(arg.size() - 5) == ".json");
  if (path) return load_model_config_file(std::filesystem::path(std::string(arg)));
  const std::string want = normalise(arg);
  std::string known;
  for (const auto& m : preset_model_configs()) {
    if (!want.empty() && (normalise(m.id) == want || normalise(m.name) == want)) return m;
    known += (known.empty() ? "" : ", ") + m.id;
  }
  throw Error(std::string(option) + ": '" + jc::printable(arg) + "' is not a shipped model (" + known +
              ") nor a .json file; `hbmscope models` lists them");
}

}  // namespace hbmscope
