#pragma once
// The sweeps outside the masked backward's main loop
// (l2_backward_outside.cpp): an access's key in trace order, sums over
// prefixes, tallies by bucket, the rows merged by first or last read, and
// where the schedule's period begins for them (l2_backward_period.cpp).
// Internal to src/core.
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <type_traits>
#include <utility>
#include <vector>

#include "big_array.hpp"
#include "hbmscope/checked.hpp"
#include "l2_backward_outside.hpp"
#include "l2_tally.hpp"
#include "radix_sort.hpp"

namespace hbmscope::l2::sweeps {

using u64 = std::uint64_t;
using i64 = std::int64_t;
// An access of the main loop: (step, CTA, position in the step), as one number
// above 0, which stands for the preprocessing (a row the main loop never
// reads): in 64 bits where steps lie below 2^37 and CTAs below 2^25, else in
// 128.
__extension__ typedef unsigned __int128 Wide;
template <class K>
K key_of(u64 step, u64 cta, u64 sub) {
  if constexpr (std::is_same_v<K, u64>) return (step + 1) << 27 | cta << 2 | sub;
  else return (static_cast<Wide>(step + 1) << 64) | ((cta << 2) | sub);
}
constexpr u64 kv_sub = 0, row_sub = 1, dk_sub = 2;

// The bits set in x, inline (a build for any x86-64 calls a library
// function for __builtin_popcountll).
inline u64 bits_set(u64 x) {
  x -= (x >> 1) & 0x5555555555555555ull;
  x = (x & 0x3333333333333333ull) + ((x >> 2) & 0x3333333333333333ull);
  x = (x + (x >> 4)) & 0x0f0f0f0f0f0f0f0full;
  return (x * 0x0101010101010101ull) >> 56;
}
constexpr std::uint32_t no_reader = ~std::uint32_t{0};

// Sums over a prefix of places, places added one at a time. The sweeps ask
// near their last question (a head's rows, a head's key blocks one after
// another), so the sum below a cursor is kept and the cursor moved over the
// places between. Where it has moved more than `per_query` places a question
// and twice over every place (a first question may ask near the last place),
// up to `Cursors` are kept (with GQA the dK, dV writes of the three or four
// chunks in flight): the one asked last, else the nearest, moves; where that
// is far, a cursor placed anew or the least recently asked one starts from the
// nearest; an add costs one compare a cursor placed. Where they too have
// moved as much again, a Fenwick tree over blocks of 16 places is built from
// the values and answers from then on: O(log) an access at worst.
template <std::size_t Cursors = 1>
class PrefixSums {
 public:
  static constexpr std::size_t block = 16, per_query = 32;
  explicit PrefixSums(std::size_t n) : v_(n, 0), slack_(2 * static_cast<i64>(n)) {}
  void add(std::size_t i, u64 x) {
    v_[i] += x;
    if (t_.empty()) {
      const std::size_t live = Cursors == 1 ? 1 : live_;  // (a constant where one: no loads in the loop)
      for (std::size_t k = 0; k < live; ++k) c_[k].sum += i < c_[k].at ? x : 0;
      return;
    }
    for (std::size_t k = i / block + 1; k < t_.size(); k += k & (0 - k)) t_[k] += x;
  }
  u64 below(std::size_t i) {  // places [0, i)
    if (t_.empty()) {
      Cursor* c = &c_[last_];
      std::size_t far = distance(c->at, i);
      if (Cursors > 1 && spread_ && far > per_query) {
        for (std::size_t k = 0; k < live_; ++k)
          if (distance(c_[k].at, i) < far) {
            c = &c_[k];
            far = distance(c->at, i);
          }
        if (far > per_query) {  // (a cursor placed anew, else the least recently asked)
          Cursor* to = &c_[0];
          if (live_ < Cursors) {
            to = &c_[live_++];
          } else {
            for (std::size_t k = 1; k < live_; ++k)
              if (c_[k].used < to->used) to = &c_[k];
          }
          *to = *c;
          c = to;
        }
        last_ = static_cast<std::size_t>(c - c_);
      }
      c->used = ++asked_;
      slack_ += static_cast<i64>(per_query) - static_cast<i64>(far);  // (the budget less the moves)
      if (slack_ < 0 && Cursors > 1 && !spread_) {  // (one cursor's budget spent: the others, with as much again)
        spread_ = true;
        slack_ += 2 * static_cast<i64>(v_.size());
      }
      if (slack_ >= 0) {
        for (; c->at < i; ++c->at) c->sum += v_[c->at];
        for (; c->at > i; --c->at) c->sum -= v_[c->at - 1];
        return c->sum;
      }
      build();
    }
    u64 s = 0;
    for (std::size_t k = i / block; k > 0; k -= k & (0 - k)) s += t_[k];
    for (std::size_t j = i / block * block; j < i; ++j) s += v_[j];
    return s;
  }
  bool tree() const { return !t_.empty(); }  // (the tests' view)

