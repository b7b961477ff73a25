#include "hbmscope/softmax_trace.hpp"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <random>
#include <string>

#include "hbmscope/error.hpp"

namespace hbmscope {

SoftmaxTrace trace_online_softmax(std::span<const double> x, std::size_t block) {
  if (x.empty()) throw Error("softmax: no values (give numbers, or --random N)");
  if (x.size() > max_softmax_values)
    throw Error("softmax: " + std::to_string(x.size()) + " values, at most " +
                std::to_string(max_softmax_values));
  if (block == 0) throw Error("--block: '0' must be positive");
  const double inf = std::numeric_limits<double>::infinity();
  bool finite_seen = false;
  for (double v : x) {
    if (std::isnan(v) || v == inf) throw Error("softmax: values must be finite or -inf");
    finite_seen |= v != -inf;
  }
  if (!finite_seen) throw Error("softmax: every value is -inf, so the softmax is 0/0");

  SoftmaxTrace t;
  t.x.assign(x.begin(), x.end());
  t.block = block;
  OnlineSoftmaxState<double> st;
  for (std::size_t b = 0; b < x.size(); b += block) {
    SoftmaxTraceStep step;
    step.begin = b;
    step.end = std::min(b + block, x.size());
    const auto blk = x.subspan(b, step.end - b);
    step.block_max = block_max(blk, -inf);
    step.update = online_softmax_update(st, blk);
    step.rescaled = step.update.scale < 1.0 && step.update.l_before > 0.0;
    const double m = step.update.m_after;
    for (std::size_t i = 0; i < step.end; ++i) {
      const double term = m == -inf ? 0.0 : std::exp(x[i] - m);
      step.terms.push_back(term);
      if (i >= step.begin) step.block_sum += term;
    }
    t.steps.push_back(std::move(step));
  }
  t.online.resize(x.size());
  t.two_pass.resize(x.size());
  online_softmax<double>(x, t.online, block);
  safe_softmax<double>(x, t.two_pass);
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double d = std::fabs(t.online[i] - t.two_pass[i]);
    if (d > t.max_difference) {
      t.max_difference = d;
      t.max_difference_at = i;
    }
  }
  return t;
}

double parse_logit(std::string_view text) {
  const std::string s(text);
  if (s == "-inf") return -std::numeric_limits<double>::infinity();
  // Decimal numbers only: strtod would also take hex, "nan" and "inf".
  const bool decimal =
      !s.empty() && s.find_first_not_of("0123456789+-.eE") == std::string::npos &&
      s.find_first_of("0123456789") != std::string::npos;
  char* end = nullptr;
  errno = 0;
  const double v = decimal ? std::strtod(s.c_str(), &end) : 0.0;
  if (!decimal || end != s.c_str() + s.size())
    throw UsageError("softmax: '" + s + "' is not a number");
  if (errno == ERANGE && std::isinf(v)) throw UsageError("softmax: '" + s + "' is out of range");
  return v;
}

std::vector<double> random_logits(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<double> out(n);
  // From the raw 64-bit output, not a std:: distribution, whose algorithm the
  // standard leaves to the library: the same seed gives the same values anywhere.
  for (auto& v : out) {
    const auto k = static_cast<std::int64_t>(rng() % 8000);  // 0 .. 7999
    v = static_cast<double>(k - 4000) / 1000.0;              // -4.000 .. 3.999
  }
  return out;
}

}  // namespace hbmscope
