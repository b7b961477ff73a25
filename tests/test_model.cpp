#include <catch2/catch.hpp>
#include <random>

#include "hbmscope/error.hpp"
#include "hbmscope/model.hpp"
#include "hbmscope/printers.hpp"

using namespace hbmscope;

namespace {
Shape note_shape(std::uint64_t n, std::uint64_t d) {
  Shape s;
  s.seq_q = s.seq_kv = n;
  s.head_dim = d;
  return s;
}

// Key columns streamed, by the definition: query block i visits key block j iff
// some row r of i sees some key c of j (c <= r + Nkv - Nq when causal).
std::uint64_t columns_by_definition(const Shape& s) {
  std::uint64_t total = 0;
  const std::int64_t off = causal_offset(s);
  for (std::uint64_t i = 0; i * s.block_rows < s.seq_q; ++i)
    for (std::uint64_t j = 0; j * s.block_cols < s.seq_kv; ++j) {
      bool visited = !s.causal;
      for (std::uint64_t r = i * s.block_rows; !visited && r < std::min((i + 1) * s.block_rows, s.seq_q); ++r)
        for (std::uint64_t c = j * s.block_cols; !visited && c < std::min((j + 1) * s.block_cols, s.seq_kv); ++c)
          visited = static_cast<std::int64_t>(c) <= static_cast<std::int64_t>(r) + off;
      if (visited) total += std::min(s.block_cols, s.seq_kv - j * s.block_cols);
    }
  return total;
}
}  // namespace

TEST_CASE("the design note's nine table figures", "[model][note]") {
  struct Case { std::uint64_t n, d; const char *standard, *flash, *floor; };
  const Case cases[] = {
      {4096, 64, "136 MB", "34.6 MB", "2.1 MB"},
      {4096, 128, "138 MB", "69.2 MB", "4.19 MB"},
      {8192, 128, "545 MB", "273 MB", "8.39 MB"},
  };
  for (const auto& c : cases) {
    const ModelBytes m = evaluate(note_shape(c.n, c.d));
    CHECK(format_bytes(m.standard, Units::decimal) == c.standard);
    CHECK(format_bytes(m.flash_no_l2, Units::decimal) == c.flash);
    CHECK(format_bytes(m.floor, Units::decimal) == c.floor);
  }
}

TEST_CASE("the note's formulas for one head, N = Nq = Nkv", "[model]") {
  // standard = e(2Nd + 4N^2 + 2Nd); flash = e(2Nd + 2N^2 d / Br); floor = 4eNd.
  for (std::uint64_t n : {128u, 1024u, 4096u, 8192u})
    for (std::uint64_t d : {32u, 64u, 128u, 256u})
      for (Dtype dt : {Dtype::fp32, Dtype::fp16, Dtype::bf16, Dtype::fp8}) {
        Shape s = note_shape(n, d);
        s.dtype = dt;
        const std::uint64_t e = elem_bytes(dt);
        CHECK(standard_bytes(s) == e * (2 * n * d + 4 * n * n + 2 * n * d));
        CHECK(flash_no_l2_bytes(s) == e * (2 * n * d + 2 * n * n * d / s.block_rows));
        CHECK(floor_bytes(s) == 4 * e * n * d);
        CHECK(attention_flops(s) == 4 * n * n * d);
      }
}

TEST_CASE("exact figures of the note's first row", "[model]") {
  const ModelBytes m = evaluate(note_shape(4096, 64));
  CHECK(m.standard == 136314880);
  CHECK(m.flash_no_l2 == 34603008);
  CHECK(m.floor == 2097152);
  CHECK(m.flops == 4294967296);
}

