// The causal backward's main loop by rows (docs/l2-backward.md, "The
// backward's main loop by rows"): runs of row-set re-reads found per head,
// counted by bucket where bounds settle them, evaluated over the CTAs beside
// them elsewhere. The tallies must be the enumeration's, bit for bit, at any
// L2 sizes (tests/test_l2_backward.cpp holds it at 45 of them on random
// shapes); here at the one to three sizes where bounds settle most reads, on
// long causal heads.
#include <catch2/catch.hpp>
#include <random>
#include <tuple>

#include "hbmscope/l2_sim.hpp"
#include "../src/core/l2_backward.hpp"
#include "l2_tallies.hpp"
#include "random_shapes.hpp"

using namespace hbmscope;

namespace {

using test::pick;

// Long causal heads: 1K to 6K tokens in blocks of 8 to 32 (up to 768 CTAs a
// head), GQA groups of 1 to 8, Nq != Nkv at times, beside 4 to 48 slots.
Shape long_causal(std::mt19937_64& rng) {
  Shape s;
  s.pass = Pass::bwd;
  s.causal = true;
  s.kv_heads = pick(rng, 1, 2);
  s.heads = s.kv_heads * pick(rng, 1, 4);
  s.batch = pick(rng, 1, 2);
  s.seq_q = pick(rng, 1024, 6144);
  s.seq_kv = pick(rng, 0, 3) == 0 ? pick(rng, 1024, 6144) : s.seq_q;
  s.head_dim = pick(rng, 8, 64);
  s.block_rows = pick(rng, 8, 32);
  s.block_cols = pick(rng, 8, 32);
  if (pick(rng, 0, 3) == 0) {  // a ragged batch, causal or not
    std::vector<SeqLen> items;
    for (std::uint64_t b = 0, n = pick(rng, 2, 3); b < n; ++b) {
      const std::uint64_t kv = pick(rng, 512, 3000);
      items.push_back({pick(rng, kv / 2, kv), kv});
    }
    s.seq_lens = SeqList(items);
    s.batch = items.size();
    s.seq_q = s.seq_lens.max_q();
    s.seq_kv = s.seq_lens.max_kv();
    s.causal = pick(rng, 0, 1) == 1;
  }
  return s;
}

// L2 sizes where bounds settle most re-reads (two steps of every slot's row
// set and K/V and more, as sweep --device asks) or at random, one to three.
std::vector<std::uint64_t> sizes(std::mt19937_64& rng, const Shape& s, const L2SimConfig& c, std::uint64_t all) {
  const l2::BackwardGrid g(s, c.order);
  const std::uint64_t slots = std::uint64_t{c.sm_count} * c.ctas_per_sm;
  const std::uint64_t row_set = (g.ql_row() + g.do_row() + 4 + g.acc_row()) * s.block_rows;
  const std::uint64_t kv = g.kv_col() * s.block_cols, settle = 2 * slots * (row_set + kv) + row_set;
  std::vector<std::uint64_t> caps;
  for (std::uint64_t k = 0, n = pick(rng, 1, 3); k < n; ++k) {
    switch (pick(rng, 0, 3)) {
      case 0: caps.push_back(settle + pick(rng, 0, settle)); break;
      case 1: caps.push_back(settle * pick(rng, 2, 12)); break;
      case 2: caps.push_back(pick(rng, 0, all + 1)); break;
      default: caps.push_back(pick(rng, settle, std::max(settle, all / 4))); break;
    }
  }
  return caps;
}

// n L2 sizes at random, up to the largest distance the enumeration reaches.
std::vector<std::uint64_t> random_sizes(std::mt19937_64& rng, const Shape& s, const L2SimConfig& c, int n) {
  l2::Tally t0({0});
  l2::enumerate_backward(s, c, t0);
  std::vector<std::uint64_t> caps;
  for (int i = 0; i < n; ++i) caps.push_back(pick(rng, 0, t0.max_reuse_distance() + 1));
  return caps;
}

// A causal backward of 1 to 3 kv heads, groups of g_lo to 4 query heads.
Shape causal_backward(std::mt19937_64& rng, std::uint64_t g_lo, std::uint64_t batch_hi) {
  Shape s;
  s.pass = Pass::bwd;
  s.causal = true;
  s.kv_heads = pick(rng, 1, 3);
  s.heads = s.kv_heads * pick(rng, g_lo, 4);
  s.batch = pick(rng, 1, batch_hi);
  return s;
}

// A ragged batch of 2 or 3 sequences, each against itself, of lo to hi tokens.
void ragged(std::mt19937_64& rng, Shape& s, std::uint64_t lo, std::uint64_t hi) {
  std::vector<SeqLen> items;
  for (std::uint64_t b = 0, n = pick(rng, 2, 3); b < n; ++b) {
    const std::uint64_t len = pick(rng, lo, hi);
    items.push_back({len, len});
  }
  s.seq_lens = SeqList(items);
  s.batch = items.size();
  s.seq_q = s.seq_lens.max_q();
  s.seq_kv = s.seq_lens.max_kv();
}

// The automatic choice and, unless `how` is automatic, the main loop taken
// `how` held to the enumeration; the second's statistics.
l2::FlashStats same_as_enumeration(const Shape& s, const L2SimConfig& c, const std::vector<std::uint64_t>& caps,
                                   l2::MainLoop how) {
  INFO(describe(s) << ", " << c.sm_count << " x " << c.ctas_per_sm << " slots, qo " << c.q_o_allocate);
  l2::Tally te(caps), ta(caps);
  const l2::FlashStats se = l2::enumerate_backward(s, c, te);
  const l2::FlashStats sa = l2::segments_backward(s, c, ta);
  test::same_tally(te, ta);
  CHECK(sa.steps == se.steps);
  CHECK(sa.heads == se.heads);
  CHECK(sa.kv_heads == se.kv_heads);
  if (how == l2::MainLoop::automatic) return sa;
  l2::Tally tr(caps);
  const l2::FlashStats sr = l2::segments_backward(s, c, tr, how);
  test::same_tally(te, tr);
  CHECK(sr.heads == se.heads);
  CHECK(sr.steps == se.steps);
  return sr;
}

// A third with every bound checked; a fifth handed to the engine, the grid's
// labels back, at the first read left open.
l2::MainLoop checked_or_handed(int k) {
  return k % 3 == 0 ? l2::MainLoop::by_rows_checked : k % 5 == 1 ? l2::MainLoop::by_rows_then_engine : l2::MainLoop::by_rows;
}

}  // namespace

