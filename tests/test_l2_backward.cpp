// The backward pass in the L2 simulation (docs/model.md, "The backward pass in
// the L2 simulation"): with no L2 it is FlashAttention-2's backward count, with
// an L2 holding everything the backward floor; monotone in between; fwdbwd is
// the forward simulation plus the backward plus the forward's log-sum-exp.
#include <catch2/catch.hpp>
#include <random>
#include <utility>

#include "hbmscope/l2_sim.hpp"
#include "hbmscope/model.hpp"
#include "hbmscope/tile_bytes.hpp"
#include "../src/core/l2_backward.hpp"
#include "../src/core/l2_segments.hpp"
#include "l2_tallies.hpp"
#include "random_shapes.hpp"

using namespace hbmscope;

namespace {

using test::pick;

L2SimConfig random_slots(std::mt19937_64& rng, Rasterization order, bool qo) {
  return test::random_slots(rng, order, qo, 12);
}

Shape random_training(std::mt19937_64& rng) {
  Shape s;
  s.kv_heads = pick(rng, 1, 3);
  s.heads = s.kv_heads * pick(rng, 1, 3);
  s.batch = pick(rng, 1, 2);
  s.seq_q = pick(rng, 1, 400);
  s.seq_kv = pick(rng, 1, 400);
  s.head_dim = pick(rng, 1, 80);
  s.block_rows = pick(rng, 8, 96);
  s.block_cols = pick(rng, 8, 96);
  s.causal = pick(rng, 0, 1) == 1;
  s.dtype = static_cast<Dtype>(pick(rng, 0, 3));
  s.pass = Pass::bwd;
  return s;
}

constexpr std::uint64_t everything = std::uint64_t{1} << 62;

// The backward floor counts Q and the log-sum-exp of every query row; the
// backward never reads those of a query block that no key sees (causal, more
// queries than keys): the simulation's floor is lower by exactly those.
std::uint64_t unread_query_bytes(const Shape& s) {
  if (!s.causal || s.seq_q <= s.seq_kv) return 0;
  std::uint64_t rows = 0;  // rows of the query blocks whose last row sees no key
  for (std::uint64_t i = 0; (i + 1) * s.block_rows <= s.seq_q; ++i)
    if ((i + 1) * s.block_rows - 1 + s.seq_kv < s.seq_q) rows += s.block_rows;
  return rows * s.batch * s.heads * (elem_bytes(s.dtype) * s.head_dim + 4);
}

}  // namespace

TEST_CASE("L2 sim backward: no L2 gives flash_no_l2, an L2 holding everything the floor", "[l2sim][backward]") {
  std::mt19937_64 rng(41);
  for (int k = 0; k < 120; ++k) {
    const Shape s = random_training(rng);
    for (auto order : {Rasterization::query_block_major, Rasterization::head_major})
      for (bool qo : {true, false}) {
        INFO(describe(s) << " " << rasterization_name(order) << " qo " << qo);
        L2SimConfig c;
        c.sm_count = static_cast<std::uint32_t>(pick(rng, 1, 5));
        c.ctas_per_sm = static_cast<std::uint32_t>(pick(rng, 1, 2));
        c.order = order;
        c.q_o_allocate = qo;
        ModelBytes m = evaluate(s);
        m.floor -= unread_query_bytes(s);
        c.l2_bytes = 0;
        const L2SimResult none = flash_l2_sim(s, c);
        CHECK(none.dram_bytes == m.flash_no_l2);
        CHECK(none.min_dram_bytes == m.floor);
        c.l2_bytes = everything;
        CHECK(flash_l2_sim(s, c).dram_bytes == m.floor);
        // The L2 size that reaches the floor is exact.
        c.l2_bytes = none.l2_bytes_to_min;
        CHECK(flash_l2_sim(s, c).dram_bytes == m.floor);
        if (none.l2_bytes_to_min > 0) {
          c.l2_bytes = none.l2_bytes_to_min - 1;
          CHECK(flash_l2_sim(s, c).dram_bytes > m.floor);
        }
        // floor <= sim <= no-L2, non-increasing in the L2 size.
        std::vector<std::uint64_t> ladder{0, 1};
        for (std::uint64_t j = 1; j <= 24; ++j) ladder.push_back(none.l2_bytes_to_min * j / 16);
        const auto bytes = flash_l2_curve(s, c, ladder);
        for (std::size_t j = 0; j < bytes.size(); ++j) {
          CHECK(bytes[j] >= m.floor);
          CHECK(bytes[j] <= m.flash_no_l2);
          if (j > 0) CHECK(bytes[j] <= bytes[j - 1]);
        }
      }
  }
}

