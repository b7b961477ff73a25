// The runs method against the enumeration (the reference): identical results
// on every shape where the enumeration runs (docs/model.md, "How it is
// evaluated"). Hundreds of random shapes, both launch orders, both --l2-qo
// modes, ladders of L2 sizes.
#include <algorithm>
#include <catch2/catch.hpp>
#include <random>

#include "hbmscope/decode.hpp"
#include "hbmscope/l2_sim.hpp"
#include "hbmscope/mask.hpp"
#include "hbmscope/model.hpp"
#include "hbmscope/tile_bytes.hpp"
#include "../src/core/l2_flash.hpp"
#include "../src/core/l2_flash_chains.hpp"
#include "l2_chain_grids.hpp"
#include "l2_tallies.hpp"
#include "random_shapes.hpp"

using namespace hbmscope;
using namespace hbmscope::test;

namespace {

L2SimConfig config(std::mt19937_64& rng, Rasterization order, bool qo) { return random_slots(rng, order, qo, 6); }

void same_flash(const Shape& s, L2SimConfig c) {
  const std::uint64_t all = kv_footprint_bytes(s) + qo_footprint_bytes(s);
  const auto caps = ladder(all);
  c.method = L2SimMethod::enumeration;
  const auto ce = flash_l2_curve(s, c, caps);
  c.method = L2SimMethod::runs;
  const auto cr = flash_l2_curve(s, c, caps);
  CHECK(ce == cr);
  for (std::uint64_t cap : {caps[3], caps[17], caps[30]}) {
    c.l2_bytes = cap;
    c.method = L2SimMethod::enumeration;
    const L2SimResult e = flash_l2_sim(s, c);
    c.method = L2SimMethod::runs;
    const L2SimResult r = flash_l2_sim(s, c);
    CHECK(e.dram_bytes == r.dram_bytes);
    CHECK(e.dram_read_bytes == r.dram_read_bytes);
    CHECK(e.dram_write_bytes == r.dram_write_bytes);
    CHECK(e.read_request_bytes == r.read_request_bytes);
    CHECK(e.l2_hit_rate == r.l2_hit_rate);
    CHECK(e.l2_bytes_to_min == r.l2_bytes_to_min);
    CHECK(e.min_dram_bytes == r.min_dram_bytes);
    CHECK(e.heads_per_wave == r.heads_per_wave);
    CHECK(e.kv_heads_per_wave == r.kv_heads_per_wave);
    CHECK(e.waves == r.waves);
    CHECK(e.steps == r.steps);
  }
}

// One exact evaluation of the forward pass (the segment engine, the chains)
// against the enumeration, on a ladder of L2 sizes.
template <class Evaluate>
void same_as_enumeration(const Shape& s, const L2SimConfig& c, Evaluate evaluate) {
  const std::uint64_t all = kv_footprint_bytes(s) + qo_footprint_bytes(s);
  const auto caps = ladder(all);
  l2::Tally te(caps), tx(caps);
  const l2::FlashStats se = l2::enumerate_flash(s, c, te);
  const l2::FlashStats sx = evaluate(s, c, tx);
  CHECK(l2::curve(te, caps) == l2::curve(tx, caps));
  same_tally(te, tx);
  CHECK(se.heads == sx.heads);
  CHECK(se.kv_heads == sx.kv_heads);
  CHECK(se.steps == sx.steps);
  CHECK(se.waves == sx.waves);
}

void same_segments(const Shape& s, const L2SimConfig& c) { same_as_enumeration(s, c, l2::segments_flash); }

// The chains (shapes whose CTAs read key blocks from 0: causal, or ragged
// without a mask; both launch orders), on the ladder and at single capacities
// as a report row has (most CTAs' re-reads then fall in one bucket and are
// counted from bounds, not evaluated).
void same_chains_at(const Shape& s, const L2SimConfig& c, std::uint64_t cap) {
  l2::Tally t1({cap}), t2({cap});
  l2::enumerate_flash(s, c, t1);
  l2::chains_flash(s, c, t2);
  CHECK(t1.dram_reads(cap) == t2.dram_reads(cap));
  CHECK(t1.max_reuse_distance() == t2.max_reuse_distance());
  CHECK(t1.requested() == t2.requested());
}
void same_chains(const Shape& s, const L2SimConfig& c) {
  if (!l2::flash_in_chains(l2::FlashGrid(s, c.order))) return;
  same_as_enumeration(s, c, l2::chains_flash);
  const auto caps = ladder(kv_footprint_bytes(s) + qo_footprint_bytes(s));
  for (std::uint64_t cap : {caps[5], caps[12], caps[24]}) same_chains_at(s, c, cap);
}

// Holds `same` (same_flash or same_segments) on s in both launch orders and
// both --l2-qo modes, each on a random grid that `grid` may change.
template <class Same, class Grid>
void in_every_order(std::mt19937_64& rng, const Shape& s, Same same, Grid grid) {
  for (auto order : {Rasterization::query_block_major, Rasterization::head_major})
    for (bool qo : {true, false}) {
      L2SimConfig c = config(rng, order, qo);
      grid(c);
      INFO(describe(s) << " " << rasterization_name(order) << " qo " << qo << " slots " << c.sm_count << "x"
                       << c.ctas_per_sm);
      same(s, c);
    }
}
void any_grid(L2SimConfig&) {}

}  // namespace