TEST_CASE("L2 sim backward: the grid's CTAs at once are its CTAs one by one", "[l2sim][backward]") {
  // BackwardGrid::all makes each key block's and each head's fields once.
  std::mt19937_64 rng(20261206);
  for (int n = 0; n < 200; ++n) {
    Shape s = long_causal(rng);
    s.seq_q = s.seq_lens.empty() ? s.seq_q / 8 : s.seq_q;
    s.seq_kv = s.seq_lens.empty() ? s.seq_kv / 8 : s.seq_kv;
    s.causal = pick(rng, 0, 1) == 1;
    for (const Rasterization order : {Rasterization::query_block_major, Rasterization::head_major}) {
      const l2::BackwardGrid g(s, order);
      std::vector<l2::BackwardCta> all(g.ctas());
      g.all(all.data());
      for (std::uint64_t id = 0; id < g.ctas(); ++id) {
        const l2::BackwardCta a = all[id], b = g.cta(id);
        INFO(describe(s) << " CTA " << id);
        REQUIRE(std::tie(a.cols, a.seq, a.head, a.k_block, a.first, a.end, a.head_key) ==
                std::tie(b.cols, b.seq, b.head, b.k_block, b.first, b.end, b.head_key));
      }
    }
  }
}

TEST_CASE("L2 backward by rows: long causal heads at one to three L2 sizes equal the enumeration",
          "[l2runs][backward]") {
  std::mt19937_64 rng(GENERATE(83, 84));
  for (int k = 0; k < test::draws(30); ++k) {
    const Shape s = long_causal(rng);
    const auto order = k % 3 == 2 ? Rasterization::head_major : Rasterization::query_block_major;
    const L2SimConfig c = test::random_slots(rng, order, pick(rng, 0, 1) == 1, 16);
    l2::Tally t0({0});
    l2::enumerate_backward(s, c, t0);
    const auto caps = sizes(rng, s, c, t0.max_reuse_distance());
    INFO(describe(s) << ", " << c.sm_count << " x " << c.ctas_per_sm << " slots, "
                     << rasterization_name(order) << ", qo " << c.q_o_allocate << ", L2 " << caps.front());
    l2::Tally te(caps), tr(caps), ta(caps);
    const l2::FlashStats se = l2::enumerate_backward(s, c, te);
    const l2::FlashStats sr = l2::segments_backward(s, c, tr, l2::MainLoop::by_rows_checked);
    const l2::FlashStats sa = l2::segments_backward(s, c, ta);  // by rows where bounds settle, else the engine
    CHECK(sa.steps == se.steps);
    test::same_tally(te, tr);
    test::same_tally(te, ta);
    CHECK(se.steps == sr.steps);
    CHECK(se.heads == sr.heads);
    CHECK(se.kv_heads == sr.kv_heads);
  }
}