TEST_CASE("L2 sim backward: fwdbwd is the forward plus the backward plus the log-sum-exp", "[l2sim][backward]") {
  std::mt19937_64 rng(43);
  for (int k = 0; k < 40; ++k) {
    Shape s = random_training(rng);
    s.pass = Pass::fwdbwd;
    Shape f = s, b = s;
    f.pass = Pass::fwd;
    b.pass = Pass::bwd;
    INFO(describe(s));
    L2SimConfig c;
    c.sm_count = 3;
    const std::vector<std::uint64_t> caps{0, 1000, 100000, 1000000, everything};
    const auto both = flash_l2_curve(s, c, caps);
    const auto fw = flash_l2_curve(f, c, caps), bw = flash_l2_curve(b, c, caps);
    for (std::size_t j = 0; j < caps.size(); ++j) CHECK(both[j] == fw[j] + bw[j] + forward_lse_bytes(f));
    CHECK(both.front() == evaluate(s).flash_no_l2);
    CHECK(both.back() == evaluate(s).floor - unread_query_bytes(s));
    c.l2_bytes = 100000;
    const L2SimResult r = flash_l2_sim(s, c);
    c.method = L2SimMethod::enumeration;
    CHECK(flash_l2_sim(s, c).dram_bytes == r.dram_bytes);
  }
}

TEST_CASE("L2 sim backward: the schedule's figures are the main loop's", "[l2sim][backward]") {
  Shape s;
  s.heads = s.kv_heads = 4;
  s.seq_q = s.seq_kv = 512;  // 4 key blocks per head, each visited by 4 query blocks
  s.head_dim = 64;
  s.pass = Pass::bwd;
  L2SimConfig c;
  c.sm_count = 4;
  c.ctas_per_sm = 2;  // 8 slots: two heads' key blocks per wave
  c.l2_bytes = 1 << 20;
  const L2SimResult r = flash_l2_sim(s, c);
  CHECK(r.waves == 2);
  CHECK(r.steps == 2 * 4);
  CHECK(r.heads_per_wave == 2.0);
}

namespace {

// The waves' closed form against the enumeration: the same tally at every
// capacity of a ladder (read and write-back bytes, requests, first reads,
// writes, the largest distance) and the same schedule figures.
template <class Method>
void same_as_enumeration(const Shape& s, const L2SimConfig& c, Method method) {
  std::uint64_t all = 0;
  {
    L2SimConfig none = c;
    none.l2_bytes = 0;
    all = flash_l2_sim(s, none).l2_bytes_to_min;
  }
  std::vector<std::uint64_t> caps{0, 1, all, all + 1, all > 0 ? all - 1 : 0};
  for (std::uint64_t j = 1; j <= 40; ++j) caps.push_back(all * j / 32);
  l2::Tally te(caps), tw(caps);
  const l2::FlashStats se = l2::enumerate_backward(s, c, te);
  const l2::FlashStats sw = method(s, c, tw);
  test::same_tally(te, tw);
  CHECK(se.heads == sw.heads);
  CHECK(se.kv_heads == sw.kv_heads);
  CHECK(se.steps == sw.steps);
  CHECK(se.waves == sw.waves);
}

// The masked backward's main loop through the segment engine, and by rows
// (causal masks and ragged batches without one: every CTA reads its head's
// row sets to the last), whatever the L2 sizes.
l2::FlashStats by_engine(const Shape& s, const L2SimConfig& c, l2::Tally& t) {
  return l2::segments_backward(s, c, t, l2::MainLoop::engine);
}
l2::FlashStats by_rows(const Shape& s, const L2SimConfig& c, l2::Tally& t) {
  return l2::segments_backward(s, c, t, l2::MainLoop::by_rows);
}
// The engine with every run's slope changes sorted, not in a dense array.
l2::FlashStats by_engine_sorted(const Shape& s, const L2SimConfig& c, l2::Tally& t) {
  struct Sorted {  // (put back however the run ends)
    std::size_t kept = std::exchange(l2::SegmentEngine::dense_steps_most(), 0);
    ~Sorted() { l2::SegmentEngine::dense_steps_most() = kept; }
  } sorted;
  return by_engine(s, c, t);
}
bool rows_fit(const Shape& s) { return s.window == 0 && s.chunk == 0; }

}  // namespace

