// Decode rows in the L2 simulation: the split kernels' GQA re-reads and
// partials against a large L2, and the stack distances against a plain LRU
// over the same accesses (the oracle).
#include <catch2/catch.hpp>

#include <list>
#include <map>
#include <random>

#include "hbmscope/decode.hpp"
#include "hbmscope/error.hpp"
#include "hbmscope/l2_sim.hpp"
#include "decode_shape.hpp"

using namespace hbmscope;

TEST_CASE("decode: the simulation's GQA re-reads and partials hit a large L2", "[decode][l2sim]") {
  const Shape s = testing::decode_shape(2, 32, 8, 1, {8192}, 128);
  L2SimConfig c;
  c.l2_bytes = 60ull << 20;
  c.sm_count = 132;
  // Unpacked: 4 query heads' CTAs of one kv head run side by side, so 3 of every
  // 4 KV reads hit; the total comes down to near the packed kernel's.
  const std::uint64_t splits = 4;
  const auto un = decode_l2_sim(s, DecodeVariant::split_unpacked, splits, c);
  const auto no_l2 = decode_bytes(s, DecodeVariant::split_unpacked, splits);
  CHECK(un.l2_hit_rate > 0.7);
  CHECK(un.dram_bytes < no_l2.total / 3);
  // Partials written by the split kernel are read back from L2 by the combine.
  const auto sp = decode_l2_sim(s, DecodeVariant::split, splits, c);
  const auto sp_bytes = decode_bytes(s, DecodeVariant::split, splits);
  CHECK(sp.dram_bytes <= sp_bytes.total - sp_bytes.partials / 2);
  // An L2 of zero: every re-read misses.
  c.l2_bytes = 0;
  CHECK(decode_l2_sim(s, DecodeVariant::split_unpacked, splits, c).dram_bytes == no_l2.total);
  CHECK_THROWS_AS(decode_l2_sim(s, DecodeVariant::floor, 1, c), Error);
}

namespace {
// A plain LRU over whole objects (the oracle): an object larger than the L2 is
// not kept; forget leaves the object cached (its id is never reused here).
struct Lru {
  explicit Lru(std::uint64_t c) : capacity(c) {}
  std::uint64_t capacity, used = 0, dram = 0, anon = 1ull << 40;
  std::list<std::uint64_t> order;
  std::map<std::uint64_t, std::pair<std::uint64_t, std::list<std::uint64_t>::iterator>> in;
  bool touch(std::uint64_t k, std::uint64_t bytes) {
    bool hit = false;
    if (auto it = in.find(k); it != in.end()) {
      hit = true;
      used -= it->second.first;
      order.erase(it->second.second);
      in.erase(it);
    }
    order.push_front(k);
    in[k] = {bytes, order.begin()};
    used += bytes;
    while (used > capacity) {
      used -= in[order.back()].first;
      in.erase(order.back());
      order.pop_back();
    }
    return hit;
  }
  void operator()(const L2Access& a) {
    const std::uint64_t k = a.obj == l2_once_only ? anon++ : a.obj;
    if (a.kind == L2Access::Kind::read && (!a.allocate || !touch(k, a.bytes))) dram += a.bytes;
    if (a.kind == L2Access::Kind::write) {
      dram += a.bytes;
      if (a.allocate) touch(k, a.bytes);
    }
  }
};
}  // namespace

TEST_CASE("decode: the simulation's stack distances equal a plain LRU", "[decode][l2sim]") {
  std::mt19937_64 rng(99);
  auto pick = [&](std::uint64_t lo, std::uint64_t hi) { return std::uniform_int_distribution<std::uint64_t>(lo, hi)(rng); };
  for (int trial = 0; trial < 40; ++trial) {
    const std::uint64_t hkv = pick(1, 3);
    Shape s = testing::decode_shape(pick(1, 3), hkv * pick(1, 4), hkv, 1, {1}, 64);
    s.seq_q = pick(1, 4);
    s.block_cols = 64;
    s.page_size = pick(1, 100);
    std::vector<std::uint64_t> lengths;
    for (std::uint64_t b = 0; b < s.batch; ++b) lengths.push_back(pick(1, 2000));
    s.context_lengths = lengths;
    s.seq_kv = s.context_lengths.max_kv();
    const std::uint64_t splits = pick(1, 12);
    L2SimConfig c;
    c.sm_count = static_cast<std::uint32_t>(pick(1, 8));
    c.ctas_per_sm = static_cast<std::uint32_t>(pick(1, 2));
    c.q_o_allocate = pick(0, 1) == 1;
    for (DecodeVariant v : {DecodeVariant::split, DecodeVariant::split_unpacked, DecodeVariant::paged})
      for (std::uint64_t cap : {std::uint64_t{0}, std::uint64_t{20000}, std::uint64_t{300000}, std::uint64_t{4} << 20}) {
        INFO(describe(s) << ", " << decode_variant_id(v) << ", " << splits << " splits, L2 " << cap);
        Lru lru(cap);
        for_each_decode_l2_access(s, v, splits, c, [&](const L2Access& a) { lru(a); });
        c.l2_bytes = cap;
        REQUIRE(decode_l2_sim(s, v, splits, c).dram_bytes == lru.dram);
      }
  }
}
