// The backward's main loop by rows (docs/l2-backward.md, "The backward's
// main loop by rows"): the layout of the schedule, each head's runs of
// row-set re-reads, and the bounds that count most of them by bucket.
#include <algorithm>
#include <string>

#include "hbmscope/checked.hpp"
#include "hbmscope/error.hpp"
#include "l2_backward_rows_loop.hpp"
#include "radix_sort.hpp"

namespace hbmscope::l2 {

namespace rows {

Loop::Loop(const BackwardLoop& in, const Tally& t, const ReadObserver& obs)
    : in_(in), ct_(*in.ct), t_(t), obs_(obs), n_(ct_.size()), rb_(t.capacities().size() + 1, 0), wb_(rb_.size(), 0) {
  const RowSetBytes& u = *in.u;
  // (The schedule's starts, below 2^63, read in place as signed steps.)
  s_ = std::span<const i64>(reinterpret_cast<const i64*>(in.start->data()), n_);
  e_.resize(n_);
  for (u64 x = 0; x < n_; ++x) e_[x] = s_[x] + static_cast<i64>(ct_[x].steps()) - 1;
  ends_ = std::span<const i64>(reinterpret_cast<const i64*>(in.ends->data()), n_);
  end_max_.resize(n_);
  for (u64 x = 0; x < n_; ++x) end_max_[x] = std::max(e_[x], x > 0 ? end_max_[x - 1] : e_[x]);
  s_ix_ = StepIndex(s_);  // (starts do not decrease in launch order)
  ends_ix_ = StepIndex(ends_);
  end_max_ix_ = StepIndex(end_max_);
  // Bytes: the most a slot reads a step, the least and most K/V; each head's
  // rows and bytes (row sets, K/V and dK, dV where they take L2 space).
  for (u64 r = 0; r < u.size(); ++r) u_max_ = std::max(u_max_, u[r]);
  // Where the grid makes every head alike (query-block-major, a head's CTAs
  // consecutive), head 0's CTAs stand for every head's.
  const bool alike = in.heads_alike && !in.head_major && in.head_keys > 0 && n_ % in.head_keys == 0;
  const u64 scan = alike ? n_ / in.head_keys : n_;
  for (u64 x = 0; x < scan; ++x) {
    kv_max_ = std::max(kv_max_, in.kv_col * ct_[x].cols);
    kv_min_ = std::min(kv_min_, in.kv_col * ct_[x].cols);
  }
  dk_on_ = in.gqa || in.qo;
  rows_.assign(in.head_keys, 0);
  head_row0_.assign(in.head_keys, none);
  head_bytes_.assign(in.head_keys + 1, 0);
  for (u64 x = 0; x < scan; ++x) {
    const u64 h = ct_[x].head_key;
    if (reads_rows(x) > 0) rows_[h] = std::max<u64>(rows_[h], ct_[x].end);
    head_row0_[h] = (*in.row0)[x];
    head_bytes_[h + 1] = sat_add(head_bytes_[h + 1], sat_add(kv_bytes(x), dk_bytes(x)));
  }
  for (u64 h = 1; alike && h < in.head_keys; ++h) {
    rows_[h] = rows_[0];
    head_row0_[h] = (*in.row0)[h * scan];
    head_bytes_[h + 1] = head_bytes_[1];
  }
  for (u64 x = 0; x < scan; ++x) to_end_ = to_end_ && (reads_rows(x) == 0 || ct_[x].end == rows_[ct_[x].head_key]);
  u_prefix_.resize(u.size() + 1);
  u_prefix_[0] = 0;
  for (u64 r = 0; r < u.size(); ++r) u_prefix_[r + 1] = u_prefix_[r] + u[r];
  head_least_.assign(in.head_keys, 0);  // (the least row set of a head: its first or its last)
  for (u64 h = 0; h < in.head_keys; ++h) {
    if (head_row0_[h] != none)
      head_bytes_[h + 1] = sat_add(head_bytes_[h + 1], u_prefix_[head_row0_[h] + rows_[h]] - u_prefix_[head_row0_[h]]);
    if (head_row0_[h] != none && rows_[h] > 0) head_least_[h] = std::min(u[head_row0_[h]], u[head_row0_[h] + rows_[h] - 1]);
    head_bytes_[h + 1] = sat_add(head_bytes_[h + 1], head_bytes_[h]);
  }
  if (!in.head_major) {  // a head's CTAs are consecutive
    head_begin_.assign(in.head_keys, none);
    head_end_.assign(in.head_keys, 0);
    distinct_.resize(n_);
    off_.resize(n_);
    const u64 blocks = n_ / block + 1;
    off_lo_.assign(2 * blocks, std::numeric_limits<i64>::max());
    off_hi_.assign(2 * blocks, std::numeric_limits<i64>::min());
    for (u64 x = 0; x < n_; ++x) {
      const u64 h = ct_[x].head_key;
      head_begin_[h] = std::min(head_begin_[h], x);
      head_end_[h] = x + 1;
      const bool fresh = x == 0 || ct_[x - 1].head_key != h || ct_[x - 1].first != ct_[x].first;
      distinct_[x] = (x > 0 ? distinct_[x - 1] : 0) + (fresh ? 1u : 0u);
      off_[x] = reads_rows(x) > 0 ? offset(x) : none_off;
      if (reads_rows(x) > 0) {
        off_lo_[blocks + x / block] = std::min(off_lo_[blocks + x / block], off_[x]);
        off_hi_[blocks + x / block] = std::max(off_hi_[blocks + x / block], off_[x]);
      }
    }
    for (u64 b = blocks; b-- > 1;) {
      off_lo_[b] = std::min(off_lo_[2 * b], off_lo_[2 * b + 1]);
      off_hi_[b] = std::max(off_hi_[2 * b], off_hi_[2 * b + 1]);
    }
  }
  reached_ = t.max_reuse_distance();
  find_dense();
}

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

bool Loop::settle(u64 lo, u64 hi, u64 n, u64 read, u64 writeback, u64 row) {
  const std::size_t b = t_.bucket_of(hi);
  if (hi >= reached_ || t_.bucket_of(lo) != b) return false;
  constexpr std::string_view what = "L2 simulation bytes";
  rb_[b] = checked_add(rb_[b], checked_mul(n, read, what), what);
  wb_[b] = checked_add(wb_[b], checked_mul(n, writeback, what), what);
  // The observer sees a distance in the reads' bucket, below every read's
  // largest: D's write-back lands in the same bucket.
  if (row != none && hi > obs_.indifferent_up_to(row, n)) observed_.push_back({row, hi, n});
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
  const i64 a = offset(k), g = a - offset(P);
  steps_most_ = std::max(steps_most_, static_cast<u64>(g));
  const i64 T0 = a + static_cast<i64>(i1), T1 = a + static_cast<i64>(i2);
  // At least P's rows after its read and k's rows before its own, other row
  // sets of the head: their count is piecewise linear in the step, least at
  // an end or a breakpoint.
  const i64 eP = s_[P] + static_cast<i64>(reads_rows(P)) - 1;
  auto after = [&](i64 T) { return std::max<i64>(0, std::min(T - 1, eP) - T + g); };
  auto before = [&](i64 T) { return std::max<i64>(0, std::min(g - 1, T - s_[k])); };
  u64 least = static_cast<u64>(std::min(after(T0) + before(T0), after(T1) + before(T1)));
  for (const i64 T : {eP + 1, eP + g, s_[k] + g - 1})
    if (T > T0 && T < T1) least = std::min(least, static_cast<u64>(after(T) + before(T)));
  u64 lo = sat_add(z, sat_mul(least, least_row(k)));
  // Every slot's row set, K/V and dK, dV each step: no lookups (a step apart
  // or less, the hits, settle so); then the CTAs that start and end there.
  // Strictly between (T - g, P) and (T, k) a slot reads g row sets, g + 1
  // only where it holds a CTA after P at T - g and one before k at T: its
  // CTAs follow one another in launch order, so the first lies strictly
  // between P and k, and no two such slots hold the same one. K/V reads
  // (starts) and dK, dV writes (ends): one more in all, k's own K/V at T or
  // P's dK, dV at T - g.
  const u64 reads = sat_add(sat_mul(static_cast<u64>(g), in_.slots), P < k ? std::min<u64>(in_.slots, k - P - 1) : 0);
  const u64 edge_most = sat_add(reads, 1);
  u64 hi = sat_add(z, sat_mul(edge_most, sat_add(u_max_, sat_add(kv_max_, dk_on_ ? kv_max_ : 0))));
  auto checked = [&] {
    if (!in_.check_bounds) return;
    for (u64 i = i1; i <= i2; ++i) {
      const i64 T = a + static_cast<i64>(i);
      check(exact({T - g, P, row_sub}, {T, k, row_sub}, (*in_.u)[r0 + i], all_running(T - g, T)), lo, hi, k, i);
    }
  };
  if (settle(lo, hi, n, z, acc, r0 + i1)) return checked();
  const u64 edges = edge_bytes(edge_most, T0 - g, T1);
  hi = std::min(hi, sat_add(z, flow_bytes(reads, edges)));
  if (settle(lo, hi, n, z, acc, r0 + i1)) return checked();
  // Tighter, at more cost: the objects between beside P's and k's rows, and
  // the rows the heads there can read. (Passed over once it has settled
  // fewer than one run in 32 of its first 4096 or more: at d = 256 it
  // settled 14 K of 1.4 M, each costing more than the halves' first bounds.)
  if (!in_.check_bounds && tight_tried_ >= 4096 && tight_settled_ * 32 < tight_tried_)
    return split_or_open(k, P, i1, i2, depth);
  ++tight_tried_;
  lo = sat_add(lo, n == 1 ? more_between(k, T0 - g + 1, T0 - 1, i1, static_cast<u64>(before(T0)),
                                         static_cast<u64>(after(T0)), true)
                          : more_between(k, T1 - g + 1, T0 - 1, i1, 0, 0, false));
  const Ids ids = running(T0 - g, T1);
  hi = std::min(hi, sat_add(z, head_bytes(ids)));
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

// (Each re-read's window [s_P, s_k] lies in the union of theirs, so the
// objects of the heads running over the union bound each from above; where
// the least lower bound lies in that bound's bucket, below the distance
// reached, each would settle there alone.)
bool Loop::settle_kv_head(u64 a, u64 b, const std::vector<u64>& last) {
  if (a >= b) return false;
  u64 lo = ~u64{0}, z_most = 0, bytes = 0;
  i64 from = std::numeric_limits<i64>::max(), to = std::numeric_limits<i64>::min();
  i64 last_p = to, first_k = from;  // every window holds (last_p, first_k)
  for (u64 k = a; k < b; ++k) {
    const u64 P = last[(*in_.kv_of)[k]];
    if (P == none) return false;
    lo = std::min(lo, kv_lower(k, P));
    z_most = std::max(z_most, kv_bytes(k));
    bytes = sat_add(bytes, kv_bytes(k));
    from = std::min(from, s_[P]);
    to = std::max(to, s_[k]);
    last_p = std::max(last_p, s_[P]);
    first_k = std::min(first_k, s_[k]);
  }
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

// A head whose readers leave (windows; chunks that cut blocks): its rows in
// order, the readers of the row kept in order of (offset, CTA), each one's
// predecessor the one below it. A reader that arrives or leaves changes the
// predecessor of the one above it alone.
template <class Run>
bool Loop::readers_that_leave(const std::vector<u64>& xs, u64 nq, Run&& run, u64 limit) {
  const u64 m = xs.size();
  auto below = [&](u64 i, u64 j) {  // i's read of a row comes before j's
    const i64 a = offset(xs[i]), b = offset(xs[j]);
    return a != b ? a < b : i < j;
  };
  // The readers by the row after their last (their first rows do not decrease).
  leaving_at_.assign(nq + 2, 0);
  for (u64 i = 0; i < m; ++i) ++leaving_at_[ct_[xs[i]].end + 1];
  for (u64 r = 1; r < leaving_at_.size(); ++r) leaving_at_[r] += leaving_at_[r - 1];
  leaving_.resize(m);
  {
    std::vector<u64> at(leaving_at_.begin(), leaving_at_.end() - 1);
    for (u64 i = 0; i < m; ++i) leaving_[at[ct_[xs[i]].end]++] = i;
  }
  readers_.clear();
  pred_.resize(m);
  from_row_.resize(m);
  auto pred_of = [&](u64 i) { return pred_[i] == none ? none : xs[pred_[i]]; };
  // Reader at place p gets a new predecessor from row r.
  auto renew = [&](std::size_t p, u64 r) {
    if (p >= readers_.size()) return;
    const u64 y = readers_[p];
    run(xs[y], pred_of(y), from_row_[y], r);
    pred_[y] = p == 0 ? none : readers_[p - 1];
    from_row_[y] = r;
  };
  u64 next = 0;
  for (u64 r = 0; r <= nq; ++r) {
    for (u64 v = leaving_at_[r]; v < leaving_at_[r + 1]; ++v) {
      const u64 i = leaving_[v];
      const auto it = std::lower_bound(readers_.begin(), readers_.end(), i, below);
      run(xs[i], pred_of(i), from_row_[i], r);
      const std::size_t p = static_cast<std::size_t>(it - readers_.begin());
      readers_.erase(it);
      renew(p, r);
    }
    for (; next < m && ct_[xs[next]].first == r; ++next) {
      const auto it = std::lower_bound(readers_.begin(), readers_.end(), next, below);
      const std::size_t p = static_cast<std::size_t>(it - readers_.begin());
      pred_[next] = p == 0 ? none : readers_[p - 1];
      from_row_[next] = r;
      readers_.insert(it, next);
      renew(p + 1, r);
    }
    if (open_cost_ > limit) return false;
  }
  return true;
}

bool Loop::classify(u64 limit) {
  // K/V: each object's previous reader, in launch order (a step's CTAs in
  // launch order too).
  {
    u64 objects = 0;
    for (u64 x = 0; x < n_; ++x) objects = std::max(objects, u64{(*in_.kv_of)[x]} + 1);
    std::vector<u64> last(objects, none);
    // (A head's CTAs together first, where they are consecutive; the tests
    // that hold each read to its bounds take them one by one.)
    const bool by_heads = !in_.head_major && !in_.check_bounds;
    for (u64 x = 0; x < n_;) {
      const u64 h = ct_[x].head_key;
      if (by_heads && x == head_begin_[h] && settle_kv_head(x, head_end_[h], last)) {
        for (; x < head_end_[h]; ++x) last[(*in_.kv_of)[x]] = x;
        continue;
      }
      const u64 o = (*in_.kv_of)[x];
      if (last[o] == none) first_kv_reads_.push_back(x);
      else settle_kv(x, last[o]);
      last[o] = x++;
      if (open_cost_ > limit) return false;
    }
  }
  // Each head's CTAs in key-block order.
  const CtasByHead by_head = ctas_by_head(ct_, in_.head_keys);
  // Row sets, per head: readers in order of (offset, CTA). A CTA inserted at
  // its first row takes its neighbour below as its predecessor, and becomes
  // the predecessor of its neighbour above from there; the neighbours at
  // insertion come from deleting the CTAs from the whole order in reverse.
  std::vector<u64> xs, order, rank, prev, next, L, R, events_at;
  struct Event {
    u64 row, pred;  // from this row on, this predecessor (an index into xs)
  };
  std::vector<Event> by_target;
  const u64 B = rb_.size();
  std::vector<u64> rb0(B), wb0(B);
  // A head evaluated: its settled bytes, observations and longest window kept
  // for the heads that repeat it.
  auto kept = [&](u64 h) {
    if (!dense_) return;
    for (u64 b = 0; b < B; ++b) {
      head_rb_[h * B + b] = rb_[b] - rb0[b];
      head_wb_[h * B + b] = wb_[b] - wb0[b];
    }
    obs_hi_[h] = observed_.size();
    head_steps_[h] = steps_most_;
  };
  for (u64 h = 0; h < in_.head_keys; ++h) {
    if (const u64 g = source_of(h); g != none) {
      repeat_settled(h, g);
      continue;
    }
    rb0 = rb_;
    wb0 = wb_;
    if (dense_) obs_lo_[h] = observed_.size();
    steps_most_ = 0;
    xs.clear();
    for (u64 j = by_head.at[h]; j < by_head.at[h + 1]; ++j)
      if (reads_rows(by_head.id(j)) > 0) xs.push_back(by_head.id(j));  // (first rows do not decrease)
    const u64 m = xs.size();
    if (m == 0) {
      kept(h);
      continue;
    }
    const u64 nq = rows_[h], r0 = head_row0_[h];
    const bool partial = (*in_.u)[r0 + nq - 1] != (*in_.u)[r0];
    // CTA k's rows [row, until) read after P's; the last, partial row apart.
    auto run = [&](u64 k, u64 P, u64 row, u64 until) {
      if (P == none || until <= row) return;
      if (partial && until == nq && until - 1 > row) {
        settle_rows(k, P, row, nq - 2, 0);
        settle_rows(k, P, nq - 1, nq - 1, 0);
      } else {
        settle_rows(k, P, row, until - 1, 0);
      }
    };
    bool leave = false;
    for (const u64 x : xs) leave = leave || ct_[x].end < nq;
    if (leave) {
      if (!readers_that_leave(xs, nq, run, limit)) return false;
      kept(h);
      continue;
    }
    order.resize(m);
    for (u64 i = 0; i < m; ++i) order[i] = i;
    radix_sort(order, [&](u64 i) { return ordered(offset(xs[i])); });  // (stable: ties by CTA)
    rank.resize(m);
    for (u64 i = 0; i < m; ++i) rank[order[i]] = i;
    prev.resize(m);
    next.resize(m);
    for (u64 i = 0; i < m; ++i) {
      prev[i] = i == 0 ? none : i - 1;
      next[i] = i + 1 == m ? none : i + 1;
    }
    L.resize(m);
    R.resize(m);
    for (u64 i = m; i-- > 0;) {
      const u64 r = rank[i];
      L[i] = prev[r] == none ? none : order[prev[r]];
      R[i] = next[r] == none ? none : order[next[r]];
      if (prev[r] != none) next[prev[r]] = next[r];
      if (next[r] != none) prev[next[r]] = prev[r];
    }
    events_at.assign(m + 1, 0);
    for (u64 i = 0; i < m; ++i)
      if (R[i] != none) ++events_at[R[i] + 1];
    for (u64 i = 1; i <= m; ++i) events_at[i] += events_at[i - 1];
    by_target.resize(events_at[m]);
    {
      std::vector<u64> at(events_at.begin(), events_at.end() - 1);
      for (u64 i = 0; i < m; ++i)
        if (R[i] != none) by_target[at[R[i]]++] = {ct_[xs[i]].first, i};
    }
    for (u64 i = 0; i < m; ++i) {
      const u64 k = xs[i];
      u64 row = ct_[k].first, pred = L[i];
      for (u64 v = events_at[i]; v < events_at[i + 1]; ++v) {
        run(k, pred == none ? none : xs[pred], row, by_target[v].row);
        row = std::max(row, by_target[v].row);
        pred = by_target[v].pred;
      }
      run(k, pred == none ? none : xs[pred], row, nq);
      if (open_cost_ > limit) return false;
    }
    kept(h);
  }
  return true;
}

}  // namespace rows

}  // namespace hbmscope::l2
