#pragma once
// A stable least-significant-digit radix sort by a 64-bit key, 16 bits a
// pass, passing over the digits every element shares (the high bits of
// steps and ranks): the segment engine's sorts of millions of steps, where a
// comparison sort's branches cost more (below a few thousand elements, where
// the passes' counts cost more, std::stable_sort). Internal to src/core.
#include <algorithm>
#include <cstdint>
#include <vector>

namespace hbmscope::l2 {

// An int64's order as a uint64's.
inline std::uint64_t ordered(std::int64_t x) { return static_cast<std::uint64_t>(x) ^ (std::uint64_t{1} << 63); }

template <class V, class Key>
void radix_sort(V& v, Key key) {
  using T = typename V::value_type;
  constexpr int bits = 16;
  constexpr std::size_t buckets = std::size_t{1} << bits;
  if (v.size() < 4096) {
    std::stable_sort(v.begin(), v.end(), [&](const T& a, const T& b) { return key(a) < key(b); });
    return;
  }
  std::uint64_t all_or = 0, all_and = ~std::uint64_t{0};
  for (const T& x : v) {
    const std::uint64_t k = key(x);
    all_or |= k;
    all_and &= k;
  }
  const std::uint64_t varies = all_or ^ all_and;  // the bits some keys differ in
  if (varies == 0) return;
  V tmp(v.size());
  std::vector<std::size_t> at(buckets);
  for (int shift = 0; shift < 64; shift += bits) {
    if (((varies >> shift) & (buckets - 1)) == 0) continue;
    std::fill(at.begin(), at.end(), 0);
    for (const T& x : v) ++at[(key(x) >> shift) & (buckets - 1)];
    std::size_t sum = 0;
    for (std::size_t& a : at) {
      const std::size_t c = a;
      a = sum;
      sum += c;
    }
    for (const T& x : v) tmp[at[(key(x) >> shift) & (buckets - 1)]++] = x;
    v.swap(tmp);
  }
}

}  // namespace hbmscope::l2
