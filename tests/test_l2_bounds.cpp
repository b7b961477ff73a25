// The chains' bounds (docs/l2-chains.md, "Counting without evaluating"),
// each held to what it bounds on long causal heads beside a few slots: the
// upper ones to each CTA's largest distance, evaluated exactly; the windows
// after a jump to those moved CTA by CTA; a run's to each of its CTAs' own.
#include <algorithm>
#include <catch2/catch.hpp>
#include <queue>
#include <random>

#include "l2_chain_grids.hpp"

using namespace hbmscope;
using namespace hbmscope::test;

TEST_CASE("L2 runs: the chains' upper bounds hold CTA by CTA", "[l2runs][chains]") {
  // Each upper bound the chains compare with the largest distance (the
  // windows' and the refined one, also from wider windows, the quick one and
  // the one resolved in time) is at least the CTA's own largest distance, evaluated exactly (in
  // head-major order: loose windows, tight peak_hi).
  std::mt19937_64 rng(GENERATE(51, 52));
  long_chain_grids(rng, 8, [&](const Shape& s, const L2SimConfig& c, const l2::chains::ChainGrid& cg) {
    l2::Tally t({kv_footprint_bytes(s) / 4});
    l2::chains::ChainReads reads(cg, t);
    l2::chains::Batches batches(t);
    l2::chains::ChainBounds bounds(cg);
    const std::uint64_t rows = cg.rows.empty() ? cg.rows0 : *std::max_element(cg.rows.begin(), cg.rows.end());
    std::uint64_t checked = 0, quick = 0;
    std::vector<std::int64_t> fin(cg.n);  // last steps in finish order
    for (std::uint64_t j = 0; j < cg.n; ++j) fin[j] = cg.f(cg.fo[j]);
    each_rereader(cg, [&](std::uint64_t i, std::uint64_t P) {
      const std::uint64_t most = reads.chain(i, P, cg.e[P], batches);
      // The quick bound (every threshold met: no backing off), some calls
      // passed over (its pointers jump), its Q and O tiles counted anew.
      if (l2::chains::Bounds q; rng() % 3 != 0 && bounds.quick(i, P, ~std::uint64_t{0}, q)) {
        REQUIRE(q.hi >= most);
        const std::int64_t X = cg.s[P], Thi = cg.s[i] + static_cast<std::int64_t>(cg.e[P]) - 1;
        auto in = [&](const auto& v) {
          return static_cast<std::uint64_t>(std::upper_bound(v.begin(), v.end(), Thi) - std::lower_bound(v.begin(), v.end(), X));
        };
        CHECK(q.qo == (c.q_o_allocate ? in(cg.s) * cg.q_row * rows + in(fin) * cg.o_row * rows : 0));
        ++quick;
      }
      l2::chains::Bounds b = bounds.of(i, P);
      REQUIRE(bounds.peak_hi(i, P) >= most);
      if (!b.valid) return;
      REQUIRE(b.hi >= most);
      l2::chains::Bounds ahead = b;
      bounds.refine_hi(i, P, b);
      REQUIRE(b.hi >= most);
      // (From the wider windows' densest steps, counted once for many CTAs:
      // at least this CTA's own.)
      bounds.refine_hi_ahead(i, P, ahead);
      REQUIRE(ahead.hi >= b.hi);
      ++checked;
    });
    CHECK(checked > 0);
    CHECK(quick > 0);
  });
}

TEST_CASE("L2 runs: the chains' bounds after a jump equal those moved CTA by CTA", "[l2runs][chains]") {
  // A window's state is a function of where it is: found by a search after
  // a long jump (past CTAs whose bounds are not asked for) or moved CTA by
  // CTA, the bounds are the same.
  std::mt19937_64 rng(GENERATE(71, 72));
  std::uint64_t jumped = 0;
  long_chain_grids(rng, 10, [&](const Shape&, const L2SimConfig&, const l2::chains::ChainGrid& cg) {
    // (Each slot's starts in 4 bytes or, as where steps pass 2^32, in 8.)
    l2::chains::ChainBounds every(cg), sparse(cg, rng() % 2 == 0);
    each_rereader(cg, [&](std::uint64_t i, std::uint64_t P) {
      const l2::chains::Bounds a = every.of(i, P);
      if (rng() % (12 * cg.slots) != 0) return;  // (jumps of some slots' CTAs)
      const l2::chains::Bounds b = sparse.of(i, P);
      REQUIRE(a.valid == b.valid);
      CHECK(a.lo == b.lo);
      CHECK(a.hi == b.hi);
      CHECK(a.qo == b.qo);
      ++jumped;
    });
  });
  CHECK(jumped > 50);
}