TEST_CASE("L2 runs: a head by arithmetic is the division, for every id the chains take", "[l2runs][chains]") {
  // (Divisors of every size up to the largest id; ids at and beside each
  // multiple, and the largest.)
  constexpr std::uint64_t top = l2::max_chain_ctas - 1;
  std::mt19937_64 rng(7);
  std::vector<std::uint64_t> divisors{1, 2, 3, 7, 64, 127, 128, 129, 1000, 8191, 8192, 8193, 65535, top - 1, top};
  for (int k = 0; k < 200; ++k) divisors.push_back(1 + rng() % top);
  for (std::uint64_t d : divisors) {
    const l2::chains::Divider div(d);
    for (std::uint64_t q = 0; q * d <= top && q < 4000; ++q)
      for (std::uint64_t k : {q * d, q * d + d - 1, q * d == 0 ? 0 : q * d - 1})
        if (k <= top) REQUIRE(div(k) == k / d);
    REQUIRE(div(top) == top / d);
    for (int j = 0; j < 200; ++j) {
      const std::uint64_t k = rng() % (top + 1);
      REQUIRE(div(k) == k / d);
    }
  }
}

TEST_CASE("L2 runs: the chains take 2^23 CTAs, 1M tokens x 64 heads x batch 8 in blocks of 64 rows", "[l2runs][chains]") {
  // (Ids fill the schedule's 23 bits; the largest is 2^23 - 1.)
  Shape s;
  s.seq_q = s.seq_kv = 1ull << 20;
  s.heads = 64;
  s.kv_heads = 8;
  s.batch = 8;
  s.head_dim = 128;
  s.block_rows = 64;
  s.causal = true;
  L2SimConfig c;
  c.sm_count = 132;
  c.ctas_per_sm = 1;
  c.l2_bytes = 60ull << 20;
  REQUIRE(l2::FlashGrid(s, c.order).ctas() == (1ull << 23));
  REQUIRE(l2_sim_within_budget(s, c));
  const L2SimResult r = flash_l2_sim(s, c);
  CHECK(r.dram_bytes > floor_bytes(s));
  CHECK(r.dram_bytes < flash_no_l2_bytes(s));
  CHECK(r.l2_bytes_to_min > c.l2_bytes);
  // One head more: past what the chains take, and left out.
  s.heads = 65;
  s.kv_heads = 5;
  CHECK_FALSE(l2_sim_within_budget(s, c));
  // Without GQA at 6 CTAs an SM the search for the largest distance took
  // 27 s (docs/l2-chains-progress.md): left out, counted at 4 units a slot.
  s.heads = s.kv_heads = 64;
  s.block_rows = 128;
  c.ctas_per_sm = 6;
  CHECK_FALSE(l2_sim_within_budget(s, c));
  s.kv_heads = 8;  // (with GQA, a unit a slot: 2.2 s measured at 8 CTAs an SM)
  CHECK(l2_sim_within_budget(s, c));
  // Head-major order with GQA: a unit a slot where a head has at least 16 S
  // query blocks (d = 64 in blocks of 64 rows at 3 CTAs an SM: 3.3 s
  // measured), else 4 (d = 128 in blocks of 128 at 8 CTAs an SM: 52 s).
  c.order = Rasterization::head_major;
  s.head_dim = 64;
  s.block_rows = 64;
  c.ctas_per_sm = 3;
  CHECK(l2_sim_within_budget(s, c));
  s.head_dim = 128;
  s.block_rows = 128;
  c.ctas_per_sm = 8;
  CHECK_FALSE(l2_sim_within_budget(s, c));
}

