// The enumeration's two LRUs (src/core/l2_list.hpp: a list with a boundary
// per capacity; l2_stack.hpp: a Fenwick tree over access times) give the same
// tally on every stream: random operations on objects of random sizes, and
// every pass's schedule, at one capacity and on a ladder of 42; and the step
// index (step_index.hpp) searched from a last answer, and the backward
// sweeps' prefix sums (l2_backward_sweeps.hpp).
#include <catch2/catch.hpp>
#include <numeric>
#include <random>

#include "hbmscope/l2_sim.hpp"
#include "hbmscope/model.hpp"
#include "../src/core/l2_backward_sweeps.hpp"
#include "../src/core/l2_list.hpp"
#include "../src/core/step_index.hpp"
#include "l2_tallies.hpp"
#include "random_shapes.hpp"

using namespace hbmscope;
using namespace hbmscope::test;

namespace {

// The same random operations through both LRUs: reads (some bypassing),
// writes, intermediates written dirty, read and forgotten, and objects read
// once, with sizes from one byte to many times a capacity.
template <class L>
void replay(L& l2, std::uint64_t seed, std::uint32_t objects, const std::vector<std::uint64_t>& size, int ops) {
  std::mt19937_64 rng(seed);
  l2.reserve_objects(objects);
  for (int k = 0; k < ops; ++k) {
    // A few objects are hot, so some distances are short.
    const auto obj = static_cast<std::uint32_t>(pick(rng, 0, pick(rng, 0, 3) == 0 ? std::min<std::uint32_t>(3, objects - 1) : objects - 1));
    switch (pick(rng, 0, 9)) {
      case 0: l2.read(l2::none, pick(rng, 1, 5000), pick(rng, 0, 1) == 1); break;
      case 1: l2.write(l2::none, pick(rng, 1, 5000), pick(rng, 0, 1) == 1); break;
      case 2: l2.write(obj, size[obj], true); break;
      case 3: l2.write_dirty(obj, size[obj]); break;
      case 4: l2.forget(obj); break;
      case 5: l2.read(obj, size[obj], false); break;
      default: l2.read(obj, size[obj], true); break;
    }
  }
}

}  // namespace

TEST_CASE("L2 list: the list LRU equals the Fenwick LRU on random operation streams", "[l2list]") {
  std::mt19937_64 rng(20261202);
  for (int k = 0; k < 2000; ++k) {
    const auto objects = static_cast<std::uint32_t>(pick(rng, 1, 300));
    std::vector<std::uint64_t> size(objects);
    const bool uniform = pick(rng, 0, 2) == 0;
    const std::uint64_t z = pick(rng, 1, 4096);
    for (auto& b : size) b = uniform ? z : pick(rng, 1, 8192);
    std::vector<std::uint64_t> caps;
    const std::uint64_t n = pick(rng, 0, 3) == 0 ? 42 : pick(rng, 1, 4);
    for (std::uint64_t c = 0; c < n; ++c) caps.push_back(pick(rng, 0, 3) == 0 ? pick(rng, 0, 8192) : pick(rng, 0, 300 * 4096));
    const std::uint64_t seed = rng();
    const int ops = static_cast<int>(pick(rng, 1, 6000));
    INFO("case " << k << ": " << objects << " objects, " << n << " capacities, " << ops << " operations");
    l2::Tally tl(caps), tf(caps);
    l2::ListL2 list(tl);
    l2::StackL2 fenwick(tf);
    replay(list, seed, objects, size, ops);
    replay(fenwick, seed, objects, size, ops);
    list.flush();
    same_tally(tl, tf);
  }
}

namespace {

// Runs f with the enumeration forced onto one LRU.
template <class F>
auto forced(l2::LruKind kind, F f) {
  struct Restore {
    ~Restore() { l2::forced_lru() = l2::LruKind::automatic; }
  } restore;
  l2::forced_lru() = kind;
  return f();
}

}  // namespace

