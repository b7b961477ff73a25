// The backward's main loop by rows (docs/l2-backward.md, "The backward's
// main loop by rows"): the layout of the schedule and each head's runs of
// row-set re-reads (their bounds: l2_backward_rows_bounds.cpp).
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
  end_max_.resize(n_);
  // Ends, their prefix maximum and (query-block-major: a head's CTAs are
  // consecutive) the heads' CTAs, the first rows' changes and the read
  // offsets with their least and most over blocks: one pass over the CTAs.
  const bool consecutive = !in.head_major;
  const u64 blocks = n_ / block + 1;
  if (consecutive) {
    head_begin_.assign(in.head_keys, none);
    head_end_.assign(in.head_keys, 0);
    distinct_.resize(n_);
    off_.resize(n_);
    off_lo_.assign(2 * blocks, std::numeric_limits<i64>::max());
    off_hi_.assign(2 * blocks, std::numeric_limits<i64>::min());
  }
  // CTA x of head key h, c its CTA (or, every head alike, head 0's at its
  // place), prev the one before it in its head (none: the head's first).
  auto lay = [&](u64 x, const BackwardCta& c, u64 h, const BackwardCta* prev) {
    e_[x] = s_[x] + static_cast<i64>(c.steps()) - 1;
    end_max_[x] = x > 0 ? std::max(e_[x], end_max_[x - 1]) : e_[x];
    if (!consecutive) return;
    head_begin_[h] = std::min(head_begin_[h], x);
    head_end_[h] = x + 1;
    const bool fresh = prev == nullptr || prev->first != c.first;
    distinct_[x] = (x > 0 ? distinct_[x - 1] : 0) + (fresh ? 1u : 0u);
    off_[x] = c.end > c.first ? s_[x] - static_cast<i64>(c.first) : none_off;  // (offset(x) where it reads rows)
    if (c.end > c.first) {
      off_lo_[blocks + x / block] = std::min(off_lo_[blocks + x / block], off_[x]);
      off_hi_[blocks + x / block] = std::max(off_hi_[blocks + x / block], off_[x]);
    }
  };
  alike_ = in.heads_alike && consecutive && in.head_keys > 0 && n_ % in.head_keys == 0;
  if (alike_) {  // (head 0's CTAs, in cache, rather than every head's)
    const u64 m = n_ / in.head_keys;
    for (u64 h = 0, x = 0; h < in.head_keys; ++h)
      for (u64 j = 0; j < m; ++j, ++x) lay(x, ct_[j], h, j == 0 ? nullptr : &ct_[j - 1]);
  } else {
    for (u64 x = 0; x < n_; ++x)
      lay(x, ct_[x], ct_[x].head_key, x == 0 || ct_[x - 1].head_key != ct_[x].head_key ? nullptr : &ct_[x - 1]);
  }
  for (u64 b = blocks; consecutive && b-- > 1;) {
    off_lo_[b] = std::min(off_lo_[2 * b], off_lo_[2 * b + 1]);
    off_hi_[b] = std::max(off_hi_[2 * b], off_hi_[2 * b + 1]);
  }
  ends_ = std::span<const i64>(reinterpret_cast<const i64*>(in.ends->data()), n_);
  s_ix_ = StepIndex(s_);  // (starts do not decrease in launch order)
  ends_ix_ = StepIndex(ends_);
  end_max_ix_ = StepIndex(end_max_);
  // Bytes: the most a slot reads a step, the least and most K/V; each head's
  // rows and bytes (row sets, K/V and dK, dV where they take L2 space).
  // Where the grid makes every head alike (query-block-major, a head's CTAs
  // consecutive), head 0's CTAs stand for every head's.
  const u64 scan = alike_ ? n_ / in.head_keys : n_;
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
  for (u64 h = 1; alike_ && h < in.head_keys; ++h) {
    rows_[h] = rows_[0];
    head_row0_[h] = (*in.row0)[h * scan];
    head_bytes_[h + 1] = head_bytes_[1];
  }
  for (u64 x = 0; x < scan; ++x) to_end_ = to_end_ && (reads_rows(x) == 0 || ct_[x].end == rows_[ct_[x].head_key]);
  for (u64 r = 0; r < u.size(); ++r) u_max_ = std::max(u_max_, u[r]);
  head_least_.assign(in.head_keys, 0);  // (the least row set of a head: its first or its last)
  for (u64 h = 0; h < in.head_keys; ++h) {
    if (head_row0_[h] != none)
      head_bytes_[h + 1] = sat_add(head_bytes_[h + 1], u.below(head_row0_[h] + rows_[h]) - u.below(head_row0_[h]));
    if (head_row0_[h] != none && rows_[h] > 0) head_least_[h] = std::min(u[head_row0_[h]], u[head_row0_[h] + rows_[h] - 1]);
    head_bytes_[h + 1] = sat_add(head_bytes_[h + 1], head_bytes_[h]);
  }
  reached_ = t.max_reuse_distance();
  if (t.capacities().size() == 1) one_capacity_ = t.capacities()[0];
  find_dense();
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
    u64 objects = in_.kv_objects;
    if (objects == 0)
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
  const CtasByHead by_head = ctas_by_head(ct_, in_.head_keys, alike_);
  // Row sets, per head: readers in order of (offset, CTA). A CTA inserted at
  // its first row takes its neighbour below as its predecessor, and becomes
  // the predecessor of its neighbour above from there; the neighbours at
  // insertion come from deleting the CTAs from the whole order in reverse.
  std::vector<u64> xs;
  std::vector<u32> order, rank, prev, next, L, R, events_at;  // (places in a head: below 2^32)
  struct Event {
    u32 row, pred;  // from this row on, this predecessor (an index into xs)
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
  // Where every head is alike (query-block-major), a CTA's rows and first
  // row are head 0's at its place (in cache), and its read offset the layout's.
  const u64 per_head = alike_ ? n_ / in_.head_keys : 0;
  std::vector<u64> places0;  // (alike: head 0's CTAs that read rows)
  bool leave0 = false;
  for (u64 j = 0; j < per_head; ++j)
    if (reads_rows(j) > 0) {
      places0.push_back(j);
      leave0 = leave0 || ct_[j].end < rows_[0];
    }
  auto first_row = [&](u64 x, u64 h) { return u64{ct_[alike_ ? x - h * per_head : x].first}; };
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
    if (alike_) {
      for (const u64 j : places0) xs.push_back(h * per_head + j);
    } else {
      for (u64 j = by_head.at[h]; j < by_head.at[h + 1]; ++j)
        if (reads_rows(by_head.id(j)) > 0) xs.push_back(by_head.id(j));  // (first rows do not decrease)
    }
    const u64 m = xs.size();
    if (m == 0) {
      kept(h);
      continue;
    }
    const u64 nq = rows_[h], r0 = head_row0_[h];
    const bool partial = (*in_.u)[r0 + nq - 1] != (*in_.u)[r0];
    // CTA k's rows [row, until) read after P's; the last, partial row apart.
    // (Most runs settle by their first bounds: from the head's row bytes,
    // without settle_rows' lookups; the tests that hold each read to its
    // bounds take them all there.)
    // (The observer asked only where a distance passes the least start of the
    // head's rows.)
    const u64 z_full = (*in_.u)[r0], acc_full = in_.acc_row * (*in_.n_rows)[r0], least = head_least_[h];
    const u64 head_indifferent = obs_.indifferent_up_to(r0, nq);
    auto run = [&](u64 k, u64 P, u64 row, u64 until) {
      if (P == none || until <= row) return;
      if (!in_.check_bounds && (!partial || until < nq)) {
        const FirstBounds f = first_bounds(k, P, row, until - 1, z_full, least);
        if (settle(f.lo, f.hi, until - row, z_full, acc_full, r0 + row, head_indifferent)) {
          steps_most_ = std::max(steps_most_, static_cast<u64>(f.g));
          return;
        }
      }
      if (partial && until == nq && until - 1 > row) {
        settle_rows(k, P, row, nq - 2, 0);
        settle_rows(k, P, nq - 1, nq - 1, 0);
      } else {
        settle_rows(k, P, row, until - 1, 0);
      }
    };
    bool leave = alike_ && leave0;
    for (u64 i = 0; !alike_ && i < m; ++i) leave = leave || ct_[xs[i]].end < nq;
    if (leave) {
      if (!readers_that_leave(xs, nq, run, limit)) return false;
      kept(h);
      continue;
    }
    order.resize(m);
    for (u64 i = 0; i < m; ++i) order[i] = static_cast<u32>(i);
    radix_sort(order, [&](u32 i) { return ordered(alike_ ? off_[xs[i]] : offset(xs[i])); });  // (stable: ties by CTA)
    rank.resize(m);
    for (u64 i = 0; i < m; ++i) rank[order[i]] = static_cast<u32>(i);
    prev.resize(m);
    next.resize(m);
    for (u64 i = 0; i < m; ++i) {
      prev[i] = i == 0 ? none32 : static_cast<u32>(i - 1);
      next[i] = i + 1 == m ? none32 : static_cast<u32>(i + 1);
    }
    L.resize(m);
    R.resize(m);
    for (u64 i = m; i-- > 0;) {
      const u32 r = rank[i];
      L[i] = prev[r] == none32 ? none32 : order[prev[r]];
      R[i] = next[r] == none32 ? none32 : order[next[r]];
      if (prev[r] != none32) next[prev[r]] = next[r];
      if (next[r] != none32) prev[next[r]] = prev[r];
    }
    // Events by target: each CTA's upper neighbour at its insertion takes it
    // as predecessor from its first row on (filled from the back: in order).
    events_at.assign(m + 1, 0);
    for (u64 i = 0; i < m; ++i)
      if (R[i] != none32) ++events_at[R[i] + 1];
    for (u64 i = 1; i <= m; ++i) events_at[i] += events_at[i - 1];
    by_target.resize(events_at[m]);
    for (u64 i = m; i-- > 0;)
      if (R[i] != none32) by_target[--events_at[R[i] + 1]] = {static_cast<u32>(first_row(xs[i], h)), static_cast<u32>(i)};
    // (events_at[i + 1] is now where target i's events begin: i's end is events_at[i + 2] where set, or the next begin.)
    for (u64 i = 0; i < m; ++i) {
      const u64 k = xs[i];
      u64 row = first_row(k, h);
      u32 pred = L[i];
      const u64 end = i + 2 <= m ? events_at[i + 2] : by_target.size();
      for (u64 v = events_at[i + 1]; v < end; ++v) {
        run(k, pred == none32 ? none : xs[pred], row, by_target[v].row);
        row = std::max<u64>(row, by_target[v].row);
        pred = by_target[v].pred;
      }
      run(k, pred == none32 ? none : xs[pred], row, nq);
      if (open_cost_ > limit) return false;
    }
    kept(h);
  }
  return true;
}

}  // namespace rows

}  // namespace hbmscope::l2
