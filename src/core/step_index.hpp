#pragma once
// A sorted array of steps and where any step falls in it: a table of where
// each bucket of 2^shift steps begins (about two steps a bucket), so a search
// looks within one bucket rather than over millions of steps (the segment
// engine's breakpoints, the backward's CTA starts and ends by rows).
// Internal to src/core.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "big_array.hpp"
#include "hbmscope/error.hpp"

namespace hbmscope::l2 {

class StepIndex {
 public:
  StepIndex() = default;
  // v: sorted steps, held by the caller for the index's life.
  template <class V>
  explicit StepIndex(const V& v) : v_(v.data()), n_(v.size()) {
    if (n_ == 0) return;
    if (n_ > std::numeric_limits<std::uint32_t>::max()) throw Error("L2 simulation: too many steps to index");
    lo_ = v_[0];
    const auto span = static_cast<std::uint64_t>(v_[n_ - 1] - lo_) + 1;
    while ((span >> shift_) > n_ / 2) ++shift_;
    first_.resize(static_cast<std::size_t>((span >> shift_) + 2));
    std::size_t k = 0;
    for (std::size_t b = 0; b < first_.size(); ++b) {
      while (k < n_ && bucket(v_[k]) < b) ++k;
      first_[b] = static_cast<std::uint32_t>(k);
    }
  }
  // The first place whose step is at least x.
  std::size_t lower(std::int64_t x) const {
    if (n_ == 0 || x <= lo_) return 0;
    if (x > v_[n_ - 1]) return n_;
    // Without branches: a bucket holds the many CTAs of a generation that
    // start or end together, whose search mispredicted a branch a halving.
    const std::size_t b = bucket(x);
    const std::int64_t* base = v_ + first_[b];
    std::size_t n = first_[b + 1] - first_[b];
    if (n == 0) return first_[b];
    while (n > 1) {
      const std::size_t half = n / 2;
      base = base[half] < x ? base + half : base;
      n -= half;
    }
    return static_cast<std::size_t>(base - v_) + (*base < x ? 1 : 0);
  }
  // The places whose step is at most x.
  std::size_t upper(std::int64_t x) const {
    return x == std::numeric_limits<std::int64_t>::max() ? n_ : lower(x + 1);
  }
  // lower(x), searched outward from `near` (the last answer of a caller whose
  // questions move little: a sweep over CTAs in launch order), which it then
  // holds: steps within cache lines of the last rather than a bucket's search.
  std::size_t lower_near(std::int64_t x, std::size_t& near) const {
    std::size_t a = 0, b = n_;  // the answer lies in [a, b]
    std::size_t h = std::min(near, n_), step = 1;
    if (h < n_ && v_[h] < x) {
      a = h + 1;
      while (a + step <= n_ && v_[a + step - 1] < x) {
        a += step;
        step *= 2;
      }
      b = std::min(n_, a + step - 1);
    } else {
      b = h;
      while (b >= step && v_[b - step] >= x) {
        b -= step;
        step *= 2;
      }
      a = b >= step ? b - step + 1 : 0;
    }
    while (a < b) {
      const std::size_t m = a + (b - a) / 2;
      if (v_[m] < x) a = m + 1;
      else b = m;
    }
    return near = a;
  }
  std::size_t upper_near(std::int64_t x, std::size_t& near) const {
    return x == std::numeric_limits<std::int64_t>::max() ? n_ : lower_near(x + 1, near);
  }

 private:
  std::size_t bucket(std::int64_t x) const { return static_cast<std::size_t>(static_cast<std::uint64_t>(x - lo_) >> shift_); }
  const std::int64_t* v_ = nullptr;
  std::size_t n_ = 0;
  Array<std::uint32_t> first_;  // (each written as it is made)
  std::int64_t lo_ = 0;
  int shift_ = 0;
};

}  // namespace hbmscope::l2