TEST_CASE("L2 runs: a run's bounds hold each of its CTAs' own", "[l2runs][chains]") {
  // Over the union of the counted CTAs' windows, with their smallest g below
  // and their largest above: at most the lower bound of each counted CTA (g
  // at least g_lo; P = i - 1 alone where near_only), at least its upper one
  // (runs at random places, forward and back: in query-block-major order of
  // one head, in head-major order of consecutive CTAs that each re-read
  // their pair's previous one, near_only or not).
  std::mt19937_64 rng(GENERATE(81, 82));
  std::uint64_t runs[3] = {}, counted = 0;
  long_chain_grids(rng, 10, [&](const Shape&, const L2SimConfig&, const l2::chains::ChainGrid& cg) {
    l2::chains::ChainBounds every(cg), sparse(cg, rng() % 2 == 0);
    std::vector<l2::chains::Bounds> own(cg.n);
    each_rereader(cg, [&](std::uint64_t i, std::uint64_t P) { own[i] = every.of(i, P); });
    auto rereads = [&](std::uint64_t j) { return cg.prev(j) != l2::chains::no_cta && cg.e[cg.prev(j)] != 0; };
    for (int k = 0; k < 200; ++k) {
      const std::uint64_t a = pick(rng, 1, cg.n - 1);
      std::uint64_t b = std::min(cg.n, a + pick(rng, 1, 300));
      if (cg.hm) {
        for (std::uint64_t j = a; j < b; ++j)
          if (!rereads(j)) b = j;
      } else {
        b = std::min(b, cg.first_of_head(a) + cg.seq_q_blocks);
      }
      if (b <= a || !rereads(a)) continue;
      std::int64_t gmax = 0;
      for (std::uint64_t j = a; j < b; ++j) gmax = std::max(gmax, cg.s[j] - cg.s[cg.prev(j)]);
      const auto g_lo = static_cast<std::int64_t>(pick(rng, 0, static_cast<std::uint64_t>(gmax)));
      const bool near_only = cg.hm && pick(rng, 0, 1) == 1;
      const l2::chains::Bounds r = sparse.of_run(a, b, g_lo, near_only);
      if (!r.valid) continue;
      for (std::uint64_t j = a; j < b; ++j) {
        const std::uint64_t P = cg.prev(j);
        if (cg.s[j] - cg.s[P] < g_lo || (near_only && P + 1 != j)) continue;
        REQUIRE(own[j].valid);
        REQUIRE(r.hi >= own[j].hi);
        REQUIRE(r.lo <= own[j].lo);
        ++counted;
      }
      ++runs[cg.hm ? (near_only ? 2 : 1) : 0];
    }
  });
  CHECK(runs[0] > 100);
  CHECK(runs[1] > 100);
  CHECK(runs[2] > 100);
  CHECK(counted > 1000);
}

TEST_CASE("L2 runs: the search from a place finds what a bisection finds", "[l2runs][chains]") {
  // (Starts that do not decrease, runs of equal ones; every value and every
  // place to search from, back and forward of the answer, in sub-ranges.)
  std::mt19937_64 rng(53);
  for (int k = 0; k < 200; ++k) {
    std::vector<std::int64_t> s(1 + rng() % 300);
    std::int64_t at_step = 0;
    for (auto& v : s) v = at_step += static_cast<std::int64_t>(rng() % 4 == 0 ? rng() % 40 : rng() % 2);
    const std::uint64_t lo = rng() % s.size(), hi = lo + rng() % (s.size() - lo + 1);
    for (std::int64_t v = s.front() - 1; v <= s.back() + 1; v += 1 + static_cast<std::int64_t>(rng() % 3)) {
      auto before = [&](std::uint64_t j) { return s[j] < v; };
      const auto want = static_cast<std::uint64_t>(std::lower_bound(s.begin() + static_cast<std::ptrdiff_t>(lo), s.begin() + static_cast<std::ptrdiff_t>(hi), v) - s.begin());
      for (std::uint64_t at = lo; at <= hi; ++at) {
        REQUIRE(l2::chains::first_not_from(at, lo, hi, before) == want);
      }
    }
  }
}

