#pragma once
// The backward's main loop by rows, inside (l2_backward_rows.cpp: the layout,
// the runs and their bounds; l2_backward_rows_exact.cpp: the reads the bounds
// leave, and the tally). Internal to src/core.
#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <span>
#include <unordered_map>
#include <vector>

#include "big_array.hpp"
#include "l2_backward_rows.hpp"
#include "step_index.hpp"

namespace hbmscope::l2::rows {

using u64 = std::uint64_t;
using i64 = std::int64_t;
using u32 = std::uint32_t;
inline constexpr u64 none = ~u64{0};
inline constexpr std::uint32_t kv_sub = 0, row_sub = 1, dk_sub = 2;

// An access's place in the trace: step, then CTA, then position in the step.
struct At {
  i64 step;
  u64 cta;
  std::uint32_t sub;
};
inline bool operator<(const At& a, const At& b) {
  if (a.step != b.step) return a.step < b.step;
  if (a.cta != b.cta) return a.cta < b.cta;
  return a.sub < b.sub;
}

inline u64 sat_add(u64 a, u64 b) { return a > infinite - b ? infinite : a + b; }
inline u64 sat_mul(u64 a, u64 b) {
  u64 r = 0;
  return __builtin_mul_overflow(a, b, &r) ? infinite : r;
}
// |[lo, hi]|, 0 when empty.
inline u64 span(i64 lo, i64 hi) { return hi >= lo ? static_cast<u64>(hi - lo + 1) : 0; }

// Reads the bounds leave: a run of CTA k's row-set re-reads of rows [i1, i2]
// of its head (predecessor P), or its K/V re-read (i1 = i2 = none).
struct Open {
  u64 k, P, i1, i2;
  // A fan: CTAs k, k + 1, ... reading rows i1, i1 + 1, ... (each its first)
  // at one step, each after P's read of that row (l2_backward_rows_fans.cpp).
  bool fan = false;
  // A staircase: runs and fans after P of rows i1 to i2 in turn, each read
  // later than the one before, all after P's last
  // (l2_backward_rows_stairs.cpp): its pieces, [piece0, piece0 + pieces) of
  // the loop's stair_pieces_.
  u32 piece0 = 0, pieces = 0;
};

// Places [0, n) each painted once, by the first stretch asked to paint it
// (paint(lo, hi, f): f(r) for each place of [lo, hi] not painted yet; the
// painted ones passed over by links past them, paths halved).
class PaintOnce {
 public:
  void reset(u64 n) {
    next_.resize(n + 1);
    for (u64 r = 0; r <= n; ++r) next_[r] = static_cast<i64>(r);
  }
  template <class F>
  void paint(i64 lo, i64 hi, F f) {
    for (i64 r = first(lo); r <= hi; r = first(r + 1)) {
      f(r);
      next_[static_cast<u64>(r)] = r + 1;
    }
  }

 private:
  i64 first(i64 r) {
    while (next_[static_cast<u64>(r)] != r) {
      next_[static_cast<u64>(r)] = next_[static_cast<u64>(next_[static_cast<u64>(r)])];
      r = next_[static_cast<u64>(r)];
    }
    return r;
  }
  std::vector<i64> next_;
};

class Loop {
 public:
  Loop(const BackwardLoop& in, const Tally& t, const ReadObserver& obs);
  // Pass 1: every re-read counted by bucket or left open; false where the
  // open ones would cost more than `limit`.
  bool classify(u64 limit);
  // Pass 2: into the tally and the observer.
  void tally(Tally& t, ReadObserver& obs);
  // Heads whose re-reads were taken from an earlier head's.
  u64 repeated() const { return repeated_; }
  u64 fan_reads() const { return fan_reads_; }
  u64 stair_reads() const { return stair_reads_; }

