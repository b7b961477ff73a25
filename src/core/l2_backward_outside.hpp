#pragma once
// What lies outside the masked backward's main loop (l2_backward_outside.cpp):
// the preprocessing, the row sets' first reads measured from it, D's depth at
// its death, the dQ conversion and the GQA reduction, counted from each
// object's first and last access in the main loop, which the schedule alone
// fixes (docs/l2-backward.md, "The backward through the segment engine").
// Internal to src/core.
#include <cstdint>
#include <vector>

#include "big_array.hpp"
#include "l2_backward.hpp"
#include "l2_tally.hpp"

namespace hbmscope::l2 {

// Per row, its row set's bytes (Q with LSE, dO, D, the accumulator): its rows
// times a row's, not kept (millions of rows); and those of the rows before
// it, from the rows' prefix sums (R + 1 of them).
struct RowSetBytes {
  std::uint64_t per_row = 0;
  const Array<std::uint32_t>* n_rows = nullptr;
  const Array<std::uint64_t>* rows_below = nullptr;
  std::uint64_t operator[](std::uint64_t r) const { return per_row * (*n_rows)[r]; }
  std::uint64_t below(std::uint64_t r) const { return per_row * (*rows_below)[r]; }
  std::uint64_t size() const { return n_rows->size(); }
};

// Per CTA, its head's first row (its part's where chunks part the heads): its
// head's, not kept.
struct FirstRows {
  const Array<BackwardCta>* ct = nullptr;
  const std::vector<std::uint64_t>* head_row0 = nullptr;
  std::uint64_t operator[](std::uint64_t x) const { return (*head_row0)[(*ct)[x].head_key]; }
};

// The main loop as segments_backward lays it out: per CTA and per row (fewer
// than 2^32 - 1 CTAs, so that a CTA, "none" and a K/V object fit in 32 bits).
struct BackwardArrays {
  const Array<BackwardCta>* ct = nullptr;        // per CTA, in launch order
  const Array<std::uint64_t>* start = nullptr;   // per CTA: its first step (the schedule)
  const Array<std::uint32_t>* kv_of = nullptr;   // per CTA: its K/V object
  const FirstRows* row0 = nullptr;               // per CTA: its head's first row
  const RowSetBytes* u = nullptr;                // per row: its row set's bytes
  const Array<std::uint32_t>* n_rows = nullptr;  // per row: its rows
  const Array<std::uint32_t>* by_end = nullptr;  // the CTAs by last step, then id (the schedule's)
  const Array<std::uint64_t>* ends = nullptr;    // their last steps, in that order (the schedule's)
  // Per head key (ct's, in order, rows in order), its first row; the rows' count last.
  const std::vector<std::uint64_t>* head_row0 = nullptr;
};

// And what lies outside the main loop needs besides.
struct BackwardKeys : BackwardArrays {
  const BackwardGrid* grid = nullptr;
  bool gqa = false, qo = false;
  std::uint64_t steps = 0;       // the schedule's
  std::uint64_t kv_objects = 0;  // K/V objects (sequence, kv head, key block)
  bool wide_keys = false;  // tests: keys in 128 bits where 64 would do
  bool periods = true;     // heads in the schedule's period take an earlier head's first reads (tests: false)
  bool heads_alike = false;  // every head key's CTAs and rows alike as the grid makes them (a dense batch, heads whole)
  bool head_major = false;   // the launch order
  // Per CTA, its head's place in its group (where GQA groups hold at most 256
  // heads; else null and read from the CTAs).
  const Array<std::uint8_t>* in_group = nullptr;
};

// Each head key's CTAs in launch order (so in key-block order): those of head
// key h at id(at[h]), ..., id(at[h + 1] - 1) (ids empty where each head's
// CTAs are consecutive: there the place is the CTA). `alike`: the caller knows
// each head key's CTAs consecutive and as many (heads alike as the grid makes
// them, in query-block-major order), so the CTAs are not read.
struct CtasByHead {
  std::vector<std::uint64_t> at;
  Array<std::uint32_t> ids;
  std::uint64_t id(std::uint64_t j) const { return ids.empty() ? j : ids[j]; }
};
CtasByHead ctas_by_head(const Array<BackwardCta>& ct, std::uint64_t head_keys, bool alike = false);

// The schedule's period (l2_backward_period.cpp): where every head key is
// alike (its CTAs consecutive, with head 0's query blocks and keys; its rows
// as many as head 0's, row by row), heads [from, H) start each CTA `steps`
// steps after the CTA `heads` heads before (`ctas` CTAs before); heads 0
// where none. The least `from` found, its least `heads`.
struct BackwardPeriod {
  std::uint64_t heads = 0, ctas = 0, steps = 0, from = 0;
  std::uint64_t per_head = 0;  // CTAs a head
  bool found() const { return heads != 0; }
};
BackwardPeriod backward_period(const BackwardKeys& in, const CtasByHead& by_head);

// Tallies all but the main loop into t; returns each row's start for D's
// write-back: the larger of its first read's distance and its depth after
// the main loop. `periodic`: the rows whose first reads came from the
// period.
Array<std::uint64_t> backward_outside(const BackwardKeys& in, Tally& t, std::uint64_t& periodic);

}  // namespace hbmscope::l2
