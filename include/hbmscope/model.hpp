#pragma once
// The analytic HBM byte model of the design note (see docs/model.md).
// Every count is exact and 64-bit; a shape whose count overflows throws Error.
// Byte counts and FLOPs cover the whole batch: every sequence of a ragged one
// (Shape::seq_lens), each mask (causal, window, chunk) and operand shape (DV,
// kv dtype, latent KV) as docs/model.md derives them. The per-head tile counts
// (streamed_key_columns, visited_tiles, ...) are of one seq_q x seq_kv
// sequence; mask.hpp has them for any other, batch_* sum them over a batch.
#include <cstdint>

#include "hbmscope/shape.hpp"

namespace hbmscope {

// Number of key columns streamed past all query blocks of one head in
// FlashAttention-2 order (C in docs/model.md): ceil(Nq/Br)*Nkv without a mask,
// fewer with a causal mask, a window or a chunk.
std::uint64_t streamed_key_columns(const Shape& s);

// Standard three-kernel attention: S and P each written and read once.
std::uint64_t standard_bytes(const Shape& s);
// FlashAttention-2, every K/V tile re-read from HBM for every query block.
std::uint64_t flash_no_l2_bytes(const Shape& s);
// Every value read or written exactly once.
std::uint64_t floor_bytes(const Shape& s);
// Forward FLOPs: 2*d + 2*DV (QK^T and PV) per visible (query, key) pair and
// head: 4*d*Nq*Nkv without a mask, about half of it causal.
std::uint64_t attention_flops(const Shape& s);
// The (query, key) pairs of one head of one sequence: Nq*Nkv, or the visible
// ones under the mask (row r sees keys c <= r + Nkv - Nq when causal):
// Nq = Nkv = N gives N(N+1)/2.
std::uint64_t visible_pairs_per_head(const Shape& s);
// The same summed over the batch's sequences (batch x the one above when dense).
std::uint64_t batch_visible_pairs(const Shape& s);
// The log-sum-exp (fp32 per query row and head) a training forward pass writes
// for the backward: counted in --pass fwdbwd for flash_no_l2 and floor.
std::uint64_t forward_lse_bytes(const Shape& s);

// (query block, key block) tiles visited for one head (T in docs/model.md):
// ceil(Nq/Br)*ceil(Nkv/Bc) without a mask. The same pairs in either loop order.
std::uint64_t visited_tiles(const Shape& s);
// Tiles one head visits over the whole batch: batch x visited_tiles, or the
// sum over the sequences of a ragged batch.
std::uint64_t batch_visited_tiles(const Shape& s);
// Query rows streamed past all key blocks of one head (R in docs/model.md): the
// real rows of each visited tile's query block, ceil(Nkv/Bc)*Nq without a mask.
std::uint64_t streamed_query_rows(const Shape& s);

// FlashAttention-1 forward loop order (key/value blocks outer, query blocks
// inner): Q, O and the fp32 row statistics l, m re-read and O, l, m re-written
// for every visited tile; O, l, m initialised in HBM first. Forward pass only.
std::uint64_t flash1_no_l2_bytes(const Shape& s);

// Backward pass (docs/model.md lists every read and write). Standard: five
// kernels with P kept from the forward pass. FlashAttention-2: the D = rowsum(dO o O)
// preprocessing, key blocks outer with dQ accumulated in fp32 by atomic adds, the
// dQ conversion; with GQA, dK and dV per query head then summed per kv head.
std::uint64_t standard_bwd_bytes(const Shape& s);
std::uint64_t flash_bwd_no_l2_bytes(const Shape& s);
// Each backward input (Q, K, V, O, dO, log-sum-exp) read once, each output
// (dQ, dK, dV) written once.
std::uint64_t floor_bwd_bytes(const Shape& s);

// The bytes standard attention holds in device memory at once (B in all): Q,
// K, V, O and its Nq x Nkv matrices, two in the forward pass (S, P), three in
// the backward (P, dP, dS, with dO, dQ, dK, dV). Saturates at 2^64 - 1: it is
// compared with a device's memory, never added.
std::uint64_t standard_resident_bytes(const Shape& s);

// FLOPs of s.pass per visible (query, key) pair and head: forward 2d + 2DV
// (4d when DV = d), backward 6d + 4DV (2.5x), forward + backward 8d + 6DV
// (3.5x); refused only when the final count overflows 64 bits.
std::uint64_t pass_flops(const Shape& s);

struct ModelBytes {
  std::uint64_t standard = 0;
  std::uint64_t flash_no_l2 = 0;
  std::uint64_t floor = 0;
  std::uint64_t flops = 0;
};

// The three variants' totals and the FLOPs of s.pass (forward, backward, or
// their sum for fwdbwd, with the forward's log-sum-exp write added to
// flash_no_l2 and floor). For the forward pass these are the functions above.
ModelBytes evaluate(const Shape& s);

inline double intensity(std::uint64_t flops, std::uint64_t bytes) {
  return bytes == 0 ? 0.0 : static_cast<double>(flops) / static_cast<double>(bytes);
}

}  // namespace hbmscope