 private:
  u64 dk_bytes(u64 x) const { return dk_on_ ? in_.kv_col * ct_[x].cols : 0; }
  u64 kv_bytes(u64 x) const { return in_.kv_col * ct_[x].cols; }
  u64 u_before(u64 r) const { return in_.u->below(r); }  // the row sets' bytes of rows [0, r)
  i64 row_bytes(i64 row) const { return static_cast<i64>((*in_.u)[static_cast<u64>(row)]); }  // a row set's bytes
  i64 offset(u64 x) const { return s_[x] - static_cast<i64>(ct_[x].first); }  // row i read at offset + i
  u64 reads_rows(u64 x) const { return ct_[x].end > ct_[x].first ? ct_[x].end - ct_[x].first : 0; }
  u64 least_row(u64 x) const;
  // CTAs starting, ending in steps [lo, hi]; those that may run there.
  u64 starts_in(i64 lo, i64 hi) const;
  u64 ends_in(i64 lo, i64 hi) const;
  u64 active_in(i64 lo, i64 hi) const;
  // The CTAs [lo, hi) among which are all those that may run in a span of
  // steps (launch order).
  struct Ids {
    u64 lo, hi;
  };
  Ids running(i64 lo, i64 hi) const { return running(lo, hi, finger_); }
  // (Searched from `finger`, a caller's own last answers.)
  Ids running(i64 lo, i64 hi, std::size_t (&finger)[2]) const;
  // At most the bytes of distinct objects accessed in any g + 1 steps in a
  // span, in parts (l2_backward_rows.cpp): the K/V and dK, dV of the CTAs
  // starting and ending there; every slot's row set a step besides; the
  // objects of the heads running there; their rows between their least and
  // most read offsets.
  u64 edge_bytes(u64 most, i64 lo, i64 hi) const;
  // The same for any one read of a run whose windows are w steps within
  // [lo, hi]: the most CTAs that start (end) within w steps there.
  u64 edge_bytes_within(u64 most, i64 lo, i64 hi, i64 w) const;
  u64 flow_bytes(u64 reads, u64 edges) const;
  u64 head_bytes(Ids ids) const;
  // Head-major order: the same less the K/V and dK, dV of those sequences'
  // CTAs that start after hi, and of the first of them that all end before
  // lo: accessed outside [lo, hi].
  u64 head_bytes_within(Ids ids, i64 lo, i64 hi) const;
  u64 rows_bytes(i64 g, Ids ids) const;
  // Tests: every CTA that may run in steps [lo, hi], found without the slots.
  std::vector<u64> all_running(i64 lo, i64 hi) const;
  // At least the bytes of the objects other than P's and k's rows accessed
  // strictly inside every window of a run (l2_backward_rows.cpp).
  // (near: the K/V re-reads' sweep in launch order, whose windows move
  // little, searches from its last answers.)
  u64 more_between(u64 k, i64 lo, i64 hi, u64 i, u64 below, u64 above, bool one, bool near = false) const;
  // At least: the rows of heads other than k's that the CTAs among `ids`
  // read in [lo, hi] (a CTA's distinct, a step each; per head its CTA that
  // reads the most there).
  u64 other_heads_rows(u64 k, Ids ids, i64 lo, i64 hi) const;
  void settle_rows(u64 k, u64 P, u64 i1, u64 i2, int depth);
  // A run's first bounds (its reads of z bytes each, least_row the least row
  // set of k's head): at least P's rows after its read and k's before its
  // own; at most every slot's row set, K/V and dK, dV each step (no lookups:
  // the reads a step apart or less, most of them, settle so).
  struct FirstBounds {
    u64 lo, hi, reads;      // reads: the row sets read strictly between, at most
    i64 a, g;               // k's read offset, the steps after P
    u64 before0, after0;    // at the first read: k's rows before it, P's after
  };
  FirstBounds first_bounds(u64 k, u64 P, u64 i1, u64 i2, u64 z, u64 least_row) const {
    const i64 a = offset(k), g = a - offset(P);
    const i64 T0 = a + static_cast<i64>(i1), T1 = a + static_cast<i64>(i2);
    const i64 eP = s_[P] + static_cast<i64>(reads_rows(P)) - 1;
    auto after = [&](i64 T) { return std::max<i64>(0, std::min(T - 1, eP) - T + g); };
    auto before = [&](i64 T) { return std::max<i64>(0, std::min(g - 1, T - s_[k])); };
    u64 least = static_cast<u64>(std::min(after(T0) + before(T0), after(T1) + before(T1)));
    for (const i64 T : {eP + 1, eP + g, s_[k] + g - 1})
      if (T > T0 && T < T1) least = std::min(least, static_cast<u64>(after(T) + before(T)));
    const u64 reads = sat_add(sat_mul(static_cast<u64>(g), in_.slots), P < k ? std::min<u64>(in_.slots, k - P - 1) : 0);
    const u64 hi = sat_add(z, sat_mul(sat_add(reads, 1), sat_add(u_max_, sat_add(kv_max_, dk_on_ ? kv_max_ : 0))));
    return {sat_add(z, sat_mul(least, least_row)), hi, reads, a, g, static_cast<u64>(before(T0)), static_cast<u64>(after(T0))};
  }
  void split_or_open(u64 k, u64 P, u64 i1, u64 i2, int depth);
  // A head's runs where readers leave before its last row (xs: its CTAs that
  // read rows, in launch order; run(k, P, from, until) for each).
  template <class Run>
  bool readers_that_leave(const std::vector<u64>& xs, u64 nq, Run&& run, u64 limit);
  void settle_kv(u64 k, u64 P);
  // K/V re-read k's first lower bound (P its previous reader).
  u64 kv_lower(u64 k, u64 P) const;
  // The K/V re-reads of a head's CTAs [a, b) (consecutive, each of its own
  // object, whose previous readers `last` gives) settled together by their
  // first or second lower bounds where they can be; false (nothing done)
  // where not.
  bool settle_kv_head(u64 a, u64 b, const std::vector<u64>& last);
  // A head's K/V re-reads together: the least lower bound, the most and all
  // their bytes, the steps their windows span and every window holds.
  struct KvHead {
    u64 lo = ~u64{0}, z_most = 0, bytes = 0;
    i64 from = std::numeric_limits<i64>::max(), to = std::numeric_limits<i64>::min();
    i64 last_p = std::numeric_limits<i64>::min(), first_k = std::numeric_limits<i64>::max();  // (last_p, first_k)
  };
  bool kv_head_alike(u64 a, u64 b, const std::vector<u64>& last, KvHead& r) const;
  // Counts `n` reads settled in bucket b, or leaves them open; false then.
  // (indifferent: a distance the starts of every row of the run reach, the
  // observer asked only past it.)
  bool settle(u64 lo, u64 hi, u64 n, u64 read, u64 writeback, u64 row, u64 indifferent = 0);
  void check(u64 d, u64 lo, u64 hi, u64 k, u64 row) const;

