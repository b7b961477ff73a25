#pragma once
// A stable least-significant-digit radix sort by a 64-bit key, over the
// bits the keys' range spans (less the least key), in digits of 11 to 16 bits
// by the elements' count (a digit's counts cost less than a pass over them):
// the segment engine's sorts of millions of steps and the rows' thousands a
// head, where a comparison sort's branches cost more (below a few thousand
// elements, where the passes' counts cost more, std::stable_sort). Internal
// to src/core.
#include <algorithm>
#include <bit>
#include <cstdint>
#include <vector>

namespace hbmscope::l2 {

// An int64's order as a uint64's.
inline std::uint64_t ordered(std::int64_t x) { return static_cast<std::uint64_t>(x) ^ (std::uint64_t{1} << 63); }

template <class V, class Key>
void radix_sort(V& v, Key key) {
  using T = typename V::value_type;
  if (v.size() < 4096) {
    std::stable_sort(v.begin(), v.end(), [&](const T& a, const T& b) { return key(a) < key(b); });
    return;
  }
  std::uint64_t least = ~std::uint64_t{0}, most = 0;
  for (const T& x : v) {
    const std::uint64_t k = key(x);
    least = std::min(least, k);
    most = std::max(most, k);
  }
  const int span = static_cast<int>(std::bit_width(most - least));  // the bits of (key - least)
  if (span == 0) return;
  const int bits = std::clamp(static_cast<int>(std::bit_width(v.size())) - 2, 11, 16);
  const std::uint64_t mask = (std::uint64_t{1} << bits) - 1;
  V tmp(v.size());
  std::vector<std::size_t> at(mask + 1);
  for (int shift = 0; shift < span; shift += bits) {
    std::fill(at.begin(), at.end(), 0);
    for (const T& x : v) ++at[((key(x) - least) >> shift) & mask];
    std::size_t sum = 0;
    for (std::size_t& a : at) {
      const std::size_t c = a;
      a = sum;
      sum += c;
    }
    for (const T& x : v) tmp[at[((key(x) - least) >> shift) & mask]++] = x;
    v.swap(tmp);
  }
}

}  // namespace hbmscope::l2
