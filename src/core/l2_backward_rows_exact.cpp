// The backward's main loop by rows: the reads its bounds leave, evaluated
// over the CTAs that run beside them, and the tally (docs/l2-backward.md,
// "The backward's main loop by rows").
#include <algorithm>
#include <iterator>
#include <limits>
#include <string>

#include "hbmscope/error.hpp"
#include "l2_backward_rows_loop.hpp"
#include "l2_backward_sweeps.hpp"

namespace hbmscope::l2 {

namespace rows {

void Loop::active(i64 lo, i64 hi, std::vector<u64>& out) {
  // CTAs start in launch order: those starting in [lo, hi] are consecutive,
  // and those running at lo that started before (a slot's worth at most) are
  // kept in launch order from one call to the next, as lo moves forward.
  const u64 first = s_ix_.lower(lo);
  for (; started_ < first; ++started_)
    if (e_[started_] >= lo) running_.push_back(started_);
  std::erase_if(running_, [&](u64 x) { return e_[x] < lo; });
  out.assign(running_.begin(), running_.end());
  for (u64 x = first, end = s_ix_.upper(hi); x < end; ++x) out.push_back(x);
}

u64 Loop::exact(At p, At q, u64 z, const std::vector<u64>& near) {
  iv_.clear();
  kvs_.clear();
  u64 d = z;
  // A K/V object is read by one CTA of each head of its pair: two reads in
  // one window only where two heads of one pair meet there (heads of the
  // grid: a head's parts, chunks, read other key blocks).
  bool shared = false;
  u64 head0 = none, pair0 = none;
  // The rows' union kept as it comes, as a few stretches by first row (the
  // CTAs beside a read, in launch order, add to one or two; `merged` while
  // they stay few), else at the end from every interval.
  constexpr std::size_t few = 16;
  bool merged = true;
  stretches_.clear();
  auto hold_rows = [&](Interval v) {
    auto it = std::lower_bound(stretches_.begin(), stretches_.end(), v.lo,
                               [](const Interval& a, u64 y) { return a.hi + 1 < y; });
    if (it == stretches_.end() || it->lo > v.hi + 1) {
      if (stretches_.size() < few) {
        stretches_.insert(it, v);
        return;
      }
      merged = false;  // (the intervals from here on, after the union so far)
      iv_.assign(stretches_.begin(), stretches_.end());
      iv_.push_back(v);
      return;
    }
    auto past = it;
    u64 hi = v.hi;
    for (; past != stretches_.end() && past->lo <= v.hi + 1; ++past) hi = std::max(hi, past->hi);
    *it = {std::min(it->lo, v.lo), hi};
    stretches_.erase(it + 1, past);
  };
  const BackwardCta* const ct = ct_.data();
  const i64* const starts = s_.data();
  const i64* const ends = e_.data();
  const u64* const hr0 = head_row0_.data();
  for (const u64 x : near) {
    const i64 sx = starts[x], ex = ends[x];
    if (sx > q.step || ex < p.step) continue;
    const BackwardCta c = ct[x];
    const At kv{sx, x, kv_sub}, dk{ex, x, dk_sub};
    if (p < kv && kv < q) {
      kvs_.push_back({(*in_.kv_of)[x], in_.kv_col * c.cols});
      const u64 head = u64{c.seq} * in_.heads + c.head;
      const u64 pair = c.pair(in_.heads / in_.group, in_.group);
      if (head0 == none) head0 = head, pair0 = pair;
      else if (pair == pair0 && head != head0) shared = true;
      else if (pair != pair0) shared = shared || in_.gqa;  // (a third head may share with the second)
    }
    if (dk_on_ && p < dk && dk < q) d += in_.kv_col * c.cols;
    const u64 n = c.end > c.first ? c.end - c.first : 0;
    if (n == 0) continue;
    // Its row reads strictly between p and q: steps [t_lo, t_hi].
    const i64 t_lo = std::max(sx, p < At{p.step, x, row_sub} ? p.step : p.step + 1);
    const i64 t_hi = std::min(sx + static_cast<i64>(n) - 1, At{q.step, x, row_sub} < q ? q.step : q.step - 1);
    if (t_hi < t_lo) continue;
    const u64 base = hr0[c.head_key] + c.first - static_cast<u64>(sx);
    const Interval v{base + static_cast<u64>(t_lo), base + static_cast<u64>(t_hi)};
    if (merged) hold_rows(v);
    else iv_.push_back(v);
  }
  if (merged) {
    for (const Interval& v : stretches_) d += u_before(v.hi + 1) - u_before(v.lo);
  } else {
    // Over a stretch of rows not much longer than the intervals are many,
    // by counting their ends; else sorted.
    u64 lo = iv_[0].lo, hi = iv_[0].hi;
    for (const Interval& v : iv_) {
      lo = std::min(lo, v.lo);
      hi = std::max(hi, v.hi);
    }
    if (hi - lo < 16 * iv_.size() + 64) {
      cover_.assign(hi - lo + 2, 0);
      for (const Interval& v : iv_) {
        ++cover_[v.lo - lo];
        --cover_[v.hi - lo + 1];
      }
      std::int64_t depth = 0;
      for (u64 r = 0, from = 0; r <= hi - lo + 1; ++r) {
        const std::int64_t was = depth;
        depth += cover_[r];
        if (was == 0 && depth > 0) from = r;
        if (was > 0 && depth == 0) d += u_before(lo + r) - u_before(lo + from);
      }
    } else {
      std::sort(iv_.begin(), iv_.end(), [](const Interval& a, const Interval& b) { return a.lo < b.lo; });
      for (std::size_t i = 0; i < iv_.size();) {
        const u64 a = iv_[i].lo;
        u64 b = iv_[i].hi;
        for (++i; i < iv_.size() && iv_[i].lo <= b + 1; ++i) b = std::max(b, iv_[i].hi);
        d += u_before(b + 1) - u_before(a);
      }
    }
  }
  // K/V: each object once.
  if (shared) std::sort(kvs_.begin(), kvs_.end());
  for (std::size_t i = 0; i < kvs_.size(); ++i)
    if (i == 0 || kvs_[i].first != kvs_[i - 1].first) d += kvs_[i].second;
  return d;
}

// A run's sliding window: a CTA's offsets [A, B] (first row F, last L) held
// by those before it, or adding their rows' bytes over the run.
void Loop::hold(const RunWindow& w, i64 F, i64 L, i64 A, i64 B) {
  constexpr i64 no_row = std::numeric_limits<i64>::min();
  auto stretch = [&](i64 ya, i64 yb, i64 M) {  // offsets [ya, yb], held to row M before
    const i64 Fs = M == no_row ? F : std::max(F, M + 1);
    if (ya > yb || Fs > L) return;
    // Start: at Fs - y where that lies after w.T0 (a range of T), else at w.T0 (a count).
    const i64 split = std::min(yb, Fs - w.T0);
    if (ya <= split) add(w, range_d_, Fs - split, Fs - ya, w.full);
    if (yb > split) {
      const i64 c = yb - std::max(ya, split + 1) + 1;
      step_d_[0] += c * w.full;
    }
    // End: gone from L - y + 1 where that lies within the run.
    const i64 from = std::max(ya, L - w.T1 + 1);
    if (from <= yb) add(w, range_d_, L - yb + 1, L - from + 1, -w.full);
    // The head's last row: at T = C - y.
    if (w.last != 0 && L == w.C) add(w, step_d_, w.C - yb, w.C - ya, w.last);
  };
  // The stretches held that overlap or touch [A, B].
  auto it = std::lower_bound(held_.begin(), held_.end(), A - 1, [](const Held& x, i64 y) { return x.hi < y; });
  if (to_end_) {  // every M is C: the gaps alone add, one stretch held after
    if (it != held_.end() && it->lo <= A && B <= it->hi) return;  // (held already: none add)
    i64 y = A, lo = A, hi = B;
    auto past = it;
    for (; past != held_.end() && past->lo <= B + 1; ++past) {
      stretch(y, std::min(B, past->lo - 1), no_row);
      y = std::max(y, past->hi + 1);
      lo = std::min(lo, past->lo);
      hi = std::max(hi, past->hi);
    }
    stretch(y, B, no_row);
    if (past == it) {
      held_.insert(it, {lo, hi, w.C});
    } else {
      *it = {lo, hi, w.C};
      held_.erase(it + 1, past);
    }
    return;
  }
  // Else they are replaced by `pieces_` (those of equal M that touch merged).
  pieces_.clear();
  auto piece = [&](i64 lo, i64 hi, i64 M) {
    if (lo > hi) return;
    if (!pieces_.empty() && pieces_.back().M == M && pieces_.back().hi + 1 == lo) pieces_.back().hi = hi;
    else pieces_.push_back({lo, hi, M});
  };
  i64 y = A;
  auto past = it;
  for (; past != held_.end() && past->lo <= B + 1; ++past) {
    const Held x = *past;
    const i64 in_lo = std::max(A, x.lo), in_hi = std::min(B, x.hi);
    piece(x.lo, std::min(x.hi, A - 1), x.M);  // below A
    if (y < x.lo) {  // a gap held by none
      const i64 gap_hi = std::min(B, x.lo - 1);
      stretch(y, gap_hi, no_row);
      piece(y, gap_hi, L);
      y = gap_hi + 1;
    }
    if (in_lo <= in_hi) {
      if (x.M < L) stretch(in_lo, in_hi, x.M);
      piece(in_lo, in_hi, std::max(x.M, L));
      y = in_hi + 1;
    }
    piece(std::max(B + 1, x.lo), x.hi, x.M);  // above B
  }
  if (y <= B) {
    stretch(y, B, no_row);
    piece(y, B, L);
  }
  it = held_.erase(it, past);
  held_.insert(it, pieces_.begin(), pieces_.end());
}

Loop::RunWindow Loop::window(u64 h, i64 T0, i64 T1) const {
  const RowSetBytes& u = *in_.u;
  RunWindow w{T0, T1, static_cast<i64>(head_row0_[h] + rows_[h]) - 1, static_cast<i64>(u[head_row0_[h]]), 0};
  w.last = static_cast<i64>(u[static_cast<u64>(w.C)]) - w.full;
  return w;
}

// Between (T - g, P, row) and (T, k, row): a CTA x's row reads at steps
// [T - g + [x <= P], T - [x >= k]], its K/V read for T in
// [s + [x > k], s + g - 1 + [x > P]], its dK, dV write for T in
// [e + [x >= k], e + g - 1 + [x >= P]] (docs/l2-backward.md).
void Loop::run_exact(const Open& o, const std::vector<u64>& near, std::vector<u64>& out) {
  const u64 k = o.k, P = o.P, n = o.i2 - o.i1 + 1, r0 = (*in_.row0)[k];
  const i64 a = offset(k), g = a - offset(P), T0 = a + static_cast<i64>(o.i1), T1 = a + static_cast<i64>(o.i2);
  step_d_.assign(n + 2, 0);   // the bytes' change at T0 + t
  range_d_.assign(n + 2, 0);  // step_d_ over t, by its differences
  if (!run_one_head(o, near, g, T0, T1)) {
    std::fill(step_d_.begin(), step_d_.end(), 0);
    std::fill(range_d_.begin(), range_d_.end(), 0);
    run_slides(o, near, g, T0, T1);
  }
  const RowSetBytes& u = *in_.u;
  out.resize(n);
  i64 change = 0, bytes = 0;
  for (u64 t = 0; t < n; ++t) {
    change += range_d_[t];
    bytes += step_d_[t] + change;
    out[t] = u[r0 + o.i1 + t] + static_cast<u64>(bytes);
  }
}

// The common run: every CTA beside it with an access between of one head,
// in order of first row, each reading its head's rows to the last. One pass
// over them, no slides; a K/V object is a CTA's alone. False where that does
// not hold (what it added is then cleared by the caller).
bool Loop::run_one_head(const Open& o, const std::vector<u64>& near, i64 g, i64 T0, i64 T1) {
  if (!to_end_) return false;
  const u64 k = o.k, P = o.P;
  const BackwardCta* const ct = ct_.data();
  const i64* const starts = s_.data();
  const i64* const ends = e_.data();
  const u64* const hr0 = head_row0_.data();
  const u64 kv_col = in_.kv_col;
  const bool dk_on = dk_on_;
  u64 head = none;
  i64 last_first = std::numeric_limits<i64>::min();
  RunWindow w{T0, T1, 0, 0, 0};
  held_.clear();
  for (const u64 x : near) {
    const i64 sx = starts[x], ex = ends[x];
    if (sx > T1 || ex < T0 - g) continue;
    const BackwardCta c = ct[x];
    const i64 lag = g - (x <= P ? 1 : 0), lead = x >= k ? 1 : 0;
    const i64 last = sx + static_cast<i64>(c.end > c.first ? c.end - c.first : 0) - 1;
    const bool rows_between = std::max(sx, T0 - lag) <= std::min(last, T1 - lead) && lag >= lead;
    const i64 kv_in = sx + (x > k ? 1 : 0), kv_out = sx + g - 1 + (x > P ? 1 : 0);
    const i64 dk_in = ex + (x >= k ? 1 : 0), dk_out = ex + g - 1 + (x >= P ? 1 : 0);
    const bool kv_between = std::max(kv_in, T0) <= std::min(kv_out, T1);
    const bool dk_between = dk_on && std::max(dk_in, T0) <= std::min(dk_out, T1);
    if (!rows_between && !kv_between && !dk_between) continue;
    if (head == none) {
      head = c.head_key;
      w = window(head, T0, T1);
    } else if (c.head_key != head) {
      return false;
    }
    const i64 bytes = static_cast<i64>(kv_col * c.cols);
    if (kv_between) add(w, step_d_, kv_in, kv_out, bytes);
    if (dk_between) add(w, step_d_, dk_in, dk_out, bytes);
    if (!rows_between) continue;
    const i64 base = static_cast<i64>(hr0[c.head_key] + c.first) - sx, F = base + sx, L = base + last;
    if (F < last_first) return false;
    last_first = F;
    // Offsets y in [A, B] that count in the run: F - y <= T1 and L - y >= T0.
    const i64 A = std::max(base - lag, F - T1), B = std::min(base - lead, L - T0);
    if (A > B) continue;
    bool held = false;  // (by a stretch before: the common case, asked here)
    for (const Held& s : held_) held = held || (s.lo <= A && B <= s.hi);
    if (!held) hold(w, F, L, A, B);
  }
  return true;
}

// Any run: the CTAs beside it as slides, taken a head at a time by first
// row; a K/V object (read by a pair's heads) over the union of its readers'
// ranges.
void Loop::run_slides(const Open& o, const std::vector<u64>& near, i64 g, i64 T0, i64 T1) {
  const u64 k = o.k, P = o.P;
  const RunWindow run{T0, T1, 0, 0, 0};
  // (`near` in launch order: query-block-major, so by head and first row.)
  // (The arrays read through local pointers: the slides written between
  // would otherwise make the compiler load them again for each CTA.)
  const BackwardCta* const ct = ct_.data();
  const i64* const starts = s_.data();
  const i64* const ends = e_.data();
  const std::uint32_t* const kv_of = in_.kv_of->data();
  const u64* const hr0 = head_row0_.data();
  const u64 kv_col = in_.kv_col;
  const bool dk_on = dk_on_;
  slides_.resize(near.size());
  std::size_t kept = 0;
  for (const u64 x : near) {
    const i64 sx = starts[x], ex = ends[x];
    if (sx > T1 || ex < T0 - g) continue;
    const BackwardCta c = ct[x];
    Slide& v = slides_[kept];
    v.s = sx;
    v.last = sx + static_cast<i64>(c.end > c.first ? c.end - c.first : 0) - 1;
    v.lag = g - (x <= P ? 1 : 0);
    v.lead = x >= k ? 1 : 0;
    v.kv_in = sx + (x > k ? 1 : 0);
    v.kv_out = sx + g - 1 + (x > P ? 1 : 0);
    v.dk_in = dk_on ? ex + (x >= k ? 1 : 0) : 1;
    v.dk_out = dk_on ? ex + g - 1 + (x >= P ? 1 : 0) : 0;
    v.base_i = static_cast<i64>(hr0[c.head_key] + c.first) - sx;
    v.kv = kv_of[x];
    v.kv_bytes = kv_col * c.cols;
    v.dk_bytes = dk_on ? v.kv_bytes : 0;
    v.head = c.head_key;
    // (Only those with an access between for some T of the run.)
    const i64 lo = std::max(v.s, T0 - v.lag), hi = std::min(v.last, T1 - v.lead);
    const bool rows_between = lo <= hi && v.lag >= v.lead;
    if (!rows_between) v.last = v.s - 1;
    const bool kv_between = std::max(v.kv_in, T0) <= std::min(v.kv_out, T1);
    const bool dk_between = std::max(v.dk_in, T0) <= std::min(v.dk_out, T1);
    if (rows_between || kv_between || dk_between) ++kept;
  }
  slides_.resize(kept);
  // Rows, a head at a time (docs/l2-backward.md, "A run's reads by a sliding
  // window"): seen from the window's end T, CTA x's rows between are the
  // offsets y = row - T in [A_x, B_x] at or above F_x - T (F_x its first row)
  // and at most L_x - T (its last). Taken by first row, a CTA adds to y the
  // T in [max(F_x, M(y) + 1) - y, L_x - y], M(y) the last row of those before
  // it that hold y (the earlier ones' T reach from below F_x - y to M(y) - y);
  // over a stretch of y of one M those intervals' ends move by one a y, so
  // each stretch adds to the differences of the rows' bytes over a range of
  // T, kept by their own differences. M is kept as stretches of offsets (a
  // sorted list); where every CTA reads to its head's last row C, the first
  // CTA to hold an offset is the only one to add it. The last row's bytes
  // apart.
  by_head_.clear();
  for (std::size_t j = 0; j < slides_.size(); ++j)
    if (slides_[j].last >= slides_[j].s)
      by_head_.push_back({slides_[j].head, slides_[j].base_i + slides_[j].s, static_cast<u32>(j)});
  auto head_first = [](const ByHead& x, const ByHead& y) { return x.head != y.head ? x.head < y.head : x.first < y.first; };
  if (!std::is_sorted(by_head_.begin(), by_head_.end(), head_first)) std::sort(by_head_.begin(), by_head_.end(), head_first);
  for (std::size_t j = 0; j < by_head_.size();) {
    std::size_t e = j;
    while (e < by_head_.size() && by_head_[e].head == by_head_[j].head) ++e;
    const RunWindow w = window(by_head_[j].head, T0, T1);
    held_.clear();
    for (; j < e; ++j) {
      const Slide& v = slides_[by_head_[j].slide];
      const i64 F = by_head_[j].first, L = v.base_i + v.last;
      // Offsets y in [A, B] that count in the run: F - y <= T1 and L - y >= T0.
      const i64 A = std::max(v.base_i - v.lag, F - T1), B = std::min(v.base_i - v.lead, L - T0);
      if (A > B) continue;
      hold(w, F, L, A, B);
    }
  }
  // K/V and dK, dV: each between for a range of T; a K/V object (read by a
  // pair's heads) over the union of its readers' ranges, once.
  if (kv_reader_.empty()) {
    u64 objects = 0;
    for (const u64 obj : *in_.kv_of) objects = std::max(objects, obj + 1);
    kv_reader_.assign(objects, none32);
  }
  kv_objects_.clear();
  kv_next_.resize(slides_.size());
  for (std::size_t j = 0; j < slides_.size(); ++j) {
    const Slide& v = slides_[j];
    if (dk_on_) add(run, step_d_, v.dk_in, v.dk_out, static_cast<i64>(v.dk_bytes));
    if (std::max(v.kv_in, T0) > std::min(v.kv_out, T1)) continue;
    u32& first = kv_reader_[v.kv];
    if (first == none32) kv_objects_.push_back(v.kv);
    kv_next_[j] = first;
    first = static_cast<u32>(j);
  }
  for (const u64 obj : kv_objects_) {
    u32 j = kv_reader_[obj];
    kv_reader_[obj] = none32;
    const i64 kv = static_cast<i64>(slides_[j].kv_bytes);
    kv_ranges_.clear();
    for (; j != none32; j = kv_next_[j]) kv_ranges_.push_back({slides_[j].kv_in, slides_[j].kv_out});
    add_union(run, step_d_, kv_ranges_, kv);
  }
}

void Loop::add_union(const RunWindow& w, std::vector<i64>& d, std::vector<std::pair<i64, i64>>& ranges, i64 bytes) {
  std::sort(ranges.begin(), ranges.end());
  i64 lo = ranges[0].first, hi = ranges[0].second;
  for (std::size_t r = 1; r < ranges.size(); ++r) {
    if (ranges[r].first > hi + 1) {
      add(w, d, lo, hi, bytes);
      lo = ranges[r].first;
    }
    hi = std::max(hi, ranges[r].second);
  }
  add(w, d, lo, hi, bytes);
}

void Loop::tally(Tally& t, ReadObserver& obs) {
  for (std::size_t b = 0; b < rb_.size(); ++b) {
    if (rb_[b] != 0) t.read_in_bucket(b, rb_[b]);
    if (wb_[b] != 0) t.writeback_in_bucket(b, wb_[b]);
  }
  for (const u64 x : first_kv_reads_) t.reads(infinite, 0, 1, kv_bytes(x));
  if (!in_.gqa)  // dK, dV are outputs: written whatever the L2
    for (u64 x = 0; x < n_; ++x) t.write(kv_bytes(x));
  for (const Observed& o : observed_) obs.reads(o.row, o.d, 0, o.count);
  // A run's pieces that its halving left open side by side (rows of one size)
  // are one run again: a run costs the CTAs beside it once, a single read
  // each time (at 264 slots, d = 64, a fifth of the open reads). Single
  // reads of a generation's first rows after one CTA are a fan.
  std::size_t kept = 0;
  for (const Open& o : open_) {
    if (kept > 0 && o.i1 != none) {
      Open& before = open_[kept - 1];
      const u64 r0 = (*in_.row0)[o.k];
      if (before.i1 != none && !before.fan && before.k == o.k && before.P == o.P && before.i2 + 1 == o.i1 &&
          (*in_.u)[r0 + before.i1] == (*in_.u)[r0 + o.i1]) {
        before.i2 = o.i2;
        continue;
      }
      if (fan_member(before, o)) {
        before.i2 = o.i2;
        before.fan = true;
        continue;
      }
    }
    open_[kept++] = o;
  }
  open_.resize(kept);
  join_stairs();
  // The open reads by the first step of their window, so that each slot's
  // CTAs are passed over once.
  auto window_lo = [&](const Open& o) {
    return o.i1 == none ? s_[o.P] : offset(o.P) + static_cast<i64>(o.i1);
  };
  std::sort(open_.begin(), open_.end(), [&](const Open& x, const Open& y) { return window_lo(x) < window_lo(y); });
  std::vector<Replay> replays;  // the open reads of heads that others repeat
  sweeps::ByBucket by_bucket(t);  // (their rows' reads and write-backs, added at the end)
  for (const Open& o : open_) {
    if (o.i1 == none) {
      active(s_[o.P], s_[o.k], near_);
      t.read(exact({s_[o.P], o.P, kv_sub}, {s_[o.k], o.k, kv_sub}, kv_bytes(o.k), near_), kv_bytes(o.k));
      continue;
    }
    // A run's reads are CTA o.k's of rows o.i1 on, a step apart; a fan's,
    // CTA o.k + j's of row o.i1 + j, all at o.k's start; a staircase's, its
    // pieces' in turn. Two reads or more are evaluated at once where they can be.
    const u64 r0 = (*in_.row0)[o.k], n = o.i2 - o.i1 + 1;
    const i64 a = offset(o.k), ap = offset(o.P);
    if (o.pieces > 0) stair_reads(o);
    auto reader = [&](u64 j) { return o.pieces > 0 ? stair_k_[j] : o.fan ? o.k + j : o.k; };
    auto step = [&](u64 j) { return o.pieces > 0 ? stair_T_[j] : o.fan ? s_[o.k] : a + static_cast<i64>(o.i1 + j); };
    active(ap + static_cast<i64>(o.i1), step(n - 1), near_);
    bool at_once = false;
    if (o.pieces > 0) {
      at_once = stair_exact(o, near_, slid_);
      if (at_once) stair_reads_ += n;
    } else if (o.fan) {
      at_once = fan_exact(o, near_, slid_);
      if (at_once) fan_reads_ += n;
    } else if (n > 1) {
      run_exact(o, near_, slid_);
      at_once = true;
    }
    for (u64 j = 0; j < n; ++j) {
      const u64 k = reader(j), i = o.i1 + j, r = r0 + i, z = (*in_.u)[r];
      auto one = [&] { return exact({ap + static_cast<i64>(i), o.P, row_sub}, {step(j), k, row_sub}, z, near_); };
      const u64 d = at_once ? slid_[j] : one();
      if (at_once && in_.check_bounds && d != one())
        throw Error("internal: backward by rows, CTA " + std::to_string(k) + " row " + std::to_string(i) +
                    (o.pieces > 0 ? ": the staircase's distance " : o.fan ? ": the fan's distance " : ": the sliding window's distance ") + std::to_string(d) +
                    " is not " + std::to_string(one()));
      by_bucket.read_writeback(d, z, in_.acc_row * (*in_.n_rows)[r]);
      if (!at_once) obs.reads(r, d, 0, 1);
      if (dense_ && source_[ct_[k].head_key] != 0) replays.push_back({ct_[k].head_key, i, d});
    }
    if (at_once) obs.reads_each(r0 + o.i1, slid_.data(), n);
  }
  by_bucket.flush(t);
  repeat_open(t, obs, replays);
}

}  // namespace rows

std::optional<ByRows> backward_by_rows(const BackwardLoop& in, Tally& t, ReadObserver& obs, std::uint64_t limit) {
  rows::Loop loop(in, t, obs);
  if (!loop.classify(limit)) return std::nullopt;
  loop.tally(t, obs);
  return ByRows{loop.repeated(), loop.fan_reads(), loop.stair_reads()};
}

}  // namespace hbmscope::l2
