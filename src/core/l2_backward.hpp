#pragma once
// FlashAttention-2's backward pass through the simulated L2 (docs/model.md,
// "The backward pass in the L2 simulation"): the preprocessing (D and the dQ
// accumulator), the main loop (one CTA per key block on the schedule's slots,
// the query blocks streamed past it), the dQ conversion and, with GQA, the dK,
// dV reduction, as one trace. Internal to src/core.
#include <cstdint>
#include <functional>

#include "hbmscope/l2_sim.hpp"
#include "hbmscope/mask.hpp"
#include "hbmscope/tile_bytes.hpp"
#include "l2_flash.hpp"
#include "l2_tally.hpp"

namespace hbmscope::l2 {

// The backward grid: one CTA per (sequence, head, key block) in launch order
// (key block fastest, then head, then sequence; head-major: head fastest).
// (Counts in 32 bits: millions of them are kept at once; BackwardGrid::cta
// refuses a grid whose counts do not fit. A key block's keys, as many as
// --block-cols, in 64: a test simulates a key block of 5e9.)
// (No default values: arrays of millions are made and then written whole;
// BackwardCta{} is all zeros.)
struct BackwardCta {
  std::uint64_t cols;            // real keys of the key block
  std::uint32_t seq, head, k_block;
  std::uint32_t first, end;      // query blocks [first, end) that see the key block
  std::uint32_t head_key;
  std::uint64_t steps() const { return end > first ? std::uint64_t{end} - first : 1; }
  // Its (sequence, kv head), in order: the K/V its heads share (group: query
  // heads a kv head).
  std::uint64_t pair(std::uint64_t kv_heads, std::uint64_t group) const {
    return std::uint64_t{seq} * kv_heads + head / group;
  }
};

class BackwardGrid {
 public:
  BackwardGrid(const Shape& s, Rasterization order);
  std::uint64_t ctas() const { return ctas_; }
  BackwardCta cta(std::uint64_t id) const;
  // Its (sequence, kv head), in order: the K/V its heads share.
  std::uint64_t pair(const BackwardCta& c) const { return c.pair(s_.kv_heads, fwd_.group()); }
  // Every CTA in launch order into out[0, ctas()): cta(id) for each id, a
  // sequence at a time.
  void all(BackwardCta* out) const;
  const FlashGrid& forward() const { return fwd_; }
  // Per-row and per-key bytes of the backward's operands.
  std::uint64_t ql_row() const { return ob_.q_row + 4; }  // Q and the fp32 log-sum-exp
  std::uint64_t do_row() const { return ob_.o_row; }      // dO (as O)
  std::uint64_t o_row() const { return ob_.o_row; }
  std::uint64_t acc_row() const { return 4 * s_.head_dim; }  // fp32 dQ accumulator
  std::uint64_t dq_row() const { return ob_.q_row; }
  std::uint64_t kv_col() const { return ob_.kv_col(); }   // K and V (and dK, dV)
  // Query blocks [first, end) whose rows see some key of key block j of sequence b.
  KeyRange query_blocks_seeing(std::uint64_t b, std::uint64_t j) const;

 private:
  const Shape& s_;
  Rasterization order_;
  FlashGrid fwd_;
  OperandBytes ob_;
  std::uint64_t ctas_ = 0;
  void fits(std::uint64_t b) const;  // refuses a sequence whose counts pass 32 bits
  BackwardCta make(std::uint64_t b, std::uint64_t head, std::uint64_t k_block, KeyRange q) const;
  std::vector<std::uint64_t> first_cta_;  // ragged: CTAs before sequence b
  std::vector<KeyRange> seeing_;          // dense: the query blocks seeing each key block
};

FlashStats enumerate_backward(const Shape& s, const L2SimConfig& c, Tally& t);
void trace_backward(const Shape& s, const L2SimConfig& c, const std::function<void(const L2Access&)>& f);
// The backward pass by either method: the runs take it in waves where there is
// no mask and one sequence length (l2_backward_waves.cpp), elsewhere through
// the segment engine or the enumeration, whichever costs less.
FlashStats flash_backward(const Shape& s, const L2SimConfig& c, Tally& t);
bool backward_in_waves(const Shape& s);
FlashStats waves_backward(const Shape& s, const L2SimConfig& c, Tally& t);
std::uint64_t waves_backward_work(const Shape& s, const L2SimConfig& c);
// Masks and ragged batches: the main loop through the segment engine
// (l2_backward_segments.cpp).
bool backward_in_segments(const Shape& s);
// Its main loop by rows in query-block-major order (chunks that part the
// heads, each part a head) where bounds settle most re-reads
// (l2_backward_rows.cpp), else through the engine; tests choose
// (by_rows_checked: every read's exact distance held to its bounds, an Error
// where one is not, and the keys outside the main loop in 128 bits;
// by_rows_every_head: no head takes an earlier head's counts;
// by_rows_then_engine: the main loop handed to the engine at the first read
// the bounds leave open).
enum class MainLoop { automatic, by_rows, by_rows_checked, by_rows_every_head, by_rows_then_engine, engine };
FlashStats segments_backward(const Shape& s, const L2SimConfig& c, Tally& t, MainLoop how = MainLoop::automatic);
// Its work (~0 where it does not apply or would not fit in memory), with
// the smallest L2 size asked for.
std::uint64_t segments_backward_work(const Shape& s, const L2SimConfig& c, std::uint64_t smallest_l2);
std::uint64_t backward_enum_accesses(const Shape& s);
std::uint64_t backward_work(const Shape& s, const L2SimConfig& c);

}  // namespace hbmscope::l2
