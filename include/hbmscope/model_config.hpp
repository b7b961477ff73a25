#pragma once
// A whole model's attention, as its Hugging Face config.json describes it
// (hf_config.hpp reads one): per decoder layer full, sliding-window or chunked
// attention, and multi-head latent attention (MLA). Pure data and the shape of
// each kind of layer; whole_model.hpp counts a step of the model. The
// conventions (which layers are local, what a config's window means) are in
// docs/models.md.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hbmscope/shape.hpp"

namespace hbmscope {

enum class LayerAttention { full, sliding, chunked };
std::string_view layer_attention_name(LayerAttention a);  // "full", "sliding", "chunked"

// MLA's dimensions (DeepSeek-V2/V3's config.json keys).
struct MlaDims {
  std::uint64_t kv_lora_rank = 0;      // r: the latent cached per token
  std::uint64_t qk_rope_head_dim = 0;  // p: the decoupled RoPE part of Q and K, cached beside it
  std::uint64_t qk_nope_head_dim = 0;  // the part of Q and K made from the latent (prefill)
  std::uint64_t v_head_dim = 0;        // V's head dim (prefill)
  std::uint64_t q_lora_rank = 0;       // 0: Q has no low-rank projection (no effect on attention bytes)
  friend bool operator==(const MlaDims&, const MlaDims&) = default;
};

struct ModelConfig {
  std::string id;          // names its rows (model_config): a shipped name, or the file as given
  std::string name;        // for people: "Llama-3.1 8B" (shipped), else the model_type
  std::string model_type;  // config.json's (its text_config's) model_type; may be empty
  std::string source;      // where the figures come from (shipped: the config.json's URL)
  std::vector<std::string> notes;  // conventions applied (shipped configs)
  std::uint64_t heads = 0;         // num_attention_heads
  std::uint64_t kv_heads = 0;      // num_key_value_heads
  std::uint64_t head_dim = 0;      // d of Q and K
  std::uint64_t head_dim_v = 0;    // d of V and O; 0: head_dim
  std::uint64_t window = 0;        // W of the sliding layers, hbmscope's convention (mask.hpp)
  std::uint64_t chunk = 0;         // C of the chunked layers
  std::optional<Dtype> dtype;      // torch_dtype, when the config gives one
  std::optional<MlaDims> mla;      // set: every layer is MLA
  std::vector<LayerAttention> layers;  // one per decoder layer, in order
};
using ModelConfigRef = std::shared_ptr<const ModelConfig>;

// Throws Error naming the model and the field when it cannot be counted.
void validate(const ModelConfig& m);

// All the layers with the same attention: a line of a whole-model report.
struct LayerKind {
  std::string name;  // "full", "sliding", "chunked", or "mla" (MLA, full attention)
  LayerAttention attention = LayerAttention::full;
  std::uint64_t layers = 0;  // how many
  std::uint64_t first = 0;   // index of its first layer
};
// The kinds of m's layers, ordered by their first layer.
std::vector<LayerKind> layer_kinds(const ModelConfig& m);

// One period of the layer pattern and how often it repeats:
// "(5 sliding, 1 full) × 10, 2 sliding"; "32 full"; "(3 chunked, 1 full) × 12".
std::string layer_pattern(const ModelConfig& m);
// "52 sliding (W 1024) + 10 full", "36 chunked (C 8192) + 12 full", "61 mla".
std::string layer_counts(const ModelConfig& m);

// The attention shape of one layer of kind k in a step of the model: base's
// batch, sequences, decode fields, dtypes, blocks and pass, with the model's
// heads, head dims, window or chunk, always causal. MLA prefill runs
// un-absorbed attention (H heads, Q and K of qk_nope + qk_rope, V of
// v_head_dim); an MLA decode step the absorbed form (latent_kv: one KV head of
// r + p values, Q of r + p and O of r per query head).
Shape layer_shape(const ModelConfig& m, const LayerKind& k, const Shape& base);

// K and V bytes one token takes in one layer of kind k in the cache, elements
// of kv bytes: kv_heads × (d + dv) × e; MLA: (r + p) × e (the latent and the
// RoPE key, shared by every head, prefill or decode).
std::uint64_t kv_bytes_per_token(const ModelConfig& m, const LayerKind& k, Dtype kv);

// What a whole-model row adds to a Row (report.hpp): which model, which kind
// of layer, and its KV cache.
struct ModelLayers {
  std::string config;               // the model config's id (rows' model_config)
  std::string kind;                 // a LayerKind name, or "total"
  std::uint64_t layers = 0;         // layers of this kind; the total: all of the model's
  std::uint64_t kv_bytes_per_token = 0;  // K and V bytes one token of one sequence takes in these layers
  std::uint64_t kv_cache_tokens = 0;     // tokens one of these layers holds for the batch (0 on the total)
  std::uint64_t kv_cache_bytes = 0;      // the cache these layers hold for the whole batch at this step
  // The total of kinds with different masks (sliding and full layers, say):
  // its shape then has no window or chunk, and the printers say "mixed".
  bool mixed_masks = false;
  friend bool operator==(const ModelLayers&, const ModelLayers&) = default;
};
inline constexpr std::string_view total_kind = "total";

}  // namespace hbmscope
