#include <catch2/catch.hpp>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "hbmscope/reference.hpp"

using namespace hbmscope;

namespace {
struct Outputs {
  std::vector<float> o, lse;
};

Outputs run(const Shape& s, const AttentionBuffers& in, bool tiled) {
  Outputs out{std::vector<float>(q_elements(s), NAN), std::vector<float>(lse_elements(s), NAN)};
  auto f = tiled ? attention_tiled : attention_naive;
  f(s, default_scale(s), in.q, in.k, in.v, out.o, out.lse);
  return out;
}

double lse_error(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::isinf(a[i]) || std::isinf(b[i])) {
      REQUIRE(a[i] == b[i]);
      continue;
    }
    worst = std::max(worst, static_cast<double>(std::abs(a[i] - b[i])));
  }
  return worst;
}
}  // namespace

TEST_CASE("tiled FlashAttention on the CPU equals naive attention", "[reference]") {
  struct Case { std::uint64_t b, h, hkv, nq, nkv, d, br, bc; bool causal; };
  const Case cases[] = {
      {1, 1, 1, 64, 64, 16, 16, 16, false},
      {2, 4, 2, 100, 77, 32, 32, 16, false},
      {2, 4, 2, 100, 77, 32, 32, 16, true},
      {1, 2, 1, 77, 200, 64, 16, 64, true},
      {1, 3, 3, 200, 50, 8, 64, 32, true},  // early rows see no key at all
      {1, 1, 1, 130, 130, 128, 128, 128, true},
  };
  for (const auto& c : cases) {
    Shape s;
    s.batch = c.b; s.heads = c.h; s.kv_heads = c.hkv; s.seq_q = c.nq; s.seq_kv = c.nkv;
    s.head_dim = c.d; s.block_rows = c.br; s.block_cols = c.bc; s.causal = c.causal;
    INFO(describe(s));
    const auto in = random_inputs(s, 42);
    const auto naive = run(s, in, false), tiled = run(s, in, true);
    CHECK(relative_l2_error(tiled.o, naive.o) < 1e-5);
    CHECK(lse_error(tiled.lse, naive.lse) < 1e-4);
  }
}

TEST_CASE("reference attention by hand: one query, two keys", "[reference]") {
  Shape s;
  s.seq_q = 1; s.seq_kv = 2; s.head_dim = 1; s.dtype = Dtype::fp32;
  const std::vector<float> q{1}, k{0, 2}, v{10, 20};
  std::vector<float> o(1), lse(1);
  attention_naive(s, 1.0f, q, k, v, o, lse);
  const double p1 = std::exp(2.0) / (1.0 + std::exp(2.0));
  CHECK(o[0] == Approx(10 * (1 - p1) + 20 * p1));
  CHECK(lse[0] == Approx(std::log(1.0 + std::exp(2.0))));
  s.causal = true;  // off = 1: row 0 sees keys 0 and 1, the same
  attention_tiled(s, 1.0f, q, k, v, o, lse);
  CHECK(o[0] == Approx(10 * (1 - p1) + 20 * p1));
}

TEST_CASE("a row the causal mask hides completely gives O = 0 and LSE = -inf", "[reference]") {
  Shape s;
  s.seq_q = 4; s.seq_kv = 2; s.head_dim = 4; s.causal = true;  // rows 0, 1 see nothing
  s.block_rows = s.block_cols = 2;
  const auto in = random_inputs(s, 3);
  for (bool tiled : {false, true}) {
    const auto out = run(s, in, tiled);
    for (int x = 0; x < 8; ++x) CHECK(out.o[x] == 0.0f);
    CHECK(std::isinf(out.lse[0]));
    CHECK(std::isfinite(out.lse[2]));
  }
}

TEST_CASE("relative error: NaN never passes", "[reference]") {
  const std::vector<float> ref{1, 2, 3};
  CHECK(relative_l2_error(ref, ref) == 0.0);
  CHECK(std::isnan(relative_l2_error(std::vector<float>{1, NAN, 3}, ref)));
  CHECK_FALSE(relative_l2_error(std::vector<float>{1, NAN, 3}, ref) < 1e-2);
}