TEST_CASE("batch, GQA, Nq != Nkv and dtype enter as the issue states", "[model]") {
  Shape s;
  s.batch = 3;
  s.heads = 8;
  s.kv_heads = 2;
  s.seq_q = 1000;
  s.seq_kv = 3000;
  s.head_dim = 96;
  s.dtype = Dtype::fp32;
  s.block_rows = 64;
  s.block_cols = 32;
  const std::uint64_t e = 4, H = 8, Hkv = 2, Nq = 1000, Nkv = 3000, d = 96, B = 3;
  CHECK(standard_bytes(s) == B * e * (H * Nq * d + H * Nkv * d + 4 * H * Nq * Nkv + H * Nkv * d + H * Nq * d));
  const std::uint64_t C = 16 * Nkv;  // ceil(1000/64) = 16 query blocks
  CHECK(streamed_key_columns(s) == C);
  CHECK(flash_no_l2_bytes(s) == B * e * (2 * H * Nq * d + 2 * d * H * C));
  CHECK(floor_bytes(s) == B * e * (2 * H * Nq * d + 2 * Hkv * Nkv * d));
  CHECK(attention_flops(s) == B * H * 4 * Nq * Nkv * d);
  s.causal = true;
  // Bottom-right aligned: row r sees r + 2001 keys, 2001..3000 over the 1000 rows.
  CHECK(visible_pairs_per_head(s) == 1000 * (2001 + 3000) / 2);
  CHECK(attention_flops(s) == B * H * 4 * d * (1000 * (2001 + 3000) / 2));
}

TEST_CASE("causal key columns: closed form equals the definition", "[model][causal]") {
  std::mt19937_64 rng(7);
  auto pick = [&](std::uint64_t lo, std::uint64_t hi) {
    return std::uniform_int_distribution<std::uint64_t>(lo, hi)(rng);
  };
  for (int t = 0; t < 400; ++t) {
    Shape s;
    s.causal = true;
    s.seq_q = pick(1, 300);
    s.seq_kv = pick(1, 300);
    s.block_rows = pick(1, 70);
    s.block_cols = pick(1, 70);
    INFO(describe(s));
    CHECK(streamed_key_columns(s) == columns_by_definition(s));
  }
  // Divisible, the usual square case: (n/B)(n/B+1)/2 key blocks of B columns.
  Shape s = note_shape(4096, 64);
  s.causal = true;
  CHECK(streamed_key_columns(s) == 32 * 33 / 2 * 128);
}

TEST_CASE("causal with more queries than keys: early rows see nothing", "[model][causal]") {
  Shape s;
  s.causal = true;
  s.seq_q = 512;
  s.seq_kv = 128;
  s.block_rows = s.block_cols = 128;
  // off = -384: query blocks 0..2 see no key; block 3 sees all 128 keys.
  CHECK(streamed_key_columns(s) == 128);
  CHECK(streamed_key_columns(s) == columns_by_definition(s));
}

TEST_CASE("flash lies between the floor and no-L2 bounds, standard above", "[model]") {
  for (std::uint64_t n : {100u, 4096u, 65536u})
    for (bool causal : {false, true}) {
      Shape s = note_shape(n, 128);
      s.causal = causal;
      const auto m = evaluate(s);
      CHECK(m.floor <= m.flash_no_l2);
      CHECK(m.flash_no_l2 <= m.standard);
    }
}

TEST_CASE("a count that would overflow 64 bits is refused, not wrapped", "[model][overflow]") {
  Shape s = note_shape(std::uint64_t{1} << 33, 128);  // 4 N^2 e = 2^69 bytes
  CHECK_THROWS_AS(standard_bytes(s), Error);
  CHECK_THROWS_WITH(standard_bytes(s), Catch::Contains("overflows"));
  // FlashAttention's 2 N^2 d / Br * e = 2^68 bytes: refused too; the floor, 4eNd, fits.
  CHECK_THROWS_AS(flash_no_l2_bytes(s), Error);
  CHECK_NOTHROW(floor_bytes(s));
  Shape big = note_shape(1 << 20, 128);
  big.batch = std::uint64_t{1} << 20;
  big.heads = 1024;
  CHECK_THROWS_AS(attention_flops(big), Error);
}

TEST_CASE("invalid shapes are refused with the field named", "[model][validate]") {
  Shape s;
  s.heads = 6;
  s.kv_heads = 4;
  CHECK_THROWS_WITH(validate(s), Catch::Contains("multiple of kv-heads"));
  s = Shape{};
  s.head_dim = 0;
  CHECK_THROWS_WITH(validate(s), Catch::Contains("head-dim"));
  s = Shape{};
  s.block_rows = 0;
  CHECK_THROWS_WITH(evaluate(s), Catch::Contains("block-rows"));
}
