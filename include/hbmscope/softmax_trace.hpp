#pragma once
// The steps of `hbmscope softmax`: online softmax block by block, in double,
// with the terms e^(x - m) after each block, then the result beside the
// two-pass safe softmax. Pure data; src/report prints it.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "hbmscope/softmax.hpp"

namespace hbmscope {

struct SoftmaxTraceStep {
  std::size_t begin = 0, end = 0;    // the block: x[begin], ..., x[end - 1]
  OnlineSoftmaxStep<double> update;  // m and l before and after; scale = e^(m - m')
  double block_max = 0;              // largest x of the block
  double block_sum = 0;              // sum over the block of e^(x - m')
  bool rescaled = false;             // the maximum rose over earlier finite terms
  std::vector<double> terms;         // e^(x[i] - m') for every i < end: the terms in l
};

struct SoftmaxTrace {
  std::vector<double> x;
  std::size_t block = 0;
  std::vector<SoftmaxTraceStep> steps;
  std::vector<double> online;    // e^(x - m) / l after the one pass
  std::vector<double> two_pass;  // the two-pass safe softmax
  double max_difference = 0;     // largest |online - two_pass|
  std::size_t max_difference_at = 0;
};

// The most values `softmax` traces (every step prints a bar per value so far).
inline constexpr std::size_t max_softmax_values = 200;

// Throws Error when x is empty or too long, block is 0, a value is NaN or +inf,
// or every value is -inf (0/0: no softmax).
SoftmaxTrace trace_online_softmax(std::span<const double> x, std::size_t block);

// One value of the command line: a decimal number (or -inf). Throws Error
// naming the text otherwise.
double parse_logit(std::string_view text);

// n values drawn uniformly from [-4, 4) by a fixed generator (mt19937_64), the
// same for the same seed on every machine; printed and traced to 3 decimals.
std::vector<double> random_logits(std::size_t n, std::uint64_t seed);

}  // namespace hbmscope
