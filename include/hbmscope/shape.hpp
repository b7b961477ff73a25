#pragma once
// One attention problem: what the model counts bytes for and the kernels run.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hbmscope/seq_list.hpp"

namespace hbmscope {

enum class Dtype { fp32, fp16, bf16, fp8 };

std::string_view dtype_name(Dtype d);
std::optional<Dtype> parse_dtype(std::string_view s);
std::uint64_t elem_bytes(Dtype d);

// Which pass the model counts: the forward pass, the backward pass (gradients
// from dO, with what the forward kept), or both in a training step.
enum class Pass { fwd, bwd, fwdbwd };

std::string_view pass_name(Pass p);
std::optional<Pass> parse_pass(std::string_view s);

struct Shape {
  std::uint64_t batch = 1;
  std::uint64_t heads = 1;     // query heads, H
  std::uint64_t kv_heads = 1;  // key/value heads, Hkv (H a multiple of Hkv)
  std::uint64_t seq_q = 4096;  // Nq
  std::uint64_t seq_kv = 4096; // Nkv
  std::uint64_t head_dim = 64; // d
  Dtype dtype = Dtype::bf16;
  std::uint64_t block_rows = 128;  // Br: queries per FlashAttention block
  std::uint64_t block_cols = 128;  // Bc: keys per FlashAttention block
  bool causal = false;
  Pass pass = Pass::fwd;
  // Attention as served (mask.hpp, docs/model.md "Masks" and "Operand shapes").
  // A window or a chunk narrows the causal mask; neither applies without it.
  std::uint64_t window = 0;      // sliding window W: position p sees keys c with p - W < c <= p; 0: none
  std::uint64_t chunk = 0;       // chunked attention C: p sees c <= p with floor(c / C) == floor(p / C); 0: none
  std::uint64_t head_dim_v = 0;  // DV, the head dim of V and O; 0: the same as head_dim (d)
  std::optional<Dtype> kv_dtype; // element type of K and V (the KV cache); unset: dtype
  // MLA in its absorbed form (FlashMLA's decode): one latent KV head of head_dim
  // values per token is K, and its first head_dim_v values are V (no V of its own).
  bool latent_kv = false;
  // Ragged prefill (docs/model.md, "Ragged prefill"): one item per sequence, q
  // queries against kv keys ({L, L} for "L", {Q, KV} for "Q:KV"), each sequence
  // attending only to itself; then batch is their number, seq_q the longest q
  // and seq_kv the longest kv. Empty: batch sequences of seq_q x seq_kv.
  // Prefill rows only; shared, never copied (seq_list.hpp).
  SeqList seq_lens;
  // Decode rows (decode.hpp, docs/model.md "Decode attention"); unused when decode is false.
  bool decode = false;
  SeqList context_lengths;  // ragged batch: L_b per sequence (kv only); empty: all seq_kv
  std::uint64_t splits = 0;      // KV splits asked for (--splits); 0: FlashAttention's heuristic
  std::uint64_t page_size = 16;  // tokens per KV cache page (decode_paged, --page-size)

  friend bool operator==(const Shape&, const Shape&) = default;
};

// Throws Error naming the offending field when the shape cannot be modelled.
void validate(const Shape& s);

// Whether s sets any field of attention as served: a window, a chunk, DV, a
// kv dtype, a latent KV or ragged prefill sequences (reports show them).
inline bool has_served_fields(const Shape& s) {
  return s.window != 0 || s.chunk != 0 || s.head_dim_v != 0 || s.kv_dtype || s.latent_kv || !s.seq_lens.empty();
}

// Whether s is a ragged prefill batch (seq_lens given).
inline bool ragged_prefill(const Shape& s) { return !s.seq_lens.empty(); }
// One group of equal sequences of a ragged prefill batch as a dense shape:
// batch = g.count, seq_q = g.item.q, seq_kv = g.item.kv, no seq_lens.
Shape sequence_shape(const Shape& s, const SeqGroup& g);

std::uint64_t query_blocks(const Shape& s);  // ceil(Nq / Br)
std::uint64_t key_blocks(const Shape& s);    // ceil(Nkv / Bc)
std::uint64_t group_size(const Shape& s);    // H / Hkv

// "4096 x 64 (batch 1, 1 head, bf16, blocks 128 x 128)": names a shape in errors.
std::string describe(const Shape& s);

// Causal visibility: query row r sees key c iff c <= r + (Nkv - Nq).
std::int64_t causal_offset(const Shape& s);

// DV: head_dim_v, or head_dim when it is 0.
inline std::uint64_t value_head_dim(const Shape& s) { return s.head_dim_v != 0 ? s.head_dim_v : s.head_dim; }
// Element type of K and V: kv_dtype, or dtype when unset.
inline Dtype key_value_dtype(const Shape& s) { return s.kv_dtype.value_or(s.dtype); }

}  // namespace hbmscope
