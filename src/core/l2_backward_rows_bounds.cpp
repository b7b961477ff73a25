// The bounds of the backward's main loop by rows (docs/l2-backward.md,
// "Bounds"): a run of row-set re-reads, or a head's K/V re-reads, at most
// and at least some bytes, counted in a bucket where both lie in it; the
// rest split or left open for their exact distances.
#include <algorithm>
#include <span>
#include <string>

#include "hbmscope/checked.hpp"
#include "hbmscope/error.hpp"
#include "l2_backward_rows_loop.hpp"

namespace hbmscope::l2 {

namespace rows {

u64 Loop::least_row(u64 x) const { return head_least_[ct_[x].head_key]; }

u64 Loop::starts_in(i64 lo, i64 hi) const { return hi < lo ? 0 : s_ix_.upper(hi) - s_ix_.lower(lo); }
u64 Loop::ends_in(i64 lo, i64 hi) const { return hi < lo ? 0 : ends_ix_.upper(hi) - ends_ix_.lower(lo); }
u64 Loop::active_in(i64 lo, i64 hi) const {
  const u64 started = s_ix_.upper(hi), ended = ends_ix_.lower(lo);
  return started > ended ? started - ended : 0;
}

// (Searched from their last answers: the K/V reads' questions, a CTA at a
// time in launch order, move little, and a bucket of the index can hold
// hundreds of CTAs that start or end together.)
Loop::Ids Loop::running(i64 lo, i64 hi, std::size_t (&finger)[2]) const {
  return {end_max_ix_.lower_near(lo, finger[0]), s_ix_.upper_near(hi, finger[1])};
}

std::vector<u64> Loop::all_running(i64 lo, i64 hi) const {
  std::vector<u64> near;
  for (u64 x = 0; x < n_; ++x)
    if (s_[x] <= hi && e_[x] >= lo) near.push_back(x);
  return near;
}

// The K/V and dK, dV of the CTAs starting and ending in [lo, hi], at most
// `most` of each.
u64 Loop::edge_bytes(u64 most, i64 lo, i64 hi) const {
  return sat_add(sat_mul(kv_max_, std::min(most, starts_in(lo, hi))),
                 dk_on_ ? sat_mul(kv_max_, std::min(most, ends_in(lo, hi))) : 0);
}

// The most of the sorted steps v (indexed by ix) that lie within any w steps
// from one of them in [lo, hi] (those past hi too: at least the most within
// [lo, hi]). Up to within_most steps from counts made once a w, the most of
// blocks of 64 places between the ends; else by two cursors.
u64 Loop::most_within(std::span<const i64> v, const StepIndex& ix, WithinByWidth& made, i64 lo, i64 hi,
                      i64 w) const {
  if (hi < lo || w < 1) return 0;
  const std::size_t a = ix.lower(lo), b = ix.upper(hi);
  if (a >= b) return 0;
  auto within = [&](std::size_t x, std::size_t& y) {  // how many from x lie within w steps (y moves up)
    while (y < v.size() && v[y] < v[x] + w) ++y;
    return static_cast<std::uint32_t>(y - x);
  };
  std::uint32_t most = 0;
  if (w > within_most) {
    for (std::size_t x = a, y = a; x < b; ++x) most = std::max(most, within(x, y));
    return most;
  }
  Within& m = made[static_cast<std::size_t>(w)];
  if (m.count.empty()) {
    m.count.resize(v.size());
    m.block_most.assign((v.size() + 63) / 64, 0);
    for (std::size_t x = 0, y = 0; x < v.size(); ++x) {
      m.count[x] = within(x, y);
      m.block_most[x / 64] = std::max(m.block_most[x / 64], m.count[x]);
    }
  }
  std::size_t x = a;
  for (; x < b && x % 64 != 0; ++x) most = std::max(most, m.count[x]);
  for (; x + 64 <= b; x += 64) most = std::max(most, m.block_most[x / 64]);
  for (; x < b; ++x) most = std::max(most, m.count[x]);
  return most;
}

u64 Loop::edge_bytes_within(u64 most, i64 lo, i64 hi, i64 w) const {
  return sat_add(sat_mul(kv_max_, std::min(most, most_within(s_, s_ix_, starts_within_, lo, hi, w))),
                 dk_on_ ? sat_mul(kv_max_, std::min(most, most_within(ends_, ends_ix_, ends_within_, lo, hi, w))) : 0);
}

// `reads` row sets, with the edges.
u64 Loop::flow_bytes(u64 reads, u64 edges) const { return sat_add(sat_mul(reads, u_max_), edges); }

// Every object of the heads of the CTAs `ids` (in head-major order, of their
// sequences).
u64 Loop::head_bytes(Ids ids) const {
  if (ids.hi == 0 || ids.lo >= ids.hi) return 0;
  u64 h_lo = ct_[ids.lo].head_key, h_hi = ct_[ids.hi - 1].head_key;
  if (in_.head_major) {
    h_lo = ct_[ids.lo].seq * in_.heads;
    h_hi = ct_[ids.hi - 1].seq * in_.heads + in_.heads - 1;
  }
  return head_bytes_[h_hi + 1] - head_bytes_[h_lo];
}

u64 Loop::head_bytes_within(Ids ids, i64 lo, i64 hi) const {
  const u64 all = head_bytes(ids);
  if (all == 0) return 0;
  if (kd_prefix_.empty()) {
    kd_prefix_.resize(n_ + 1);
    kd_prefix_[0] = 0;
    for (u64 x = 0; x < n_; ++x) {
      kd_prefix_[x + 1] = sat_add(kd_prefix_[x], sat_add(kv_bytes(x), dk_bytes(x)));
      if (x == 0 || ct_[x].seq != ct_[x - 1].seq) seq_first_.resize(ct_[x].seq + 1u, x);  // (sequences in launch order)
    }
    seq_first_.push_back(n_);
  }
  // head_bytes counts whole sequences (head-major): their CTAs, a range of
  // launch order. Starts do not fall in launch order: those after hi are a
  // suffix; the CTAs before the first whose ends' prefix maximum reaches lo
  // all end before it.
  const u64 a = seq_first_[ct_[ids.lo].seq], b = seq_first_[ct_[ids.hi - 1].seq + 1u];
  const u64 d = std::max<u64>(a, s_ix_.upper(hi)), c = std::min<u64>(std::min<u64>(b, d), end_max_ix_.lower(lo));
  u64 outside = 0;
  if (c > a) outside = sat_add(outside, kd_prefix_[c] - kd_prefix_[a]);
  if (b > d) outside = sat_add(outside, kd_prefix_[b] - kd_prefix_[d]);
  return all > outside ? all - outside : 0;
}

// Query-block-major: per head, the rows between the least and the most read
// offsets of its CTAs among `ids`, g + 1 more (CTA x reads row t - a_x at
// step t).
u64 Loop::rows_bytes(i64 g, Ids ids) const {
  if (ids.hi == 0 || ids.lo >= ids.hi) return 0;
  const u64 w = static_cast<u64>(g) + 1;
  u64 d = 0;
  for (u64 h = ct_[ids.lo].head_key; h <= ct_[ids.hi - 1].head_key; ++h) {
    const u64 a = std::max(ids.lo, head_begin_[h]), b = std::min(ids.hi, head_end_[h]);
    if (a >= b || rows_[h] == 0) continue;
    i64 least = std::numeric_limits<i64>::max(), most_off = std::numeric_limits<i64>::min();
    auto one = [&](u64 x) {
      if (off_[x] == none_off) return;
      least = std::min(least, off_[x]);
      most_off = std::max(most_off, off_[x]);
    };
    const u64 blocks = off_lo_.size() / 2, ba = (a + block - 1) / block, bb = b / block;
    if (ba >= bb) {
      for (u64 x = a; x < b; ++x) one(x);
    } else {
      for (u64 x = a; x < ba * block; ++x) one(x);
      for (u64 x = bb * block; x < b; ++x) one(x);
      for (u64 l = ba + blocks, r = bb + blocks; l < r; l /= 2, r /= 2) {
        if (l & 1) {
          least = std::min(least, off_lo_[l]);
          most_off = std::max(most_off, off_hi_[l++]);
        }
        if (r & 1) {
          least = std::min(least, off_lo_[--r]);
          most_off = std::max(most_off, off_hi_[r]);
        }
      }
    }
    if (least > most_off) continue;
    d = sat_add(d, sat_mul(std::min<u64>(rows_[h], static_cast<u64>(most_off - least) + w), u_max_));
  }
  return d;
}

// Strictly inside [lo, hi]: the dK, dV of the CTAs ending there; the K/V of
// those starting there (with GQA only those of k's head, whose K/V are
// distinct); and, for one read of row i with rows [i - below, i + above]
// known between, the first rows of k's head's CTAs starting there outside
// them (query-block-major).
u64 Loop::more_between(u64 k, i64 lo, i64 hi, u64 i, u64 below, u64 above, bool one, bool near) const {
  if (hi < lo) return 0;
  // CTAs starting in [lo, hi]: [s_lo, s_hi); ending there: as many as ends_in.
  std::size_t* f = kv_finger_;
  const u64 s_lo = near ? s_ix_.lower_near(lo, f[0]) : s_ix_.lower(lo);
  const u64 s_hi = near ? s_ix_.upper_near(hi, f[1]) : s_ix_.upper(hi);
  const u64 ended = !dk_on_ ? 0
                    : near  ? ends_ix_.upper_near(hi, f[3]) - ends_ix_.lower_near(lo, f[2])
                            : ends_in(lo, hi);
  u64 d = sat_mul(kv_min_, ended);
  if (!in_.gqa) d = sat_add(d, sat_mul(kv_min_, s_hi - s_lo));
  if (in_.head_major) return d;
  const u64 h = ct_[k].head_key;
  const u64 xa = std::max<u64>(head_begin_[h], s_lo), xb = std::min<u64>(head_end_[h], s_hi);
  if (xb <= xa) return d;
  if (in_.gqa) d = sat_add(d, sat_mul(kv_min_, xb - xa));
  if (!one) return d;
  auto first_at_least = [&](u64 v) {  // the first CTA in [xa, xb) whose first row is at least v
    u64 a = xa, b = xb;
    while (a < b) {
      const u64 m = a + (b - a) / 2;
      if (ct_[m].first >= v) b = m;
      else a = m + 1;
    }
    return a;
  };
  auto distinct = [&](u64 a, u64 b) -> u64 { return b > a ? u64{distinct_[b - 1]} - distinct_[a] + 1 : 0; };
  const u64 xl = first_at_least(i >= below ? i - below : 0), xu = first_at_least(i + above + 1);
  return sat_add(d, sat_mul(distinct(xa, xl) + distinct(xu, xb), least_row(k)));
}

u64 Loop::other_heads_rows(u64 k, Ids ids, i64 lo, i64 hi) const {
  if (hi < lo || ids.hi == 0 || ids.lo >= ids.hi) return 0;
  if (head_seen_.empty()) head_seen_.assign(head_least_.size(), 0), head_most_.assign(head_least_.size(), 0);
  ++seen_mark_;
  const u64 own = ct_[k].head_key;
  u64 d = 0;
  for (u64 x = ids.lo; x < ids.hi; ++x) {
    const u64 h = ct_[x].head_key;
    // (Its rows a step each from its start: those read in [lo, hi].)
    const i64 from = std::max(lo, s_[x]), to = std::min(hi, s_[x] + static_cast<i64>(reads_rows(x)) - 1);
    if (h == own || to < from) continue;
    const u64 steps = static_cast<u64>(to - from + 1);
    if (head_seen_[h] != seen_mark_) head_seen_[h] = seen_mark_, head_most_[h] = 0;
    if (steps > head_most_[h]) {
      d = sat_add(d, sat_mul(steps - head_most_[h], head_least_[h]));
      head_most_[h] = steps;
    }
  }
  return d;
}

bool Loop::settle(u64 lo, u64 hi, u64 n, u64 read, u64 writeback, u64 row, u64 indifferent) {
  // (With one capacity, a bucket is a comparison.)
  auto bucket = [&](u64 d) -> std::size_t { return one_capacity_ != 0 ? d > one_capacity_ : t_.bucket_of(d); };
  const std::size_t b = bucket(hi);
  if (hi >= reached_ || bucket(lo) != b) return false;
  constexpr std::string_view what = "L2 simulation bytes";
  rb_[b] = checked_add(rb_[b], checked_mul(n, read, what), what);
  wb_[b] = checked_add(wb_[b], checked_mul(n, writeback, what), what);
  // The observer sees a distance in the reads' bucket, below every read's
  // largest: D's write-back lands in the same bucket.
  if (row != none && hi > indifferent && hi > obs_.indifferent_up_to(row, n)) observed_.push_back({row, hi, n});
  return true;
}

void Loop::check(u64 d, u64 lo, u64 hi, u64 k, u64 row) const {
  if (d < lo || d > hi)
    throw Error("internal: backward by rows, CTA " + std::to_string(k) +
                (row == none ? " K/V" : " row " + std::to_string(row)) + ": distance " + std::to_string(d) +
                " outside its bounds [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
}

void Loop::settle_rows(u64 k, u64 P, u64 i1, u64 i2, int depth) {
  const u64 r0 = (*in_.row0)[k];
  const u64 z = (*in_.u)[r0 + i1], acc = in_.acc_row * (*in_.n_rows)[r0 + i1], n = i2 - i1 + 1;
  const FirstBounds f = first_bounds(k, P, i1, i2, z, least_row(k));
  const i64 a = f.a, g = f.g;
  steps_most_ = std::max(steps_most_, static_cast<u64>(g));
  const i64 T0 = a + static_cast<i64>(i1), T1 = a + static_cast<i64>(i2);
  u64 lo = f.lo, hi = f.hi;
  // Then the CTAs that start and end there. Strictly between (T - g, P) and
  // (T, k) a slot reads g row sets, g + 1 only where it holds a CTA after P
  // at T - g and one before k at T: its CTAs follow one another in launch
  // order, so the first lies strictly between P and k, and no two such slots
  // hold the same one. K/V reads (starts) and dK, dV writes (ends): one more
  // in all, k's own K/V at T or P's dK, dV at T - g.
  const u64 reads = f.reads, edge_most = sat_add(reads, 1);
  auto checked = [&] {
    if (!in_.check_bounds) return;
    for (u64 i = i1; i <= i2; ++i) {
      const i64 T = a + static_cast<i64>(i);
      check(exact({T - g, P, row_sub}, {T, k, row_sub}, (*in_.u)[r0 + i], all_running(T - g, T)), lo, hi, k, i);
    }
  };
  if (settle(lo, hi, n, z, acc, r0 + i1)) return checked();
  u64 edges = edge_bytes(edge_most, T0 - g, T1);
  hi = std::min(hi, sat_add(z, flow_bytes(reads, edges)));
  if (settle(lo, hi, n, z, acc, r0 + i1)) return checked();
  // A run's read holds the edges of its own window alone (g + 1 steps), not
  // of the whole run's: the most CTAs that start (end) within g + 1 steps
  // of it (a long run's edges, summed over its steps, kept it open where
  // its reads lay at half the L2: d = 256 on 50 MiB).
  // (Only where the row sets alone would settle it.)
  if (const u64 rows_only = sat_add(z, flow_bytes(reads, 0));
      T1 > T0 && rows_only < reached_ && t_.bucket_of(rows_only) == t_.bucket_of(lo)) {
    edges = std::min(edges, edge_bytes_within(edge_most, T0 - g, T1, g + 1));
    hi = std::min(hi, sat_add(z, flow_bytes(reads, edges)));
    if (settle(lo, hi, n, z, acc, r0 + i1)) return checked();
  }
  // Tighter, at more cost: the objects between beside P's and k's rows, and
  // the rows the heads there can read. (Passed over once it has settled
  // fewer than one run in 32 of its first 4096 or more: at d = 256 it
  // settled 14 K of 1.4 M, each costing more than the halves' first bounds.)
  if (!in_.check_bounds && tight_tried_ >= 4096 && tight_settled_ * 32 < tight_tried_)
    return split_or_open(k, P, i1, i2, depth);
  ++tight_tried_;
  lo = sat_add(lo, n == 1 ? more_between(k, T0 - g + 1, T0 - 1, i1, f.before0, f.after0, true)
                          : more_between(k, T1 - g + 1, T0 - 1, i1, 0, 0, false));
  const Ids ids = running(T0 - g, T1);
  // Head-major order: the other heads' rows inside every read's window (the
  // steps after the last read's window opens and before the first read),
  // and their objects less those accessed outside. (In query-block-major
  // order one or two heads run at once: the search would cost the runs more
  // than it settles.)
  if (in_.head_major) lo = sat_add(lo, other_heads_rows(k, ids, T1 - g + 1, T0 - 1));
  hi = std::min(hi, sat_add(z, in_.head_major ? head_bytes_within(ids, T0 - g, T1) : head_bytes(ids)));
  if (!in_.head_major) hi = std::min(hi, sat_add(z, sat_add(edges, rows_bytes(g, ids))));
  checked();
  if (settle(lo, hi, n, z, acc, r0 + i1)) {
    ++tight_settled_;
    return;
  }
  split_or_open(k, P, i1, i2, depth);
}

void Loop::split_or_open(u64 k, u64 P, u64 i1, u64 i2, int depth) {
  const u64 n = i2 - i1 + 1;
  if (n >= 16 && depth < 6) {  // halves have tighter bounds
    const u64 mid = i1 + (n - 1) / 2;
    settle_rows(k, P, i1, mid, depth + 1);
    settle_rows(k, P, mid + 1, i2, depth + 1);
    return;
  }
  const i64 a = offset(k), g = a - offset(P), T0 = a + static_cast<i64>(i1), T1 = a + static_cast<i64>(i2);
  open_.push_back({k, P, i1, i2});
  open_cost_ = sat_add(open_cost_, sat_add(active_in(T0 - g, T1), in_.slots) * (n + 1));
}

u64 Loop::kv_lower(u64 k, u64 P) const {
  const i64 T = s_[k], Tp = s_[P];
  // At least P's rows (read after its K/V) and those of the first CTA of k's
  // head, where they lie between.
  u64 lo = sat_mul(span(s_[P], std::min(T - 1, s_[P] + static_cast<i64>(reads_rows(P)) - 1)), least_row(P));
  const u64 x0 = k - std::min<u64>(k, ct_[k].k_block * (in_.head_major ? in_.heads : 1));
  if (x0 != k && x0 > P && ct_[x0].head_key == ct_[k].head_key && reads_rows(x0) > 0) {
    const u64 more =
        sat_mul(span(std::max(Tp + 1, s_[x0]), std::min(T - 1, s_[x0] + static_cast<i64>(reads_rows(x0)) - 1)),
                least_row(x0));
    lo = ct_[x0].head_key != ct_[P].head_key ? sat_add(lo, more) : std::max(lo, more);
  }
  return sat_add(kv_bytes(k), lo);
}

// Where every head is alike (dense_; a part where chunks part the heads) and
// each CTA's K/V was last read by the CTA of its key block one grid head
// before (kv_stride_ CTAs): kv_lower() of every CTA from head 0's rows and
// columns at its place (in cache) and the two CTAs' starts, rather than from
// both heads' CTAs. False (nothing set) elsewhere.
bool Loop::kv_head_alike(u64 a, u64 b, const std::vector<u64>& last, KvHead& r) const {
  const u64 m = per_head_, w = kv_stride_;
  if (!dense_ || in_.head_major || b - a != m || a < w) return false;
  // kv_lower(k, k - w): P's rows between, then, where the head starts at key
  // block 0 (else its first CTA is another part's), those of its first CTA
  // (k's head, not P's: added); a CTA's rows and least row set are head 0's.
  const u64 least = head_least_[ct_[a].head_key], reads0 = ct_[a].k_block == 0 ? reads_rows(0) : 0;
  const i64 s0 = s_[a];
  KvHead h;
  for (u64 j = 0; j < m; ++j) {
    const u64 k = a + j, P = k - w;
    if (last[(*in_.kv_of)[k]] != P) return false;
    const i64 T = s_[k], Tp = s_[P];
    u64 l = sat_mul(span(Tp, std::min(T - 1, Tp + static_cast<i64>(reads_rows(j)) - 1)), least);
    if (j != 0 && reads0 > 0)
      l = sat_add(l, sat_mul(span(std::max(Tp + 1, s0), std::min(T - 1, s0 + static_cast<i64>(reads0) - 1)), least));
    h.lo = std::min(h.lo, sat_add(kv_bytes(j), l));
    h.z_most = std::max(h.z_most, kv_bytes(j));
    h.bytes = sat_add(h.bytes, kv_bytes(j));
  }
  // (Starts do not fall in launch order.)
  h.from = s_[a - w];
  h.to = s_[b - 1];
  h.last_p = s_[b - 1 - w];
  h.first_k = s_[a];
  r = h;
  return true;
}

// (Each re-read's window [s_P, s_k] lies in the union of theirs, so the
// objects of the heads running over the union bound each from above; where
// the least lower bound lies in that bound's bucket, below the distance
// reached, each would settle there alone.)
bool Loop::settle_kv_head(u64 a, u64 b, const std::vector<u64>& last) {
  if (a >= b) return false;
  KvHead r;
  if (!kv_head_alike(a, b, last, r))
    for (u64 k = a; k < b; ++k) {
      const u64 P = last[(*in_.kv_of)[k]];
      if (P == none) return false;
      r.lo = std::min(r.lo, kv_lower(k, P));
      r.z_most = std::max(r.z_most, kv_bytes(k));
      r.bytes = sat_add(r.bytes, kv_bytes(k));
      r.from = std::min(r.from, s_[P]);
      r.to = std::max(r.to, s_[k]);
      r.last_p = std::max(r.last_p, s_[P]);
      r.first_k = std::min(r.first_k, s_[k]);
    }
  u64 lo = r.lo;
  const u64 z_most = r.z_most, bytes = r.bytes;
  const i64 from = r.from, to = r.to, last_p = r.last_p, first_k = r.first_k;
  const u64 hi = sat_add(z_most, head_bytes(running(from, to)));
  if (settle(lo, hi, 1, bytes, 0, none)) return true;
  // Then with the K/V and dK, dV of the CTAs starting and ending inside every
  // window (below each one's second lower bound, which takes its own window):
  // chunks' parts settle so, whose first bounds fall short and whose windows,
  // a grid head long, lie a few steps apart.
  if (last_p + 1 <= first_k - 1 &&
      settle(sat_add(lo, more_between(a, last_p + 1, first_k - 1, 0, 0, 0, false, true)), hi, 1, bytes, 0, none))
    return true;
  // Then with each one's second lower bound (as settle_kv takes it next;
  // with a window every K/V re-read needs it).
  lo = ~u64{0};
  for (u64 k = a; k < b; ++k) {
    const u64 P = last[(*in_.kv_of)[k]];
    lo = std::min(lo, sat_add(kv_lower(k, P), more_between(k, s_[P] + 1, s_[k] - 1, 0, 0, 0, false, true)));
  }
  return settle(lo, hi, 1, bytes, 0, none);
}

void Loop::settle_kv(u64 k, u64 P) {
  const u64 z = kv_bytes(k);
  const i64 T = s_[k], Tp = s_[P];
  u64 lo = kv_lower(k, P);
  // At most the objects of the heads that may run there (most K/V re-reads,
  // a head or more apart, settle so); then the CTAs that start and end there.
  const Ids ids = running(Tp, T);
  u64 hi = sat_add(z, head_bytes(ids));
  auto checked = [&] {
    if (in_.check_bounds) check(exact({Tp, P, kv_sub}, {T, k, kv_sub}, z, all_running(Tp, T)), lo, hi, k, none);
  };
  if (settle(lo, hi, 1, z, 0, none)) return checked();
  // At least, besides, the K/V of the CTAs that start strictly between and the
  // dK, dV of those that end there (as for a run of rows).
  lo = sat_add(lo, more_between(k, Tp + 1, T - 1, 0, 0, 0, false, true));
  if (settle(lo, hi, 1, z, 0, none)) return checked();
  const u64 slot_steps = sat_mul(static_cast<u64>(T - Tp) + 1, in_.slots);
  const u64 edges = edge_bytes(slot_steps, Tp, T);
  hi = std::min(hi, sat_add(z, flow_bytes(slot_steps, edges)));
  if (!in_.head_major) hi = std::min(hi, sat_add(z, sat_add(edges, rows_bytes(T - Tp, ids))));
  checked();
  if (settle(lo, hi, 1, z, 0, none)) return;
  open_.push_back({k, P, none, none});
  open_cost_ = sat_add(open_cost_, sat_add(active_in(Tp, T), in_.slots));
}

}  // namespace rows

}  // namespace hbmscope::l2