  // Heads that repeat an earlier one (l2_backward_rows_repeats.cpp): whether
  // every head is alike (the constructor's); the earlier head whose row-set
  // re-reads head h's repeat (none), h kept as a source where none; g's
  // settled reads counted again for h.
  void find_dense();
  u64 source_of(u64 h);
  bool repeats(u64 h, u64 g, Ids env, i64 lo, i64 hi) const;
  void repeat_settled(u64 h, u64 g);
  struct Replay {
    u64 head, row, d;  // a source's open read: its row in the head, its distance
  };
  void repeat_open(Tally& t, ReadObserver& obs, std::vector<Replay>& replays) const;

  // The CTAs that run in steps [lo, hi] in launch order, lo not decreasing
  // from one call to the next (l2_backward_rows_exact.cpp).
  void active(i64 lo, i64 hi, std::vector<u64>& out);
  // The exact distance of the read at q of the object read last at p (z its
  // bytes) over the CTAs `near` that run between: z plus every object
  // accessed between, once.
  u64 exact(At p, At q, u64 z, const std::vector<u64>& near);
  // The exact distances of an open run's reads, one a step, into out
  // (l2_backward_rows_exact.cpp): each access between the two reads is there
  // for a range of the window's end, summed as differences; `near` in launch
  // order.
  void run_exact(const Open& o, const std::vector<u64>& near, std::vector<u64>& out);
  // A fan's reads (Open::fan) likewise, one a CTA: each access between is
  // there for a range of the fan's reads; false where it is short or its rows
  // span more than half the reads' visits to the CTAs beside (read by read
  // then).
  bool fan_member(const Open& fan, const Open& o) const;
  bool fan_exact(const Open& o, const std::vector<u64>& near, std::vector<u64>& out);
  // Staircases (Open::pieces): the open runs and fans after one CTA joined
  // where their reads follow one another; each one's reads' CTAs and steps
  // into stair_k_ and stair_T_; its reads at once, false where its rows span
  // more than half the reads' visits to the CTAs beside (read by read then).
  void join_stairs();
  void stair_reads(const Open& o);
  bool stair_exact(const Open& o, const std::vector<u64>& near, std::vector<u64>& out);
  // Its parts: the run's steps [T0, T1] and its head's last row C, a row's
  // bytes and the last row's more; one head's CTAs in one pass, or any.
  struct RunWindow {
    i64 T0, T1, C, full, last;
  };
  RunWindow window(u64 h, i64 T0, i64 T1) const;
  bool run_one_head(const Open& o, const std::vector<u64>& near, i64 g, i64 T0, i64 T1);
  void run_slides(const Open& o, const std::vector<u64>& near, i64 g, i64 T0, i64 T1);
  void hold(const RunWindow& w, i64 F, i64 L, i64 A, i64 B);
  // d's values over T in [lo, hi] (within the run) raised by `bytes`, as differences.
  static void add(const RunWindow& w, std::vector<i64>& d, i64 lo, i64 hi, i64 bytes) {
    lo = std::max(lo, w.T0);
    hi = std::min(hi, w.T1);
    if (lo > hi) return;
    d[static_cast<u64>(lo - w.T0)] += bytes;
    d[static_cast<u64>(hi - w.T0) + 1] -= bytes;
  }
  // The same over the union of `ranges` (sorted here): an object read by
  // several CTAs counted once for each T.
  static void add_union(const RunWindow& w, std::vector<i64>& d, std::vector<std::pair<i64, i64>>& ranges, i64 bytes);
  // (Fans' and staircases', from fan_kv_ and fan_rows_: each K/V object over
  // the union of its readers' ranges into fan_d_; each row of [lo_row,
  // lo_row + span) its largest bound into fan_c_, painted from the largest down.)
  void add_fan_kv(const RunWindow& w);
  void paint_fan_rows(i64 lo_row, u64 span);
  // Each read's distance: its row set's bytes and fan_d_'s sum up to it.
  void distances(const Open& o, std::vector<u64>& out) const;