// L2 sizes where one step of every slot's row set fits but not two K/V beside
// it (by rows since 2026-12-06; before, the engine): a read a step after its
// predecessor settles only where the predecessor comes later in launch order
// or no CTA was launched between the two.
TEST_CASE("L2 backward by rows: one step of row sets in the L2 equals the enumeration", "[l2runs][backward]") {
  std::mt19937_64 rng(GENERATE(89, 90));
  for (int k = 0; k < test::draws(12); ++k) {
    Shape s = long_causal(rng);
    s.window = k % 3 == 1 ? pick(rng, 1, 400) : 0;
    const L2SimConfig c = test::random_slots(rng, Rasterization::query_block_major, pick(rng, 0, 1) == 1, 16);
    const l2::BackwardGrid g(s, c.order);
    const std::uint64_t slots = std::uint64_t{c.sm_count} * c.ctas_per_sm;
    const std::uint64_t row_set = (g.ql_row() + g.do_row() + 4 + g.acc_row()) * s.block_rows;
    const std::uint64_t kv = g.kv_col() * s.block_cols, one = slots * row_set + row_set;
    const std::vector<std::uint64_t> caps{pick(rng, one, one + 2 * slots * kv)};
    INFO(describe(s) << ", " << slots << " slots, L2 " << caps.front());
    l2::Tally te(caps), tr(caps), ta(caps);
    const l2::FlashStats se = l2::enumerate_backward(s, c, te);
    l2::segments_backward(s, c, tr, l2::MainLoop::by_rows_checked);
    const l2::FlashStats sa = l2::segments_backward(s, c, ta);
    test::same_tally(te, tr);
    test::same_tally(te, ta);
    CHECK(sa.steps == se.steps);
  }
}

TEST_CASE("L2 backward by rows: random causal and ragged shapes at one to three L2 sizes equal the enumeration",
          "[l2runs][backward]") {
  std::mt19937_64 rng(GENERATE(85, 86));
  int checked = 0;
  for (int k = 0; k < test::draws(200); ++k) {
    Shape s = test::random_prefill(rng);
    s.pass = Pass::bwd;
    s.window = s.chunk = 0;
    if (k % 2 == 0) test::lengthen(rng, s, 16, 600, 8);
    if (!l2::backward_in_segments(s)) continue;
    const auto order = pick(rng, 0, 1) ? Rasterization::head_major : Rasterization::query_block_major;
    const L2SimConfig c = test::random_slots(rng, order, pick(rng, 0, 1) == 1, 40);
    l2::Tally t0({0});
    l2::enumerate_backward(s, c, t0);
    const auto caps = sizes(rng, s, c, t0.max_reuse_distance());
    INFO(describe(s) << ", " << c.sm_count << " x " << c.ctas_per_sm << " slots");
    l2::Tally te(caps), tr(caps);
    l2::enumerate_backward(s, c, te);
    l2::segments_backward(s, c, tr, l2::MainLoop::by_rows_checked);
    test::same_tally(te, tr);
    ++checked;
  }
  CHECK(checked > test::draws(200) / 2);
}

