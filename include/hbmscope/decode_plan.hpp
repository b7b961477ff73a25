#pragma once
// Host-side decisions of the split-KV decode kernels (src/cuda/decode.cu) that
// need no GPU: which instantiation runs, the split and page geometry, launch
// grids, buffer sizes, the block table. Plain C++ (src/cuda/decode_plan.cpp),
// covered by CPU tests (tests/test_decode_emulation.cpp).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "hbmscope/launch_plan.hpp"
#include "hbmscope/mask.hpp"
#include "hbmscope/shape.hpp"

namespace hbmscope {

// Keys per shared-memory tile of the split kernel; a split is any whole
// number of tokens (the model's key blocks), cut into tiles from its start.
inline constexpr std::uint64_t decode_tile_keys = 64;
inline constexpr std::uint32_t decode_threads = 128;  // 4 warps
inline constexpr std::uint64_t decode_max_rows = 64;  // packed rows per CTA (4 m-tiles of 16)

// Head dims the decode kernels are compiled for.
bool decode_supports(std::uint64_t head_dim);

struct DecodePlan {
  std::uint64_t head_dim = 0;
  std::uint64_t m_tiles = 1;     // 16-row m-tiles per CTA: 1, 2 or 4
  std::uint64_t row_blocks = 1;  // CTAs per kv head along the G*Nq packed rows
  bool paged = false;
  std::uint64_t splits = 1;
  std::uint64_t split_tokens = 0;  // tokens per split (the last may be shorter or empty)
  std::uint64_t kv_stride = 0;     // contiguous: token rows per (batch, kv head) = seq_kv
  std::uint64_t page_size = 0;     // paged
  std::uint64_t max_pages = 0;     // block-table row length: ceil(seq_kv / P)
  std::uint64_t pages = 0;         // pages in the pool: sum_b ceil(L_b / P)
  std::uint64_t rows = 0;          // output rows B*H*Nq
  LaunchGeometry split;            // grid (splits, Hkv * row_blocks, B)
  LaunchGeometry combine;          // grid (ceil(rows / 4)); unused when splits == 1
};

// The keys a decode step of a sequence of `len` cached tokens reads: those
// some new token sees, [first, len) (mask.hpp's visible keys of token 0 to
// the end): all of them, or with s.window the last min(len, W + Nq - 1), with
// s.chunk those from the current chunk's start.
KeyRange decode_read_keys(const Shape& s, std::uint64_t len);

// Tokens per split: the read keys of the longest (ragged batches: of the
// sequence with the most read keys) cut into whole key blocks of block_cols
// shared out evenly, ceil(ceil(keys / Bc) / splits) * Bc (FlashAttention-2's
// n_blocks_per_split); split j of a sequence reads [first + j*T, first +
// (j+1)*T) of its read keys, clamped to its length. Without a window or a
// chunk this is the model's blocks_per_split(s, splits) * Bc.
std::uint64_t decode_split_tokens(const Shape& s, std::uint64_t splits);

// The plan for decode shape `s` (decode.hpp: seq_q new tokens, context
// lengths, block_cols, page_size, window or chunk) run with `splits` splits of
// decode_split_tokens(s, splits) tokens; through a block table of s.page_size
// pages when `paged`. Throws Error past the kernels' limits (32-bit lengths,
// grid sizes, head dims).
DecodePlan decode_plan(const Shape& s, bool paged, std::uint64_t splits);

// Dynamic shared memory of the split kernel: Q rows + K and V stages.
std::size_t decode_smem_bytes(std::uint64_t head_dim, std::uint64_t m_tiles);

// A block table [B][max_pages]: every page of the pool used exactly once, in
// an order shuffled by `seed` (so consecutive tokens' pages are not
// adjacent, as in a serving cache); slots past a sequence's pages are -1.
std::vector<std::int32_t> decode_block_table(const Shape& s, const DecodePlan& plan, std::uint64_t seed);

// Why the decode kernels cannot run `s` (not a decode row, dtype, head dim),
// or nothing when they can.
std::optional<std::string> decode_unsupported_reason(const Shape& s);

// The CPU reference's cost, sum_b L_b * H * Nq * d multiply-adds, above which
// validation takes a smaller shape. Lower than prefill's validation_budget:
// random K/V for the reference is generated on the host, and a decode row's
// cache is large for its cost (Hkv / (H * Nq) values per unit).
inline constexpr std::uint64_t decode_validation_budget = 1ull << 28;

// The shape validation runs on: `s` itself when its CPU reference is cheap
// (cost <= decode_validation_budget), else at most 2 sequences and
// 2 kv heads (the GQA group, Nq, head dim, splits and page size kept), each
// context cut to 1000 + its length mod 1000 tokens (ragged, and not a multiple
// of the tile or page) if still too costly, a window or chunk with it
// (cut_band, launch_plan.hpp). `s.splits` must be set.
Shape decode_validation_shape(const Shape& s);

// Device bytes of the decode kernels for a plan: Q, O, K, V (contiguous or the
// page pool), LSE, partials, block table and lengths. Throws Error on overflow.
std::uint64_t decode_footprint(const Shape& s, const DecodePlan& plan);

}  // namespace hbmscope
