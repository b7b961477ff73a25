// The forward grid of the L2 simulation: CTAs in launch order, dense or
// ragged (docs/model.md, "The FlashAttention schedule").
#include "l2_flash.hpp"

#include <algorithm>

#include "hbmscope/checked.hpp"
#include "hbmscope/error.hpp"
#include "hbmscope/model.hpp"

namespace hbmscope::l2 {

namespace {
Shape one_sequence(const Shape& s, std::uint64_t q, std::uint64_t kv) {
  Shape one = s;
  one.seq_lens = {};
  one.batch = 1;
  one.seq_q = q;
  one.seq_kv = kv;
  return one;
}
}  // namespace

FlashGrid::FlashGrid(const Shape& s, Rasterization order) : s_(s), order_(order), ob_(operand_bytes(s)) {
  constexpr std::string_view what = "L2 simulation";
  group_ = group_size(s);
  sequences_ = s.batch;
  heads_ = checked_mul(s.batch, s.heads, what);
  pairs_ = checked_mul(s.batch, s.kv_heads, what);
  auto make = [&](std::uint64_t q, std::uint64_t kv) {
    FlashSeq f;
    f.shape = one_sequence(s, q, kv);
    f.q_blocks = ceil_div(q, s.block_rows);
    f.k_blocks = ceil_div(kv, s.block_cols);
    return f;
  };
  if (s.seq_lens.empty()) {
    seqs_.push_back(make(s.seq_q, s.seq_kv));
    ctas_ = checked_product(what, s.batch, s.heads, seqs_[0].q_blocks);
    max_kb_ = seqs_[0].k_blocks;
    return;
  }
  seqs_.reserve(s.seq_lens.size());
  std::uint64_t at = 0;
  for (std::size_t b = 0; b < s.seq_lens.size(); ++b) {
    FlashSeq f = make(s.seq_lens[b].q, s.seq_lens[b].kv);
    f.first_cta = at;
    f.first_pair = b * s.kv_heads;
    f.first_head = b * s.heads;
    at = checked_add(at, checked_mul(s.heads, f.q_blocks, what), what);
    max_kb_ = std::max(max_kb_, f.k_blocks);
    seqs_.push_back(std::move(f));
  }
  if (seqs_.size() == 1) {  // one sequence: the dense layout
    ctas_ = at;
    return;
  }
  ctas_ = at;
}

FlashCta FlashGrid::cta(std::uint64_t id) const {
  std::uint64_t b = 0, local = id;
  const FlashSeq* q = &seqs_[0];
  if (seqs_.size() == 1) {
    const std::uint64_t per = s_.heads * q->q_blocks;
    b = id / per;
    local = id % per;
  } else {
    const auto it = std::upper_bound(seqs_.begin(), seqs_.end(), id,
                                     [](std::uint64_t v, const FlashSeq& f) { return v < f.first_cta; });
    q = &*(it - 1);
    b = static_cast<std::uint64_t>(it - 1 - seqs_.begin());
    local = id - q->first_cta;
  }
  FlashCta c;
  c.seq = b;
  if (order_ == Rasterization::query_block_major) {
    c.q_block = local % q->q_blocks;
    c.head = local / q->q_blocks;
  } else {
    c.head = local % s_.heads;
    c.q_block = local / s_.heads;
  }
  c.rows = std::min(s_.block_rows, q->shape.seq_q - c.q_block * s_.block_rows);
  const KeyRange blocks = visible_key_blocks(q->shape, c.q_block);
  c.first = blocks.begin;
  c.end = std::max(blocks.begin, blocks.end);
  c.head_key = b * s_.heads + c.head;
  c.pair = b * s_.kv_heads + c.head / group_;
  return c;
}

std::uint64_t visited_tiles_of(const Shape& one) {
  if (one.window == 0 && one.chunk == 0) return visited_tiles(one);
  // Windows and chunks: summed over query blocks where that is quick, else
  // bounded by every tile (a cost estimate only then).
  const std::uint64_t nqb = ceil_div(one.seq_q, one.block_rows);
  if (nqb > (std::uint64_t{1} << 24)) return checked_mul(nqb, ceil_div(one.seq_kv, one.block_cols), "visited tiles");
  std::uint64_t t = 0;
  for (std::uint64_t i = 0; i < nqb; ++i) t += visible_key_blocks(one, i).size();
  return t;
}

std::uint64_t FlashGrid::kv_bytes(std::uint64_t b, std::uint64_t j) const {
  const FlashSeq& f = sequence(b);
  return ob_.kv_col() * std::min(s_.block_cols, f.shape.seq_kv - j * s_.block_cols);
}

}  // namespace hbmscope::l2