TEST_CASE("L2 runs: the forward pass equals the enumeration on random shapes", "[l2runs]") {
  std::mt19937_64 rng(GENERATE(2024, 7, 99));
  for (int k = 0; k < 160; ++k) {
    const Shape s = random_prefill(rng);
    in_every_order(rng, s, same_flash, any_grid);
  }
}

TEST_CASE("L2 runs: the segment engine equals the enumeration on random shapes", "[l2runs]") {
  // runs_flash enumerates where that is cheaper; the engine is held to it directly.
  std::mt19937_64 rng(GENERATE(11, 12));
  for (int k = 0; k < 160; ++k) {
    const Shape s = random_prefill(rng, true);
    in_every_order(rng, s, same_segments, any_grid);
  }
}

TEST_CASE("L2 runs: the segment engine equals the enumeration on long CTAs and wide GQA groups", "[l2runs]") {
  // Long segments beside few others (slope changes sorted, not swept), and
  // many single reads (a head's first reads of key blocks its group's
  // previous head read last), with the ties of regular schedules.
  std::mt19937_64 rng(GENERATE(5, 6));
  for (int k = 0; k < 60; ++k) {
    Shape s = random_prefill(rng, true);
    lengthen(rng, s, 200, 1500, 6);
    in_every_order(rng, s, same_segments, [&](L2SimConfig& c) {
      if (pick(rng, 0, 1) == 0) c.sm_count = static_cast<std::uint32_t>(pick(rng, 8, 40));
    });
  }
}

TEST_CASE("L2 runs: the chains equal the enumeration on causal and ragged shapes", "[l2runs][chains]") {
  std::mt19937_64 rng(GENERATE(31, 32, 33));
  for (int k = 0; k < 200; ++k) {
    Shape s = random_prefill(rng);
    s.window = 0;
    s.chunk = 0;
    if (k % 2 == 0) lengthen(rng, s, 100, 900, 5);  // long heads beside few slots, wide GQA groups
    for (auto order : {Rasterization::query_block_major, Rasterization::head_major})
      for (bool qo : {true, false}) {
        L2SimConfig c = config(rng, order, qo);
        if (pick(rng, 0, 1) == 0) c.sm_count = static_cast<std::uint32_t>(pick(rng, 8, 40));
        INFO(describe(s) << " " << rasterization_name(order) << " qo " << qo << " slots " << c.sm_count << "x"
                         << c.ctas_per_sm);
        same_chains(s, c);
      }
  }
}

TEST_CASE("L2 runs: the chains equal the enumeration on long causal heads", "[l2runs][chains]") {
  // Heads of hundreds of key blocks beside tens of slots: most CTAs' re-reads
  // are counted from bounds, a head's first reads of its blocks mostly in
  // closed form (its previous head's last CTA done), with the ties of
  // regular schedules; one capacity (a report row) and a curve.
  std::mt19937_64 rng(GENERATE(41, 42));
  for (int k = 0; k < 12; ++k) beside_few_slots(rng, long_causal_heads(rng, 3000, 8000, 4), same_chains);
}

// Many causal heads of tens of key blocks beside a few slots, query-block-
// major: the schedule settles into a period of heads that repeat earlier ones.
Shape many_heads(std::mt19937_64& rng) {
  Shape s;
  s.kv_heads = pick(rng, 1, 4);
  s.heads = s.kv_heads * pick(rng, 1, 8);
  s.batch = pick(rng, 1, 2);
  s.block_rows = s.block_cols = 16;
  s.seq_q = s.seq_kv = pick(rng, 0, 2) == 0 ? pick(rng, 100, 600) : pick(rng, 600, 2500);  // (short heads overlap)
  s.head_dim = 64;
  s.causal = true;
  return s;
}