// Fans: where a generation of CTAs starts together, each one's first row was
// often last read by one earlier CTA, read by read a step apart; evaluated at
// once (l2_backward_rows_fans.cpp), and the staircases of runs and fans after
// one CTA (l2_backward_rows_stairs.cpp), each checked against the
// read-by-read evaluation where bounds are checked, and every tally against
// the enumeration, at L2 sizes about a few steps of every slot's row sets.
TEST_CASE("L2 backward by rows: fans and staircases of reads after one CTA equal the enumeration", "[l2runs][backward]") {
  std::mt19937_64 rng(GENERATE(100, 104));
  std::uint64_t fans = 0, stairs = 0;
  for (int k = 0; k < test::draws(24); ++k) {
    Shape s = causal_backward(rng, 1, 3);
    s.block_rows = pick(rng, 0, 1) == 1 ? 16 : 32;
    s.block_cols = pick(rng, 0, 3) == 0 ? 16 : s.block_rows;
    s.seq_q = s.seq_kv = s.block_rows * pick(rng, 40, 160) - (pick(rng, 0, 3) == 0 ? pick(rng, 1, 5) : 0);
    s.head_dim = pick(rng, 8, 64);
    L2SimConfig c = test::random_slots(rng, Rasterization::query_block_major, pick(rng, 0, 1) == 1, 64);
    const std::uint64_t row = std::uint64_t{s.block_rows} * s.head_dim * 4;
    const std::uint64_t slots = std::uint64_t{c.sm_count} * c.ctas_per_sm;
    std::vector<std::uint64_t> caps;
    for (int j = 0; j < 3; ++j) caps.push_back(row * slots * pick(rng, 1, 400) / 10 + pick(rng, 0, 5000));
    std::sort(caps.begin(), caps.end());
    caps.erase(std::unique(caps.begin(), caps.end()), caps.end());
    INFO(describe(s) << ", " << c.sm_count << " x " << c.ctas_per_sm << " slots, L2 " << caps.front());
    l2::Tally te(caps), tr(caps), tc(caps);
    l2::enumerate_backward(s, c, te);
    const l2::FlashStats sr = l2::segments_backward(s, c, tr, l2::MainLoop::by_rows);
    l2::segments_backward(s, c, tc, l2::MainLoop::by_rows_checked);
    test::same_tally(te, tr);
    test::same_tally(te, tc);
    fans += sr.fan_reads;
    stairs += sr.stair_reads;
  }
  INFO("fan reads " << fans << ", staircase reads " << stairs);
  // (Most fans join staircases of runs and fans after one CTA; some stay alone.)
  CHECK(fans > static_cast<std::uint64_t>(test::draws(24)));
  CHECK(stairs > 4 * static_cast<std::uint64_t>(test::draws(24)));
}