 private:
  struct Cursor {
    std::size_t at = 0;
    u64 sum = 0, used = 0;
  };
  static std::size_t distance(std::size_t a, std::size_t b) { return a > b ? a - b : b - a; }
  void build() {  // t_[k]: blocks [k - lowbit(k), k)
    t_.assign(v_.size() / block + 2, 0);
    for (std::size_t k = 1; k < t_.size(); ++k) {
      for (std::size_t j = (k - 1) * block; j < std::min(v_.size(), k * block); ++j) t_[k] += v_[j];
      if (const std::size_t up = k + (k & (0 - k)); up < t_.size()) t_[up] += t_[k];
    }
  }
  std::vector<u64> v_, t_;
  Cursor c_[Cursors];
  std::size_t last_ = 0, live_ = 1;  // the cursor asked last; those placed
  bool spread_ = false;               // more than one cursor asked
  i64 slack_;
  u64 asked_ = 0;
};

// Places [0, n) in order of key(place): radix-sorted (key, place) pairs where
// keys take 64 bits, else compared.
template <class Ix = u64, class KeyOf>
Array<Ix> order_by(u64 n, KeyOf key) {
  Array<Ix> ix(n);
  if constexpr (std::is_same_v<decltype(key(0)), u64>) {
    Array<std::pair<u64, u64>> kx(n);
    for (u64 i = 0; i < n; ++i) kx[i] = {key(i), i};
    radix_sort(kx, [](const std::pair<u64, u64>& p) { return p.first; });
    for (u64 i = 0; i < n; ++i) ix[i] = static_cast<Ix>(kx[i].second);
  } else {
    std::iota(ix.begin(), ix.end(), Ix{0});
    std::sort(ix.begin(), ix.end(), [&](Ix a, Ix b) { return key(a) < key(b); });
  }
  return ix;
}

// Reads and write-backs at finite distances, summed by bucket and added to
// the tally at once (as many as the rows; a bucket looked up where a distance
// leaves the last one).
class ByBucket {
 public:
  explicit ByBucket(const Tally& t) : t_(t), rb_(t.capacities().size() + 1, 0), wb_(rb_.size(), 0) {}
  void read(u64 d, u64 bytes) { add(rb_[bucket(d)], bytes, d); }
  void writeback(u64 d, u64 bytes) { add(wb_[bucket(d)], bytes, d); }
  // A read and a write-back at one distance: one bucket found.
  void read_writeback(u64 d, u64 read, u64 written) {
    const std::size_t k = bucket(d);
    add(rb_[k], read, d);
    add(wb_[k], written, d);
  }
  void first(u64 bytes) { add(first_, bytes, 0); }
  void flush(Tally& t) {
    for (std::size_t k = 0; k < rb_.size(); ++k) {
      if (rb_[k] != 0) t.read_in_bucket(k, rb_[k]);
      if (wb_[k] != 0) t.writeback_in_bucket(k, wb_[k]);
    }
    if (first_ != 0) t.reads(infinite, 0, 1, first_);
    t.reached(most_);
  }