TEST_CASE("L2 runs: a repeated head's re-readers have the distances of the head they repeat", "[l2runs][chains]") {
  std::mt19937_64 rng(GENERATE(61, 62));
  std::uint64_t repeated = 0, whole = 0;  // (whole: at a place from which the head's next one runs beside it)
  for (int k = 0; k < 40; ++k) {
    const Shape s = many_heads(rng);
    L2SimConfig c;
    c.sm_count = static_cast<std::uint32_t>(pick(rng, 6, s.seq_q < 600 ? 40 : 16));
    c.ctas_per_sm = 1;
    c.q_o_allocate = pick(rng, 0, 1) == 1;
    INFO(describe(s) << " qo " << c.q_o_allocate << " slots " << c.sm_count);
    const l2::FlashGrid grid(s, c.order);
    REQUIRE(l2::flash_in_chains(grid));
    const l2::chains::ChainGrid cg(grid, c);
    const l2::chains::HeadRepeats r = l2::chains::find_repeats(cg);
    const auto caps = ladder(kv_footprint_bytes(s) + qo_footprint_bytes(s));
    std::vector<std::uint64_t> peaks;  // repeated re-readers' largest distances
    for (std::uint64_t i = 0; i < cg.n; ++i) {
      const std::uint64_t from = r.of(i);
      if (from == l2::chains::no_cta) continue;
      REQUIRE(r.source_of_any(from));
      // (The run keeps the source's bounds for its repeats.)
      REQUIRE(r.source_kept(from) < r.sources * r.per_head);
      // Each evaluated alone into a tally of its own: every capacity's
      // misses, and the largest distance, alike.
      l2::Tally ti(caps), tf(caps);
      l2::chains::ChainReads ri(cg, ti), rf(cg, tf);
      l2::chains::Batches bi(ti), bf(tf);
      CHECK(ri.chain(i, cg.prev(i), cg.e[cg.prev(i)], bi) == rf.chain(from, cg.prev(from), cg.e[cg.prev(from)], bf));
      bi.flush(ti), bf.flush(tf);
      for (std::uint64_t cap : caps) CHECK(ti.dram_reads(cap) == tf.dram_reads(cap));
      CHECK(ti.max_reuse_distance() == tf.max_reuse_distance());
      peaks.push_back(ti.max_reuse_distance());
      ++repeated;
      whole += i - cg.head_of(i) * r.per_head >= r.upto[cg.head_of(i)];
    }
    same_chains(s, c);
    // One capacity at (and one byte below) a repeated re-reader's largest
    // distance: its re-reads straddle it or touch it, where its neighbours'
    // may not, so a repeat given another place's bounds is counted wrong.
    for (std::size_t at = 0; at < 3 && !peaks.empty(); ++at) {
      const std::uint64_t peak = peaks[(2 * at + 1) * peaks.size() / 6];
      same_chains_at(s, c, peak);
      same_chains_at(s, c, peak - 1);
    }
  }
  CHECK(repeated > 1000);
  CHECK(whole > 100);
}

