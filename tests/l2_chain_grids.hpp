#pragma once
// Long causal heads beside a few slots, and the chains' grids of them, for
// the chains' tests (test_l2_runs.cpp, test_l2_bounds.cpp).
#include <catch2/catch.hpp>
#include <random>

#include "hbmscope/l2_sim.hpp"
#include "hbmscope/tile_bytes.hpp"
#include "../src/core/l2_flash.hpp"
#include "../src/core/l2_flash_chain_bounds.hpp"
#include "random_shapes.hpp"

namespace hbmscope::test {

// Causal heads of lo to hi tokens in blocks of 16 (GQA groups up to `group`,
// Nq != Nkv now and then), for the chains' long-head tests.
inline Shape long_causal_heads(std::mt19937_64& rng, std::uint64_t lo, std::uint64_t hi, std::uint64_t group) {
  Shape s;
  s.kv_heads = pick(rng, 1, 2);
  s.heads = s.kv_heads * pick(rng, 1, group);
  s.batch = pick(rng, 1, 2);
  s.block_rows = s.block_cols = 16;
  s.seq_q = pick(rng, lo, hi);
  s.seq_kv = pick(rng, 0, 3) == 0 ? s.seq_q + pick(rng, 1, 500) : s.seq_q;
  s.head_dim = 64;
  s.causal = true;
  return s;
}

// Holds `check` on s beside 8 to 48 slots of one CTA, in both launch orders
// and both --l2-qo modes.
template <class Check>
void beside_few_slots(std::mt19937_64& rng, const Shape& s, Check check) {
  for (auto order : {Rasterization::query_block_major, Rasterization::head_major})
    for (bool qo : {true, false}) {
      L2SimConfig c;
      c.sm_count = static_cast<std::uint32_t>(pick(rng, 8, 48));
      c.q_o_allocate = qo;
      c.order = order;
      INFO(describe(s) << " " << rasterization_name(order) << " qo " << qo << " slots " << c.sm_count);
      check(s, c);
    }
}

// Long causal heads with wide GQA groups beside a few slots, both orders:
// check(s, c, chain grid) on each grid the chains take.
template <class Check>
void long_chain_grids(std::mt19937_64& rng, int shapes, Check check) {
  for (int k = 0; k < shapes; ++k) {
    const Shape s = long_causal_heads(rng, 1500, 4000, 6);
    beside_few_slots(rng, s, [&](const Shape&, const L2SimConfig& c) {
      const l2::FlashGrid grid(s, c.order);
      if (l2::flash_in_chains(grid)) check(s, c, l2::chains::ChainGrid(grid, c));
    });
  }
}

// visit(i, P) for every CTA i that re-reads its predecessor P's blocks.
template <class Visit>
void each_rereader(const l2::chains::ChainGrid& cg, Visit visit) {
  for (std::uint64_t i = 0; i < cg.n; ++i) {
    const std::uint64_t P = cg.prev(i);
    if (cg.e[i] != 0 && P != l2::chains::no_cta && cg.e[P] != 0) visit(i, P);
  }
}

}  // namespace hbmscope::test