TEST_CASE("L2 runs: a sum of ramps from cells of steps: exact at the cells' ends, at most its least value", "[l2runs][chains]") {
  // Random ramps and boxes, some starting before the first step or ending
  // past the last, placed into an array over the steps and into cells:
  // each cell's end value is the array's there, and the cells' least value
  // is at most the array's (equal where every ramp is flat within a cell).
  std::mt19937_64 rng(93);
  std::uint64_t tight = 0;
  for (int k = 0; k < 2000; ++k) {
    const std::uint64_t steps = 1 + rng() % 300;
    const std::int64_t lo = static_cast<std::int64_t>(rng() % 1000), hi = lo + static_cast<std::int64_t>(steps) - 1;
    std::vector<std::int64_t> d2(steps + 3, 0), ends(steps / 16 + 2, 0);
    std::vector<l2::chains::SlopeCell> cells(steps / 16 + 2);
    l2::chains::Ramps fine(d2.data(), lo, hi);
    l2::chains::BasicRamps<l2::chains::SlopeCells> coarse(l2::chains::SlopeCells{cells.data(), steps}, lo, hi);
    const bool aligned = k % 4 == 0;  // (every change at a cell's edge: the cells exact)
    auto at = [&](std::int64_t t) { return aligned ? lo + (t - lo) / 16 * 16 + 1 : t; };
    for (int r = 0, n = 1 + static_cast<int>(rng() % 12); r < n; ++r) {
      const std::int64_t a = at(lo - 40 + static_cast<std::int64_t>(rng() % (steps + 80)));
      const std::int64_t b = at(a + static_cast<std::int64_t>(rng() % 200)), w = 1 + static_cast<std::int64_t>(rng() % 50);
      if (rng() % 3 == 0) {
        fine.range(a, b, w), coarse.range(a, b, w);
      } else {
        const std::int64_t M = aligned ? 16 * (1 + static_cast<std::int64_t>(rng() % 4)) : 1 + static_cast<std::int64_t>(rng() % 60);
        fine.trapezoid(a, b, M, w), coarse.trapezoid(a, b, M, w);
      }
    }
    std::int64_t V = fine.v0, S = fine.s0, least = V;
    const std::int64_t got = l2::chains::least_of_cells(cells.data(), steps, coarse.v0, coarse.s0, ends.data());
    for (std::uint64_t x = 1; x < steps; ++x) {
      S += d2[x], V += S, least = std::min(least, V);
      if (x % 16 == 0 || x == steps - 1) REQUIRE(ends[(x - 1) / 16] == V);
    }
    REQUIRE(got <= least);
    tight += got == least;
    for (const auto& c : cells) REQUIRE((c.sum == 0 && c.weighted == 0 && c.neg == 0 && c.pos == 0));
  }
  CHECK(tight > 500);
}

TEST_CASE("L2 runs: long_lo from cells of steps is at most long_lo step by step", "[l2runs][chains]") {
  // On long causal heads in both orders (over the long gaps in head-major
  // order with GQA, over every neighbour otherwise).
  std::mt19937_64 rng(GENERATE(91, 92));
  std::uint64_t checked = 0;
  long_chain_grids(rng, 8, [&](const Shape&, const L2SimConfig&, const l2::chains::ChainGrid& cg) {
    l2::Tally t({1});
    l2::chains::ChainReads reads(cg, t);
    each_rereader(cg, [&](std::uint64_t i, std::uint64_t P) {
      const std::uint64_t m = cg.e[P];
      if (m <= 64 || rng() % 4 != 0) return;
      REQUIRE(reads.long_lo(i, P, m, 0) <= reads.long_lo(i, P, m, ~std::uint64_t{0}));
      ++checked;
    });
  });
  CHECK(checked > 1000);
}