  const BackwardLoop& in_;
  const Array<BackwardCta>& ct_;
  const Tally& t_;
  const ReadObserver& obs_;
  u64 n_;
  std::span<const i64> s_;             // starts by CTA
  Array<i64> e_, end_max_;              // ends by CTA; their prefix maximum
  std::span<const i64> ends_;          // ends sorted (the schedule's)
  StepIndex s_ix_, ends_ix_, end_max_ix_;
  // head_bytes_within() (made when first asked): the K/V and dK, dV bytes of
  // CTAs [0, x) in launch order; each sequence's first CTA, its CTAs' count last.
  mutable Array<u64> kd_prefix_;
  mutable std::vector<u64> seq_first_;
  mutable std::vector<u64> head_seen_, head_most_;  // other_heads_rows(): per head key, the last call that counted it, its most
  mutable u64 seen_mark_ = 0;
  // Per window of w steps (w up to 8, made when first asked): for each
  // place of the sorted starts (ends) how many lie within w steps from it,
  // and the most of each block of 64 places.
  struct Within {
    std::vector<std::uint32_t> count, block_most;
  };
  static constexpr i64 within_most = 8;
  using WithinByWidth = std::array<Within, within_most + 1>;
  mutable WithinByWidth starts_within_, ends_within_;
  u64 most_within(std::span<const i64> v, const StepIndex& ix, WithinByWidth& made, i64 lo, i64 hi, i64 w) const;
  mutable std::size_t finger_[2] = {};  // running()'s last answers
  mutable std::size_t shifted_finger_[2] = {};  // repeats()': an earlier head's steps
  mutable std::size_t kv_finger_[4] = {};  // more_between's, for the K/V re-reads
  u64 started_ = 0;             // active(): the CTAs before it passed over,
  std::vector<u64> running_;    // those of them running at the last lo, in launch order
  std::vector<u64> rows_, head_row0_, head_bytes_;  // per head: rows, first row, bytes (prefix)
  std::vector<u64> head_least_;                      // per head: its least row set's bytes
  std::vector<u64> head_begin_, head_end_;           // query-block-major: a head's CTAs
  Array<std::uint32_t> distinct_;                    // query-block-major: first rows' changes so far
  static constexpr u64 block = 64;
  static constexpr i64 none_off = std::numeric_limits<i64>::min();
  Array<i64> off_;                       // query-block-major: read offsets
  std::vector<i64> off_lo_, off_hi_;      // their least and most, a tree over blocks of CTAs
  u64 u_max_ = 0, kv_max_ = 0, kv_min_ = infinite, reached_ = 0;
  u64 one_capacity_ = 0;  // the tally's capacity where it has one (and it is not 0)
  bool dk_on_ = false;
  bool alike_ = false;  // query-block-major, every head key's CTAs and rows head 0's (in.heads_alike)
  bool to_end_ = true;  // every CTA reads its head's rows to the last
  std::vector<u64> rb_, wb_;  // settled bytes by bucket: read, written back
  struct Observed {
    u64 row, d, count;
  };
  std::vector<Observed> observed_;  // settled runs the observer must see
  std::vector<Open> open_;
  u64 open_cost_ = 0;
  u64 tight_tried_ = 0, tight_settled_ = 0;  // settle_rows' third bounds: asked, settled
  u64 fan_reads_ = 0;                         // open reads evaluated as fans
  u64 stair_reads_ = 0;                       // ... as staircases
  std::vector<Open> stair_pieces_;
  std::vector<u64> stair_k_;
  std::vector<i64> stair_T_;
  struct LateRows {
    i64 lo, hi, base;  // rows [lo, hi] read at or after the first read, row base + t at step t
    u64 x;             // by CTA x
  };
  std::vector<LateRows> stair_late_;
  std::vector<i64> stair_from_, stair_at_;
  PaintOnce stair_paint_;
  // Repeated heads: every head's CTAs alike (per_head_ of them); per head the
  // head it repeats (none), and, where evaluated, its settled bytes by bucket,
  // its observations' range in observed_, the most steps between a re-read
  // and its predecessor; heads evaluated by a hash of their surroundings;
  // kv_stride_: the CTAs between one key block's CTAs of two heads.
  bool dense_ = false;
  u64 per_head_ = 0, kv_stride_ = 0, repeated_ = 0, steps_most_ = 0;
  std::vector<u64> from_, head_rb_, head_wb_, obs_lo_, obs_hi_, head_steps_;
  std::vector<std::uint8_t> source_;
  std::unordered_map<u64, std::vector<u64>> by_env_;
  // readers_that_leave()'s scratch: the readers (places in xs) by the row
  // after their last; the current row's, in order; each one's predecessor and
  // the row its run began.
  std::vector<u64> leaving_at_, leaving_, readers_, pred_, from_row_;
  std::vector<u64> first_kv_reads_;  // CTAs whose K/V read is a first access
  // exact()'s scratch
  struct Interval {
    u64 lo, hi;  // global rows [lo, hi]
  };
  std::vector<Interval> iv_, stretches_;
  std::vector<std::pair<u64, u64>> kvs_;
  std::vector<u64> near_;
  std::vector<std::int64_t> cover_;
  // run_exact()'s scratch: per CTA beside the run, the ranges its accesses are between for
  struct Slide {
    i64 s, last;          // its row reads' steps [s, last] (last < s: none)
    i64 lag, lead;        // at window end T its row reads between are at steps [T - lag, T - lead]
    i64 kv_in, kv_out;    // its K/V read lies between for T in [kv_in, kv_out]
    i64 dk_in, dk_out;    // its dK, dV write likewise
    i64 base_i;           // row read at step t: base_i + t
    u64 kv;               // its K/V object
    u64 kv_bytes, dk_bytes;
    u64 head;
  };
  std::vector<Slide, NoInit<Slide>> slides_;  // (written before read)
  std::vector<i64> step_d_, range_d_;      // the bytes between: their changes by step, and those changes'
  struct ByHead {
    u64 head;
    i64 first;  // its first row
    u32 slide;
  };
  std::vector<ByHead> by_head_;                // the CTAs with rows between, by head and first row
  struct Held {
    i64 lo, hi, M;  // offsets [lo, hi] held by CTAs of lesser first rows, to row M at most
  };
  std::vector<Held> held_, pieces_;            // by lo; a CTA's replacements
  static constexpr u32 none32 = ~u32{0};
  std::vector<u32> kv_reader_;                  // per K/V object: its last reader between (none32)
  std::vector<u32> kv_next_;                    // per CTA: the next reader of its K/V
  std::vector<u64> kv_objects_;                 // the K/V objects between
  std::vector<std::pair<i64, i64>> kv_ranges_;  // one object's readers' ranges of T
  std::vector<u64> slid_;                      // the run's distances
  // fan_exact()'s scratch
  struct FanKv {
    u64 object;
    i64 lo, hi;  // between for the fan's reads [lo, hi]
    i64 bytes;
  };
  struct FanRows {
    i64 lo, hi, c;  // rows [lo, hi], between for the reads j <= row + c
  };
  std::vector<FanKv> fan_kv_;
  std::vector<FanRows> fan_rows_;
  std::vector<i64> fan_d_, fan_c_;
  PaintOnce fan_paint_;
  static constexpr i64 unpainted = std::numeric_limits<i64>::min();
};

}  // namespace hbmscope::l2::rows
