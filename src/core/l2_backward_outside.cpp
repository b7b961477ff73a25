// What lies outside the masked backward's main loop, from each object's first
// and last access in it (docs/l2-backward.md, "The backward through the
// segment engine"): the preprocessing; the row sets' first reads, measured
// from it; D's depth at its death; the dQ conversion; the GQA reduction.
// Each is one sweep over the accesses in trace order. Where each head's rows
// are first (last) read in row order, as whenever a head's CTAs start in
// key-block order and read its rows to the last, the rows' order is a merge
// of the heads' and the sums over rows read earlier (later) are sums over
// heads; elsewhere the rows are sorted and summed in a tree over rows.
#include "l2_backward_outside.hpp"

#include <algorithm>
#include <numeric>
#include <type_traits>

#include "hbmscope/checked.hpp"
#include "radix_sort.hpp"

namespace hbmscope::l2 {

namespace {

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
// places between; where it has moved more than `per_query` places a question
// and twice over every place (a first question may ask near the last place),
// a Fenwick tree over blocks of 16 places is built from the values and
// answers from then on: O(log) an access at worst.
class PrefixSums {
 public:
  static constexpr std::size_t block = 16, per_query = 32;
  explicit PrefixSums(std::size_t n) : v_(n, 0), budget_(2 * n) {}
  void add(std::size_t i, u64 x) {
    v_[i] += x;
    if (t_.empty()) {
      if (i < at_) sum_ += x;
      return;
    }
    for (std::size_t k = i / block + 1; k < t_.size(); k += k & (0 - k)) t_[k] += x;
  }
  u64 below(std::size_t i) {  // places [0, i)
    if (t_.empty()) {
      budget_ += per_query;
      moved_ += i > at_ ? i - at_ : at_ - i;
      if (moved_ <= budget_) {
        for (; at_ < i; ++at_) sum_ += v_[at_];
        for (; at_ > i; --at_) sum_ -= v_[at_ - 1];
        return sum_;
      }
      build();
    }
    u64 s = 0;
    for (std::size_t k = i / block; k > 0; k -= k & (0 - k)) s += t_[k];
    for (std::size_t j = i / block * block; j < i; ++j) s += v_[j];
    return s;
  }

