#pragma once
// Decode attention (docs/model.md, "Decode attention"): Nq = 1..8 new query
// tokens per sequence against a KV cache of L_b tokens, over a batch whose
// context lengths may differ (ragged). Pure and exact, like model.hpp.
//
// A decode problem is a Shape with decode = true (shape.hpp):
//   batch        B, the number of sequences
//   heads        H query heads; kv_heads Hkv (GQA group G = H / Hkv)
//   seq_q        Nq new tokens per sequence, 1..max_decode_seq_q
//   seq_kv       the longest context, max_b L_b (every L_b when context_lengths is empty)
//   context_lengths  L_b per sequence (B of them) for a ragged batch; empty: every L_b = seq_kv
//   head_dim     d; dtype: Q, K, V, O element type (e bytes)
//   block_cols   Bc, the key block a split CTA reads at a time; splits are cut on key-block
//                boundaries of the longest context
//   splits       KV splits asked for (--splits); 0: FlashAttention's heuristic (decode_splits)
//   page_size    P tokens per KV page (decode_paged; --page-size, default 16)
//   causal       with Nq > 1, row r sees keys c < L_b - Nq + r + 1 (FLOPs only; bytes unchanged)
// block_rows and pass do not apply (a decode row is a forward pass).
//
// Kernels (KernelMeasurement.variant) are held against decode_split (packed
// GQA, split-KV + combine) and decode_paged (the same through a block table).
// A kernel's model_bytes are decode_bytes(shape, variant, splits it ran with).
#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

#include "hbmscope/mask.hpp"
#include "hbmscope/shape.hpp"

namespace hbmscope {

inline constexpr std::uint64_t max_decode_seq_q = 8;        // speculative decoding: 1..8 tokens
inline constexpr std::uint64_t default_page_size = 16;      // vLLM's default KV block on CUDA
inline constexpr std::uint64_t max_heuristic_splits = 128;  // FlashAttention-2's cap
inline constexpr std::uint64_t max_decode_splits = 4096;    // --splits upper bound
inline constexpr std::uint64_t decode_block_m = 64;         // FA2 split-KV kernel's query block (kBlockM)
// SM count used when neither --device nor --sms gives one (H100 SXM and H200: 132).
inline constexpr std::uint64_t default_decode_sm_count = 132;

enum class DecodeVariant {
  floor,           // "decode_floor": K, V, Q read once, O written once
  split,           // "decode_split": flash-decoding, GQA packed (one CTA per kv head and split)
  split_unpacked,  // "decode_split_unpacked": one CTA per query head and split, each KV head read G times
  paged,           // "decode_paged": decode_split through a paged cache, whole pages read
};
inline constexpr std::array<DecodeVariant, 4> all_decode_variants{
    DecodeVariant::floor, DecodeVariant::split, DecodeVariant::split_unpacked, DecodeVariant::paged};

std::string_view decode_variant_id(DecodeVariant v);
std::optional<DecodeVariant> parse_decode_variant(std::string_view id);
// Whether one CTA serves all G query heads of a kv head (reads each KV tile once).
bool gqa_packed(DecodeVariant v);

// L_b of sequence b (0-based), seq_kv when the batch is not ragged.
std::uint64_t context_length(const Shape& s, std::uint64_t b);
// Sum_b L_b, exact (checked: refuses overflow).
std::uint64_t total_context(const Shape& s);
// Whether the sequences' lengths differ.
bool ragged(const Shape& s);

// FlashAttention-2's num_splits_heuristic, as it is written: 1 when
// ctas >= 0.8 * sm_slots; otherwise, among the eligible split counts up to
// min(max_splits, sm_slots, n_blocks) (a count is eligible unless it gives the
// same blocks per split as one fewer), the smallest whose wave efficiency
// (ctas*s/sm_slots divided by its ceiling) is >= 0.85 of the best.
std::uint64_t num_splits_heuristic(std::uint64_t ctas, std::uint64_t sm_slots, std::uint64_t n_blocks,
                                   std::uint64_t max_splits);

// CTAs of one split of variant v: B * Hkv * ceil(Nq*G / 64) packed,
// B * H * ceil(Nq / 64) unpacked (FA2 packs the G heads as query rows).
std::uint64_t decode_ctas_per_split(const Shape& s, DecodeVariant v);

// CTAs of one split that read the same kv head's keys: ceil(Nq*G / 64) packed
// (1 unless G*Nq > 64), G * ceil(Nq / 64) unpacked, 1 for decode_floor.
std::uint64_t decode_kv_readers(const Shape& s, DecodeVariant v);

// The split count variant v runs with: s.splits when non-zero, else the
// heuristic with FA2's arguments: (decode_ctas_per_split, 2 * sm_count,
// ceil(seq_kv / Bc), 128). decode_floor: always 1. Throws Error for sm_count 0.
std::uint64_t decode_splits(const Shape& s, DecodeVariant v, std::uint64_t sm_count);

// Key blocks per split: ceil(ceil(seq_kv / Bc) / splits), from the longest
// context as in FA2 (a short sequence may leave its last splits empty).
std::uint64_t blocks_per_split(const Shape& s, std::uint64_t splits);

// Keys [begin, end) of sequence b that split j reads; empty (begin >= end) when
// the sequence ends before the split starts. Empty splits read nothing but still
// write a partial (O = 0, LSE = -inf) that the combine reads, as FA2 does.
KeyRange split_key_range(const Shape& s, std::uint64_t splits, std::uint64_t b, std::uint64_t j);

// Pages of sequence b: ceil(L_b / P).
std::uint64_t context_pages(const Shape& s, std::uint64_t b);

// One variant's HBM bytes, by operand (reads + writes, no L2 reuse).
struct DecodeBytes {
  std::uint64_t total = 0;
  std::uint64_t kv = 0;           // K and V read (papers' "KV bytes")
  std::uint64_t q = 0;            // Q read (once per non-empty split CTA that needs it)
  std::uint64_t o = 0;            // final O written
  std::uint64_t partials = 0;     // fp32 partial O and LSE written by the split kernel, read by the combine
  std::uint64_t block_table = 0;  // int32 page indices read (decode_paged)
};

// Bytes of variant v run with `splits` splits (ignored by decode_floor; a split
// count of 1 means no combine kernel and no partials). Throws Error on overflow.
DecodeBytes decode_bytes(const Shape& s, DecodeVariant v, std::uint64_t splits);

// 4 * H * d * sum_b (visible (query, key) pairs of sequence b): Nq*L_b, less
// Nq(Nq-1)/2 when causal.
std::uint64_t decode_flops(const Shape& s);

}  // namespace hbmscope
