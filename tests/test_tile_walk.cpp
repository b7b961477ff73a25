#include <catch2/catch.hpp>
#include <random>

#include "hbmscope/model.hpp"
#include "hbmscope/tile_walk.hpp"

using namespace hbmscope;

namespace {
void check_walk_equals_closed_forms(const Shape& s) {
  INFO(describe(s));
  const WalkTotals w = walk_totals(s);
  CHECK(w.moved == flash_no_l2_bytes(s));
  CHECK(w.once == floor_bytes(s));
}
}  // namespace

TEST_CASE("tile walk equals the closed forms on a grid of shapes", "[walk]") {
  for (std::uint64_t nq : {1u, 64u, 100u, 128u, 129u, 500u})
    for (std::uint64_t nkv : {1u, 100u, 128u, 257u, 640u})
      for (std::uint64_t br : {16u, 64u, 128u})
        for (std::uint64_t bc : {32u, 128u})
          for (bool causal : {false, true})
            for (auto [h, hkv] : {std::pair<std::uint64_t, std::uint64_t>{1, 1}, {4, 4}, {8, 2}}) {
              Shape s;
              s.seq_q = nq;
              s.seq_kv = nkv;
              s.block_rows = br;
              s.block_cols = bc;
              s.causal = causal;
              s.heads = h;
              s.kv_heads = hkv;
              s.head_dim = 64;
              s.batch = 2;
              check_walk_equals_closed_forms(s);
            }
}

TEST_CASE("tile walk equals the closed forms on random shapes", "[walk]") {
  std::mt19937_64 rng(2024);
  auto pick = [&](std::uint64_t lo, std::uint64_t hi) {
    return std::uniform_int_distribution<std::uint64_t>(lo, hi)(rng);
  };
  for (int t = 0; t < 300; ++t) {
    Shape s;
    s.kv_heads = pick(1, 4);
    s.heads = s.kv_heads * pick(1, 4);
    s.batch = pick(1, 3);
    s.seq_q = pick(1, 2000);
    s.seq_kv = pick(1, 2000);
    s.head_dim = pick(1, 256);
    s.block_rows = pick(1, 256);
    s.block_cols = pick(1, 256);
    s.causal = pick(0, 1) == 1;
    s.dtype = static_cast<Dtype>(pick(0, 3));
    check_walk_equals_closed_forms(s);
  }
}

TEST_CASE("the note's shapes walk to the note's figures", "[walk][note]") {
  Shape s;
  s.seq_q = s.seq_kv = 4096;
  s.head_dim = 64;
  const auto w = walk_totals(s);
  CHECK(w.moved == 34603008);
  CHECK(w.once == 2097152);
  CHECK(w.tiles == 32 * 32);
}

TEST_CASE("walk order: query blocks in order, key blocks in order inside each", "[walk]") {
  Shape s;
  s.seq_q = 300;
  s.seq_kv = 300;
  s.block_rows = s.block_cols = 128;
  s.causal = true;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> tiles;
  int q_loads = 0, o_stores = 0;
  for_each_tile_event(s, [&](const TileEvent& ev) {
    if (ev.kind == TileEventKind::tile) tiles.emplace_back(ev.q_block, ev.k_block);
    q_loads += ev.kind == TileEventKind::load_q;
    o_stores += ev.kind == TileEventKind::store_o;
  });
  const std::vector<std::pair<std::uint64_t, std::uint64_t>> expected{
      {0, 0}, {1, 0}, {1, 1}, {2, 0}, {2, 1}, {2, 2}};
  CHECK(tiles == expected);
  CHECK(q_loads == 3);
  CHECK(o_stores == 3);
}

TEST_CASE("GQA: K and V of a kv head count once for its whole group", "[walk]") {
  Shape s;
  s.heads = 8;
  s.kv_heads = 2;
  s.seq_q = s.seq_kv = 512;
  std::uint64_t first_visits = 0;
  for_each_tile_event(s, [&](const TileEvent& ev) {
    if (ev.kind == TileEventKind::tile && ev.kv_first_visit) ++first_visits;
  });
  CHECK(first_visits == 2 * 4);  // 2 kv heads x 4 key blocks
}
