#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "hbmscope/softmax.hpp"

using namespace hbmscope;

namespace {

template <class T>
std::vector<T> online(const std::vector<T>& x, std::size_t block) {
  std::vector<T> out(x.size());
  online_softmax<T>(x, out, block);
  return out;
}

template <class T>
std::vector<T> two_pass(const std::vector<T>& x) {
  std::vector<T> out(x.size());
  safe_softmax<T>(x, out);
  return out;
}

// Equal within tol, NaN exactly where the two-pass softmax gives NaN.
template <class T>
T max_difference(const std::vector<T>& a, const std::vector<T>& b) {
  T worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(b[i])) {
      REQUIRE(std::isnan(a[i]));
      continue;
    }
    REQUIRE(std::isfinite(a[i]));
    worst = std::max(worst, std::abs(a[i] - b[i]));
  }
  return worst;
}

constexpr double inf = std::numeric_limits<double>::infinity();

}  // namespace

TEST_CASE("online softmax equals the two-pass softmax in double", "[softmax]") {
  std::mt19937_64 rng(1);
  std::normal_distribution<double> dist(0.0, 3.0);
  for (std::size_t n : {1u, 2u, 7u, 64u, 1000u})
    for (std::size_t block : {1u, 3u, 16u, 1000u}) {
      std::vector<double> x(n);
      for (auto& v : x) v = dist(rng);
      CHECK(max_difference(online(x, block), two_pass(x)) < 1e-15);
    }
}

TEST_CASE("online softmax equals the two-pass softmax in float", "[softmax]") {
  std::mt19937_64 rng(2);
  std::normal_distribution<float> dist(0.0f, 3.0f);
  std::vector<float> x(513);
  for (auto& v : x) v = dist(rng);
  for (std::size_t block : {1u, 8u, 128u}) CHECK(max_difference(online(x, block), two_pass(x)) < 1e-6f);
}

TEST_CASE("the note's example: rescale when the maximum rises", "[softmax]") {
  const std::vector<double> x{3, 1, 4, 1, 5, 9, 2, 6};
  OnlineSoftmaxState<double> st;
  const std::span<const double> all(x);
  const auto s1 = online_softmax_update(st, all.subspan(0, 3));
  CHECK(s1.m_after == 4.0);
  const auto s2 = online_softmax_update(st, all.subspan(3, 3));
  CHECK(s2.m_before == 4.0);
  CHECK(s2.m_after == 9.0);
  CHECK(s2.scale == Approx(std::exp(-5.0)));
  const auto s3 = online_softmax_update(st, all.subspan(6, 2));
  CHECK(s3.scale == 1.0);  // 2 and 6 do not raise the maximum
  double l = 0;
  for (double v : x) l += std::exp(v - 9.0);
  CHECK(st.l == Approx(l).epsilon(1e-15));
}

TEST_CASE("edge values behave as in the two-pass softmax", "[softmax][edge]") {
  SECTION("-inf entries get probability 0, even in a leading all -inf block") {
    const std::vector<double> x{-inf, -inf, -inf, 1.0, -inf, 2.0};
    const auto a = online(x, 3), b = two_pass(x);
    CHECK(max_difference(a, b) < 1e-15);
    CHECK(a[0] == 0.0);
    CHECK(a[5] == Approx(1.0 / (1.0 + std::exp(-1.0))));
  }
  SECTION("a row of all -inf gives NaN in both (0/0), never a made-up number") {
    const std::vector<double> x(5, -inf);
    const auto a = online(x, 2), b = two_pass(x);
    for (std::size_t i = 0; i < x.size(); ++i) {
      CHECK(std::isnan(a[i]));
      CHECK(std::isnan(b[i]));
    }
  }
  SECTION("logits of +-1e4 do not overflow") {
    const std::vector<double> x{1e4, -1e4, 1e4 - 1, 0.0, 1e4};
    const auto a = online(x, 2), b = two_pass(x);
    CHECK(max_difference(a, b) < 1e-15);
    CHECK(a[1] == 0.0);
    CHECK(a[0] == Approx(1.0 / (2.0 + std::exp(-1.0))));
  }
  SECTION("float logits of +-1e4") {
    const std::vector<float> x{1e4f, -1e4f, 9999.f, 1e4f};
    CHECK(max_difference(online(x, 1), two_pass(x)) < 1e-6f);
  }
  SECTION("NaN spreads as in the two-pass softmax") {
    const std::vector<double> x{1.0, std::nan(""), 2.0, 3.0};
    const auto a = online(x, 2), b = two_pass(x);
    for (std::size_t i = 0; i < x.size(); ++i) CHECK(std::isnan(a[i]) == std::isnan(b[i]));
  }
  SECTION("+inf gives what the two-pass gives") {
    const std::vector<double> x{1.0, inf, 2.0};
    const auto a = online(x, 1), b = two_pass(x);
    for (std::size_t i = 0; i < x.size(); ++i) CHECK(std::isnan(a[i]) == std::isnan(b[i]));
  }
}
