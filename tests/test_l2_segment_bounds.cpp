// The segment engine's bounds (docs/l2-simulation.md, "Reads settled by
// bounds"): a read whose distance lies between two bounds in one bucket of
// the tally, below a distance some read is known to reach, is counted
// without evaluating it. With one L2 size (what `sweep --device` asks) most
// re-reads settle; the tallies must stay the enumeration's, bit for bit.
#include <catch2/catch.hpp>
#include <algorithm>
#include <random>

#include "hbmscope/l2_sim.hpp"
#include "../src/core/l2_backward.hpp"
#include "../src/core/l2_flash.hpp"
#include "../src/core/l2_segments.hpp"
#include "../src/core/radix_sort.hpp"
#include "l2_tallies.hpp"
#include "random_shapes.hpp"

using namespace hbmscope;

namespace {

using test::pick;

// 1 to 3 L2 sizes up to the largest distance (or an eighth of it, where
// more reads settle as hits), the largest found by the enumeration first.
template <class Evaluate>
std::vector<std::uint64_t> few_capacities(std::mt19937_64& rng, Evaluate enumerate) {
  l2::Tally t0({0});
  enumerate(t0);
  const std::uint64_t all = t0.max_reuse_distance();
  std::vector<std::uint64_t> caps;
  const auto n = pick(rng, 1, 3);
  for (std::uint64_t k = 0; k < n; ++k) {
    const std::uint64_t top = pick(rng, 0, 1) ? all / 8 + 1 : all + 1;
    caps.push_back(std::uniform_int_distribution<std::uint64_t>(0, top)(rng));
  }
  return caps;
}

Shape random_masked(std::mt19937_64& rng, int k) {
  Shape s = test::random_prefill(rng, k % 5 != 0);
  if (k % 2 == 0) test::lengthen(rng, s, 16, 600, 8);
  return s;
}

// The engine (evaluate) against the enumeration at one to three L2 sizes,
// on random slots, order and `--l2-qo`.
template <class Enumerate, class Evaluate>
void same_at_few_sizes(std::mt19937_64& rng, const Shape& s, Enumerate enumerate, Evaluate evaluate) {
  const auto order = pick(rng, 0, 1) ? Rasterization::head_major : Rasterization::query_block_major;
  const L2SimConfig c = test::random_slots(rng, order, pick(rng, 0, 1) == 1, 40);
  const auto caps = few_capacities(rng, [&](l2::Tally& t) { enumerate(s, c, t); });
  INFO(describe(s) << ", " << c.sm_count << " x " << c.ctas_per_sm << " slots");
  l2::Tally te(caps), tx(caps);
  const l2::FlashStats se = enumerate(s, c, te);
  const l2::FlashStats sx = evaluate(s, c, tx);
  test::same_tally(te, tx);
  CHECK(se.steps == sx.steps);
  CHECK(se.heads == sx.heads);
}

}  // namespace

TEST_CASE("L2 segment bounds: the backward at one to three L2 sizes equals the enumeration", "[l2runs][backward]") {
  std::mt19937_64 rng(GENERATE(71, 72));
  int checked = 0;
  for (int k = 0; k < 150; ++k) {
    Shape s = random_masked(rng, k);
    s.pass = Pass::bwd;
    if (!l2::backward_in_segments(s)) continue;
    same_at_few_sizes(rng, s, l2::enumerate_backward,
                      [](const Shape& x, const L2SimConfig& c, l2::Tally& t) { return l2::segments_backward(x, c, t); });
    ++checked;
  }
  CHECK(checked > 100);
}

TEST_CASE("L2 segment bounds: the forward at one to three L2 sizes equals the enumeration", "[l2runs]") {
  std::mt19937_64 rng(GENERATE(73, 74));
  for (int k = 0; k < 150; ++k) same_at_few_sizes(rng, random_masked(rng, k), l2::enumerate_flash, l2::segments_flash);
}

TEST_CASE("L2 segment bounds: reads settle at a large L2 and the tally is the one every read evaluated gives",
          "[l2runs]") {
  // Causal-like CTAs (CTA i reads objects [0, i + 1) at its steps) on 8
  // slots, heads one after another, two by two on the same objects (the
  // second's reads come a head later): at an L2 of a tenth of the largest
  // distance most re-reads are hits by their bounds; beside a ladder of 42
  // sizes (where few settle) the counts at that size are the same.
  const std::uint64_t slots = 8, ctas_a_head = 40, heads = 6;
  auto run = [&](l2::Tally& t) {
    l2::SegmentEngine e;
    std::vector<std::uint64_t> len;
    for (std::uint64_t h = 0; h < heads; ++h)
      for (std::uint64_t i = 0; i < ctas_a_head; ++i) len.push_back(i + 1);
    e.add_kernel(slots, len);
    for (std::uint64_t h = 0; h < heads; ++h)
      for (std::uint64_t i = 0; i < ctas_a_head; ++i) {
        const std::uint64_t id = h * ctas_a_head + i;
        e.add_stream(id, 0, 0, i + 1, 0, (h / 2) * ctas_a_head, 100 + 10 * (h / 2), l2::Op::read);
        e.add_stream(id, 1, i, 1, l2::SegmentEngine::unique, 0, 50, l2::Op::write);
      }
    e.evaluate(t);
    return e.settled_reads();
  };
  l2::Tally probe({0});
  run(probe);
  const std::uint64_t cap = probe.max_reuse_distance() / 10;
  std::vector<std::uint64_t> caps = test::ladder(probe.max_reuse_distance());
  caps.push_back(cap);
  l2::Tally one({cap}), ladder(caps);
  const std::uint64_t settled = run(one);
  run(ladder);
  CHECK(settled > 0);
  CHECK(one.dram_reads(cap) == ladder.dram_reads(cap));
  CHECK(one.dram_writes(cap) == ladder.dram_writes(cap));
  CHECK(one.requested() == ladder.requested());
  CHECK(one.first_access_reads() == ladder.first_access_reads());
  CHECK(one.max_reuse_distance() == ladder.max_reuse_distance());
}

TEST_CASE("L2 segment bounds: the engine's radix sort is a stable sort by the key", "[l2runs]") {
  // Negative steps and keys that share their high digits, as std::stable_sort
  // orders them, at counts that take digits of 11, 12 and 16 bits.
  std::mt19937_64 rng(75);
  for (const std::size_t n : {std::size_t{1000}, std::size_t{5000}, std::size_t{9000}, std::size_t{300000}})
  for (const std::int64_t spread : {std::int64_t{3}, std::int64_t{1} << 20, std::int64_t{1} << 50, std::int64_t{1} << 62}) {
    std::vector<std::pair<std::int64_t, int>> v(n);
    for (std::size_t i = 0; i < v.size(); ++i)
      v[i] = {std::uniform_int_distribution<std::int64_t>(-spread, spread)(rng), static_cast<int>(i)};
    auto w = v;
    l2::radix_sort(v, [](const auto& x) { return l2::ordered(x.first); });
    std::stable_sort(w.begin(), w.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    CHECK(v == w);
  }
}