// Many short causal heads (dense: every head alike), where the schedule
// settles into a period of heads and a head takes an earlier head's counts;
// heads of a few CTAs beside many slots, so that two heads' reads of one K/V
// object meet in a window (where their pairs must match: about one shape in
// 200 tells it).
TEST_CASE("L2 backward by rows: heads that repeat an earlier one equal the enumeration", "[l2runs][backward]") {
  std::mt19937_64 rng(GENERATE(87, 88));
  std::uint64_t repeated = 0, heads = 0, periodic = 0, rows = 0;
  for (int k = 0; k < 600; ++k) {
    Shape s;
    s.pass = Pass::bwd;
    s.causal = true;
    s.kv_heads = pick(rng, 1, 4);
    s.heads = s.kv_heads * (std::uint64_t{1} << pick(rng, 0, 3));
    s.batch = pick(rng, 2, 6);
    s.block_rows = s.block_cols = pick(rng, 0, 1) ? 8 : 16;
    const std::uint64_t blocks = pick(rng, 0, 1) ? pick(rng, 3, 8) : pick(rng, 3, 24);
    s.seq_q = s.seq_kv = s.block_rows * blocks - (pick(rng, 0, 1) ? pick(rng, 1, 5) : 0);
    s.head_dim = pick(rng, 8, 64);
    const L2SimConfig c = test::random_slots(rng, Rasterization::query_block_major, pick(rng, 0, 1) == 1, 32);
    const auto caps = random_sizes(rng, s, c, 4);
    INFO(describe(s) << ", " << c.sm_count << " x " << c.ctas_per_sm << " slots, qo " << c.q_o_allocate);
    l2::Tally te(caps), tr(caps), tf(caps);
    l2::enumerate_backward(s, c, te);
    const l2::FlashStats sr = l2::segments_backward(s, c, tr, l2::MainLoop::by_rows);
    test::same_tally(te, tr);
    repeated += sr.repeated_heads;
    heads += s.batch * s.heads;
    periodic += sr.periodic_rows;
    rows += s.batch * s.heads * ((s.seq_q + s.block_rows - 1) / s.block_rows);
    if (k % 10 == 0) {  // and every head evaluated
      const l2::FlashStats sf = l2::segments_backward(s, c, tf, l2::MainLoop::by_rows_every_head);
      test::same_tally(te, tf);
      CHECK(sf.repeated_heads == 0);
      CHECK(sf.periodic_rows == 0);
    }
  }
  // Heads past the first few periods repeat one: about a third of them.
  CHECK(repeated * 4 > heads);
  // And two rows in five take their first read's distance from the period
  // (docs/l2-backward.md, "The outside by periods"), every_head none.
  CHECK(periodic * 3 > rows);
}

// The outside by periods (docs/l2-backward.md): dense batches of many short
// heads, causal or not, windowed or chunked, Nq != Nkv at times, GQA, both
// --l2-qo, where the schedule settles into a period of heads and the later
// heads' rows take their first reads' distances from an earlier head's; by
// rows (a third with every bound checked, its keys in 128 bits), through the
// engine, or the automatic choice, at four random L2 sizes.
TEST_CASE("L2 backward: rows whose first reads come from the schedule's period equal the enumeration",
          "[l2runs][backward]") {
  std::mt19937_64 rng(GENERATE(95, 96));
  std::uint64_t periodic = 0, with = 0;
  for (int k = 0; k < 300; ++k) {
    Shape s;
    s.pass = Pass::bwd;
    s.causal = pick(rng, 0, 3) != 0;
    s.kv_heads = pick(rng, 1, 4);
    s.heads = s.kv_heads * (std::uint64_t{1} << pick(rng, 0, 3));
    s.batch = pick(rng, 2, 8);
    s.block_rows = pick(rng, 0, 1) ? 8 : 16;
    s.block_cols = pick(rng, 0, 2) == 0 ? 8 : s.block_rows;
    s.seq_q = s.seq_kv = s.block_rows * pick(rng, 2, 24) - (pick(rng, 0, 2) == 0 ? pick(rng, 1, 5) : 0);
    if (pick(rng, 0, 4) == 0) s.seq_kv = s.seq_q + pick(rng, 1, 40);
    const auto mask = pick(rng, 0, 4);
    if (mask == 0) s.window = pick(rng, 1, 120);
    else if (mask == 1) s.chunk = s.block_rows * pick(rng, 1, 4);
    s.head_dim = pick(rng, 8, 64);
    if (!l2::backward_in_segments(s)) continue;
    const L2SimConfig c = test::random_slots(rng, Rasterization::query_block_major, pick(rng, 0, 1) == 1, 24);
    const auto caps = random_sizes(rng, s, c, 4);
    const auto how = k % 3 == 0 ? l2::MainLoop::by_rows_checked : k % 3 == 1 ? l2::MainLoop::engine
                                                                             : l2::MainLoop::automatic;
    INFO(describe(s) << ", " << c.sm_count << " x " << c.ctas_per_sm << " slots, qo " << c.q_o_allocate);
    l2::Tally te(caps), tr(caps);
    l2::enumerate_backward(s, c, te);
    const l2::FlashStats sr = l2::segments_backward(s, c, tr, how);
    test::same_tally(te, tr);
    periodic += sr.periodic_rows;
    with += sr.periodic_rows != 0 ? 1 : 0;
  }
  CHECK(with > 60);
  CHECK(periodic > 0);
}

