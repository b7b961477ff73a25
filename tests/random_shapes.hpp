#pragma once
// Random shapes for the L2 simulation's tests (test_l2_runs.cpp,
// test_l2_list.cpp): the draws are part of each test's cases.
#include <algorithm>
#include <cstdlib>
#include <random>
#include <vector>

#include "hbmscope/l2_sim.hpp"
#include "hbmscope/shape.hpp"

namespace hbmscope::test {

// How many random shapes a long test draws: `n`, or one in N of them where
// HBMSCOPE_TEST_SHARE=N (at least one). The sanitizer suite sets it (ASan +
// UBSan run these tests about 20 times slower, and checks memory, not more
// shapes); the plain suite draws every shape. The first draws of each seed are
// the same either way.
inline int draws(int n) {
  static const int share = [] {
    const char* v = std::getenv("HBMSCOPE_TEST_SHARE");
    const int k = v ? std::atoi(v) : 1;
    return k > 1 ? k : 1;
  }();
  return std::max(1, n / share);
}

inline std::uint64_t pick(std::mt19937_64& rng, std::uint64_t lo, std::uint64_t hi) {
  return std::uniform_int_distribution<std::uint64_t>(lo, hi)(rng);
}

// Prefill shapes of every kind the schedule has: dense or ragged, unmasked,
// causal, windowed or chunked, GQA, Nq != Nkv, every dtype, DV != d, a KV
// dtype of its own.
inline Shape random_prefill(std::mt19937_64& rng, bool masked_only = false) {
  Shape s;
  s.kv_heads = pick(rng, 1, 3);
  s.heads = s.kv_heads * pick(rng, 1, 3);
  s.batch = pick(rng, 1, 3);
  s.seq_q = pick(rng, 1, 600);
  s.seq_kv = pick(rng, 1, 600);
  s.head_dim = pick(rng, 1, 96);
  s.block_rows = pick(rng, 8, 128);
  s.block_cols = pick(rng, 8, 128);
  s.dtype = static_cast<Dtype>(pick(rng, 0, 3));
  const std::uint64_t mask = masked_only ? pick(rng, 1, 3) : pick(rng, 0, 3);
  s.causal = mask > 0;
  if (mask == 2) s.window = pick(rng, 1, 300);
  if (mask == 3) s.chunk = pick(rng, 1, 300);
  if (pick(rng, 0, 3) == 0) s.head_dim_v = pick(rng, 1, 96);
  if (pick(rng, 0, 3) == 0) s.kv_dtype = static_cast<Dtype>(pick(rng, 0, 3));
  if (pick(rng, 0, 3) == 0) {  // ragged: sequences of their own lengths
    std::vector<SeqLen> items;
    const std::uint64_t n = pick(rng, 1, 4);
    for (std::uint64_t b = 0; b < n; ++b) {
      const std::uint64_t kv = pick(rng, 1, 500);
      items.push_back({pick(rng, 1, kv), kv});
    }
    s.seq_lens = SeqList(items);
    s.batch = n;
    s.seq_q = s.seq_lens.max_q();
    s.seq_kv = s.seq_lens.max_kv();
  }
  return s;
}

// Long CTAs and wide GQA groups: small blocks, sequences of lo to hi tokens
// (a dense shape's; a ragged batch keeps its own), up to `group` query heads
// a kv head.
inline void lengthen(std::mt19937_64& rng, Shape& s, std::uint64_t lo, std::uint64_t hi, std::uint64_t group) {
  s.block_rows = pick(rng, 4, 16);
  s.block_cols = pick(rng, 4, 16);
  if (s.seq_lens.empty()) {
    s.seq_q = pick(rng, lo, hi);
    s.seq_kv = pick(rng, 1, 3) == 1 ? s.seq_q : pick(rng, lo, hi);
  }
  s.kv_heads = pick(rng, 1, 2);
  s.heads = s.kv_heads * pick(rng, 1, group);
}

// 1 to 3 x max_sms slots in the given launch order and `--l2-qo`.
inline L2SimConfig random_slots(std::mt19937_64& rng, Rasterization order, bool qo, std::uint64_t max_sms) {
  L2SimConfig c;
  c.sm_count = static_cast<std::uint32_t>(pick(rng, 1, max_sms));
  c.ctas_per_sm = static_cast<std::uint32_t>(pick(rng, 1, 3));
  c.order = order;
  c.q_o_allocate = qo;
  return c;
}

// L2 sizes from 0 to 1.25 times `all` (the bytes of everything), 42 of them.
inline std::vector<std::uint64_t> ladder(std::uint64_t all) {
  std::vector<std::uint64_t> l{0, 1};
  for (std::uint64_t k = 1; k <= 40; ++k) l.push_back(all * k / 32);
  return l;
}

}  // namespace hbmscope::test
