// The forward by heads (docs/l2-windows.md, "Windows and chunks by
// heads"): in a dense batch in query-block-major order with GQA, a head's
// re-reads of its pair's K/V objects follow one another a few steps apart
// (their gap bounded from the starts alone), so where that many steps of
// every slot's accesses fit in the smallest capacity they are all hits; a
// head's first read of an object follows the pair's previous head's last one,
// across every access of the objects whose spans of reads meet the gap,
// counted from the spans' ends by prefix sums and a tree.
#include <algorithm>
#include <deque>
#include <limits>
#include <memory>
#include <optional>
#include <vector>

#include "big_array.hpp"
#include "hbmscope/checked.hpp"
#include "l2_backward_sweeps.hpp"
#include "l2_flash.hpp"
#include "l2_segments.hpp"
#include "radix_sort.hpp"

namespace hbmscope::l2 {

namespace {

using u64 = std::uint64_t;
using i64 = std::int64_t;

constexpr u64 unread = ~u64{0};

// One head's objects' first and last read keys, sorted, with their bytes
// summed: the bytes of its objects whose span starts before a key, ends before one.
struct SpanEnds {
  std::vector<u64> first, last, first_sum, last_sum;
  SpanEnds(const u64* F, const u64* L, const std::vector<u64>& z) {
    std::vector<std::pair<u64, u64>> f, l;
    for (u64 y = 0; y < z.size(); ++y)
      if (F[y] != unread) f.push_back({F[y], z[y]}), l.push_back({L[y], z[y]});
    std::sort(f.begin(), f.end());
    std::sort(l.begin(), l.end());
    fill(f, first, first_sum);
    fill(l, last, last_sum);
  }
  static u64 before(const std::vector<u64>& keys, const std::vector<u64>& sum, u64 key) {
    return sum[static_cast<u64>(std::lower_bound(keys.begin(), keys.end(), key) - keys.begin())];
  }
  // Bytes of the objects whose span meets (lo, hi): starts before hi, ends after lo.
  u64 meeting(u64 lo, u64 hi) const { return before(first, first_sum, hi) - before(last, last_sum, lo + 1); }

