#pragma once
// The masked backward's main loop by rows, without the segment engine, where
// every CTA that reads row sets reads its head's from its first query block to
// the last (causal masks; ragged batches without one): a row set's readers
// then come in one order for all its rows (by their read offsets), so a CTA's
// re-reads are a few runs of one predecessor each, found per head in
// O(CTAs); bounds count most runs by bucket, and the rest are evaluated over
// the CTAs beside them (docs/l2-backward.md, "The backward's main loop by
// rows"). Internal to src/core.
#include <cstdint>
#include <optional>
#include <vector>

#include "big_array.hpp"
#include "l2_backward.hpp"
#include "l2_backward_outside.hpp"
#include "l2_segments.hpp"
#include "l2_tally.hpp"

namespace hbmscope::l2 {

// The main loop as segments_backward lays it out (l2_backward_outside.hpp:
// per CTA and per row), with the slots' count.
struct BackwardLoop : BackwardArrays {
  std::uint64_t slots = 1, heads = 1;  // heads: query heads of a sequence
  std::uint64_t group = 1;             // query heads a kv head
  bool head_major = false, gqa = false, qo = false;
  std::uint64_t kv_col = 0, acc_row = 0;         // bytes of K and V a key, of the accumulator a row
  std::uint64_t head_keys = 0;                   // (sequence, head) pairs, or the parts chunks cut them into
  // Where heads are parts (chunks): CTAs between one key block's CTAs of two
  // heads where every sequence is alike, else 0.
  bool parts = false;
  std::uint64_t kv_stride = 0;
  std::uint64_t kv_objects = 0;  // K/V objects, above every kv_of (0: found from kv_of)
  bool repeats = true;        // heads that repeat an earlier one take its counts (tests: false)
  bool heads_alike = false;   // every head key's CTAs and rows alike as the grid makes them (a dense batch, heads whole)
  bool check_bounds = false;  // tests: every read's exact distance held to its bounds (an Error where one is not)
};

// Tallies the main loop into t as the segment engine would (the row sets'
// re-reads with the accumulator's write-back at the same distance, their
// distances reported to obs; K/V reads; dK, dV written where they are
// outputs); a row set's first read is left to the caller. Returns the heads
// whose re-reads were an earlier head's (l2_backward_rows_repeats.cpp) and
// the reads evaluated as fans (l2_backward_rows_fans.cpp), or nothing, with t
// and obs untouched, where the reads its bounds leave would cost more than
// `limit` (CTAs visited) to evaluate.
struct ByRows {
  std::uint64_t repeated_heads = 0, fan_reads = 0, stair_reads = 0;
};
std::optional<ByRows> backward_by_rows(const BackwardLoop& in, Tally& t, ReadObserver& obs, std::uint64_t limit);

}  // namespace hbmscope::l2