// Chunked attention whose chunks are whole blocks: each chunk of a head is a
// head of the main loop by rows (its CTAs read its rows to its last). Chunks
// of 1 to 12 blocks of 8 or 16 (blocks of one size or two), ragged batches and
// Nq != Nkv at times (where chunks may straddle blocks: the heads stay whole), GQA, dense
// batches whose parts repeat an earlier one, at four random L2 sizes.
TEST_CASE("L2 backward by rows: chunks that part the heads equal the enumeration", "[l2runs][backward]") {
  std::mt19937_64 rng(GENERATE(89, 90));
  std::uint64_t repeated = 0, rows = 0;
  for (int k = 0; k < 150; ++k) {
    Shape s = causal_backward(rng, 1, 4);
    s.block_rows = pick(rng, 0, 1) ? 8 : 16;
    s.block_cols = pick(rng, 0, 3) == 0 ? 24 - s.block_rows : s.block_rows;
    s.chunk = 16 * pick(rng, 1, 6);
    if (s.block_rows != s.block_cols) s.chunk = 48 * pick(rng, 1, 4);
    s.seq_q = s.seq_kv = pick(rng, 1, 6) * s.chunk - (pick(rng, 0, 1) ? pick(rng, 0, 15) : 0);
    s.head_dim = pick(rng, 8, 64);
    const auto kind = pick(rng, 0, 5);
    if (kind == 0) ragged(rng, s, 16, 5 * s.chunk);
    else if (kind == 1) s.seq_kv = s.seq_q + pick(rng, 1, 2 * s.chunk);  // Nq != Nkv
    const L2SimConfig c = test::random_slots(rng, Rasterization::query_block_major, pick(rng, 0, 1) == 1, 32);
    const auto caps = random_sizes(rng, s, c, 4);
    // (Nq != Nkv: chunks may straddle blocks; the automatic choice alone.)
    repeated += same_as_enumeration(s, c, caps, kind == 1 ? l2::MainLoop::automatic : checked_or_handed(k)).repeated_heads;
    rows += kind == 1 ? 0 : 1;
  }
  CHECK(rows > 100);
  CHECK(repeated > 0);
}

// Windows, and chunks that cut blocks: a head's readers leave before its last
// row, so a row's readers are kept in order as they come and go. Windows of 1
// to 80 tokens in blocks of 8 to 24, chunks of any length, Nq != Nkv, ragged
// batches, GQA, both --l2-qo, at four random L2 sizes; a third of them with
// every bound checked (and each run slid as a whole held to its reads one by
// one), a fifth handed to the engine.
TEST_CASE("L2 backward by rows: windows and chunks that cut blocks equal the enumeration", "[l2runs][backward]") {
  std::mt19937_64 rng(GENERATE(93, 94));
  std::uint64_t windows = 0;
  for (int k = 0; k < 150; ++k) {
    Shape s = causal_backward(rng, 1, 3);
    s.block_rows = 8 * pick(rng, 1, 3);
    s.block_cols = pick(rng, 0, 2) == 0 ? 8 * pick(rng, 1, 3) : s.block_rows;
    if (pick(rng, 0, 3) == 0) s.chunk = pick(rng, 5, 70);
    else s.window = pick(rng, 1, 80);
    s.seq_q = s.seq_kv = pick(rng, 16, 400);
    if (pick(rng, 0, 4) == 0) s.seq_kv = s.seq_q + pick(rng, 1, 200);
    s.head_dim = pick(rng, 8, 64);
    if (pick(rng, 0, 5) == 0) ragged(rng, s, 8, 300);
    const L2SimConfig c = test::random_slots(rng, Rasterization::query_block_major, pick(rng, 0, 1) == 1, 32);
    same_as_enumeration(s, c, random_sizes(rng, s, c, 4), checked_or_handed(k));
    windows += s.window != 0 ? 1 : 0;
  }
  CHECK(windows > 80);
}

