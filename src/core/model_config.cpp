#include "hbmscope/model_config.hpp"

#include <algorithm>

#include "hbmscope/checked.hpp"
#include "hbmscope/error.hpp"

namespace hbmscope {

std::string_view layer_attention_name(LayerAttention a) {
  switch (a) {
    case LayerAttention::full: return "full";
    case LayerAttention::sliding: return "sliding";
    case LayerAttention::chunked: return "chunked";
  }
  return "";
}

namespace {

[[noreturn]] void refuse(const ModelConfig& m, const std::string& what) {
  throw Error("model config '" + m.id + "': " + what);
}

std::string kind_name(const ModelConfig& m, LayerAttention a) {
  return m.mla && a == LayerAttention::full ? std::string("mla") : std::string(layer_attention_name(a));
}

}  // namespace

void validate(const ModelConfig& m) {
  if (m.layers.empty()) refuse(m, "no layers");
  if (m.heads == 0) refuse(m, "num_attention_heads must be positive");
  if (m.kv_heads == 0) refuse(m, "num_key_value_heads must be positive");
  if (m.heads % m.kv_heads != 0)
    refuse(m, "num_attention_heads (" + std::to_string(m.heads) + ") is not a multiple of num_key_value_heads (" +
                  std::to_string(m.kv_heads) + ")");
  if (m.head_dim == 0) refuse(m, "head_dim must be positive");
  const auto has = [&](LayerAttention a) { return std::find(m.layers.begin(), m.layers.end(), a) != m.layers.end(); };
  if (has(LayerAttention::sliding) && m.window == 0) refuse(m, "sliding layers without a window (sliding_window)");
  if (has(LayerAttention::chunked) && m.chunk == 0) refuse(m, "chunked layers without a chunk (attention_chunk_size)");
  if (m.mla) {
    const MlaDims& d = *m.mla;
    if (d.kv_lora_rank == 0 || d.qk_rope_head_dim == 0 || d.qk_nope_head_dim == 0 || d.v_head_dim == 0)
      refuse(m, "MLA needs positive kv_lora_rank, qk_rope_head_dim, qk_nope_head_dim and v_head_dim");
    if (has(LayerAttention::sliding) || has(LayerAttention::chunked))
      refuse(m, "MLA with sliding or chunked layers is not modelled");
  }
}

std::vector<LayerKind> layer_kinds(const ModelConfig& m) {
  std::vector<LayerKind> kinds;
  for (std::size_t i = 0; i < m.layers.size(); ++i) {
    auto it = std::find_if(kinds.begin(), kinds.end(), [&](const LayerKind& k) { return k.attention == m.layers[i]; });
    if (it == kinds.end()) kinds.push_back({kind_name(m, m.layers[i]), m.layers[i], 1, i});
    else ++it->layers;
  }
  return kinds;
}

std::string layer_pattern(const ModelConfig& m) {
  const auto& l = m.layers;
  const std::size_t n = l.size();
  if (n == 0) return "no layers";
  // The shortest period that repeats at least twice, else the layers as runs.
  std::size_t period = n;
  for (std::size_t p = 1; p <= n / 2 && period == n; ++p) {
    bool ok = true;
    for (std::size_t i = p; i < n && ok; ++i) ok = l[i] == l[i - p];
    if (ok) period = p;
  }
  const auto runs = [&](std::size_t from, std::size_t to) {
    std::string out;
    for (std::size_t i = from; i < to;) {
      std::size_t j = i;
      while (j < to && l[j] == l[i]) ++j;
      out += (out.empty() ? "" : ", ") + std::to_string(j - i) + " " + kind_name(m, l[i]);
      i = j;
    }
    return out;
  };
  if (period == n) return runs(0, n);
  const std::string one = runs(0, period);
  const std::size_t reps = n / period, rest = n % period;
  const bool single = one.find(',') == std::string::npos;
  if (single && rest == 0) return runs(0, n);
  std::string out = "(" + one + ") × " + std::to_string(reps);
  if (rest) out += ", " + runs(0, rest);
  return out;
}

std::string layer_counts(const ModelConfig& m) {
  std::string out;
  for (const LayerKind& k : layer_kinds(m)) {
    out += (out.empty() ? "" : " + ") + std::to_string(k.layers) + " " + k.name;
    if (k.attention == LayerAttention::sliding) out += " (W " + std::to_string(m.window) + ")";
    if (k.attention == LayerAttention::chunked) out += " (C " + std::to_string(m.chunk) + ")";
  }
  return out;
}

Shape layer_shape(const ModelConfig& m, const LayerKind& k, const Shape& base) {
  Shape s = base;
  s.causal = true;
  s.heads = m.heads;
  s.kv_heads = m.kv_heads;
  s.head_dim = m.head_dim;
  s.head_dim_v = m.head_dim_v;
  s.window = k.attention == LayerAttention::sliding ? m.window : 0;
  s.chunk = k.attention == LayerAttention::chunked ? m.chunk : 0;
  s.latent_kv = false;
  if (m.mla) {
    const MlaDims& d = *m.mla;
    if (base.decode) {  // absorbed: the latent and its RoPE key are K, the latent is V
      s.latent_kv = true;
      s.kv_heads = 1;
      s.head_dim = checked_add(d.kv_lora_rank, d.qk_rope_head_dim, "MLA head dim");
      s.head_dim_v = d.kv_lora_rank;
    } else {  // un-absorbed: K and V per head, made from the latent
      s.kv_heads = m.heads;
      s.head_dim = checked_add(d.qk_nope_head_dim, d.qk_rope_head_dim, "MLA head dim");
      s.head_dim_v = d.v_head_dim;
    }
  }
  if (s.head_dim_v == s.head_dim) s.head_dim_v = 0;  // one form per shape
  return s;
}

std::uint64_t kv_bytes_per_token(const ModelConfig& m, const LayerKind& /*k*/, Dtype kv) {
  if (m.mla)
    return checked_mul(checked_add(m.mla->kv_lora_rank, m.mla->qk_rope_head_dim, "MLA cache"), elem_bytes(kv),
                       "KV cache bytes per token");
  const std::uint64_t dv = m.head_dim_v != 0 ? m.head_dim_v : m.head_dim;
  return checked_product("KV cache bytes per token", m.kv_heads, checked_add(m.head_dim, dv, "head dims"),
                         elem_bytes(kv));
}

}  // namespace hbmscope
