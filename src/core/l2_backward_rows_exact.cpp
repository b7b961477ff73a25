// The backward's main loop by rows: the reads its bounds leave, evaluated
// over the CTAs that run beside them, and the tally (docs/l2-backward.md,
// "The backward's main loop by rows").
#include <algorithm>
#include <string>

#include "hbmscope/error.hpp"
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

bool Loop::run_exact(const Open& o, const std::vector<u64>& near, std::vector<u64>& out) {
  const u64 k = o.k, P = o.P, n = o.i2 - o.i1 + 1, r0 = (*in_.row0)[k];
  const i64 a = offset(k), g = a - offset(P), T0 = a + static_cast<i64>(o.i1), T1 = a + static_cast<i64>(o.i2);
  // Between (T - g, P, row) and (T, k, row): a CTA x's row reads at steps
  // [T - g + [x <= P], T - [x >= k]], its K/V read for T in
  // [s + [x > k], s + g - 1 + [x > P]], its dK, dV write for T in
  // [e + [x >= k], e + g - 1 + [x >= P]] (docs/l2-backward.md).
  slides_.clear();
  u64 row_lo = ~u64{0}, row_hi = 0;
  for (const u64 x : near) {
    if (s_[x] > T1 || e_[x] < T0 - g) continue;
    Slide v;
    v.s = s_[x];
    v.last = s_[x] + static_cast<i64>(reads_rows(x)) - 1;
    v.lag = g - (x <= P ? 1 : 0);
    v.lead = x >= k ? 1 : 0;
    v.kv_in = s_[x] + (x > k ? 1 : 0);
    v.kv_out = s_[x] + g - 1 + (x > P ? 1 : 0);
    v.dk_in = dk_on_ ? e_[x] + (x >= k ? 1 : 0) : 1;
    v.dk_out = dk_on_ ? e_[x] + g - 1 + (x >= P ? 1 : 0) : 0;
    v.base = (*in_.row0)[x] + ct_[x].first - static_cast<u64>(s_[x]);
    v.kv = (*in_.kv_of)[x];
    v.kv_bytes = kv_bytes(x);
    v.dk_bytes = dk_bytes(x);
    v.head = ct_[x].head_key;
    v.moving = true;
    // (Only those with an access between for some T of the run.)
    const i64 lo = std::max(v.s, T0 - v.lag), hi = std::min(v.last, T1 - v.lead);
    const bool rows_between = lo <= hi && v.lag >= v.lead;
    if (rows_between) {
      row_lo = std::min(row_lo, v.base + static_cast<u64>(lo));
      row_hi = std::max(row_hi, v.base + static_cast<u64>(hi));
    } else {
      v.last = v.s - 1;
    }
    const bool kv_between = std::max(v.kv_in, T0) <= std::min(v.kv_out, T1);
    const bool dk_between = std::max(v.dk_in, T0) <= std::min(v.dk_out, T1);
    if (rows_between || kv_between || dk_between) slides_.push_back(v);
  }
  // An array over the rows they read: where that costs more than the reads
  // one by one, those.
  const u64 span = row_lo <= row_hi ? row_hi - row_lo + 1 : 0;
  if (span > 4 * n * slides_.size() + 4096) return false;
  count_.assign(span + 1, 0);
  // A head whose CTAs' windows stay inside their reads for the whole run, over
  // rows of one size: its rows between slide as one, as many bytes each step.
  std::sort(slides_.begin(), slides_.end(), [](const Slide& x, const Slide& y) { return x.head < y.head; });
  const Array<u64>& u = *in_.u;
  for (std::size_t j = 0; j < slides_.size();) {
    std::size_t e = j;
    bool steady = true;
    for (; e < slides_.size() && slides_[e].head == slides_[j].head; ++e) {
      const Slide& v = slides_[e];
      if (v.last < v.s) continue;
      steady = steady && T0 - v.lag >= v.s && T1 - v.lead <= v.last &&
               u[v.base + static_cast<u64>(T0 - v.lag)] == u[v.base + static_cast<u64>(T1 - v.lead)];
    }
    if (steady)
      for (; j < e; ++j) slides_[j].moving = false;
    j = e;
  }
  // K/V objects: the CTAs that read one share a counter (GQA: a pair's heads);
  // K/V and dK, dV entering and leaving, by step.
  kv_count_.clear();
  events_.clear();
  for (std::size_t j = 0; j < slides_.size(); ++j) {
    const Slide& v = slides_[j];
    kv_count_.push_back({v.kv, static_cast<u32>(j)});
    if (v.kv_in <= v.kv_out) {
      if (v.kv_in > T0 && v.kv_in <= T1) events_.push_back({v.kv_in, static_cast<u32>(j), 0});
      if (v.kv_out + 1 > T0 && v.kv_out + 1 <= T1) events_.push_back({v.kv_out + 1, static_cast<u32>(j), 1});
    }
    if (v.dk_in <= v.dk_out) {
      if (v.dk_in > T0 && v.dk_in <= T1) events_.push_back({v.dk_in, static_cast<u32>(j), 2});
      if (v.dk_out + 1 > T0 && v.dk_out + 1 <= T1) events_.push_back({v.dk_out + 1, static_cast<u32>(j), 3});
    }
  }
  std::sort(kv_count_.begin(), kv_count_.end());
  u32 objects = 0;
  for (std::size_t j = 0; j < kv_count_.size(); ++j) {
    if (j > 0 && kv_count_[j].first != kv_count_[j - 1].first) ++objects;
    slides_[kv_count_[j].second].object = objects;
  }
  readers_.assign(objects + 1, 0);
  std::sort(events_.begin(), events_.end(), [](const Change& x, const Change& y) { return x.step < y.step; });
  u64 rows_bytes = 0, kv_sum = 0, dk_sum = 0;
  auto kv_add = [&](const Slide& v) {
    if (readers_[v.object]++ == 0) kv_sum += v.kv_bytes;
  };
  auto kv_remove = [&](const Slide& v) {
    if (--readers_[v.object] == 0) kv_sum -= v.kv_bytes;
  };
  // At T0: each CTA's rows between, by counting interval ends.
  for (const Slide& v : slides_) {
    const i64 lo = std::max(v.s, T0 - v.lag), hi = std::min(v.last, T0 - v.lead);
    if (lo <= hi) {
      ++count_[v.base + static_cast<u64>(lo) - row_lo];
      --count_[v.base + static_cast<u64>(hi) + 1 - row_lo];
    }
    if (v.kv_in <= T0 && T0 <= v.kv_out) kv_add(v);
    if (v.dk_in <= T0 && T0 <= v.dk_out) dk_sum += v.dk_bytes;
  }
  for (u64 r = 0, c = 0; r < span; ++r) {
    c += static_cast<u64>(static_cast<std::int64_t>(count_[r]));
    count_[r] = static_cast<std::int32_t>(c);
    if (c > 0) rows_bytes += u[row_lo + r];
  }
  moving_.clear();
  for (const Slide& v : slides_)
    if (v.moving && v.last >= v.s) moving_.push_back(v);
  out.resize(n);
  out[0] = u[r0 + o.i1] + rows_bytes + kv_sum + dk_sum;
  // Then a step at a time: one row read leaves each moving CTA's window, one
  // enters; the K/V and dK, dV whose step it is.
  std::size_t ev = 0;
  for (i64 T = T0 + 1; T <= T1; ++T) {
    for (const Slide& v : moving_) {
      const i64 t_out = T - 1 - v.lag, t_in = T - v.lead;
      if (t_out >= v.s && t_out <= v.last) {
        const u64 row = v.base + static_cast<u64>(t_out);
        if (--count_[row - row_lo] == 0) rows_bytes -= u[row];
      }
      if (t_in >= v.s && t_in <= v.last) {
        const u64 row = v.base + static_cast<u64>(t_in);
        if (count_[row - row_lo]++ == 0) rows_bytes += u[row];
      }
    }
    for (; ev < events_.size() && events_[ev].step == T; ++ev) {
      const Slide& v = slides_[events_[ev].slide];
      switch (events_[ev].kind) {
        case 0: kv_add(v); break;
        case 1: kv_remove(v); break;
        case 2: dk_sum += v.dk_bytes; break;
        default: dk_sum -= v.dk_bytes; break;
      }
    }
    out[static_cast<u64>(T - T0)] = u[r0 + o.i1 + static_cast<u64>(T - T0)] + rows_bytes + kv_sum + dk_sum;
  }
  return true;
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
    // A run of a few reads or more slides its window a step a read.
    const bool slid = o.i2 - o.i1 >= 3 && run_exact(o, near_, slid_);
    for (u64 i = o.i1; i <= o.i2; ++i) {
      const u64 r = r0 + i, z = (*in_.u)[r];
      auto one = [&] { return exact({ap + static_cast<i64>(i), o.P, row_sub}, {a + static_cast<i64>(i), o.k, row_sub}, z, near_); };
      const u64 d = slid ? slid_[i - o.i1] : one();
      if (slid && in_.check_bounds && d != one())
        throw Error("internal: backward by rows, CTA " + std::to_string(o.k) + " row " + std::to_string(i) +
                    ": the sliding window's distance " + std::to_string(d) + " is not " + std::to_string(one()));
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