TEST_CASE("bf16 rounding is round-to-nearest-even", "[reference]") {
  CHECK(round_to_dtype(1.0f, Dtype::bf16) == 1.0f);
  CHECK(round_to_dtype(1.0f + 0x1p-8f, Dtype::bf16) == 1.0f);           // tie, to even
  CHECK(round_to_dtype(1.0f + 3 * 0x1p-8f, Dtype::bf16) == 1.0f + 0x1p-6f);  // tie, to even
  CHECK(round_to_dtype(1.0f + 0x1p-7f, Dtype::bf16) == 1.0f + 0x1p-7f);
  CHECK(round_to_dtype(0.1f, Dtype::fp16) == Approx(0.0999755859375f));
  CHECK(round_to_dtype(1000.f, Dtype::fp8) == 448.f);
  CHECK(round_to_dtype(1.0625f, Dtype::fp8) == 1.0f);
}

TEST_CASE("reference runs the oracle size 2 x 4 heads x 1024 x 128 (timed in bench/)", "[reference]") {
  Shape s;
  s.batch = 2; s.heads = 4; s.kv_heads = 4; s.seq_q = s.seq_kv = 1024; s.head_dim = 128;
  const auto in = random_inputs(s, 9);
  std::vector<float> o(q_elements(s), NAN), lse(lse_elements(s), NAN);
  attention_naive(s, default_scale(s), in.q, in.k, in.v, o, lse);
  for (float x : o) REQUIRE(std::isfinite(x));
}

TEST_CASE("fp16 rounding is IEEE binary16, round-to-nearest-even", "[reference]") {
  const auto h = [](float x) { return round_to_dtype(x, Dtype::fp16); };
  CHECK(h(1.0f + 0x1p-11f) == 1.0f);                        // tie, to even
  CHECK(h(1.0f + 3 * 0x1p-11f) == 1.0f + 0x1p-9f);          // tie, to even
  CHECK(h(1.0f + 0x1p-10f) == 1.0f + 0x1p-10f);             // exact
  CHECK(h(65504.f) == 65504.f);                             // the largest half
  CHECK(h(65519.f) == 65504.f);
  CHECK(std::isinf(h(65520.f)));                            // tie past the largest: infinity
  CHECK(h(-65520.f) == -INFINITY);
  CHECK(h(0x1p-24f) == 0x1p-24f);                           // the smallest subnormal
  CHECK(h(0x1p-25f) == 0.0f);                               // tie, to even (zero)
  CHECK(h(3 * 0x1p-25f) == 0x1p-23f);
  CHECK(h(0x1p-14f + 0x1p-25f) == 0x1p-14f);                // just above the normal range
  CHECK(std::signbit(h(-0x1p-30f)));
  CHECK(std::isnan(h(NAN)));
#ifdef __FLT16_MAX__
  // Where the compiler has _Float16, agree with it bit for bit on many floats.
  std::uint32_t u = 12345;
  for (int i = 0; i < 200000; ++i) {
    u = u * 1664525u + 1013904223u;
    const float x = std::bit_cast<float>(u);
    if (std::isnan(x)) continue;
    const float want = static_cast<float>(static_cast<_Float16>(x));
    if (std::bit_cast<std::uint32_t>(h(x)) != std::bit_cast<std::uint32_t>(want)) FAIL("x = " << x);
  }
#endif
}

TEST_CASE("lse_relative_error: hidden rows must be -inf in both, the rest by relative L2", "[reference]") {
  const float ninf = -std::numeric_limits<float>::infinity();
  const std::vector<float> ref{1.f, ninf, 2.f};
  CHECK(lse_relative_error(std::vector<float>{1.f, ninf, 2.f}, ref) == 0.0);
  CHECK(lse_relative_error(std::vector<float>{1.f, ninf, 2.2f}, ref) == Approx(0.2 / std::sqrt(5.0)).epsilon(1e-6));
  CHECK(std::isnan(lse_relative_error(std::vector<float>{1.f, 0.f, 2.f}, ref)));  // a hidden row not -inf
  CHECK(std::isnan(lse_relative_error(std::vector<float>{ninf, ninf, 2.f}, ref)));  // a seen row -inf
  CHECK(std::isnan(lse_relative_error(std::vector<float>{1.f}, ref)));              // sizes differ
}

TEST_CASE("bf16 buffers round-trip the values bf16 holds", "[reference]") {
  const std::vector<float> x{0.f, 1.f, -2.5f, 0.099609375f, 65280.f};
  const auto bits = to_bf16_bits(x);
  REQUIRE(bits.size() == x.size());
  CHECK(bits[1] == 0x3F80);
  CHECK(from_bf16_bits(bits) == x);
}