TEST_CASE("L2 runs: long_lo over a run of readers is at most each one's", "[l2runs][chains]") {
  // Runs of CTAs that each re-read their predecessor's blocks, at random
  // places in both orders, held step by step and at their least (in head-major order with GQA, the pairs' first
  // CTAs of a block alone, as the chains take them, or any).
  std::mt19937_64 rng(GENERATE(94, 95));
  std::uint64_t runs = 0, held = 0;
  long_chain_grids(rng, 10, [&](const Shape&, const L2SimConfig&, const l2::chains::ChainGrid& cg) {
    l2::Tally t({1});
    l2::chains::ChainReads reads(cg, t);
    const bool firsts = cg.hm && cg.group > 1 && rng() % 4 != 0;
    for (int k = 0; k < 60; ++k) {
      std::vector<std::uint64_t> run;
      for (std::uint64_t j = pick(rng, 1, cg.n - 1), end = std::min(cg.n, j + pick(rng, 2, 200)); j < end; ++j) {
        const std::uint64_t P = cg.prev(j);
        if (P == l2::chains::no_cta || cg.e[j] == 0 || cg.e[P] == 0 || (firsts && P + 1 == j)) continue;
        if (rng() % 3 != 0) run.push_back(j);
      }
      if (run.size() < 2) continue;
      const std::uint64_t lo = reads.long_lo_run(run);
      const std::vector<std::int64_t> all = reads.long_values(run, true);
      for (const std::uint64_t j : run) {
        // Over every regular neighbour, step by step, the run's sum at most
        // the CTA's; the run's long_lo at most the CTA's least (its g / 8 may
        // keep neighbours the CTA's own long_lo leaves out).
        const std::vector<std::int64_t> own = reads.long_values({j}, true);
        const auto at = static_cast<std::size_t>(cg.s[j] - cg.s[run.front()]);
        std::size_t over = 0;  // (the first read where the run's sum passes the CTA's, if any)
        while (over < own.size() && all[at + over] <= own[over]) ++over;
        INFO("CTA " << j << " read " << over << " of " << own.size());
        REQUIRE(over == own.size());
        REQUIRE(lo <= std::min(cg.zfull(j), cg.zlast(j)) + static_cast<std::uint64_t>(*std::min_element(own.begin(), own.end())));
        ++held;
      }
      ++runs;
    }
  });
  CHECK(runs > 500);
  CHECK(held > 10000);
}

TEST_CASE("L2 runs: the chains' schedule is list scheduling's, however many heads are in flight", "[l2runs][chains]") {
  // Each CTA's start and slot, and the finish order, against list scheduling
  // by a heap of (last step, id): long heads beside few slots (one head's
  // middle at a time), short ones beside many (more heads in flight than the
  // schedule's queues), ragged and both launch orders.
  std::mt19937_64 rng(61);
  int grids = 0, crowded = 0;
  for (int k = 0; k < 160; ++k) {
    Shape s = k % 2 == 0 ? long_causal_heads(rng, 200, 1500, 6) : random_prefill(rng);
    if (k % 4 == 1) s.heads = s.kv_heads * pick(rng, 4, 12), s.block_rows = pick(rng, 8, 32);
    for (auto order : {Rasterization::query_block_major, Rasterization::head_major}) {
      L2SimConfig c;
      c.sm_count = static_cast<std::uint32_t>(pick(rng, 1, 48));
      c.ctas_per_sm = static_cast<std::uint32_t>(pick(rng, 1, 3));
      c.order = order;
      const l2::FlashGrid grid(s, order);
      if (!l2::flash_in_chains(grid)) continue;
      const l2::chains::ChainGrid cg(grid, c);
      INFO(describe(s) << " " << rasterization_name(order) << " slots " << cg.slots);
      using Key = std::pair<std::int64_t, std::uint64_t>;
      std::priority_queue<Key, std::vector<Key>, std::greater<>> running;
      std::vector<std::int64_t> start(cg.n);
      std::vector<std::uint64_t> slot(cg.n), finish;
      std::uint64_t heads_at_once = 0;
      auto last = [&](std::uint64_t j) { return start[j] + static_cast<std::int64_t>(std::max<std::uint32_t>(cg.e[j], 1)) - 1; };
      for (std::uint64_t j = 0; j < cg.n; ++j) {
        slot[j] = j;
        if (j >= cg.slots) {
          const std::uint64_t done = running.top().second;
          running.pop();
          finish.push_back(done);
          start[j] = last(done) + 1, slot[j] = slot[done];
        }
        running.push({last(j), j});
        if (j >= cg.slots && order == Rasterization::query_block_major) heads_at_once = std::max(heads_at_once, cg.head_of(j) - cg.head_of(j - cg.slots) + 1);
      }
      for (; !running.empty(); running.pop()) finish.push_back(running.top().second);
      for (std::uint64_t j = 0; j < cg.n; ++j) {
        REQUIRE(cg.s[j] == start[j]);
        REQUIRE(cg.slot[j] == slot[j]);
        REQUIRE(cg.fo[j] == finish[j]);
      }
      ++grids;
      crowded += heads_at_once > 4;
    }
  }
  CHECK(grids > 100);
  CHECK(crowded > 10);
}