 private:
  static void fill(const std::vector<std::pair<u64, u64>>& v, std::vector<u64>& keys, std::vector<u64>& sum) {
    keys.resize(v.size());
    sum.assign(v.size() + 1, 0);
    for (u64 k = 0; k < v.size(); ++k) keys[k] = v[k].first, sum[k + 1] = sum[k] + v[k].second;
  }
};

// The first place in [0, n) whose key is at least k (n where none), searched
// outward from `at`, the last answer (the queries come nearly in order).
template <class KeyAt>
u64 seek(u64& at, u64 n, u64 k, const KeyAt& key_at) {
  u64 lo = at, hi = at, step = 1;
  if (at < n && key_at(at) < k) {
    lo = hi = at + 1;
    while (hi < n && key_at(hi) < k) {
      lo = hi + 1;
      hi = std::min(n, hi + step);
      step *= 2;
    }
  } else {
    while (lo > 0 && key_at(lo - 1) >= k) {
      hi = lo - 1;
      lo = hi > step ? hi - step : 0;
      step *= 2;
    }
  }
  while (lo < hi) {  // (key_at(lo - 1) < k, and hi == n or key_at(hi) >= k)
    const u64 m = lo + (hi - lo) / 2;
    if (key_at(m) < k) lo = m + 1;
    else hi = m;
  }
  return at = lo;
}

// The schedule and the bound inside a head: where that bound exceeds the
// smallest capacity, or the grid is not a dense batch whose query blocks'
// ranges do not fall, there is no plan.
struct HeadsPlan {
  explicit HeadsPlan(const Shape& s, Rasterization order) : grid(s, order) {}
  FlashGrid grid;
  u64 N = 0, nq = 0, nk = 0, G = 0, heads = 0, slots = 0;
  bool qo = false;
  std::vector<u64> f, e, qb, ob;  // per query block of a head: its key blocks [f, e), Q and O bytes
  std::vector<u64> z, lo, hi;     // per key block: its bytes, its readers [lo, hi)
  u64 z_max = 0;
  Array<u64> len, start;                            // per CTA: steps, first step
  Array<std::uint32_t> by_end;                      // (where Q and O take L2 space) the CTAs by last step
  Array<u64> ends;                                  // and their last steps
  u64 steps = 0;
  i64 gap = 1;     // the most steps between two reads of an object inside a head
  u64 inside = 0;  // at most the distance of a re-read inside a head
  i64 a_of(u64 x0, u64 i) const { return static_cast<i64>(start[x0 + i]) - static_cast<i64>(f[i]); }
};

// At most the distance of a re-read inside a head whose predecessor lies at
// most span - 1 steps before it, less its own bytes: over every step T, the
// K/V objects the CTAs that run within [T - span + 1, T] read there, and the
// Q (O) tiles of those that start (end) there. A CTA x reads block t - a_x at
// step t, inside its own blocks [f_x, e_x), so one head's CTAs read there at
// most the spread of their a plus `span` blocks, at most `span` each, and at
// most the blocks from its first CTA's f to its last's e (f and e do not fall
// over a head); never more than the slots' span each. The CTAs that may run
// then lie in a range of launch order [lo, hi): those started by T (starts do
// not fall in launch order), from the first not ended before (a superset; the
// bound only grows). Between two steps where a CTA starts or ends each count
// only shrinks, so those steps alone are visited.
template <class AOf>
u64 inside_within(const HeadsPlan& p, u64 span, const AOf& a_of) {
  struct HeadWindow {  // one head's CTAs in [lo, hi): their count, a's least and largest (monotone queues)
    u64 head = 0, count = 0;
    std::deque<u64> least, largest;
  };
  const u64 N = p.N, nq = p.nq;
  const Array<u64>&start = p.start, &len = p.len, &ends = p.ends;
  const u64 q_max = p.qo ? *std::max_element(p.qb.begin(), p.qb.end()) : 0;
  const u64 o_max = p.qo ? *std::max_element(p.ob.begin(), p.ob.end()) : 0;
  std::deque<HeadWindow> w;
  auto a = [&](u64 x) { return a_of(x / nq * nq, x % nq); };
  u64 most = 0;
  // (Cursors: CTAs [lo, hi) as above; starts [q0, hi) and ends [o0, o1) in the window.)
  u64 lo = 0, hi = 0, q0 = 0, o0 = 0, o1 = 0;
  const u64 n_ends = p.qo ? N : 0;
  while (hi < N || o1 < n_ends) {
    const u64 T = hi < N && (o1 == n_ends || start[hi] <= ends[o1]) ? start[hi] : ends[o1];
    for (; lo < hi && start[lo] + len[lo] + span <= T + 1; ++lo) {  // (ended before T - span + 1)
      HeadWindow& f = w.front();
      if (f.least.front() == lo) f.least.pop_front();
      if (f.largest.front() == lo) f.largest.pop_front();
      if (--f.count == 0) w.pop_front();
    }
    for (; hi < N && start[hi] == T; ++hi) {
      if (w.empty() || w.back().head != hi / nq) w.push_back({hi / nq, 0, {}, {}});
      HeadWindow& b = w.back();
      while (!b.least.empty() && a(b.least.back()) >= a(hi)) b.least.pop_back();
      b.least.push_back(hi);
      while (!b.largest.empty() && a(b.largest.back()) <= a(hi)) b.largest.pop_back();
      b.largest.push_back(hi);
      ++b.count;
    }
    for (; o1 < n_ends && ends[o1] == T; ++o1) {}
    for (; q0 < hi && start[q0] + span <= T; ++q0) {}
    for (; o0 < o1 && ends[o0] + span <= T; ++o0) {}
    u64 objects = 0;
    for (const HeadWindow& h : w) {
      const u64 x0 = h.head * nq, first = std::max(lo, x0) - x0, last = std::min(hi, x0 + nq) - 1 - x0;
      objects += std::min({h.count * span, static_cast<u64>(a(h.largest.front()) - a(h.least.front())) + span,
                           p.e[last] - p.f[first]});
    }
    most = std::max(most, std::min(objects, span * p.slots) * p.z_max + (hi - q0) * q_max + (o1 - o0) * o_max);
  }
  return most;
}

std::unique_ptr<HeadsPlan> plan_heads(const Shape& s, const L2SimConfig& c, u64 capacity) {
  auto plan = std::make_unique<HeadsPlan>(s, c.order);
  HeadsPlan& p = *plan;
  const FlashGrid& grid = p.grid;
  if (!grid.dense() || grid.order() != Rasterization::query_block_major || grid.group() < 2) return nullptr;
  const FlashSeq& q = grid.sequence(0);
  const u64 N = p.N = grid.ctas(), nq = p.nq = q.q_blocks, nk = p.nk = q.k_blocks, heads = p.heads = grid.heads();
  p.G = grid.group();
  const u64 slots = p.slots = u64{c.sm_count} * c.ctas_per_sm;
  if (N == 0 || nq == 0 || nk == 0 || N > max_unit_ctas || heads * nk > max_unit_ctas) return nullptr;
  const bool qo = p.qo = c.q_o_allocate;
  // A head's query blocks (every head alike): each reads a range of key
  // blocks whose ends do not fall, so an object's readers are a range of them.
  std::vector<u64>&f = p.f, &e = p.e, &qb = p.qb, &ob = p.ob;
  f.resize(nq), e.resize(nq), qb.resize(nq), ob.resize(nq);
  for (u64 i = 0; i < nq; ++i) {
    const FlashCta ct = grid.cta(i);
    if (ct.blocks() == 0 || (i > 0 && (ct.first < f[i - 1] || ct.end < e[i - 1]))) return nullptr;
    f[i] = ct.first, e[i] = ct.end, qb[i] = grid.q_bytes(ct.rows), ob[i] = grid.o_bytes(ct.rows);
  }
  p.z.resize(nk), p.lo.resize(nk), p.hi.resize(nk);
  for (u64 y = 0, a = 0, b = 0; y < nk; ++y) {
    p.z[y] = grid.kv_bytes(0, y);
    p.z_max = std::max(p.z_max, p.z[y]);
    while (a < nq && e[a] <= y) ++a;
    while (b < nq && f[b] <= y) ++b;
    p.lo[y] = a, p.hi[y] = std::max(a, b);  // readers [lo, hi)
  }
  // (Where Q and O take L2 space, the CTAs by last step too.)
  if (qo && N >= (u64{1} << 32)) return nullptr;
  p.len.resize(N), p.start.resize(N);
  for (u64 x = 0; x < N; ++x) p.len[x] = e[x % nq] - f[x % nq];
  p.by_end.resize(qo ? N : 0), p.ends.resize(qo ? N : 0);
  p.steps = SegmentEngine::schedule(slots, p.len.data(), N, p.start.data(), qo ? p.by_end.data() : nullptr,
                                    qo ? p.ends.data() : nullptr);
  // (Keys (step, CTA, place) below 2^64.)
  if (p.steps >= std::numeric_limits<u64>::max() / 3 / N - 2) return nullptr;

  // The gap bound: an object's readers are a range of query blocks, so in
  // (a, CTA) order (a = start - first: CTA i reads y at a_i + y) two next to
  // each other lie at most the largest change of a between two of them next
  // in launch order apart (the order has to cross their gap).
  auto a_of = [&](u64 x0, u64 i) { return p.a_of(x0, i); };
  i64& gap = p.gap;  // (at least 1: reads a step apart)
  for (u64 x0 = 0; x0 < N; x0 += nq)
    for (u64 i = 0; i + 1 < nq; ++i)
      if (f[i + 1] < e[i]) {
        const i64 d = a_of(x0, i + 1) - a_of(x0, i);
        gap = std::max(gap, d < 0 ? -d : d);
      }
  // Re-reads inside a head: at most their own bytes and what runs over the
  // gap's steps and one more.
  p.inside = p.z_max + inside_within(p, static_cast<u64>(gap) + 1, a_of);
  if (p.inside > capacity) return nullptr;
  return plan;
}

// The last plan the budget made, kept for the run that follows it (a plan
// is a fifth of the run, and the budget asks before the run and after it):
// its work kept with it, the plan taken by the run, both replaced by the next.
struct KeptPlan {
  Shape s;
  L2SimConfig c;
  std::optional<u64> work;          // (none: it did not hold at c.l2_bytes)
  std::unique_ptr<HeadsPlan> plan;  // (until the run takes it)
};
thread_local std::optional<KeptPlan> kept;

}  // namespace

std::optional<std::uint64_t> heads_flash_work(const Shape& s, const L2SimConfig& c) {
  if (!kept || !(kept->s == s) || !(kept->c == c)) {
    kept.reset();  // (freed before the next is made)
    std::unique_ptr<HeadsPlan> p = plan_heads(s, c, c.l2_bytes);
    // (Measured: 0.5 to 0.6 s for 4.2 M CTAs and as many spans, the
    // schedule and the plan a fifth of it; units of about a nanosecond.)
    const std::optional<u64> work = p ? std::optional<u64>(60 * p->N + 60 * p->heads * p->nk) : std::nullopt;
    kept.emplace(KeptPlan{s, c, work, std::move(p)});
  }
  return kept->work;
}

std::optional<std::uint64_t> heads_flash_bound(const Shape& s, const L2SimConfig& c) {
  const std::unique_ptr<HeadsPlan> p = plan_heads(s, c, ~u64{0});
  if (!p) return std::nullopt;
  return p->inside;
}

std::optional<FlashStats> heads_flash(const Shape& s, const L2SimConfig& c, Tally& t) {
  if (t.capacities().empty()) return std::nullopt;
  std::unique_ptr<HeadsPlan> plan;
  if (kept && kept->s == s && kept->c == c && kept->plan) {
    plan = std::move(kept->plan);
    if (plan->inside > t.capacities().front()) return std::nullopt;
  } else {
    plan = plan_heads(s, c, t.capacities().front());
  }
  if (!plan) return std::nullopt;
  const HeadsPlan& hp = *plan;
  const FlashGrid& grid = hp.grid;
  const u64 N = hp.N, nq = hp.nq, nk = hp.nk, G = hp.G, heads = hp.heads, slots = hp.slots, steps = hp.steps;
  const bool qo = hp.qo;
  const std::vector<u64>&qb = hp.qb, &ob = hp.ob, &z = hp.z, &lo = hp.lo, &hi = hp.hi;
  const Array<u64>&len = hp.len, &start = hp.start, &ends = hp.ends;
  const Array<std::uint32_t>& by_end = hp.by_end;
  const i64 gap = hp.gap;
  const u64 inside = hp.inside;
  auto a_of = [&](u64 x0, u64 i) { return hp.a_of(x0, i); };
  // Keys (step, CTA, place: Q 0, K/V 1, O 2), the trace's order.
  auto key = [&](u64 step, u64 x, u64 place) { return (step * N + x) * 3 + place; };
  const u64 M = 3 * N;  // (keys a step)
  auto step_key = [&](u64 step) { return step > steps ? ~u64{0} : step * M; };  // a step's first key

  // Per head: each object's first and last read, the least and the largest
  // (a, CTA) over its readers [lo(y), hi(y)), sliding.
  Array<u64> F(heads * nk), L(heads * nk);
  std::vector<u64> dq_lo(nq), dq_hi(nq);
  for (u64 h = 0; h < heads; ++h) {
    const u64 x0 = h * nq;
    auto a = [&](u64 i) { return a_of(x0, i); };
    u64 lf = 0, lb = 0, hf = 0, hb = 0, next = 0;
    for (u64 y = 0; y < nk; ++y) {
      const u64 at = h * nk + y;
      if (lo[y] >= hi[y]) {
        F[at] = L[at] = unread;
        continue;
      }
      for (next = std::max(next, lo[y]); next < hi[y]; ++next) {
        while (lb > lf && a(dq_lo[lb - 1]) > a(next)) --lb;  // (a tie: the earlier CTA first)
        dq_lo[lb++] = next;
        while (hb > hf && a(dq_hi[hb - 1]) <= a(next)) --hb;
        dq_hi[hb++] = next;
      }
      while (dq_lo[lf] < lo[y]) ++lf;
      while (dq_hi[hf] < lo[y]) ++hf;
      F[at] = key(static_cast<u64>(a(dq_lo[lf]) + static_cast<i64>(y)), x0 + dq_lo[lf], 1);
      L[at] = key(static_cast<u64>(a(dq_hi[hf]) + static_cast<i64>(y)), x0 + dq_hi[hf], 1);
    }
  }

  // Q and O tiles between two keys (where they take L2 space).
  std::vector<u64> head_q(nq + 1, 0);
  for (u64 i = 0; i < nq; ++i) head_q[i + 1] = head_q[i] + qb[i];
  auto q_below = [&](u64 x) { return x / nq * head_q[nq] + head_q[x % nq]; };  // CTAs [0, x)
  Array<u64> o_sum(qo ? N + 1 : 0);
  if (qo) {
    o_sum[0] = 0;
    for (u64 k = 0; k < N; ++k) o_sum[k + 1] = o_sum[k] + ob[by_end[k] % nq];
  }
  // (Bytes of the tiles before a key: asked in order of keys from two
  // cursors, one for the spans' last reads, one for their first.)
  auto q_key = [&](u64 x) { return key(start[x], x, 0); };
  auto o_key = [&](u64 k) { return key(ends[k], by_end[k], 2); };
  auto tiles_before = [&](u64 k, u64& q_at, u64& o_at) -> u64 {
    return qo ? q_below(seek(q_at, N, k, q_key)) + o_sum[seek(o_at, N, k, o_key)] : 0;
  };
  u64 q_first = 0, o_first = 0, q_last = 0, o_last = 0;

  // The heads' first reads after their pair's previous head, pair by pair.
  // With spans of reads dense (a gap at most `gap` steps) and each head's
  // after the previous head's, an object is accessed between two keys at
  // least gap + 1 steps apart iff one of its spans meets them: the spans that
  // start before the later key, less those ending before the earlier, less
  // the gaps between an object's spans that lie inside.
  std::vector<u64> head_end(heads, 0);  // each head's last step, then the latest up to it
  for (u64 x = 0; x < N; ++x) head_end[x / nq] = std::max(head_end[x / nq], start[x] + len[x] - 1);
  for (u64 h = 1; h < heads; ++h) head_end[h] = std::max(head_end[h], head_end[h - 1]);
  const u64 pairs = heads / G;
  Tally after_head(t.capacities());  // the first reads after a head (added to t once all hold)
  u64 counted = 0;
  u64 largest = 0;
  std::vector<u64> order(G * nk), rank(G * nk), l_sum(G * nk + 1), l_tiles(G * nk);
  for (u64 p = 0; p < pairs; ++p) {
    const u64 h0 = p * G, m = G * nk;
    const u64* Fp = &F[h0 * nk];
    const u64* Lp = &L[h0 * nk];
    // Only this pair's heads and its neighbours' nearest may run between.
    const u64 earlier_end = h0 >= 2 ? head_end[h0 - 2] : 0;
    const u64 later_start = h0 + G + 1 < heads ? start[(h0 + G + 1) * nq] : std::numeric_limits<u64>::max();
    // The spans' last reads ranked; the spans by first read.
    for (u64 k = 0; k < m; ++k) order[k] = k;
    radix_sort(order, [&](u64 k) { return Lp[k]; });
    l_sum[0] = 0;
    for (u64 k = 0; k < m; ++k) {
      const bool read = Lp[order[k]] != unread;
      rank[order[k]] = k;
      l_sum[k + 1] = l_sum[k] + (read ? z[order[k] % nk] : 0);
      l_tiles[k] = read ? tiles_before(Lp[order[k]], q_last, o_last) : 0;
    }
    radix_sort(order, [&](u64 k) { return Fp[k]; });
    // (The neighbours' nearest heads: the steps where they may read.)
    std::optional<SpanEnds> before, after;
    const u64 before_end = p > 0 ? head_end[h0 - 1] : 0;
    const u64 after_start = p + 1 < pairs ? start[(h0 + G) * nq] : std::numeric_limits<u64>::max();
    const u64 earlier_key = h0 >= 2 ? step_key(earlier_end + 1) : 0, later_key = step_key(later_start);
    const u64 before_key = p > 0 ? step_key(before_end + 1) : 0, after_key = step_key(after_start);
    sweeps::PrefixSums<> inside_gaps(m);  // (by rank of their first span's last read)
    u64 f_sum = 0, gaps_all = 0;  // the spans' bytes that start before the current one; the gaps'
    for (u64 k = 0; k < m; ++k) {
      const u64 span = order[k], y = span % nk;
      if (Fp[span] == unread) break;  // (unread objects last: the largest keys)
      if (span >= nk) {
        const u64 T = Fp[span], Tp = Lp[span - nk];
        // (At least gap + 1 steps apart: the spans of y head after head, the window long.)
        if (T < Tp || (T - Tp < (static_cast<u64>(gap) + 2) * M && T / M < Tp / M + static_cast<u64>(gap) + 1))
          return std::nullopt;
        if (Tp < earlier_key || T >= later_key) return std::nullopt;
        // (The object's own span before counts its own bytes: it ends at Tp.)
        const u64 r = rank[span - nk], ended = l_sum[r];
        const u64 gaps = gaps_all - inside_gaps.below(r + 1);
        u64 d = f_sum - ended - gaps + tiles_before(T, q_first, o_first) - l_tiles[r];
        if (Tp < before_key) {
          if (!before) before.emplace(&F[(h0 - 1) * nk], &L[(h0 - 1) * nk], z);
          d += before->meeting(Tp, T);
        }
        if (T >= after_key) {
          if (!after) after.emplace(&F[(h0 + G) * nk], &L[(h0 + G) * nk], z);
          d += after->meeting(Tp, T);
        }
        after_head.read(d, z[y]);
        ++counted;
        largest = std::max(largest, d);
        inside_gaps.add(r, z[y]);
        gaps_all += z[y];
      }
      f_sum += z[y];
    }
  }
  if (counted == 0 || largest < inside) return std::nullopt;

  // The tally: Q tiles read once, O tiles written once; the pairs' first
  // heads' reads first accesses; the re-reads inside a head hits at every
  // capacity; the first reads after the previous head at their distances.
  u64 q_all = 0, o_all = 0, first = 0, hits = 0;
  for (u64 i = 0; i < nq; ++i) q_all += qb[i], o_all += ob[i];
  for (u64 y = 0; y < nk; ++y) {
    if (lo[y] >= hi[y]) continue;
    first += z[y];
    hits += (hi[y] - lo[y] - 1) * z[y];
  }
  t.reads(infinite, 0, heads, q_all);
  t.reads(infinite, 0, pairs, first);
  t.read_in_bucket(0, checked_mul(hits, heads, "L2 simulation bytes"));
  t.merge(after_head);
  t.write(checked_mul(o_all, heads, "L2 simulation bytes"));

  return dense_schedule_stats(grid, start.data(), len.data(), steps, slots);
}

}  // namespace hbmscope::l2