TEST_CASE("L2 list: every pass's enumeration is the same through either LRU", "[l2list]") {
  std::mt19937_64 rng(4242);
  for (int k = 0; k < 120; ++k) {
    Shape s = random_prefill(rng);
    const int pass = static_cast<int>(pick(rng, 0, 3));  // forward, standard, backward, decode
    if (pass == 2) s.pass = Pass::bwd;
    if (pass == 3) {
      s = Shape{};
      s.kv_heads = pick(rng, 1, 3);
      s.heads = s.kv_heads * pick(rng, 1, 8);
      s.batch = pick(rng, 1, 4);
      s.head_dim = pick(rng, 8, 128);
      s.decode = true;
      s.seq_q = pick(rng, 1, 4);
      s.seq_kv = pick(rng, s.seq_q, 1500);
      s.block_cols = 8 * pick(rng, 1, 16);
      s.page_size = s.block_cols / (1 + pick(rng, 0, 1));
      if (pick(rng, 0, 1) == 1) s.splits = pick(rng, 2, 6);
    }
    L2SimConfig c;
    c.method = L2SimMethod::enumeration;
    c.sm_count = static_cast<std::uint32_t>(pick(rng, 1, 6));
    c.ctas_per_sm = static_cast<std::uint32_t>(pick(rng, 1, 3));
    c.order = pick(rng, 0, 1) == 0 ? Rasterization::query_block_major : Rasterization::head_major;
    c.q_o_allocate = pick(rng, 0, 1) == 1;
    const std::uint64_t all = s.decode ? decode_bytes(s, DecodeVariant::split, s.splits == 0 ? 1 : s.splits).total
                                       : kv_footprint_bytes(s) + qo_footprint_bytes(s);
    const auto caps = ladder(all);
    INFO(describe(s) << " pass " << pass << " " << rasterization_name(c.order) << " qo " << c.q_o_allocate);
    auto curve = [&] {
      if (pass == 1) return standard_l2_curve(s, c, caps);
      if (pass == 3) return decode_l2_curve(s, DecodeVariant::split, s.splits == 0 ? 1 : s.splits, c, caps);
      return flash_l2_curve(s, c, caps);
    };
    CHECK(forced(l2::LruKind::list, curve) == forced(l2::LruKind::fenwick, curve));
    for (std::uint64_t cap : {caps[2], caps[11], caps[25], caps[41]}) {
      c.l2_bytes = cap;
      auto one = [&] {
        if (pass == 1) return standard_l2_sim(s, c);
        if (pass == 3) return decode_l2_sim(s, DecodeVariant::paged, s.splits == 0 ? 1 : s.splits, c);
        return flash_l2_sim(s, c);
      };
      const L2SimResult a = forced(l2::LruKind::list, one), b = forced(l2::LruKind::fenwick, one);
      CHECK(a.dram_bytes == b.dram_bytes);
      CHECK(a.dram_read_bytes == b.dram_read_bytes);
      CHECK(a.dram_write_bytes == b.dram_write_bytes);
      CHECK(a.read_request_bytes == b.read_request_bytes);
      CHECK(a.l2_bytes_to_min == b.l2_bytes_to_min);
      CHECK(a.min_dram_bytes == b.min_dram_bytes);
    }
  }
}

// The step index's search from a caller's last answer finds what its bucket
// search finds, from any hint, on steps with long runs of equal values.
TEST_CASE("a step index searched from the last answer agrees with its bucket search", "[l2][units]") {
  std::mt19937_64 rng(20261207);
  for (int round = 0; round < 200; ++round) {
    std::vector<std::int64_t> steps(static_cast<std::size_t>(pick(rng, 1, 3000)));
    std::int64_t at = static_cast<std::int64_t>(pick(rng, 0, 50)) - 25;
    for (auto& s : steps) {
      if (pick(rng, 0, 3) == 0) at += static_cast<std::int64_t>(pick(rng, 0, pick(rng, 0, 1) == 0 ? 3 : 5000));
      s = at;
    }
    const l2::StepIndex index(steps);
    std::size_t near_lo = pick(rng, 0, steps.size() + 3), near_hi = 0;
    for (int q = 0; q < 300; ++q) {
      const std::int64_t x = steps.front() - 30 + static_cast<std::int64_t>(pick(rng, 0, static_cast<std::uint64_t>(steps.back() - steps.front()) + 60));
      if (pick(rng, 0, 9) == 0) near_lo = pick(rng, 0, steps.size() + 3);
      REQUIRE(index.lower_near(x, near_lo) == index.lower(x));
      REQUIRE(index.lower(x) == static_cast<std::size_t>(std::lower_bound(steps.begin(), steps.end(), x) - steps.begin()));
      REQUIRE(index.upper_near(x, near_hi) == index.upper(x));
    }
    std::size_t near = 0;
    REQUIRE(index.upper_near(std::numeric_limits<std::int64_t>::max(), near) == steps.size());
  }
}

// The sweeps' prefix sums answer as a plain array would, with one cursor and
// with four: questions near a few places asked in turn, far jumps, and streams
// that exhaust the cursors' budget and turn to the Fenwick tree part way.
template <class Sums>
static int prefix_sums_rounds(std::mt19937_64& rng) {
  int built = 0;
  for (int round = 0; round < 300; ++round) {
    const std::size_t n = pick(rng, 1, pick(rng, 0, 1) == 0 ? 64 : 5000);
    Sums sums(n);
    std::vector<std::uint64_t> plain(n, 0);
    std::vector<std::size_t> regions(pick(rng, 1, 7));
    for (auto& r : regions) r = pick(rng, 0, n - 1);
    const int far = static_cast<int>(pick(rng, 0, 3)) * 10;  // in 100: jumps anywhere
    for (int q = 0; q < 2000; ++q) {
      std::size_t& r = regions[pick(rng, 0, regions.size() - 1)];
      if (static_cast<int>(pick(rng, 0, 99)) < far) r = pick(rng, 0, n - 1);
      else r = std::min(n - 1, r + pick(rng, 0, 2));
      const std::uint64_t x = pick(rng, 0, 1000);
      sums.add(r, x);
      plain[r] += x;
      const std::size_t i = std::min(n, pick(rng, 0, 1) == 0 ? r : r + pick(rng, 0, 40));
      REQUIRE(sums.below(i) == std::accumulate(plain.begin(), plain.begin() + static_cast<std::ptrdiff_t>(i), std::uint64_t{0}));
    }
    built += sums.tree() ? 1 : 0;
  }
  return built;
}

TEST_CASE("the backward sweeps' prefix sums equal a plain array's", "[l2][units]") {
  std::mt19937_64 rng(20261208);
  const int one = prefix_sums_rounds<l2::sweeps::PrefixSums<1>>(rng);
  const int four = prefix_sums_rounds<l2::sweeps::PrefixSums<4>>(rng);
  CHECK(one > 10);  // some streams turned to the tree
  CHECK(one < 290);  // and most of the near ones did not
  CHECK(four > 10);
  CHECK(four < one);  // four cursors keep more streams off it
}