 private:
  void build() {  // t_[k]: blocks [k - lowbit(k), k)
    t_.assign(v_.size() / block + 2, 0);
    for (std::size_t k = 1; k < t_.size(); ++k) {
      for (std::size_t j = (k - 1) * block; j < std::min(v_.size(), k * block); ++j) t_[k] += v_[j];
      if (const std::size_t up = k + (k & (0 - k)); up < t_.size()) t_[up] += t_[k];
    }
  }
  std::vector<u64> v_, t_;
  std::size_t at_ = 0;
  u64 sum_ = 0, moved_ = 0, budget_;
};

// Places [0, n) in order of key(place): radix-sorted (key, place) pairs where
// keys take 64 bits, else compared.
template <class KeyOf>
Array<u64> order_by(u64 n, KeyOf key) {
  Array<u64> ix(n);
  if constexpr (std::is_same_v<decltype(key(0)), u64>) {
    Array<std::pair<u64, u64>> kx(n);
    for (u64 i = 0; i < n; ++i) kx[i] = {key(i), i};
    radix_sort(kx, [](const std::pair<u64, u64>& p) { return p.first; });
    for (u64 i = 0; i < n; ++i) ix[i] = kx[i].second;
  } else {
    std::iota(ix.begin(), ix.end(), u64{0});
    std::sort(ix.begin(), ix.end(), [&](u64 a, u64 b) { return key(a) < key(b); });
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
// where each head's (rows [head_row0[h], head_row0[h + 1])) come in
// increasing order: the heads merged, a head streamed while it leads. False
// where a head's do not (found as they are merged; out is then left as is).
template <class KeyOf>
bool merge_heads(const std::vector<u64>& head_row0, KeyOf key, Array<u64>& out) {
  using Key = decltype(key(0));
  constexpr Key preprocessing = 0, last_key = ~Key{0};
  struct Head {
    Key k;
    u64 r, end;
  };
  std::vector<Head> heads;
  for (u64 h = 0; h + 1 < head_row0.size(); ++h)
    for (u64 r = head_row0[h]; r < head_row0[h + 1]; ++r)
      if (const Key k = key(r); k != preprocessing) {
        heads.push_back({k, r, head_row0[h + 1]});
        break;
      }
  std::sort(heads.begin(), heads.end(), [](const Head& a, const Head& b) { return a.k < b.k; });
  out.clear();
  out.reserve(head_row0.back() - head_row0.front());
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
      out.push_back(c.r);
      const Key prev = c.k;
      for (++c.r; c.r < c.end && (c.k = key(c.r)) == preprocessing; ++c.r) {
      }
      if (c.r == c.end) break;
      if (c.k <= prev) return false;
      if (c.k > lim) {
        heap.push_back(c);
        std::push_heap(heap.begin(), heap.end(), later);
        break;
      }
    }
  }
  return true;
}

template <class Key>
Array<u64> outside(const BackwardKeys& in, Tally& t) {
  constexpr Key preprocessing = 0;
  const BackwardGrid& g = *in.grid;
  const FlashGrid& fg = g.forward();
  const Array<BackwardCta>& ct = *in.ct;
  const Array<u64>& start = *in.start;
  const FirstRows& row0 = *in.row0;
  const Array<std::uint32_t>& kv_of = *in.kv_of;
  const RowSetBytes& u = *in.u;
  const Array<std::uint32_t>& n_rows = *in.n_rows;
  const bool gqa = in.gqa, qo = in.qo;
  const std::vector<u64>& head_row0 = *in.head_row0;
  const u64 ctas = ct.size(), R = u.size(), P = in.kv_objects, heads = head_row0.size() - 1, G = fg.group();
  auto ql = [&](u64 r) { return g.ql_row() * n_rows[r]; };
  auto dO = [&](u64 r) { return g.do_row() * n_rows[r]; };
  auto dd = [&](u64 r) { return u64{4} * n_rows[r]; };
  auto acc = [&](u64 r) { return g.acc_row() * n_rows[r]; };
  auto o = [&](u64 r) { return g.o_row() * n_rows[r]; };
  auto dq = [&](u64 r) { return g.dq_row() * n_rows[r]; };
  auto pre = [&](u64 r) { return dO(r) + (qo ? o(r) : 0) + dd(r) + acc(r); };  // what the preprocessing leaves in L2
  u64 all_rows = 0;
  for (u64 r = 0; r < R; ++r) all_rows += n_rows[r];

  // Each row's head key.
  Array<std::uint32_t> head_of(R);
  for (u64 h = 0; h < heads; ++h)
    for (u64 r = head_row0[h]; r < head_row0[h + 1]; ++r) head_of[r] = static_cast<std::uint32_t>(h);

  // Each row's first and last reader: row i of a head is read by the head's
  // CTAs j whose query blocks [first(j), end(j)) hold it, a range of j that
  // moves up with i, at step start(j) - first(j) + i; the earliest (latest)
  // is a sliding minimum (maximum) of (start(j) - first(j), CTA).
  auto offset = [&](u64 id) { return static_cast<i64>(start[id]) - static_cast<i64>(ct[id].first); };
  Array<std::uint32_t> first_by(R, no_reader), last_by(R, no_reader);  // (none: a query block no key sees)
  {
    const CtasByHead by_head = ctas_by_head(ct, heads);
    u64 most = 0;
    for (u64 k = 0; k < heads; ++k) most = std::max(most, by_head.at[k + 1] - by_head.at[k]);
    std::vector<u64> lo(most), hi(most);  // CTAs of the window: increasing (v, id) from the front; decreasing
    for (u64 k = 0; k < heads; ++k) {
      const u64 j0 = by_head.at[k], m = by_head.at[k + 1] - j0;
      auto js = [&](u64 n) { return by_head.id(j0 + n); };
      if (m == 0) continue;
      const u64 r0 = row0[js(0)], nq = head_row0[k + 1] - r0;
      u64 lf = 0, lb = 0, hf = 0, hb = 0;  // [front, back) of each
      u64 next = 0;
      for (u64 i = 0; i < nq; ++i) {
        for (; next < m && ct[js(next)].first <= i; ++next) {
          const u64 id = js(next);
          if (ct[id].end <= ct[id].first) continue;
          while (lb > lf && offset(lo[lb - 1]) > offset(id)) --lb;  // (on a tie the earlier CTA reads first)
          lo[lb++] = id;
          while (hb > hf && offset(hi[hb - 1]) <= offset(id)) --hb;
          hi[hb++] = id;
        }
        while (lb > lf && ct[lo[lf]].end <= i) ++lf;
        while (hb > hf && ct[hi[hf]].end <= i) ++hf;
        if (lb == lf) continue;
        first_by[r0 + i] = static_cast<std::uint32_t>(lo[lf]);
        last_by[r0 + i] = static_cast<std::uint32_t>(hi[hf]);
      }
    }
  }
  auto row_key = [&](u64 r, std::uint32_t x) {
    return x == no_reader ? preprocessing
                          : key_of<Key>(static_cast<u64>(offset(x) + static_cast<i64>(r - row0[x])), x, row_sub);
  };
  auto first_read = [&](u64 r) { return row_key(r, first_by[r]); };
  auto last_read = [&](u64 r) { return row_key(r, last_by[r]); };
  // K/V objects' first and last reads, the dK, dV writes.
  std::vector<Key> kv_first(P, ~Key{0}), kv_last(P, 0);
  std::vector<u64> kv_bytes(P, 0);
  for (u64 id = 0; id < ctas; ++id) {
    const Key k = key_of<Key>(start[id], id, kv_sub);
    kv_first[kv_of[id]] = std::min(kv_first[kv_of[id]], k);
    kv_last[kv_of[id]] = std::max(kv_last[kv_of[id]], k);
    kv_bytes[kv_of[id]] = g.kv_col() * ct[id].cols;
  }

  // The preprocessing: dO and O read, D and the accumulator allocated dirty.
  t.reads(infinite, 0, 1, g.do_row() * all_rows);
  t.reads(infinite, 0, 1, g.o_row() * all_rows);

  // The dK, dV writes in trace order (the schedule's order by last step),
  // with their bytes and, with GQA, their places in the reduction's order:
  // K/V object times G plus the head in its group (below 2^32: a place a CTA).
  // (Keys from the schedule's ends; places made in launch order, then one
  // number gathered a CTA rather than the CTA.)
  const Array<std::uint32_t>& by_end = *in.by_end;
  const Array<u64>& ends = *in.ends;
  Array<Key> dks(ctas);
  for (u64 i = 0; i < ctas; ++i) dks[i] = key_of<Key>(ends[i], by_end[i], dk_sub);
  Array<std::uint32_t> dk_place(gqa ? ctas : 0);
  if (gqa) {
    std::vector<std::uint32_t> in_group(fg.shape().heads);
    for (u64 h = 0; h < in_group.size(); ++h) in_group[h] = static_cast<std::uint32_t>(h % G);
    Array<std::uint32_t> place(ctas);
    for (u64 id = 0; id < ctas; ++id) place[id] = static_cast<std::uint32_t>(u64{kv_of[id]} * G + in_group[ct[id].head]);
    for (u64 i = 0; i < ctas; ++i) dk_place[i] = place[by_end[i]];
  }
  auto dk_at = [&](u64 i) -> u64 {  // (as many bytes as the object's K/V where they take L2 space)
    if (gqa) return kv_bytes[dk_place[i] / G];
    return qo ? kv_bytes[kv_of[by_end[i]]] : 0;
  };
  ByBucket sums(t);

  // First reads: after the preprocessing's later rows, what the main loop
  // read before (a row set the preprocessing had not reached adds only its Q).
  // Sums over rows first read before, by row (by head where each head's rows
  // are first read in row order: those of the row's head all come before it).
  // (Each row's start holds at first the preprocessing's bytes of the rows
  // after it; for a row the main loop never reads, 0.)
  Array<u64> row_start(R);
  for (u64 r = R, after = 0; r-- > 0;) {
    row_start[r] = first_by[r] == no_reader ? 0 : after;
    after += pre(r);
  }
  {
    Array<u64> rows;
    const bool by_heads = merge_heads(head_row0, first_read, rows);
    if (!by_heads) rows = order_by(R, first_read);
    auto place = [&](u64 r) -> u64 { return by_heads ? head_of[r] : r; };
    const Array<u64> kvs = order_by(P, [&](u64 k) { return kv_first[k]; });
    PrefixSums q_seen(by_heads ? heads : R), u_seen(by_heads ? heads : R);
    u64 q_total = 0, kv_sum = 0, dk_sum = 0;
    std::size_t a = 0, b = 0;
    for (const u64 r : rows) {
      const Key key = first_read(r);
      if (key == preprocessing) continue;
      for (; a < kvs.size() && kv_first[kvs[a]] < key; ++a) kv_sum += kv_bytes[kvs[a]];
      for (; b < dks.size() && dks[b] < key; ++b) dk_sum += dk_at(b);
      const u64 x = place(r);
      const u64 d = u[r] + row_start[r] + (q_total - q_seen.below(x + 1)) + u_seen.below(x + 1) + kv_sum + dk_sum;
      row_start[r] = d;
      q_seen.add(x, ql(r));
      u_seen.add(x, u[r]);
      q_total += ql(r);
      sums.first(ql(r));
      sums.read(d, dd(r) + acc(r));
      sums.read(qo ? d + o(r) : d, dO(r));
      sums.writeback(d, acc(r));
    }
  }

  // What the main loop reads after an access: the row sets, K/V and dK, dV
  // whose last access is later. Rows by last read, latest first (merged as
  // the first reads where each head's come in row order; then the rows never
  // read, last).
  Array<u64> rows_late;
  const bool late_by_heads = merge_heads(head_row0, last_read, rows_late);
  if (late_by_heads) {
    std::reverse(rows_late.begin(), rows_late.end());
    for (u64 r = 0; r < R; ++r)
      if (last_by[r] == no_reader) rows_late.push_back(r);
  } else {
    rows_late = order_by(R, last_read);
    std::reverse(rows_late.begin(), rows_late.end());
  }
  Array<Key> late_key(rows_late.size());
  for (std::size_t i = 0; i < rows_late.size(); ++i) late_key[i] = last_read(rows_late[i]);
  Array<u64> kvs_late = order_by(P, [&](u64 k) { return kv_last[k]; });
  std::reverse(kvs_late.begin(), kvs_late.end());
  struct After {
    u64 rows = 0, acc = 0, kv = 0, dk = 0;
    std::size_t r = 0, k = 0, d = 0;
  };
  // Advances `a` over every access later than `key`; `row` and `dk` see each
  // one passed (a row; a dK, dV write's place in dks).
  auto advance = [&](After& a, Key key, auto&& row, auto&& dk) {
    for (; a.r < rows_late.size() && late_key[a.r] > key; ++a.r) {
      a.rows += u[rows_late[a.r]];
      a.acc += acc(rows_late[a.r]);
      row(rows_late[a.r]);
    }
    for (; a.k < kvs_late.size() && kv_last[kvs_late[a.k]] > key; ++a.k) a.kv += kv_bytes[kvs_late[a.k]];
    for (; a.d < dks.size() && dks[dks.size() - 1 - a.d] > key; ++a.d) {  // (dK, dV: written once)
      a.dk += dk_at(dks.size() - 1 - a.d);
      dk(dks.size() - 1 - a.d);
    }
  };

  // D's depth at its death and the dQ conversion's reads, in row order: the
  // accumulators the conversion read before (those of rows with an earlier
  // last read; the others are among the main loop's rows). Those of rows
  // below r read later, by row, or by head where each head's rows are last
  // read in row order (those of r's head read later all lie above it); for a
  // row never read, every row the main loop reads below it.
  {
    // A row the main loop never reads was last accessed by the preprocessing:
    // after it come the preprocessing's later rows (with O, for those the
    // main loop reads too, beside their row sets) and the whole main loop.
    // (Both only where some row is never read.)
    bool unread = false;
    for (u64 r = 0; r < R && !unread; ++r) unread = last_by[r] == no_reader;
    Array<u64> pre_extra(unread ? R + 1 : 0), acc_read(unread ? R + 1 : 0);
    if (unread) {
      pre_extra[R] = 0;
      for (u64 r = R; r-- > 0;)
        pre_extra[r] = pre_extra[r + 1] + (last_by[r] != no_reader ? (qo ? o(r) : 0) : pre(r));
      acc_read[0] = 0;  // accumulators of the rows below r, of those the main loop reads
      for (u64 r = 0; r < R; ++r) acc_read[r + 1] = acc_read[r] + (last_by[r] != no_reader ? acc(r) : 0);
    }
    PrefixSums acc_later(late_by_heads ? heads : R);
    After a;
    Array<u64> conv(R);  // less the accumulators read later
    for (std::size_t i = 0; i < rows_late.size(); ++i) {
      const u64 r = rows_late[i];
      const Key key = late_key[i];
      advance(a, key, [&](u64 x) { acc_later.add(late_by_heads ? head_of[x] : x, acc(x)); }, [](u64) {});
      const u64 after = a.rows + a.kv + a.dk + (key == preprocessing ? pre_extra[r + 1] : 0);
      row_start[r] = std::max(row_start[r], dd(r) + acc(r) + after);
      conv[r] = acc(r) + after -
                (key == preprocessing ? acc_read[r] : acc_later.below(late_by_heads ? head_of[r] : r));
    }
    u64 dq_before = 0, acc_before = 0;
    for (u64 r = 0; r < R; ++r) {
      const u64 d = conv[r] + acc_before + (qo ? dq_before : 0);
      sums.read(d, acc(r));
      sums.writeback(d, acc(r));
      dq_before += dq(r);
      acc_before += acc(r);
    }
    t.write(dq_before);
  }

  // GQA: dK, dV of the G heads of a (kv head, key block) read in head order
  // after the conversion, then their sum written.
  if (gqa) {
    const u64 acc_total = g.acc_row() * all_rows, dq_total = g.dq_row() * all_rows;
    // A place's dK, dV as its object's K/V. Those written later, below a
    // place: the objects' below it (sums over objects) and its object's
    // heads' below its own (one bit a place: each is written once, as many
    // bytes as its object's K/V).
    std::vector<u64> out_before(P + 1, 0);
    for (u64 k = 0; k < P; ++k) out_before[k + 1] = out_before[k] + kv_bytes[k];
    PrefixSums objects_later(P);
    std::vector<u64> written_later((P * G + 63) / 64, 0);
    auto written_below = [&](u64 from, u64 to) {  // places [from, to) written later
      u64 n = 0;
      for (u64 x = from; x < to;) {
        const u64 w = x / 64, lo = x % 64, hi = std::min<u64>(64, lo + (to - x));
        const u64 word = written_later[w] >> lo;
        n += bits_set(hi - lo == 64 ? word : word & ((u64{1} << (hi - lo)) - 1));
        x += hi - lo;
      }
      return n;
    };
    After a;
    for (std::size_t i = dks.size(); i-- > 0;) {
      advance(a, dks[i], [](u64) {}, [&](u64 j) {
        objects_later.add(dk_place[j] / G, kv_bytes[dk_place[j] / G]);
        written_later[dk_place[j] / 64] |= u64{1} << (dk_place[j] % 64);
      });
      const u64 k = dk_place[i] / G, h = dk_place[i] % G;
      const u64 later = objects_later.below(k) + written_below(k * G, k * G + h) * kv_bytes[k];
      const u64 d = kv_bytes[k] + a.rows + a.kv + a.dk + (acc_total - a.acc) + (qo ? dq_total : 0) +
                    (G * out_before[k] + h * kv_bytes[k] - later) + (qo ? out_before[k] : 0);
      sums.read(d, kv_bytes[k]);
      sums.writeback(d, kv_bytes[k]);
    }
    t.write(out_before[P]);
  }
  sums.flush(t);
  return row_start;
}

}  // namespace

CtasByHead ctas_by_head(const Array<BackwardCta>& ct, u64 head_keys) {
  CtasByHead r;
  r.at.assign(head_keys + 1, 0);
  bool in_order = true;  // (query-block-major: a head's CTAs are consecutive; ids stay empty)
  std::uint32_t last = 0;
  for (const BackwardCta& c : ct) {
    ++r.at[c.head_key + 1];
    in_order = in_order && c.head_key >= last;
    last = c.head_key;
  }
  std::partial_sum(r.at.begin(), r.at.end(), r.at.begin());
  if (in_order) return r;
  r.ids.resize(ct.size());
  std::vector<u64> next(r.at.begin(), r.at.end() - 1);
  for (u64 id = 0; id < ct.size(); ++id) r.ids[next[ct[id].head_key]++] = static_cast<std::uint32_t>(id);
  return r;
}

Array<u64> backward_outside(const BackwardKeys& in, Tally& t) {
  // Keys in 64 bits where every step lies below 2^37 and every CTA below 2^25.
  if (!in.wide_keys && in.steps < (u64{1} << 37) - 1 && in.ct->size() < (u64{1} << 25)) return outside<u64>(in, t);
  return outside<Wide>(in, t);
}

}  // namespace hbmscope::l2
