// The forward's enumeration by units against the enumeration (the reference):
// every unit of a dense batch enumerated over its own steps, the others'
// accesses visited, and units whose steps repeat an earlier unit's taking its
// tally (docs/l2-windows.md, "Units that repeat").
#include <catch2/catch.hpp>
#include <random>

#include "hbmscope/l2_sim.hpp"
#include "hbmscope/model.hpp"
#include "../src/core/l2_flash.hpp"
#include "l2_tallies.hpp"
#include "random_shapes.hpp"

using namespace hbmscope;
using namespace hbmscope::test;

namespace {

// Units' tallies and stats against the enumeration's, on `caps`; returns the
// units that took another's tally.
std::uint64_t same_by_units(const Shape& s, const L2SimConfig& c, const std::vector<std::uint64_t>& caps,
                            l2::UnitsOf of = l2::UnitsOf::whole) {
  const l2::FlashGrid grid(s, c.order);
  const auto plan = l2::plan_flash_units(grid, std::uint64_t{c.sm_count} * c.ctas_per_sm, of);
  REQUIRE(plan.has_value());
  l2::Tally te(caps), tu(caps);
  const l2::FlashStats se = l2::enumerate_flash(s, c, te);
  const l2::FlashStats su = l2::units_flash(s, c, tu, *plan);
  same_tally(te, tu);
  CHECK(se.heads == su.heads);
  CHECK(se.kv_heads == su.kv_heads);
  CHECK(se.steps == su.steps);
  CHECK(se.waves == su.waves);
  std::uint64_t taken = 0;
  for (std::uint64_t u = 0; u < plan->units(); ++u) taken += plan->source[u] != u;
  return taken;
}

// A dense batch of 2 to 6 sequences, masked or not, small blocks (long CTAs
// beside many others, whose schedules fall into repeats).
Shape random_dense(std::mt19937_64& rng) {
  Shape s = random_prefill(rng);
  s.seq_lens = SeqList();
  lengthen(rng, s, 40, 400, 4);
  s.batch = pick(rng, 2, 6);
  return s;
}

}  // namespace

TEST_CASE("L2 runs: the forward by units equals the enumeration on dense batches", "[l2runs][units]") {
  std::mt19937_64 rng(GENERATE(31, 32, 33));
  std::uint64_t taken = 0, shapes = 0, by_finer = 0;
  for (int k = 0; k < 70; ++k) {
    const Shape s = random_dense(rng);
    for (auto order : {Rasterization::query_block_major, Rasterization::head_major})
      for (bool qo : {true, false}) {
        L2SimConfig c = random_slots(rng, order, qo, 12);
        INFO(describe(s) << " " << rasterization_name(order) << " qo " << qo << " slots " << c.sm_count << "x"
                         << c.ctas_per_sm);
        const auto caps = ladder(kv_footprint_bytes(s) + qo_footprint_bytes(s));
        taken += same_by_units(s, c, caps);  // (the Fenwick tree's LRU: a ladder of sizes)
        for (std::uint64_t cap : {caps[pick(rng, 2, 12)], caps[pick(rng, 13, 41)]})
          taken += same_by_units(s, c, {cap});  // (the list's: one size, as a report row has)
        // Finer units where they apply (with GQA a head; head-major a query block).
        const l2::FlashGrid grid(s, c.order);
        if (l2::plan_flash_units(grid, std::uint64_t{c.sm_count} * c.ctas_per_sm, l2::UnitsOf::finer))
          taken += same_by_units(s, c, caps, l2::UnitsOf::finer), ++by_finer;
        ++shapes;
      }
  }
  INFO(shapes << " grids (" << by_finer << " also by finer units), " << taken << " units taken from an earlier one");
  CHECK(taken > shapes);  // most grids repeat units: the repeats are held to the enumeration too
}

TEST_CASE("L2 runs: the forward by units of a head equals the enumeration on long GQA heads", "[l2runs][units]") {
  // A head's reads follow its pair's previous head's: its steps open there.
  std::mt19937_64 rng(GENERATE(41, 42));
  std::uint64_t taken = 0, grids = 0;
  for (int k = 0; k < 60; ++k) {
    Shape s = random_dense(rng);
    lengthen(rng, s, 300, 1500, 4);
    s.block_rows = pick(rng, 4, 8);
    s.kv_heads = pick(rng, 1, 2);
    s.heads = s.kv_heads * pick(rng, 2, 4);
    for (bool qo : {true, false}) {
      const L2SimConfig c = random_slots(rng, Rasterization::query_block_major, qo, 3);
      INFO(describe(s) << " qo " << qo << " slots " << c.sm_count << "x" << c.ctas_per_sm);
      const l2::FlashGrid grid(s, c.order);
      if (!l2::plan_flash_units(grid, std::uint64_t{c.sm_count} * c.ctas_per_sm, l2::UnitsOf::finer)) continue;
      const auto caps = ladder(kv_footprint_bytes(s) + qo_footprint_bytes(s));
      taken += same_by_units(s, c, caps, l2::UnitsOf::finer);
      taken += same_by_units(s, c, {caps[pick(rng, 2, 20)]}, l2::UnitsOf::finer);
      ++grids;
    }
  }
  INFO(grids << " grids by heads, " << taken << " units taken from an earlier one");
  CHECK(grids >= 100);
  CHECK(taken > grids);
}

TEST_CASE("L2 runs: a windowed batch whose units repeat goes by units, and equals the enumeration", "[l2runs][units]") {
  // Large enough for runs_flash to plan the units (48 kv pairs of 8 heads'
  // 256 query blocks, a window of 16 blocks: about 1.9 M accesses).
  Shape s;
  s.seq_q = s.seq_kv = 16384;
  s.heads = 64;
  s.kv_heads = 8;
  s.batch = 6;
  s.head_dim = 64;
  s.block_rows = s.block_cols = 64;
  s.causal = true;
  s.window = 1024;
  L2SimConfig c;
  c.sm_count = 32;
  c.ctas_per_sm = 2;
  const l2::FlashGrid grid(s, c.order);
  const auto plan = l2::plan_flash_units(grid, 64);
  REQUIRE(plan.has_value());
  std::uint64_t taken = 0;
  for (std::uint64_t u = 0; u < plan->units(); ++u) taken += plan->source[u] != u;
  CHECK(plan->units() == 48);
  CHECK(taken >= 40);
  CHECK(plan->enumerated * 5 < l2::flash_enum_accesses(s));
  const std::uint64_t cap = 8ull << 20;
  l2::Tally te({cap}), tr({cap});
  l2::enumerate_flash(s, c, te);
  l2::runs_flash(s, c, tr);
  same_tally(te, tr);
}
