#pragma once
// The chains of the forward pass (docs/l2-chains.md): where
// every CTA reads key blocks [0, e) and e does not decrease along the CTAs of
// a kv pair in launch order, CTA i re-reads the blocks its pair's previous
// CTA P read, each g steps after it, and a block CTA k reads is next read by
// its pair's next CTA, G steps later. In query-block-major order that holds
// within a head (causal masks; ragged batches without a mask; P = i - 1),
// and a head's other blocks are read first in its head (their previous
// access is the last CTA of the pair's previous head); in head-major order
// along the whole pair (the other blocks are first accesses). The schedule
// (ChainGrid, l2_flash_chain_grid.cpp), exact distances
// (l2_flash_chain_reads.cpp), bounds that count a CTA's re-reads without
// evaluating them (l2_flash_chain_bounds.hpp, .cpp) and the run that chooses
// (l2_flash_chains.cpp). Internal to src/core.
#include <algorithm>
#include <array>
#include <cstdint>
#include <deque>
#include <limits>
#include <memory>
#include <utility>
#include <vector>


#include "big_array.hpp"
#include "l2_flash.hpp"
#include "l2_tally.hpp"

namespace hbmscope::l2::chains {

using i64 = std::int64_t;
using u64 = std::uint64_t;
inline constexpr u64 no_cta = ~u64{0};
inline constexpr i64 never = std::numeric_limits<i64>::min() / 4;


// The first place j in [lo, hi) that is not `before` (every place before it is).
template <class Before>
u64 first_not(u64 lo, u64 hi, Before before) {
  while (lo < hi) {
    const u64 mid = lo + (hi - lo) / 2;
    if (before(mid)) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

// The same place, searched from `at` (in [lo, hi]) where it was near the
// answer last time: back or forward a place, then in steps that double,
// then by bisection (forward, a few places one at a time first).
template <class Before>
__attribute__((always_inline)) inline u64 first_not_from(u64 at, u64 lo, u64 hi, Before before) {
  if (at > lo && !before(at - 1)) {
    u64 top = at - 1, d = 1;  // (top: not before)
    while (top > lo + d && !before(top - d)) top -= d, d *= 2;
    return first_not(top > lo + d ? top - d + 1 : lo, top, before);
  }
  for (int near = 0; near < 8; ++near, ++at)
    if (at == hi || !before(at)) return at;
  lo = at;
  for (u64 d = 2; at < hi && before(at); d *= 2) lo = at + 1, at = std::min(hi, at + d);
  return first_not(lo, at, before);
}

// A shortcut that is tried less often where it fails in a row: after the
// k-th failure in a row the next 2^k - 1 calls (at most 255) pass it over.
class BackOff {
 public:
  bool pass_over() {  // this call does not try it
    if (skip_ == 0) return false;
    --skip_;
    return true;
  }
  void tried(bool worked) {
    if (worked) {
      wait_ = 0;
      return;
    }
    skip_ = wait_;
    wait_ = std::min<u64>(2 * wait_ + 1, 255);
  }

 private:
  u64 wait_ = 0, skip_ = 0;
};

// k / d for every k below 2^23 by one multiply: m = ceil(2^(23 + l) / d)
// with 2^l >= d (docs/l2-chains.md, "Cost": heads by arithmetic).
class Divider {
 public:
  Divider() = default;
  explicit Divider(u64 d) {
    u64 l = 0;
    while ((u64{1} << l) < d) ++l;
    shift_ = chain_id_bits + l;
    m_ = ((u64{1} << shift_) + d - 1) / d;
  }
  u64 operator()(u64 k) const { return (k * m_) >> shift_; }

 private:
  u64 m_ = 1, shift_ = 0;
};

// The forward grid scheduled: per CTA in launch order.
struct ChainGrid {
  ChainGrid(const FlashGrid& grid, const L2SimConfig& c);

  // The next head's first CTA reading block y (k: a head's last CTA with a
  // next head in its pair; query-block-major order).
  u64 next_reader(u64 k, u64 y) const;
  // The CTA of i's pair before it (its blocks' previous reader: none for a
  // head's first CTA in query-block-major order), and the next reader of a
  // regular CTA k's blocks, G steps later.
  u64 prev(u64 i) const {
    if (hm) return prv[i] == none32 ? no_cta : prv[i];
    return first_of_head(i) < i ? i - 1 : no_cta;
  }
  u64 next(u64 k) const { return hm ? (nxt[k] == none32 ? no_cta : nxt[k]) : k + 1; }
  // Whether k is the last CTA of its head (query-block-major) or pair
  // (head-major) that reads: none reads its blocks after it in its chain.
  bool last_in_chain(u64 k) const { return hm ? nxt[k] == none32 : k + 1 == n || head_ends_at(k); }
  // A head's last CTA whose pair's next head follows it: that head's first (else none).
  u64 next_head(u64 k) const {
    return !hm && e[k] > 0 && k + 1 < n && head_ends_at(k) && pair_of(k + 1) == pair_of(k) ? k + 1 : no_cta;
  }
  i64 f(u64 k) const { return s[k] + static_cast<i64>(std::max<std::uint32_t>(e[k], 1)) - 1; }
  // The last step of the j-th CTA to finish (computed), and the first place
  // in [lo, hi) of finish order whose last step is at least `step` (by: past it).
  i64 fin(u64 j) const { return f(fo[j]); }
  u64 fin_bound(i64 step, bool by, u64 lo, u64 hi) const {
    return first_not(lo, hi, [&](u64 j) { return by ? fin(j) <= step : fin(j) < step; });
  }
  // A regular CTA's (next(k) reads all its blocks) last K/V step + G; never for the others:
  // the next reader's start and k's blocks, computed.
  i64 R(u64 k) const {
    if (hm) return e[k] > 0 && nxt[k] != none32 ? s[nxt[k]] + static_cast<i64>(e[k]) - 1 : never;
    return e[k] > 0 && k + 1 < n && !head_ends_at(k) ? s[k + 1] + static_cast<i64>(e[k]) - 1 : never;
  }
  i64 gap(u64 k) const { return R(k) - (s[k] + static_cast<i64>(e[k]) - 1); }
  u64 nkb(u64 k) const { return seq_nkb[dense ? 0 : seq[k]]; }
  u64 zfull(u64 k) const { return seq_zfull[dense ? 0 : seq[k]]; }
  u64 zlast(u64 k) const { return seq_zlast[dense ? 0 : seq[k]]; }
  u64 qb(u64 k) const { return q_row * (rows.empty() ? rows0 : rows[k]); }
  u64 ob(u64 k) const { return o_row * (rows.empty() ? rows0 : rows[k]); }
  // The first CTA of k's head in launch order (head-major: 0, one chain).
  u64 first_of_head(u64 k) const { return hm ? 0 : dense ? head_of(k) * seq_q_blocks : head_first[k]; }
  // Each CTA's (sequence, head) and (sequence, kv head).
  u64 head_of(u64 k) const { return by_arithmetic ? per_head(k) : head[k]; }
  u64 pair_of(u64 k) const { return by_arithmetic ? head_pair[per_head(k)] : pair[k]; }
  // Whether CTA k + 1 (there is one) is of another head than k.
  bool head_ends_at(u64 k) const { return by_arithmetic ? k + 1 == (per_head(k) + 1) * seq_q_blocks : head[k + 1] != head[k]; }
  // Q bytes of CTAs [0, k) and O bytes of the first k in finish order (with --l2-qo allocate).
  u64 q_prefix(u64 k) const { return rows.empty() ? k * q_row * rows0 : qpre[k]; }
  u64 o_prefix(u64 k) const { return rows.empty() ? k * o_row * rows0 : opre[k]; }
  u64 kv_bytes(u64 k, u64 y) const { return y + 1 == nkb(k) ? zlast(k) : zfull(k); }
  bool reads_partial(u64 k) const { return e[k] == nkb(k) && zlast(k) != zfull(k); }
  // visit(k, R(k)) for every CTA k < up_to that is not its head's last and
  // whose R is at least thr, head by head down (a head's prefix maximum ends
  // its scan, the overall one the heads'; in query-block-major order R rises
  // along a head's CTAs but its last: the first below thr ends the scan).
  template <class F>
  void regular_from(u64 up_to, i64 thr, F visit) const {
    for (u64 k = up_to; k > 0;) {
      const u64 hf = first_of_head(k - 1);
      if (hm) {
        for (u64 j = k; j-- > hf && PMh[j] >= thr;) {
          const i64 r = R(j);
          if (r >= thr) visit(j, r);
        }
      } else if (u64 j = k - 1; j > hf || (j == hf && !last_in_chain(j))) {
        if (last_in_chain(j)) --j;  // (the head's last: none reads its blocks in the head)
        for (i64 next_s = s[j + 1];; next_s = s[j--]) {
          const i64 r = next_s + static_cast<i64>(e[j]) - 1;
          if (e[j] == 0 || r < thr) break;
          visit(j, r);
          if (j == hf) break;
        }
      }
      k = hf;
      if (k == 0 || PM[head_of(k - 1)] < thr) return;
    }
  }

  static constexpr std::uint32_t none32 = ~std::uint32_t{0};
  bool qo = false, dense = false, hm = false;  // hm: head-major order
  u64 n = 0, slots = 0, steps = 0;
  // Per CTA, in 4 bytes where a value allows (ids below 2^23, key blocks and
  // rows below 2^32), and R; what follows from them (last steps, a head's
  // next head, tile bytes; a dense batch's heads' first CTAs, rows where all
  // are alike) is computed.
  Array<std::uint32_t> e;
  Array<std::uint32_t> rows;              // empty where every CTA has rows0 rows
  Array<std::uint32_t> head_first;        // query-block-major, a ragged batch: each CTA's head's first
  Array<std::uint32_t> head, pair;        // (sequence, head) and (sequence, kv head), but by arithmetic
  bool by_arithmetic = false;             // a dense batch in query-block-major order: head k / seq_q_blocks
  Divider per_head;                       // (then) that division
  std::vector<std::uint32_t> head_pair;   // (then) each head's pair
  Array<std::uint32_t> seq;               // a ragged batch's sequence (a dense one's are alike)
  Array<std::uint32_t> prv, nxt;          // head-major: the pair's previous and next CTA that read
  Array<i64> s;                           // first step
  Array<i64> PMh;                         // head-major: prefix maximum of R over all CTAs
  std::vector<i64> PM;                    // per (sequence, head), query-block-major: the largest R up to its last CTA
  std::vector<u64> sp;                    // the CTAs that read and are not regular (a head's last), in launch order
  std::vector<i64> sp_s, spm;             // their starts, prefix maximum of their last steps
  Array<std::uint32_t> fo;                // CTAs by (last step, id)
  Array<std::uint32_t> slot;              // the slot each CTA runs on
  std::vector<u64> qpre, opre;            // q_prefix and o_prefix where rows differ
  std::vector<u64> seq_nkb, seq_zfull, seq_zlast;  // per sequence: key blocks, a full and the last block's bytes
  u64 q_row = 0, o_row = 0;                        // Q and O bytes a row
  u64 seq_ctas = 0, kv_heads = 0;                  // a dense batch: CTAs a sequence, pairs a sequence
  u64 seq_q_blocks = 0, rows0 = 0;                 // a dense batch: query blocks a sequence; rows where all alike
  u64 group = 1;                                   // heads a kv head
  u64 longest = 1;                                 // the most steps a CTA runs
  // Per pair: one past its last CTA, the largest last step of the CTAs before
  // it, the bytes of every block its heads read.
  std::vector<u64> pair_end;
  std::vector<i64> fmax_before;
  std::vector<u64> zpair;
  std::vector<u64> first_reader;  // a dense batch: per block, its first reader's place in a head
};

// A sum of ramps and boxes over steps [lo, hi] (a CTA's re-reads, a
// profile's stretch), as second differences: d2[x] at step lo + x, a box's
// edge two of them. (Without branches: a change at or before lo goes to the
// value and slope there, v0 and s0; one past hi to index hi - lo + 1 or + 2,
// which a pass never reads.) Out takes each change: into an array over the
// steps (SlopeArray) or summed per cell of steps (SlopeCells).
template <class Out>
class BasicRamps {
 public:
  BasicRamps(Out out, i64 lo, i64 hi) : out_(out), lo_(lo), hi_(hi), last_(static_cast<u64>(hi - lo)) {}
  void range(i64 a, i64 b, i64 w) {  // +w at every step of [a, b]
    if (a > b || b < lo_ || a > hi_) return;
    step(a, w), step(b + 1, -w);
  }
  void trapezoid(i64 a, i64 b, i64 M, i64 w) {  // range(t, t + M - 1, w) for t in [a, b]
    if (a > b || M <= 0 || b + M - 1 < lo_ || a > hi_) return;
    // (A rise over by lo is its plateau there: callers place the latest
    // start first, so this branch changes once a call.)
    if (a + M <= lo_) v0 += w * M;
    else at(a, w), at(a + M, -w);
    at(b + 1, -w), at(b + M + 1, w);
  }
  i64 v0 = 0, s0 = 0;

 private:
  void at(i64 pos, i64 w) {  // + w (x - pos + 1) from pos on
    const i64 x = pos - lo_;
    const i64 early = x <= 0 ? w : 0;
    v0 += early * (1 - x);
    s0 += early;
    out_.add(std::min(static_cast<u64>(x - 1), last_) + 1, w);
  }
  void step(i64 pos, i64 w) {  // + w from pos on
    const i64 x = pos - lo_;
    v0 += x <= 0 ? w : 0;
    const u64 j = std::min(static_cast<u64>(x - 1), last_) + 1;
    const i64 v = x <= 0 ? 0 : w;  // (a slope of w at x and -w after)
    out_.add(j, v);
    out_.add(j + 1, -v);
  }
  Out out_;
  i64 lo_, hi_;
  u64 last_;
};

struct SlopeArray {
  SlopeArray(i64* to) : d2(to) {}  // NOLINT(google-explicit-constructor): Ramps(d2, lo, hi)
  void add(u64 j, i64 w) { d2[j] += w; }
  i64* d2;
};
using Ramps = BasicRamps<SlopeArray>;

// The slope changes at steps [1, steps) summed per cell of 16 steps (cell c:
// [16 c + 1, 16 c + 16]), with their sums weighted by the steps to the cell's
// end and their negative and positive parts: the value at each cell's end,
// and a lower bound of the values within, without a pass over the steps
// (docs/l2-chains.md, "Counting without evaluating": long_lo).
struct SlopeCell {
  i64 sum = 0, weighted = 0, neg = 0, pos = 0;
};
struct SlopeCells {
  static constexpr u64 width = 16;
  void add(u64 j, i64 w) {
    if (j >= steps) return;  // (past the last step)
    const u64 at = (j - 1) / width;
    SlopeCell& c = cells[at];
    c.sum += w;
    c.weighted += w * static_cast<i64>(at * width + width + 1 - j);
    c.neg += std::min<i64>(w, 0), c.pos += std::max<i64>(w, 0);
  }
  SlopeCell* cells;
  u64 steps;
};
// At most the least value at steps [0, steps) of a sum of ramps whose
// changes went to cells (v0, s0: its value and slope at step 0); the cells
// left zero, each cell's end value (steps 16 k + 16, or the last) to ends.
i64 least_of_cells(SlopeCell* cells, u64 steps, i64 v0, i64 s0, i64* ends = nullptr);

// Reads of several sizes, each size's runs counted in its own batch.
class Batches {
 public:
  explicit Batches(const Tally& t) : t_(t) {}
  Tally::Batch& of(u64 bytes) {
    for (auto& [b, batch] : v_)
      if (b == bytes) return batch;
    v_.emplace_back(bytes, Tally::Batch(t_));
    return v_.back().second;
  }
  void flush(Tally& t) {
    for (auto& [b, batch] : v_) batch.flush(t, b);
  }
  // The reads counted so far, by size, taken out (these start again), and
  // such reads added.
  using Counts = std::vector<std::pair<u64, Tally::Batch>>;
  Counts take() {
    Counts r;
    for (auto& [b, batch] : v_)
      if (!batch.empty()) r.emplace_back(b, batch), batch.clear();
    return r;
  }
  void add(const Counts& counts) {
    for (const auto& [b, batch] : counts) of(b).merge(batch);
  }

 private:
  const Tally& t_;
  std::deque<std::pair<u64, Tally::Batch>> v_;  // references stay valid as it grows
};

// Heads that repeat an earlier one (l2_flash_chain_repeats.cpp): in a dense
// batch in query-block-major order, where a head and the head before it
// started as an earlier head and its predecessor did (every start the same
// relative to the head's first, in both), and no older head runs from the
// previous head's last CTA's start, a CTA of the head whose reads end before
// the head's last CTA starts has the distances of its place in the earlier
// head: its re-reads' and its first reads' where the two heads share a kv
// pair with their predecessors alike, its re-reads' where the previous
// head's last CTA's blocks are not read again by the head within them.
struct HeadRepeats {
  u64 per_head = 0;                      // CTAs a head (0: none repeats)
  std::vector<std::uint32_t> from;       // per head: the earlier head it repeats (none32: none)
  std::vector<std::uint32_t> lo, upto;   // per head: its CTAs at places [lo, upto) repeat (and the source's)
  std::vector<std::uint32_t> rupto;      // per head: its re-reads repeat at places [lo, rupto) (upto, or the whole head)
  std::vector<std::uint32_t> source_end; // per head: later heads' re-reads repeat its places below it
  std::vector<std::uint8_t> full;        // per head: its first reads repeat too (places [1, upto))
  std::vector<std::uint8_t> source;      // per head: a later head repeats it
  std::vector<std::uint8_t> source_full; // per head: a later head repeats its first reads
  std::vector<std::uint32_t> kept;       // per head whose first reads others repeat: its rank among them
  std::vector<std::uint32_t> source_rank;  // per head that others repeat: its rank among them
  u64 sources = 0;                         // heads that others repeat
  std::vector<u64> first_at;             // per place: its first reads' offset among a head's ([per_head]: all)
  Divider head;                          // the grid's: each CTA's head
  // Where CTA i's first reads are kept among the heads whose first reads others repeat.
  u64 first_kept(u64 i) const {
    const u64 h = head(i);
    return kept[h] * first_at[per_head] + first_at[i - h * per_head];
  }
  // Where a source's CTA i is kept among the sources' CTAs (no_cta: not a source).
  u64 source_kept(u64 i) const {
    if (per_head == 0) return no_cta;
    const u64 h = head(i);
    return source_rank[h] == ChainGrid::none32 ? no_cta : source_rank[h] * per_head + (i - h * per_head);
  }
  // The CTA whose re-reads CTA i's repeat (no_cta: none).
  __attribute__((always_inline)) u64 of(u64 i) const {  // (once a CTA)
    if (per_head == 0) return no_cta;
    const u64 h = head(i), q = i - h * per_head;
    return from[h] == ChainGrid::none32 || q < lo[h] || q >= rupto[h] ? no_cta : i - (h - from[h]) * per_head;
  }
  // The CTA whose first reads CTA i's repeat (no_cta: none).
  u64 first_of(u64 i) const {
    if (per_head == 0) return no_cta;
    const u64 h = head(i), q = i - h * per_head;
    return full[h] == 0 || q == 0 || q >= upto[h] ? no_cta : i - (h - from[h]) * per_head;
  }
  // Whether a later CTA's re-reads (first reads) repeat CTA i's.
  bool source_of_any(u64 i) const { return in(source, source_end, i); }
  bool first_source_of_any(u64 i) const { return in(source_full, upto, i); }

 private:
  bool in(const std::vector<std::uint8_t>& v, const std::vector<std::uint32_t>& end, u64 i) const {
    if (per_head == 0) return false;
    const u64 h = head(i), q = i - h * per_head;
    return v[h] != 0 && q != 0 && q < end[h];
  }
};
HeadRepeats find_repeats(const ChainGrid& c);

// Exact distances (l2_flash_chain_reads.cpp).
class ChainReads {
 public:
  ChainReads(const ChainGrid& g, const Tally& t);
  // The read at step T by CTA i whose predecessor is CTA P's access g steps
  // earlier: the bytes of the other K/V objects accessed in between (the Q
  // and O tiles apart).
  i64 between(u64 i, u64 P, i64 T, i64 g) const;
  // CTA i's re-reads of blocks [0, m) (P: their previous reader) into the
  // batches; returns their largest distance. most = false: where they cannot
  // hold the largest distance of all (a bound below one found), the reads of
  // full blocks at one capacity are counted without it (0 for them); so too,
  // with most, where a head's middle shows it below `floor` (a distance found).
  u64 chain(u64 i, u64 P, u64 m, Batches& b, bool most = true, u64 floor = 0);
  // At most the smallest distance of those re-reads: exact over the regular
  // neighbours whose gap is long next to g (G > g / 8) alone (in head-major
  // order with GQA, a pair's first CTA beside the group's other heads). From
  // cells of steps first; step by step only where that is below `need`.
  u64 long_lo(u64 i, u64 P, u64 m, u64 need = 0);
  // At most long_lo of each of the CTAs (in launch order, each re-reading
  // its predecessor's blocks), over the union of their reads, from cells.
  u64 long_lo_run(const std::vector<u64>& ctas);
  // (The tests': long_lo's sum less the readers' own block at each step of
  // the union of their reads, for a run or a single CTA; every: over every
  // regular neighbour, for a single CTA exact but for the heads' last CTAs
  // and the Q and O tiles, which only add.)
  std::vector<i64> long_values(const std::vector<u64>& ctas, bool every = false) const;

  // A head's middle (l2_flash_chain_middle.cpp): in query-block-major order,
  // a dense batch of whole blocks and one capacity, where every neighbour
  // of CTA i's re-reads is on a side of i known without i (the heads'
  // last CTAs accessed then are earlier ones whose blocks are next read
  // after i), a re-read's distance is one function of its step and g but
  // at i's first and last read. chain() counts such CTAs from profiles of
  // that function, each built for a stretch of steps and one g and shared
  // by the head's CTAs of that g whose reads lie in it.
  bool in_middle(u64 i, u64 m) const;
  void profiles(bool on) { profiles_on_ = on; }  // (off: every CTA evaluated, as the tests' reference)
  // The fewest steps a profile is built ahead of the reads it is built for
  // (2,048; the tests' short ones are extended and dropped more often).
  void profile_ahead(i64 steps) { ahead_ = steps; }
  struct ProfileStats {
    u64 ctas = 0, hits = 0, between = 0;  // counted from profiles; from one of their g; between two others'
    u64 builds = 0, steps = 0;            // profiles built or extended, and their steps
  };
  const ProfileStats& profile_stats() const { return stats_; }

 private:
  template <bool Lo>
  u64 evaluate(u64 i, u64 P, u64 m, Batches* batches, bool most = true);
  struct Readers {  // one reader, or a run of them (long_lo_run)
    i64 Tlo, Thi, g;  // reads at steps [Tlo, Thi]; the least gap
    u64 P, first, last;  // the latest predecessor; the first and last reader
    static Readers of(const ChainGrid& c, u64 i, u64 P, u64 m) {
      return {c.s[i], c.s[i] + static_cast<i64>(m) - 1, c.s[i] - c.s[P], P, i, i};
    }
  };
  Readers readers_of(const std::vector<u64>& ctas, u64* own) const;  // (own: their least block, where asked)
  u64 long_lo_cells(const Readers& rd, u64 own);                      // long_lo's bound from cells alone
  template <bool Lo, class R>
  void place_regular(const Readers& rd, R& ramps) const;
  u64 middle(u64 i, u64 m, Batches& b, bool most, u64 floor);
  // The distance, less the read's own block, at steps [A, B] for one g and
  // the CTAs of one head (hf: its first): each step's, and how many steps
  // before each are at most the capacity.
  struct Profile {
    i64 g = 0, A = 0, B = -1;
    u64 hf = 0;
    Array<i64> phi;
    Array<std::uint32_t> le;  // le[x]: steps of [A, A + x) whose phi is at most single_ less a block
    u64 used = 0;             // (least recently used: replaced)
    // The largest phi of steps [x0, x1) (from A), from the largest of each
    // block of 64 steps, kept as they are built: top[b] holds steps
    // [64 b, 64 b + 64) (the last block's so far). Drops are of whole blocks.
    static constexpr std::size_t block = 64;
    i64 largest(std::size_t x0, std::size_t x1) const;
    Array<i64> top;
  };
  void build(Profile& p, i64 A, i64 B);  // appends steps [A, B] (A: one past its end)
  const ChainGrid& c_;
  u64 single_ = 0;       // the tally's one capacity, if it has one (and it is not 0)
  std::vector<i64> d2_;  // slope changes over one CTA's steps
  std::vector<SlopeCell> cells_;  // (long_lo's, zero between calls)
  bool middle_ok_ = false, profiles_on_ = true;
  std::array<Profile, 32> profiles_;
  u64 clock_ = 0;
  i64 ahead_ = 2048;
  std::vector<i64> pd2_;  // a profile's slope changes (zero between builds)
  ProfileStats stats_;
};

}  // namespace hbmscope::l2::chains
