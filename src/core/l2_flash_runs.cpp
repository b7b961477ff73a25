// The runs of the forward pass (docs/model.md, "How it is evaluated"): the
// waves' closed form where every CTA takes the same steps (no mask, one
// sequence length: l2_flash_waves.cpp); otherwise the cheapest of the chains,
// the segment engine and the enumeration.
#include <algorithm>

#include "hbmscope/checked.hpp"
#include "hbmscope/error.hpp"
#include "l2_flash.hpp"
#include "l2_list.hpp"
#include "l2_segments.hpp"

namespace hbmscope::l2 {

namespace {

// The forward trace for the segment engine: per CTA its Q tile (step 0), its
// K/V stream (one key block a step; the last, partial block apart) and its O
// tile (last step).
void add_forward(SegmentEngine& e, const FlashGrid& grid, const L2SimConfig& c) {
  const std::uint64_t n = grid.ctas();
  std::vector<std::uint64_t> lengths(n);
  std::vector<FlashCta> ctas(n);
  for (std::uint64_t id = 0; id < n; ++id) {
    ctas[id] = grid.cta(id);
    lengths[id] = ctas[id].steps();
  }
  const std::uint64_t first = e.add_kernel(std::uint64_t{c.sm_count} * c.ctas_per_sm, std::move(lengths));
  const bool qo = c.q_o_allocate;
  e.reserve_streams(4 * n);  // Q, K/V (two where a last block is partial), O
  for (std::uint64_t id = 0; id < n; ++id) {
    const FlashCta& t = ctas[id];
    const std::uint64_t cta = first + id;
    e.add_stream(cta, 0, 0, 1, SegmentEngine::unique, 0, grid.q_bytes(t.rows), Op::read, qo);
    if (t.blocks() > 0) {
      const std::uint64_t nkb = grid.sequence(t.seq).k_blocks;
      const std::uint64_t full = grid.kv_bytes(t.seq, 0);
      const bool partial = grid.kv_bytes(t.seq, nkb - 1) != full;
      const std::uint64_t split = partial ? std::min(t.end, nkb - 1) : t.end;
      if (split > t.first) e.add_stream(cta, 1, 0, split - t.first, t.pair, t.first, full, Op::read);
      if (split < t.end)
        e.add_stream(cta, 1, split - t.first, t.end - split, t.pair, split, grid.kv_bytes(t.seq, split), Op::read);
    }
    e.add_stream(cta, 2, t.steps() - 1, 1, SegmentEngine::unique, 0, grid.o_bytes(t.rows), Op::write, qo);
  }
}

}  // namespace

namespace {

// The segment engine's cost (docs/l2-simulation.md, "Cost"): each segment
// meets the segments of the CTAs resident beside it (about 5 S of them, S the
// slots), at about 12 units each in query-block-major order (24 with GQA: a
// head's first reads of its key blocks are single reads evaluated together),
// 9 in head-major order (a row's CTAs end together); and no less than a
// sixth of that per tile access (the pieces of long CTAs' distances).
// Measured on causal shapes of 4K to 8M tokens (bench/, "L2 runs").
std::uint64_t segment_work(const FlashGrid& grid, std::uint64_t slots) {
  // About 1.2 KB a CTA (streams, segments, their index and the single reads'
  // trees): past 1.5 M CTAs (about 2 GB) the engine is not used.
  constexpr std::uint64_t max_ctas = std::uint64_t{3} << 19;
  if (grid.ctas() > max_ctas) return ~std::uint64_t{0};
  const std::uint64_t beside = 5 * std::min(grid.ctas(), slots) + 8;
  const std::uint64_t unit = grid.order() == Rasterization::head_major ? 9 : grid.group() > 1 ? 24 : 12;
  std::uint64_t w = 0;
  if (__builtin_mul_overflow(grid.ctas(), beside, &w)) return ~std::uint64_t{0};
  w = std::max(w, flash_enum_accesses(grid.shape()) / 6);
  return __builtin_mul_overflow(w, unit, &w) ? ~std::uint64_t{0} : w;
}

// The chains' cost (docs/l2-chains.md), in units of about a
// nanosecond: the schedule, the first reads and bounds for every CTA (about 4
// units a slot and 300 more, an upper estimate: their windows move a few CTAs
// a read, refined O(S) passes for the CTAs near a capacity; 1 a slot on long
// heads with GQA, below) and the exact
// evaluation of what they leave, two units a step: where they hold (a dense
// batch whose CTAs all read), about S CTAs of every head (the ones near the
// capacity and near the largest distance) of up to n key blocks each, and in
// head-major order with GQA the pairs' first CTAs of every query block; where
// they do not, every access, and 12 units a slot a CTA. Measured on causal
// shapes of 128K to 16M tokens (bench/, "L2 runs"). At most about 65 bytes
// a CTA (head-major order): past 2^23 CTAs (1M tokens x 64 heads x batch 8
// in blocks of 64 rows; about 540 MB) the chains are not used.
std::uint64_t chains_work(const FlashGrid& grid, std::uint64_t slots) {
  std::uint64_t all_steps = 0;  // at most: below 2^41, as the chains' schedule keeps them
  if (grid.ctas() > max_chain_ctas || __builtin_mul_overflow(grid.ctas(), grid.max_key_blocks() + 1, &all_steps) ||
      all_steps >= (std::uint64_t{1} << 41) || !flash_in_chains(grid))
    return ~std::uint64_t{0};
  const bool bounded = grid.dense() && grid.ctas() >= slots && grid.cta(0).blocks() > 0;
  std::uint64_t w = 0, steps = 0;
  if (bounded && grid.order() == Rasterization::head_major && grid.group() > 1) {
    // A pair's first CTA of a query block re-reads what the pair's last CTA
    // of the previous block read, while the slots hold CTAs with short gaps
    // (the group's other heads) and long ones: loose window bounds, so up to
    // those CTAs are evaluated, about 1 / G of the accesses (an upper
    // estimate: peak_hi settles most of them).
    steps = 2 * (flash_enum_accesses(grid.shape()) / grid.group());
  } else if (bounded) {
    const FlashSeq& q = grid.sequence(0);
    steps = 2 * grid.heads() * std::min(slots, q.q_blocks) * q.k_blocks;
  } else if (__builtin_mul_overflow(flash_enum_accesses(grid.shape()), 2, &steps)) {
    return ~std::uint64_t{0};
  }
  // (With GQA and heads of at least 4 S query blocks in query-block-major
  // order, 16 S in head-major order, a slot costs a unit: measured at most
  // 0.8 ns a slot a CTA in the first, 2 to 8 CTAs an SM, and at most 0.4 ns
  // a unit of the whole estimate in the second, 2 to 7. Shorter heads cost
  // more (head-major, 8,192 query blocks beside 1,056 slots: 52 s);
  // without GQA the largest distance lies in re-reads whose bounds are loose
  // at many slots, and its search can cost more than 2 ns a slot a CTA.)
  const std::uint64_t long_from = (grid.order() == Rasterization::query_block_major ? 4 : 16) * slots;
  const bool long_heads = bounded && grid.group() > 1 && grid.sequence(0).q_blocks >= long_from;
  const std::uint64_t per_slot = long_heads ? 1 : bounded ? 4 : 12;
  if (__builtin_mul_overflow(grid.ctas(), per_slot * slots + 300, &w)) return ~std::uint64_t{0};
  return __builtin_add_overflow(w, steps, &w) ? ~std::uint64_t{0} : w;
}

// Whether the forward by heads may take the grid (its plan says where it does).
bool heads_possible(const FlashGrid& grid) {
  return grid.dense() && grid.group() > 1 && grid.order() == Rasterization::query_block_major;
}

std::uint64_t enumeration_work(const Shape& s, std::size_t capacities) {
  std::uint64_t w = 0;
  return __builtin_mul_overflow(flash_enum_accesses(s), enumeration_units(capacities), &w) ? ~std::uint64_t{0} : w;
}

}  // namespace

FlashStats runs_flash(const Shape& s, const L2SimConfig& c, Tally& t) {
  if (flash_in_waves(s)) return waves_flash(s, c, t);
  const FlashGrid grid(s, c.order);
  const std::uint64_t slots = std::uint64_t{c.sm_count} * c.ctas_per_sm;
  // Not in lockstep: whichever exact evaluation costs less.
  const std::uint64_t enumeration = enumeration_work(s, t.capacities().size());
  const std::uint64_t chained = chains_work(grid, slots), segments = segment_work(grid, slots);
  if (chained < enumeration && chained <= segments) return chains_flash(s, c, t);
  // A dense batch with GQA in query-block-major order (windows and chunks,
  // mostly): by heads where every re-read inside a head is a hit
  // (l2_flash_heads.cpp; it says so from the schedule, at most about 25
  // units a CTA, before it tallies anything).
  constexpr std::uint64_t worth = std::uint64_t{1} << 24;
  if (enumeration >= worth && heads_possible(grid))
    if (const std::optional<FlashStats> st = heads_flash(s, c, t)) return *st;
  // (The budget took a shape past it on the plan by heads alone: where the
  // pass over the spans declined, the others would run past it.)
  if (std::min({enumeration_work(s, 1), segments, chained}) > max_l2_sim_work)
    throw Error("L2 simulation: shape " + describe(s) +
                ": the forward by heads does not hold here (docs/l2-windows.md, \"Windows and chunks by heads\") "
                "and the other methods take more than " + std::to_string(max_l2_sim_work) +
                " work units; bigger --block-rows/--block-cols, fewer heads or shorter sequences simulate it");
  if (enumeration <= segments) {
    // A dense batch of several units (windows and chunks, mostly): the
    // schedule first (about 25 units a CTA with the heads in flight), then
    // the units whose steps no earlier unit's repeat.
    if (enumeration >= worth && grid.dense()) {
      const std::optional<FlashUnits> p = plan_flash_units(grid, slots);
      if (p && p->enumerated * enumeration_units(t.capacities().size()) + 25 * grid.ctas() < enumeration)
        return units_flash(s, c, t, *p);
    }
    return enumerate_flash(s, c, t);
  }
  return segments_flash(s, c, t);
}

FlashStats segments_flash(const Shape& s, const L2SimConfig& c, Tally& t) {
  const FlashGrid grid(s, c.order);
  SegmentEngine e;
  add_forward(e, grid, c);
  e.run(t);
  FlashStats st;
  st.steps = e.kernel_steps(0);
  st.waves = ceil_div(grid.ctas(), std::uint64_t{c.sm_count} * c.ctas_per_sm);
  count_in_flight(st, grid.ctas(), grid.heads(), grid.pairs(), [&](std::uint64_t id) {
    const FlashCta ct = grid.cta(id);
    const std::uint64_t first = e.start(id);
    return InFlight{ct.head_key, ct.pair, first, first + e.length(id) - 1};
  });
  return st;
}

std::uint64_t flash_runs_work(const Shape& s, const L2SimConfig& c) {
  validate(s);
  validate(c);
  const FlashGrid grid(s, c.order);
  const std::uint64_t slots = std::uint64_t{c.sm_count} * c.ctas_per_sm;
  if (flash_in_waves(s)) return waves_flash_work(grid, slots);
  const std::uint64_t w = std::min({enumeration_work(s, 1), segment_work(grid, slots), chains_work(grid, slots)});
  // (By heads, where the others are past the budget: its plan, a pass over
  // the CTAs, says whether it applies.)
  if (w > max_l2_sim_work && heads_possible(grid))
    if (const std::optional<std::uint64_t> h = heads_flash_work(s, c)) return std::min(w, *h);
  return w;
}

}  // namespace hbmscope::l2