TEST_CASE("L2 runs: a head's middle counted from profiles equals each CTA evaluated", "[l2runs][chains]") {
  // Dense causal heads of whole blocks (the profiles' domain), query-block-
  // major, one capacity: every CTA the profiles count (from one of its g,
  // extended or new, or between two others') has the bytes at each side of
  // the capacity and, where asked, the largest distance of its own
  // evaluation (where asked with a floor above it, at most that); some CTAs
  // are passed over, so that profiles are found ahead, behind and missing;
  // and the run equals the enumeration.
  std::mt19937_64 rng(GENERATE(81, 82));
  l2::chains::ChainReads::ProfileStats all;
  std::uint64_t checked = 0, builds_short = 0, builds_long = 0, below_floor = 0;
  for (int k = 0; k < 24; ++k) {
    Shape s = long_causal_heads(rng, 60, 300, 6);
    s.seq_q *= 16;  // (whole blocks of 16)
    s.seq_kv = pick(rng, 0, 3) == 0 ? s.seq_q + 16 * pick(rng, 1, 30) : s.seq_q;
    L2SimConfig c;
    c.sm_count = static_cast<std::uint32_t>(pick(rng, 8, 40));
    c.ctas_per_sm = static_cast<std::uint32_t>(pick(rng, 1, 2));
    c.q_o_allocate = pick(rng, 0, 1) == 1;
    INFO(describe(s) << " qo " << c.q_o_allocate << " slots " << c.sm_count << "x" << c.ctas_per_sm);
    const l2::FlashGrid grid(s, c.order);
    REQUIRE(l2::flash_in_chains(grid));
    const l2::chains::ChainGrid cg(grid, c);
    const auto caps = ladder(kv_footprint_bytes(s) + qo_footprint_bytes(s));
    // (Capacities on the ladder, and at an evaluated CTA's largest distance
    // and a byte below: its reads straddle or touch it.)
    std::vector<std::uint64_t> at = {caps[pick(rng, 4, 10)], caps[pick(rng, 11, 17)], caps[pick(rng, 18, 24)]};
    {
      l2::Tally t({at[1]});
      l2::chains::ChainReads reads(cg, t);
      l2::chains::Batches b(t);
      const std::uint64_t i = cg.n / 3 + rng() % (cg.n / 3);
      if (cg.prev(i) != l2::chains::no_cta && cg.e[cg.prev(i)] > 0) {
        const std::uint64_t peak = reads.chain(i, cg.prev(i), cg.e[cg.prev(i)], b);
        at.insert(at.end(), {peak, peak - 1});
      }
    }
    for (std::uint64_t cap : at) {
      l2::Tally t({cap});
      l2::chains::ChainReads profiled(cg, t), evaluated(cg, t);
      evaluated.profiles(false);
      // (Profiles built far ahead as the CLI's, or a few steps: extended and
      // their steps dropped more often.)
      const bool short_ahead = pick(rng, 0, 1) == 1;
      if (short_ahead) profiled.profile_ahead(static_cast<std::int64_t>(pick(rng, 1, 256)));
      each_rereader(cg, [&](std::uint64_t i, std::uint64_t P) {
        const std::uint64_t m = cg.e[P];
        if (!profiled.in_middle(i, m) || rng() % 5 == 0) return;
        const bool most = rng() % 4 == 0;
        l2::Tally ta({cap}), tb({cap});
        l2::chains::Batches ba(ta), bb(tb);
        const std::uint64_t want = evaluated.chain(i, P, m, bb, most);
        // (With most, a floor at, above or below the largest distance: where
        // the largest lies below it, the profiles may count without it.)
        const std::uint64_t floors[] = {0, want, want + 1, want - want / 16, want + want / 16};
        const std::uint64_t floor = most ? floors[rng() % 5] : 0;
        const std::uint64_t got = profiled.chain(i, P, m, ba, most, floor);
        ba.flush(ta), bb.flush(tb);
        REQUIRE(ta.dram_reads(cap) == tb.dram_reads(cap));
        if (want >= floor) {
          REQUIRE(got == want);
          REQUIRE(ta.max_reuse_distance() == tb.max_reuse_distance());
        } else {
          REQUIRE(got <= want);
          REQUIRE(ta.max_reuse_distance() <= tb.max_reuse_distance());
          below_floor += got < want;
        }
        ++checked;
      });
      const auto& st = profiled.profile_stats();
      all.ctas += st.ctas, all.hits += st.hits, all.between += st.between, all.builds += st.builds;
      (short_ahead ? builds_short : builds_long) += st.builds;
      same_chains_at(s, c, cap);
    }
  }
  CHECK(checked > 2000);
  CHECK(below_floor > 20);
  CHECK(all.hits > 500);
  CHECK(all.between > 200);
  CHECK(all.builds > 200);
  CHECK(builds_short > 100);
  CHECK(builds_long > 100);
}

