#pragma once
// Index maps of the split-KV decode kernels (decode_attention.cuh): which
// tokens a split reads, which query head and token a packed row is, where a
// token's K/V row lives (contiguous or paged cache), which keys a row sees,
// which warp owns which rows and keys, and where partial results go.
// constexpr for host and device, so that the CPU emulation
// (tests/test_decode_emulation.cpp) runs the very functions the kernel uses.
// The mma/ldmatrix fragment maps are flash_layout.hpp's.
#include "flash_layout.hpp"

namespace hbmscope::decode {

// Keys per pipeline stage (one shared-memory tile of K and one of V).
inline constexpr int tile_keys = 64;
// Warps per CTA; each owns one 16-row m-tile and a slice of every key tile.
inline constexpr int warps = 4;
inline constexpr int threads = warps * 32;

struct Range {
  long long begin = 0;
  long long end = 0;  // exclusive; end <= begin: empty
  friend constexpr bool operator==(const Range&, const Range&) = default;
};

// Tokens per split: the key tiles of the longest sequence shared out evenly
// (FlashAttention-2's n_blocks_per_split), so a split is whole tiles and
// trailing splits of a short sequence may be empty.
HBMSCOPE_HD constexpr long long split_tokens(long long max_len, int splits) {
  const long long tiles = (max_len + tile_keys - 1) / tile_keys;
  const long long per_split = (tiles + splits - 1) / splits;
  return (per_split > 0 ? per_split : 1) * tile_keys;
}

// The mask of sequence b's new tokens (flash_layout.hpp's KeyMask): token t
// of seq_q sits at position len - seq_q + t, the keys are the len cached
// tokens; causal, with a sliding window or a chunk (0: none).
HBMSCOPE_HD constexpr flash::KeyMask sequence_mask(long long len, int seq_q, bool causal, int window, int chunk) {
  return {static_cast<int>(len), causal, static_cast<int>(len) - seq_q, window, chunk};
}

// The first key some new token sees: token 0's first (spans only move right
// as the token grows). A decode step reads keys [first, len) only: the last
// min(len, W + seq_q - 1) with a window, the current chunk with a chunk.
HBMSCOPE_HD constexpr long long first_visible_key(const flash::KeyMask& m) {
  const flash::KeySpan r = flash::row_keys(0, m);
  return r.end > r.begin ? r.begin : 0;
}

// The keys split `split` of a sequence reads: the visible keys [first, len)
// cut into splits of tokens_per_split from `first`, the last one clamped to
// len (empty when the visible keys end before the split starts).
HBMSCOPE_HD constexpr Range split_range(int split, long long tokens_per_split, long long first, long long len) {
  const long long b = first + static_cast<long long>(split) * tokens_per_split;
  const long long e = b + tokens_per_split < len ? b + tokens_per_split : len;
  return {b, e};
}

HBMSCOPE_HD constexpr int range_tiles(const Range& r) {
  return r.end > r.begin ? static_cast<int>((r.end - r.begin + tile_keys - 1) / tile_keys) : 0;
}

// GQA packing: the query heads of one kv head are consecutive in Q, so the
// group's (head, token) pairs form rows r = head_in_group * seq_q + token, and
// row r of kv head h of batch b is row (b * heads + h * group) * seq_q + r of
// Q and O (and of the LSE and partial buffers).
struct HeadToken {
  int head_in_group = 0;
  int token = 0;
  friend constexpr bool operator==(const HeadToken&, const HeadToken&) = default;
};
HBMSCOPE_HD constexpr HeadToken packed_row(int row, int seq_q) { return {row / seq_q, row % seq_q}; }
HBMSCOPE_HD constexpr long long first_group_row(int batch, int kv_head, int heads, int group, int seq_q) {
  return (static_cast<long long>(batch) * heads + static_cast<long long>(kv_head) * group) * seq_q;
}

// Whether token `token` sees key `key` (sequence_mask) inside a split that
// reads keys before split_end.
HBMSCOPE_HD constexpr bool key_visible(long long key, long long split_end, int token, const flash::KeyMask& m) {
  return key < split_end && flash::key_visible(token, static_cast<int>(key), m);
}
// Whether the tile starting at key k0 needs per-element masking: it runs past
// the split, past the first token's last visible key (causal), or starts
// before the last token's first visible key (a window or a chunk, with
// several new tokens).
HBMSCOPE_HD constexpr bool tile_needs_mask(long long k0, long long split_end, int seq_q, const flash::KeyMask& m) {
  const long long last = k0 + tile_keys - 1;
  return last >= split_end || last >= flash::row_keys(0, m).end || k0 < flash::row_keys(seq_q - 1, m).begin;
}

// Element offset of the first value of a token's K (or V) row.
// Contiguous cache: [batch][kv_heads][kv_stride][d], kv_stride >= every length.
HBMSCOPE_HD constexpr long long contiguous_row(int batch, int kv_head, long long token, int kv_heads,
                                               long long kv_stride, int d) {
  return ((static_cast<long long>(batch) * kv_heads + kv_head) * kv_stride + token) * d;
}
// Paged cache: pages of [kv_heads][page_size][d]; token t of a sequence is in
// page block_table[t / page_size] at slot t % page_size.
HBMSCOPE_HD constexpr long long page_of(long long token, int page_size) { return token / page_size; }
HBMSCOPE_HD constexpr long long paged_slot_row(int page, int kv_head, int slot, int kv_heads, int page_size, int d) {
  return ((static_cast<long long>(page) * kv_heads + kv_head) * page_size + slot) * d;
}
HBMSCOPE_HD constexpr long long paged_row(int page, int kv_head, long long token, int kv_heads, int page_size,
                                          int d) {
  return paged_slot_row(page, kv_head, static_cast<int>(token % page_size), kv_heads, page_size, d);
}
// A token's page index in its sequence and its slot in that page, from one
// division, a 32-bit one while the token fits (a 64-bit division is a long
// subroutine on the GPU).
struct PageSlot {
  long long page_index = 0;
  int slot = 0;
};
HBMSCOPE_HD constexpr PageSlot page_slot(long long token, int page_size) {
  if (token >= 0 && token <= 0x7fffffffLL) {
    const int t = static_cast<int>(token);
    const int pg = t / page_size;
    return {pg, t - pg * page_size};
  }
  const long long pg = token / page_size;
  return {pg, static_cast<int>(token - pg * page_size)};
}
// The page and slot `by` tokens on (by >= 0): no division; one step for
// pages of at least `by` tokens.
HBMSCOPE_HD constexpr PageSlot advance(PageSlot ps, int by, int page_size) {
  ps.slot += by;
  while (ps.slot >= page_size) {
    ps.slot -= page_size;
    ++ps.page_index;
  }
  return ps;
}

// Warp roles: m_tiles (1, 2 or 4) 16-row m-tiles per CTA, warps / m_tiles
// warps per m-tile, each taking an equal slice of every key tile.
struct WarpRole {
  int m_tile = 0;
  int key_warp = 0;
  friend constexpr bool operator==(const WarpRole&, const WarpRole&) = default;
};
HBMSCOPE_HD constexpr int key_warps(int m_tiles) { return warps / m_tiles; }
HBMSCOPE_HD constexpr int warp_keys(int m_tiles) { return tile_keys / key_warps(m_tiles); }
HBMSCOPE_HD constexpr WarpRole warp_role(int warp, int m_tiles) {
  return {warp / key_warps(m_tiles), warp % key_warps(m_tiles)};
}

// Partial results of split s for output row `row` (flash-decoding): fp32
// O at [row][splits][d], LSE at [row][splits], so that the combine kernel
// reads one row's splits as one contiguous block.
HBMSCOPE_HD constexpr long long partial_o(long long row, int split, int splits, int d) {
  return (row * splits + split) * d;
}
HBMSCOPE_HD constexpr long long partial_lse(long long row, int split, int splits) { return row * splits + split; }

}  // namespace hbmscope::decode