TEST_CASE("L2 sim backward: waves in lockstep (no mask) equal the enumeration", "[l2sim][backward][l2runs]") {
  std::mt19937_64 rng(47);
  int checked = 0;
  for (int k = 0; k < 400; ++k) {
    Shape s = random_training(rng);
    s.causal = false;
    s.batch = pick(rng, 1, 3);
    if (k % 2 == 0) {  // many key and query blocks beside few slots
      s.block_rows = pick(rng, 4, 16);
      s.block_cols = pick(rng, 4, 16);
    }
    if (k % 3 == 0) s.kv_heads = 1, s.heads = pick(rng, 1, 6);
    if (pick(rng, 0, 3) == 0) s.head_dim_v = pick(rng, 1, 64);
    for (auto order : {Rasterization::query_block_major, Rasterization::head_major})
      for (bool qo : {true, false}) {
        const L2SimConfig c = random_slots(rng, order, qo);
        REQUIRE(l2::backward_in_waves(s));
        INFO(describe(s) << " " << rasterization_name(order) << " qo " << qo << " slots " << c.sm_count << "x"
                         << c.ctas_per_sm);
        same_as_enumeration(s, c, l2::waves_backward);
        ++checked;
      }
  }
  CHECK(checked == 1600);
}

TEST_CASE("L2 sim backward: the segment engine (masks, ragged) equals the enumeration", "[l2sim][backward][l2runs]") {
  std::mt19937_64 rng(53);
  int checked = 0;
  for (int k = 0; k < 300; ++k) {
    Shape s = test::random_prefill(rng, k % 4 != 0);
    s.pass = Pass::bwd;
    if (k % 3 == 0) test::lengthen(rng, s, 16, 300, 5);
    if (!l2::backward_in_segments(s)) continue;
    for (auto order : {Rasterization::query_block_major, Rasterization::head_major})
      for (bool qo : {true, false}) {
        const L2SimConfig c = random_slots(rng, order, qo);
        INFO(describe(s) << " " << rasterization_name(order) << " qo " << qo << " slots " << c.sm_count << "x"
                         << c.ctas_per_sm);
        same_as_enumeration(s, c, by_engine);
        if (k % 3 == 1) same_as_enumeration(s, c, by_engine_sorted);
        if (rows_fit(s)) same_as_enumeration(s, c, by_rows);
        ++checked;
      }
  }
  CHECK(checked >= 800);
}

TEST_CASE("L2 sim backward: the segment engine with query blocks no key sees", "[l2sim][backward][l2runs]") {
  // Causal (or windowed, chunked) with more queries than keys: the first
  // query blocks are never read by the main loop, only by the preprocessing
  // and the conversion.
  std::mt19937_64 rng(59);
  for (int k = 0; k < 80; ++k) {
    Shape s = test::random_prefill(rng, true);
    s.pass = Pass::bwd;
    s.seq_lens = {};
    s.batch = pick(rng, 1, 2);
    s.seq_q = s.seq_kv + s.block_rows + pick(rng, 1, 300);
    if (k % 2 == 0) test::lengthen(rng, s, 16, 200, 4), s.seq_q = s.seq_kv + s.block_rows + pick(rng, 1, 100);
    REQUIRE(l2::backward_in_segments(s));
    REQUIRE(visible_key_blocks(s, 0).empty());
    const auto order = k % 4 < 2 ? Rasterization::query_block_major : Rasterization::head_major;
    const L2SimConfig c = random_slots(rng, order, k % 2 == 1);
    INFO(describe(s) << " " << rasterization_name(order) << " qo " << c.q_o_allocate);
    same_as_enumeration(s, c, by_engine);
    if (rows_fit(s)) same_as_enumeration(s, c, by_rows);
  }
}
