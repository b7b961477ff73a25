#pragma once
// The head keys (or kv pairs) of a run of CTA ids in a dense grid, as sets of
// intervals: the waves' closed forms of the forward (l2_flash_waves.cpp) and
// of the backward (l2_backward_waves.cpp) count the distinct objects between
// two accesses with them. Internal to src/core.
#include <algorithm>
#include <array>
#include <cstdint>
#include <utility>

namespace hbmscope::l2::wave {

// A set of keys as sorted, disjoint, half-open intervals: at most five from
// one range of ids (below), ten for the union of two, kept in place (a set
// is made for every CTA).
struct Keys {
  using Interval = std::pair<std::uint64_t, std::uint64_t>;
  std::array<Interval, 10> iv;
  std::size_t count = 0;
  const Interval* begin() const { return iv.data(); }
  const Interval* end() const { return iv.data() + count; }
  void add(std::uint64_t a, std::uint64_t b) {
    if (a < b) iv[count++] = {a, b};
  }
  void normalize() {
    std::sort(iv.begin(), iv.begin() + static_cast<std::ptrdiff_t>(count));
    std::size_t out = 0;
    for (std::size_t k = 0; k < count; ++k) {
      if (out > 0 && iv[k].first <= iv[out - 1].second) iv[out - 1].second = std::max(iv[out - 1].second, iv[k].second);
      else iv[out++] = iv[k];
    }
    count = out;
  }
  std::uint64_t size() const {
    std::uint64_t n = 0;
    for (const auto& p : *this) n += p.second - p.first;
    return n;
  }
  // |this \ other|
  std::uint64_t size_minus(const Keys& o) const {
    std::uint64_t n = size(), common = 0;
    std::size_t k = 0;
    for (const auto& p : *this) {
      while (k < o.count && o.iv[k].second <= p.first) ++k;
      for (std::size_t m = k; m < o.count && o.iv[m].first < p.second; ++m)
        common += std::min(p.second, o.iv[m].second) - std::max(p.first, o.iv[m].first);
    }
    return n - common;
  }
  // this ∩ [0, k)
  Keys below(std::uint64_t k) const {
    Keys b;
    for (const auto& p : *this) b.add(p.first, std::min(p.second, k));
    return b;
  }
  static Keys unite(const Keys& a, const Keys& b) {
    Keys u = a;
    for (const auto& p : b) u.iv[u.count++] = p;
    u.normalize();
    return u;
  }
};

// The dense grid's ids, in either launch order: nqb CTAs a head key (query
// blocks of the forward, key blocks of the backward).
struct Ids {
  std::uint64_t H, nqb, ctas;
  bool qbm;
  // Keys (sequence, head / grp) of the CTAs with ids in [x, y).
  Keys keys(std::uint64_t x, std::uint64_t y, std::uint64_t grp) const {
    Keys k;
    if (x >= y) return k;
    const std::uint64_t per_b = H / grp;  // keys per sequence
    if (qbm) {  // id = (b H + h) nqb + i: key = id / (nqb grp)
      k.add(x / (nqb * grp), (y - 1) / (nqb * grp) + 1);
      return k;
    }
    // id = (b nqb + i) H + h
    const std::uint64_t per = nqb * H;
    const std::uint64_t bx = x / per, by = (y - 1) / per;
    auto within = [&](std::uint64_t b, std::uint64_t lo, std::uint64_t hi) {  // ids [lo, hi) of sequence b
      if (hi - lo >= H) {
        k.add(b * per_b, (b + 1) * per_b);
        return;
      }
      const std::uint64_t h0 = lo % H, len = hi - lo;
      if (h0 + len <= H) {
        k.add(b * per_b + h0 / grp, b * per_b + (h0 + len - 1) / grp + 1);
      } else {
        k.add(b * per_b + h0 / grp, (b + 1) * per_b);
        k.add(b * per_b, b * per_b + (h0 + len - H - 1) / grp + 1);
      }
    };
    if (bx == by) {
      within(bx, x, y);
    } else {
      within(bx, x, (bx + 1) * per);
      if (by > bx + 1) k.add((bx + 1) * per_b, by * per_b);
      within(by, by * per, y);
    }
    k.normalize();
    return k;
  }
};

}  // namespace hbmscope::l2::wave