TEST_CASE("L2 runs: waves in lockstep (no mask) equal the enumeration, wide and narrow grids", "[l2runs]") {
  std::mt19937_64 rng(31);
  for (int k = 0; k < 300; ++k) {
    Shape s;
    s.kv_heads = pick(rng, 1, 4);
    s.heads = s.kv_heads * pick(rng, 1, 4);
    s.batch = pick(rng, 1, 4);
    s.seq_q = pick(rng, 1, 300);
    s.seq_kv = pick(rng, 1, 300);
    s.head_dim = pick(rng, 1, 64);
    s.block_rows = pick(rng, 8, 96);
    s.block_cols = pick(rng, 8, 96);
    s.dtype = static_cast<Dtype>(pick(rng, 0, 3));
    if (pick(rng, 0, 2) == 0) s.head_dim_v = pick(rng, 1, 64);
    in_every_order(rng, s, same_flash, [&](L2SimConfig& c) {
      c.sm_count = static_cast<std::uint32_t>(pick(rng, 1, 9));  // fewer slots than heads, and more
    });
  }
}

TEST_CASE("L2 runs: decode rows equal the enumeration", "[l2runs][decode]") {
  std::mt19937_64 rng(5150);
  for (int k = 0; k < 150; ++k) {
    Shape s;
    s.decode = true;
    s.kv_heads = pick(rng, 1, 4);
    s.heads = s.kv_heads * pick(rng, 1, 20);
    s.batch = pick(rng, 1, 6);
    s.seq_q = pick(rng, 1, 4);
    s.seq_kv = pick(rng, s.seq_q, 2000);
    s.head_dim = pick(rng, 8, 128);
    s.block_cols = 8 * pick(rng, 1, 16);
    s.dtype = static_cast<Dtype>(pick(rng, 0, 3));
    s.page_size = pick(rng, 0, 2) == 0 ? pick(rng, 1, 40) : s.block_cols / (1 + pick(rng, 0, 3) % 2);
    if (s.block_cols % s.page_size != 0 && pick(rng, 0, 1)) s.page_size = 8;
    if (pick(rng, 0, 3) == 0) {  // ragged contexts: enumerated
      std::vector<std::uint64_t> l;
      for (std::uint64_t b = 0; b < s.batch; ++b) l.push_back(pick(rng, s.seq_q, 2000));
      s.context_lengths = l;
      s.seq_kv = s.context_lengths.max_kv();
    }
    s.splits = pick(rng, 0, 2) == 0 ? pick(rng, 2, 9) : 1;
    for (DecodeVariant v : {DecodeVariant::split, DecodeVariant::split_unpacked, DecodeVariant::paged})
      for (bool qo : {true, false}) {
        L2SimConfig c = config(rng, Rasterization::query_block_major, qo);
        c.sm_count = static_cast<std::uint32_t>(pick(rng, 1, 8));
        INFO(describe(s) << " " << decode_variant_id(v) << " splits " << s.splits << " qo " << qo << " slots "
                         << c.sm_count << "x" << c.ctas_per_sm << " page " << s.page_size);
        const std::uint64_t all = decode_bytes(s, v, s.splits).total;
        const auto caps = ladder(all);
        c.method = L2SimMethod::enumeration;
        const auto ce = decode_l2_curve(s, v, s.splits, c, caps);
        c.method = L2SimMethod::runs;
        const auto cr = decode_l2_curve(s, v, s.splits, c, caps);
        CHECK(ce == cr);
        c.l2_bytes = caps[9];
        c.method = L2SimMethod::enumeration;
        const L2SimResult e = decode_l2_sim(s, v, s.splits, c);
        c.method = L2SimMethod::runs;
        const L2SimResult r = decode_l2_sim(s, v, s.splits, c);
        CHECK(e.dram_bytes == r.dram_bytes);
        CHECK(e.l2_hit_rate == r.l2_hit_rate);
        CHECK(e.l2_bytes_to_min == r.l2_bytes_to_min);
        CHECK(e.min_dram_bytes == r.min_dram_bytes);
        CHECK(e.waves == r.waves);
        CHECK(e.steps == r.steps);
      }
  }
}

