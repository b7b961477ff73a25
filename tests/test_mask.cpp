// Masks (include/hbmscope/mask.hpp): per-row visible keys, the key blocks a
// query block visits and the tiles that need an element mask, against brute force.
#include <catch2/catch.hpp>

#include <random>

#include "hbmscope/error.hpp"
#include "hbmscope/mask.hpp"

using namespace hbmscope;

namespace {

// Whether position p sees key c, straight from the definitions.
bool sees(const Shape& s, std::int64_t p, std::uint64_t c) {
  const auto ci = static_cast<std::int64_t>(c);
  if (!s.causal) return true;
  if (ci > p) return false;
  if (s.window != 0 && ci <= p - static_cast<std::int64_t>(s.window)) return false;
  if (s.chunk != 0 && ci / static_cast<std::int64_t>(s.chunk) != p / static_cast<std::int64_t>(s.chunk)) return false;
  return true;
}

std::int64_t position(const Shape& s, std::uint64_t row) {
  return static_cast<std::int64_t>(row) + static_cast<std::int64_t>(s.seq_kv) - static_cast<std::int64_t>(s.seq_q);
}

}  // namespace

TEST_CASE("visible keys follow the causal, window and chunk definitions", "[mask]") {
  Shape s;
  s.seq_q = 10;
  s.seq_kv = 10;
  CHECK(visible_keys(s, 3) == KeyRange{0, 10});
  s.causal = true;
  CHECK(visible_keys(s, 3) == KeyRange{0, 4});
  s.window = 2;  // itself and the one before it
  CHECK(visible_keys(s, 3) == KeyRange{2, 4});
  CHECK(visible_keys(s, 0) == KeyRange{0, 1});
  s.window = 0;
  s.chunk = 4;
  CHECK(visible_keys(s, 3) == KeyRange{0, 4});
  CHECK(visible_keys(s, 4) == KeyRange{4, 5});
  CHECK(visible_keys(s, 9) == KeyRange{8, 10});
  s.chunk = 0;
  s.seq_q = 12;  // more queries than keys: the first two rows see nothing
  CHECK(visible_keys(s, 1).empty());
  CHECK(visible_keys(s, 2) == KeyRange{0, 1});
}

TEST_CASE("visited key blocks and masked tiles agree with brute force on random shapes", "[mask]") {
  std::mt19937_64 rng(20261201);
  auto pick = [&](std::uint64_t lo, std::uint64_t hi) {
    return std::uniform_int_distribution<std::uint64_t>(lo, hi)(rng);
  };
  for (int n = 0; n < 3000; ++n) {
    Shape s;
    s.seq_q = pick(1, 300);
    s.seq_kv = pick(1, 300);
    s.block_rows = pick(1, 70);
    s.block_cols = pick(1, 70);
    s.causal = pick(0, 4) != 0;
    if (s.causal) {
      const auto kind = pick(0, 2);
      if (kind == 1) s.window = pick(1, 200);
      if (kind == 2) s.chunk = pick(1, 200);
    }
    INFO(describe(s));
    validate(s);
    const std::uint64_t nkb = key_blocks(s);
    for (std::uint64_t i = 0; i < query_blocks(s); ++i) {
      const std::uint64_t r0 = i * s.block_rows, r1 = std::min(r0 + s.block_rows, s.seq_q);
      std::vector<bool> block_seen(nkb), block_hidden(nkb);
      for (std::uint64_t r = r0; r < r1; ++r) {
        const KeyRange k = visible_keys(s, r);
        for (std::uint64_t c = 0; c < s.seq_kv; ++c) {
          const bool v = sees(s, position(s, r), c);
          REQUIRE(v == (k.begin <= c && c < k.end));
          (v ? block_seen : block_hidden)[c / s.block_cols] = true;
        }
      }
      const KeyRange blocks = visible_key_blocks(s, i);
      for (std::uint64_t j = 0; j < nkb; ++j) {
        REQUIRE(block_seen[j] == (blocks.begin <= j && j < blocks.end));
        if (block_seen[j]) REQUIRE(tile_needs_mask(s, i, j) == block_hidden[j]);
      }
    }
  }
}

TEST_CASE("windows and chunks need a causal mask and positive sizes", "[mask]") {
  Shape s;
  s.window = 128;
  CHECK_THROWS_WITH(validate(s), Catch::Contains("causal"));
  s.causal = true;
  CHECK_NOTHROW(validate(s));
  s.chunk = 64;
  CHECK_THROWS_WITH(validate(s), Catch::Contains("cannot be combined"));
  s.window = 0;
  CHECK_NOTHROW(validate(s));
  CHECK(describe(s).find("chunk 64") != std::string::npos);
  s.latent_kv = true;
  s.heads = 16;
  s.kv_heads = 1;
  s.head_dim = 576;
  s.head_dim_v = 512;
  CHECK_NOTHROW(validate(s));
  s.head_dim_v = 600;
  CHECK_THROWS_WITH(validate(s), Catch::Contains("first head-dim-v"));
}
