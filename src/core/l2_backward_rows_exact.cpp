// The backward's main loop by rows: the reads its bounds leave, evaluated
// over the CTAs that run beside them, and the tally (docs/l2-backward.md,
// "The backward's main loop by rows").
#include <algorithm>

#include "l2_backward_rows_loop.hpp"

namespace hbmscope::l2 {

namespace rows {

void Loop::active(i64 lo, i64 hi, std::vector<u64>& out) {
  // Each slot's first CTA that ends at lo or later only moves forward.
  out.clear();
  for (u64 sl = 0; sl + 1 < slot_at_.size(); ++sl) {
    u64& at = slot_next_[sl];
    const u64 end = slot_at_[sl + 1];
    while (at < end && e_[by_slot_[at]] < lo) ++at;
    for (u64 j = at; j < end && s_[by_slot_[j]] <= hi; ++j) out.push_back(by_slot_[j]);
  }
}

u64 Loop::exact(At p, At q, u64 z, const std::vector<u64>& near) {
  iv_.clear();
  kvs_.clear();
  u64 d = z;
  // A K/V object is read by one CTA of each head of its pair: two reads in
  // one window only where two heads of one pair meet there.
  bool shared = false;
  u64 head0 = none, pair0 = none;
  for (const u64 x : near) {
    if (s_[x] > q.step || e_[x] < p.step) continue;
    const At kv{s_[x], x, kv_sub}, dk{e_[x], x, dk_sub};
    if (p < kv && kv < q) {
      kvs_.push_back({(*in_.kv_of)[x], kv_bytes(x)});
      if (head0 == none) head0 = ct_[x].head_key, pair0 = ct_[x].pair;
      else if (ct_[x].pair == pair0 && ct_[x].head_key != head0) shared = true;
      else if (ct_[x].pair != pair0) shared = shared || in_.gqa;  // (a third head may share with the second)
    }
    if (dk_on_ && p < dk && dk < q) d += dk_bytes(x);
    const u64 n = reads_rows(x);
    if (n == 0) continue;
    // Its row reads strictly between p and q: steps [t_lo, t_hi].
    const i64 t_lo = std::max(s_[x], p < At{p.step, x, row_sub} ? p.step : p.step + 1);
    const i64 t_hi = std::min(s_[x] + static_cast<i64>(n) - 1, At{q.step, x, row_sub} < q ? q.step : q.step - 1);
    if (t_hi < t_lo) continue;
    const u64 base = (*in_.row0)[x] + ct_[x].first - static_cast<u64>(s_[x]);
    iv_.push_back({base + static_cast<u64>(t_lo), base + static_cast<u64>(t_hi)});
  }
  // The rows' union: over a stretch of rows not much longer than the
  // intervals are many, by counting their ends; else sorted.
  if (!iv_.empty()) {
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
        if (was > 0 && depth == 0) d += u_prefix_[lo + r] - u_prefix_[lo + from];
      }
    } else {
      std::sort(iv_.begin(), iv_.end(), [](const Interval& a, const Interval& b) { return a.lo < b.lo; });
      for (std::size_t i = 0; i < iv_.size();) {
        const u64 a = iv_[i].lo;
        u64 b = iv_[i].hi;
        for (++i; i < iv_.size() && iv_[i].lo <= b + 1; ++i) b = std::max(b, iv_[i].hi);
        d += u_prefix_[b + 1] - u_prefix_[a];
      }
    }
  }
  // K/V: each object once.
  if (shared) std::sort(kvs_.begin(), kvs_.end());
  for (std::size_t i = 0; i < kvs_.size(); ++i)
    if (i == 0 || kvs_[i].first != kvs_[i - 1].first) d += kvs_[i].second;
  return d;
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
  // The open reads by the first step of their window, so that each slot's
  // CTAs are passed over once.
  auto window_lo = [&](const Open& o) {
    return o.i1 == none ? s_[o.P] : offset(o.P) + static_cast<i64>(o.i1);
  };
  std::sort(open_.begin(), open_.end(), [&](const Open& x, const Open& y) { return window_lo(x) < window_lo(y); });
  std::vector<Replay> replays;  // the open reads of heads that others repeat
  for (const Open& o : open_) {
    if (o.i1 == none) {
      active(s_[o.P], s_[o.k], near_);
      t.read(exact({s_[o.P], o.P, kv_sub}, {s_[o.k], o.k, kv_sub}, kv_bytes(o.k), near_), kv_bytes(o.k));
      continue;
    }
    const u64 r0 = (*in_.row0)[o.k];
    const i64 a = offset(o.k), ap = offset(o.P);
    active(ap + static_cast<i64>(o.i1), a + static_cast<i64>(o.i2), near_);
    for (u64 i = o.i1; i <= o.i2; ++i) {
      const u64 r = r0 + i, z = (*in_.u)[r];
      const u64 d = exact({ap + static_cast<i64>(i), o.P, row_sub}, {a + static_cast<i64>(i), o.k, row_sub}, z, near_);
      t.read(d, z);
      t.writebacks(d, 0, 1, in_.acc_row * (*in_.n_rows)[r]);
      obs.reads(r, d, 0, 1);
      if (dense_ && source_[ct_[o.k].head_key] != 0) replays.push_back({ct_[o.k].head_key, i, d});
    }
  }
  repeat_open(t, obs, replays);
}

}  // namespace rows

std::optional<std::uint64_t> backward_by_rows(const BackwardLoop& in, Tally& t, ReadObserver& obs, std::uint64_t limit) {
  rows::Loop loop(in, t, obs);
  if (!loop.classify(limit)) return std::nullopt;
  loop.tally(t, obs);
  return loop.repeated();
}

}  // namespace hbmscope::l2