// Dense batches of short chunks beside many slots: parts repeat an earlier
// one, and two heads' reads of one K/V object (a head's CTAs apart, not a
// part's) meet in a window, where their pairs must match (taking a part's
// CTAs for that distance fails here, about one shape in 300).
TEST_CASE("L2 backward by rows: chunks of dense batches, parts that repeat, equal the enumeration", "[l2runs][backward]") {
  std::mt19937_64 rng(GENERATE(91, 92));
  std::uint64_t repeated = 0;
  for (int k = 0; k < 2000; ++k) {
    Shape s = causal_backward(rng, 2, 4);
    s.block_rows = s.block_cols = 8;
    s.chunk = 8 * pick(rng, 1, 4);
    s.seq_q = s.seq_kv = s.chunk * pick(rng, 1, 4);
    s.head_dim = pick(rng, 8, 32);
    L2SimConfig c;
    c.sm_count = static_cast<std::uint32_t>(pick(rng, 4, 40));
    c.ctas_per_sm = static_cast<std::uint32_t>(pick(rng, 1, 3));
    c.q_o_allocate = pick(rng, 0, 1) == 1;
    const auto caps = random_sizes(rng, s, c, 6);
    INFO(describe(s) << ", " << c.sm_count << " x " << c.ctas_per_sm << " slots, qo " << c.q_o_allocate);
    l2::Tally te(caps), tr(caps);
    l2::enumerate_backward(s, c, te);
    repeated += l2::segments_backward(s, c, tr, l2::MainLoop::by_rows).repeated_heads;
    test::same_tally(te, tr);
  }
  CHECK(repeated > 5000);
}

TEST_CASE("L2 backward by rows: 1M x 64/8 causal, batch 1 and 8, is within the budget where bounds settle",
          "[l2runs][backward]") {
  Shape s;
  s.seq_q = s.seq_kv = 1ull << 20;
  s.heads = 64;
  s.kv_heads = 8;
  s.head_dim = 128;
  s.causal = true;
  s.pass = Pass::bwd;
  L2SimConfig c;
  c.sm_count = 132;
  c.ctas_per_sm = 1;
  for (const std::uint64_t batch : {1, 8}) {
    s.batch = batch;
    c.l2_bytes = 60ull << 20;  // H200's: by rows
    CHECK(l2_sim_within_budget(s, c));
    // H100's at d = 64 (264 slots): one step of the slots' row sets fits, by
    // rows (batch 8: past the engine's memory, by rows all the same).
    s.head_dim = 64;
    c.ctas_per_sm = 2;
    c.l2_bytes = 50ull << 20;
    CHECK(l2_sim_within_budget(s, c));
    s.head_dim = 128;
    c.ctas_per_sm = 1;
    // At a 4 MiB L2 a step's row sets do not fit: the engine, every re-read
    // evaluated (batch 8: past its memory), left out.
    c.l2_bytes = 4ull << 20;
    CHECK_FALSE(l2_sim_within_budget(s, c));
  }
  // In chunks of 8192, by rows, each chunk of a head a head of its own (the
  // enumeration, which the estimate chose before, took 10 s and 1.5 GB).
  s.batch = 8;
  s.chunk = 8192;
  c.l2_bytes = 60ull << 20;
  CHECK(l2::segments_backward_work(s, c, c.l2_bytes) < 5'000'000'000ull);
  CHECK(l2_sim_within_budget(s, c));
  s.chunk = 0;
  // Past 6.3 M CTAs or rows (blocks of 64 rows and columns: 8.4 M, 1.4 GB) it
  // is left out.
  c.l2_bytes = 60ull << 20;
  s.block_rows = s.block_cols = 64;
  CHECK_FALSE(l2_sim_within_budget(s, c));
  // d = 256 at batch 8 (one step of the slots' row sets fits, not with two
  // K/V): where the L2 holds 1.4 steps or more (H100's 50 MiB, 1.5) the runs'
  // bounds by one read's window settle most reads, in about a second; nearer
  // one step (36 MiB) two units a read, left out.
  s.block_rows = s.block_cols = 128;
  s.head_dim = 256;
  c.l2_bytes = 50ull << 20;
  CHECK(l2_sim_within_budget(s, c));
  c.l2_bytes = 36ull << 20;
  CHECK_FALSE(l2_sim_within_budget(s, c));
}