TEST_CASE("L2 runs: standard attention's closed form equals the enumeration", "[l2runs][standard]") {
  std::mt19937_64 rng(808);
  for (int k = 0; k < 300; ++k) {
    const Shape s = random_prefill(rng);
    for (bool qo : {true, false}) {
      L2SimConfig c = config(rng, Rasterization::query_block_major, qo);
      INFO(describe(s) << " qo " << qo);
      const std::uint64_t e = elem_bytes(s.dtype);
      const std::uint64_t all = kv_footprint_bytes(s) + qo_footprint_bytes(s) +
                                4 * e * s.batch * s.heads * s.seq_q * s.seq_kv;
      const auto caps = ladder(all);
      c.method = L2SimMethod::enumeration;
      const auto ce = standard_l2_curve(s, c, caps);
      c.method = L2SimMethod::runs;
      const auto cr = standard_l2_curve(s, c, caps);
      CHECK(ce == cr);
      c.l2_bytes = caps[7];
      c.method = L2SimMethod::enumeration;
      const L2SimResult a = standard_l2_sim(s, c);
      c.method = L2SimMethod::runs;
      const L2SimResult b = standard_l2_sim(s, c);
      CHECK(a.dram_bytes == b.dram_bytes);
      CHECK(a.l2_hit_rate == b.l2_hit_rate);
      CHECK(a.l2_bytes_to_min == b.l2_bytes_to_min);
      CHECK(a.min_dram_bytes == b.min_dram_bytes);
    }
  }
}

namespace {
// Issue 19's shapes at the two ends, counted here from the masks and the
// operand sizes alone: with no L2 every CTA's Q, O and visited K/V tiles;
// with an L2 holding everything Q and O once and each K/V tile some query
// block visits once (whole tiles: a window that starts inside a key block
// still reads the block).
struct Ends {
  std::uint64_t none = 0, all = 0;
};
Ends forward_ends(const Shape& s) {
  const OperandBytes ob = operand_bytes(s);
  Ends e;
  auto one = [&](std::uint64_t q, std::uint64_t kv, std::uint64_t count) {
    Shape t = s;
    t.seq_lens = {};
    t.batch = 1;
    t.seq_q = q;
    t.seq_kv = kv;
    const std::uint64_t nqb = (q + s.block_rows - 1) / s.block_rows, nkb = (kv + s.block_cols - 1) / s.block_cols;
    std::vector<bool> seen(nkb, false);
    std::uint64_t none = (ob.q_row + ob.o_row) * q * s.heads, kv_once = 0;
    for (std::uint64_t i = 0; i < nqb; ++i) {
      const KeyRange r = visible_key_blocks(t, i);
      for (std::uint64_t j = r.begin; j < r.end; ++j) {
        const std::uint64_t bytes = ob.kv_col() * std::min(s.block_cols, kv - j * s.block_cols);
        none += s.heads * bytes;
        if (!seen[j]) kv_once += bytes;
        seen[j] = true;
      }
    }
    e.none += count * none;
    e.all += count * ((ob.q_row + ob.o_row) * q * s.heads + s.kv_heads * kv_once);
  };
  if (s.seq_lens.empty()) one(s.seq_q, s.seq_kv, s.batch);
  else
    for (const SeqLen& x : s.seq_lens) one(x.q, x.kv, 1);
  return e;
}
}  // namespace

TEST_CASE("L2 runs: windows, chunks, DV, KV dtype and ragged batches at no L2 and at an L2 holding all", "[l2runs]") {
  std::mt19937_64 rng(1919);
  for (int k = 0; k < 200; ++k) {
    const Shape s = random_prefill(rng);
    INFO(describe(s));
    const Ends e = forward_ends(s);
    for (auto m : {L2SimMethod::runs, L2SimMethod::enumeration}) {
      L2SimConfig c = config(rng, Rasterization::query_block_major, true);
      c.method = m;
      CHECK(flash_l2_sim(s, c).dram_bytes == e.none);
      c.l2_bytes = std::uint64_t{1} << 62;
      CHECK(flash_l2_sim(s, c).dram_bytes == e.all);
      c.q_o_allocate = false;
      c.l2_bytes = kv_footprint_bytes(s);  // every K/V tile fits when Q and O bypass
      CHECK(flash_l2_sim(s, c).dram_bytes == e.all);
    }
    if (s.window == 0 && s.chunk == 0 && s.seq_lens.empty() && s.head_dim_v == 0 && !s.kv_dtype) {  // what model.cpp counts today
      CHECK(e.none == flash_no_l2_bytes(s));
      CHECK(e.all == floor_bytes(s));
    }
  }
}
