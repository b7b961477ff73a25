#include "hbmscope/mask.hpp"

#include <algorithm>

#include "hbmscope/checked.hpp"

namespace hbmscope {

KeyRange visible_keys(const Shape& s, std::uint64_t nq, std::uint64_t nkv, std::uint64_t row) {
  if (!masked(s)) return {0, nkv};
  // p = row + nkv - nq may be negative (a causal row before the first key).
  if (row + nkv < nq) return {0, 0};
  const std::uint64_t p = row + nkv - nq;
  KeyRange r{0, std::min(nkv, p + 1)};
  if (s.window != 0 && p + 1 > s.window) r.begin = p + 1 - s.window;
  if (s.chunk != 0) r.begin = std::max(r.begin, p / s.chunk * s.chunk);
  return r;
}

KeyRange visible_key_blocks(const Shape& s, std::uint64_t q_block) {
  const std::uint64_t first_row = q_block * s.block_rows;
  const std::uint64_t last_row = std::min(first_row + s.block_rows, s.seq_q) - 1;
  const KeyRange lo = visible_keys(s, first_row);
  const KeyRange hi = visible_keys(s, last_row);
  // begin and end are non-decreasing in the row: the union runs from the first
  // non-empty row's begin to the last row's end.
  if (hi.empty()) return {0, 0};
  // An empty first row means the block holds the row at p = 0, which sees key 0.
  const std::uint64_t begin = lo.empty() ? 0 : lo.begin;
  return {begin / s.block_cols, ceil_div(hi.end, s.block_cols)};
}

bool tile_needs_mask(const Shape& s, std::uint64_t q_block, std::uint64_t k_block) {
  if (!masked(s)) return false;
  const std::uint64_t first_row = q_block * s.block_rows;
  const std::uint64_t last_row = std::min(first_row + s.block_rows, s.seq_q) - 1;
  const std::uint64_t k0 = k_block * s.block_cols;
  const std::uint64_t k1 = std::min(k0 + s.block_cols, s.seq_kv);  // keys [k0, k1)
  // Every row sees the whole tile iff the row with the smallest end and the row
  // with the largest begin both cover it: the first row's end, the last row's begin.
  const KeyRange first = visible_keys(s, first_row);
  const KeyRange last = visible_keys(s, last_row);
  return first.empty() || first.end < k1 || last.begin > k0;
}

}  // namespace hbmscope