 private:
  void add(u64& sum, u64 bytes, u64 d) {
    sum = checked_add(sum, bytes, "L2 simulation bytes");
    most_ = std::max(most_, d);
  }
  std::size_t bucket(u64 d) {
    if (d <= below_ || d > top_) {
      k_ = t_.bucket_of(d);
      below_ = k_ == 0 ? 0 : t_.capacities()[k_ - 1];
      top_ = k_ < t_.capacities().size() ? t_.capacities()[k_] : infinite;
    }
    return k_;
  }
  const Tally& t_;
  std::vector<u64> rb_, wb_;
  u64 first_ = 0, most_ = 0, below_ = infinite, top_ = 0;
  std::size_t k_ = 0;
};

// The rows the main loop reads (key above the preprocessing) in key order,
// those with keys in (after, stop], where each head's (rows [head_row0[h],
// head_row0[h + 1])) come in increasing order: the heads merged, a head
// streamed while it leads; appended to `out`. False where a head's do not
// (found as they are merged; out is then left part written). (Where `after`
// is given, each head's rows after it are found from its last row back.)
template <class Row, class KeyOf, class Key = std::invoke_result_t<KeyOf, u64>>
bool merge_heads(const std::vector<u64>& head_row0, KeyOf key, Array<Row>& out, Key stop = ~Key{0},
                 Key after = 0) {
  constexpr Key preprocessing = 0, last_key = ~Key{0};
  struct Head {
    Key k;
    u64 r, end;
  };
  std::vector<Head> heads;
  for (u64 h = 0; h + 1 < head_row0.size(); ++h) {
    u64 r = head_row0[h];
    if (after != preprocessing)
      for (u64 b = head_row0[h + 1]; b > r; --b)
        if (const Key k = key(b - 1); k != preprocessing && k <= after) {
          r = b;
          break;
        }
    for (; r < head_row0[h + 1]; ++r)
      if (const Key k = key(r); k != preprocessing) {
        if (k <= stop) heads.push_back({k, r, head_row0[h + 1]});
        break;
      }
  }
  std::sort(heads.begin(), heads.end(), [](const Head& a, const Head& b) { return a.k < b.k; });
  if (out.empty() && stop == last_key && after == preprocessing) out.reserve(head_row0.back() - head_row0.front());
  auto later = [](const Head& a, const Head& b) { return a.k > b.k; };  // (a heap of the least)
  std::vector<Head> heap;
  std::size_t next = 0;
  while (next < heads.size() || !heap.empty()) {
    while (next < heads.size() && (heap.empty() || heads[next].k < heap.front().k)) {
      heap.push_back(heads[next++]);
      std::push_heap(heap.begin(), heap.end(), later);
    }
    std::pop_heap(heap.begin(), heap.end(), later);
    Head c = heap.back();
    heap.pop_back();
    const Key lim = std::min(heap.empty() ? last_key : heap.front().k, next < heads.size() ? heads[next].k : last_key);
    for (;;) {
      out.push_back(static_cast<Row>(c.r));
      const Key prev = c.k;
      for (++c.r; c.r < c.end && (c.k = key(c.r)) == preprocessing; ++c.r) {
      }
      if (c.r == c.end) break;
      if (c.k <= prev) return false;
      if (c.k > stop) break;
      if (c.k > lim) {
        heap.push_back(c);
        std::push_heap(heap.begin(), heap.end(), later);
        break;
      }
    }
  }
  return true;
}

// The first head h1 in the period whose first reads and its source's
// (p.heads before) follow every access of the CTAs before the period's heads
// (before their sources, for the source): from then on the accesses between
// a row's first read and its image's, one period later, are the same for
// every row. Heads where none.
template <class Key>
u64 periodic_from(const BackwardKeys& in, const BackwardPeriod& p) {
  const Array<BackwardCta>& ct = *in.ct;
  const Array<u64>& start = *in.start;
  const u64 heads = in.head_row0->size() - 1, m = p.per_head;
  Key before_sources = 0, before_heads = 0;  // the last access of the CTAs before them (a dK, dV write)
  for (u64 y = 0; y < p.from * m; ++y) {
    const Key k = key_of<Key>(start[y] + ct[y].steps() - 1, y, dk_sub);
    if (y < (p.from - p.heads) * m) before_sources = std::max(before_sources, k);
    before_heads = std::max(before_heads, k);
  }
  auto first_access = [&](u64 h) { return key_of<Key>(start[h * m], h * m, row_sub); };  // (of a row)
  for (u64 h = p.from; h < heads; ++h)
    if (first_access(h) > before_heads && first_access(h - p.heads) > before_sources) return h;
  return heads;
}

// A key one period later: p.steps steps and p.ctas CTAs on.
template <class Key>
Key period_shift(const BackwardPeriod& p) {
  return key_of<Key>(p.steps, p.ctas, 0) - key_of<Key>(0, 0, 0);
}

// The rows merged by key as merge_heads has them (with their keys), where the
// schedule has a period p: past the last key E of the heads before p.from
// every row is the image (p.heads heads on, one period later) of a row one
// period earlier, up to the first key L of the last p.heads heads (whose
// rows have no image). So the rows up to one period past E are merged, each
// period after copied from the one before while that one ends before L, and
// the rest merged. False where a head's rows do not come in increasing order.
template <class Row, class KeyOf, class Key = std::invoke_result_t<KeyOf, u64>>
bool merge_by_period(const std::vector<u64>& head_row0, KeyOf key, const BackwardPeriod& p, Array<Row>& rows,
                     Array<Key>& keys) {
  constexpr Key preprocessing = 0;
  const u64 H = head_row0.size() - 1, step = p.heads * (head_row0[1] - head_row0[0]);
  const Key shift = period_shift<Key>(p);
  Key E = 0, L = ~Key{0};
  for (u64 r = head_row0[0]; r < head_row0[p.from]; ++r) E = std::max(E, key(r));
  for (u64 r = head_row0[H - p.heads]; r < head_row0[H]; ++r)
    if (const Key k = key(r); k != preprocessing) L = std::min(L, k);
  rows.clear();
  keys.clear();
  rows.reserve(head_row0[H] - head_row0[0]);
  keys.reserve(head_row0[H] - head_row0[0]);
  auto merged = [&](Key stop, Key after) {
    if (!merge_heads(head_row0, key, rows, stop, after)) return false;
    for (std::size_t i = keys.size(); i < rows.size(); ++i) keys.push_back(key(rows[i]));
    return true;
  };
  if (L == ~Key{0} || E >= L || L - E <= shift) return merged(~Key{0}, 0);
  if (!merged(E + shift, 0)) return false;
  // The period (a, b] just laid out, copied one period on.
  std::size_t from = static_cast<std::size_t>(std::lower_bound(keys.begin(), keys.end(), E + 1) - keys.begin());
  Key b = E + shift;
  for (; b < L && L - b > shift; b += shift) {  // (the copy's end below L: no key past the last)
    const std::size_t to = keys.size();
    for (std::size_t i = from; i < to; ++i) {
      rows.push_back(static_cast<Row>(rows[i] + step));
      keys.push_back(keys[i] + shift);
    }
    from = to;
  }
  return merged(~Key{0}, b);
}

}  // namespace hbmscope::l2::sweeps
