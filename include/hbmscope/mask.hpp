#pragma once
// Which keys a query sees (docs/model.md, "Masks"): none hidden, causal, a
// sliding window or a chunk, all bottom-right aligned (query row r of Nq rows
// against Nkv keys sits at position p = r + Nkv - Nq). Every count of the
// model, the tile walk, the L2 simulation and the kernels' index maps goes
// through these functions. Pure and exact.
#include <cstdint>

#include "hbmscope/shape.hpp"

namespace hbmscope {

// Keys [begin, end) of one sequence: a split's keys, a query row's visible keys.
struct KeyRange {
  std::uint64_t begin = 0, end = 0;
  bool empty() const { return begin >= end; }
  std::uint64_t size() const { return empty() ? 0 : end - begin; }
  friend bool operator==(const KeyRange&, const KeyRange&) = default;
};

// Whether any key is hidden from some query: causal, window or chunk.
inline bool masked(const Shape& s) { return s.causal || s.window != 0 || s.chunk != 0; }

// Keys that query row `row` (0-based, row < nq) of a sequence of nq queries
// against nkv keys sees, with s's mask: all nkv; causal: c <= p (p = row + nkv - nq);
// window W: p - W < c <= p; chunk C: floor(p / C) * C <= c <= p. Empty when
// p < 0 (more queries than keys under a causal mask).
KeyRange visible_keys(const Shape& s, std::uint64_t nq, std::uint64_t nkv, std::uint64_t row);
inline KeyRange visible_keys(const Shape& s, std::uint64_t row) {
  return visible_keys(s, s.seq_q, s.seq_kv, row);
}

// Key blocks [begin, end) (of block_cols keys) that query block q_block (of
// block_rows rows) visits: every block holding a key some row of the query
// block sees. The rows' visible ranges overlap or touch, so their union is one
// range and every block in it holds a visible key. Empty when no row sees a key.
KeyRange visible_key_blocks(const Shape& s, std::uint64_t q_block);

// Whether key block k_block holds a key that some row of q_block cannot see
// (the kernels apply the mask element by element only on such tiles).
bool tile_needs_mask(const Shape& s, std::uint64_t q_block, std::uint64_t k_block);

// Sums over one sequence of nq queries against nkv keys (one head), with s's
// mask and blocks Br, Bc (docs/model.md, "Masks"): what every variant counts.
// Exact; an Error when the count passes 2^64. O(log) steps (floor sums), but
// for a chunk that is neither a multiple nor a divisor of Bc:
// O(min(Nq/C, Nkv/Bc, Bc/gcd(C, Bc))), at most about sqrt(Nkv) steps.

// (query, key) pairs the mask leaves visible: P.
std::uint64_t visible_pairs(const Shape& s, std::uint64_t nq, std::uint64_t nkv);
// The first key some query sees (keys before it are never needed: the floor
// reads [first_seen_key, nkv)); 0 without a window or chunk.
std::uint64_t first_seen_key(const Shape& s, std::uint64_t nq, std::uint64_t nkv);
// (query block, key block) tiles visited, over all query blocks: T.
std::uint64_t visited_tiles(const Shape& s, std::uint64_t nq, std::uint64_t nkv);
// Key columns of the visited tiles, summed over the query blocks: C.
std::uint64_t streamed_key_columns(const Shape& s, std::uint64_t nq, std::uint64_t nkv);
// Query rows of the visited tiles, summed over the key blocks: R.
std::uint64_t streamed_query_rows(const Shape& s, std::uint64_t nq, std::uint64_t nkv);
// Columns of the key blocks that some query block visits (key-block-outer
// loops read these): nkv less the key blocks wholly before first_seen_key.
std::uint64_t visited_key_columns(const Shape& s, std::uint64_t nq, std::uint64_t nkv);

}  // namespace hbmscope
