// The chains of the forward pass (docs/l2-chains.md), in
// either launch order: the run that counts a CTA's re-reads from bounds
// where they fall in one bucket below the largest distance, and evaluates
// them exactly elsewhere (the schedule: l2_flash_chain_grid.cpp). Exact,
// and in long causal heads O(log) for most CTAs.
#include "l2_flash_chain_bounds.hpp"

#include <algorithm>
#include <array>
#include <limits>
#include <unordered_map>

#include "hbmscope/checked.hpp"
#include "hbmscope/error.hpp"

namespace hbmscope::l2 {
namespace chains {
namespace {

// The bytes of the Q and O tiles accessed in (p, q) = ((T - g, P, 1), (T, i, 1))
// (Q tiles at (start, id, 0), O tiles at (last step, id, 2)), for reads whose
// T and T - g do not decrease from call to call (a head's first reads):
// pointers that only move up.
class QoWalk {
 public:
  explicit QoWalk(const ChainGrid& c) : c_(c) {}
  void reset() { fresh_ = true; }
  u64 operator()(u64 i, u64 P, i64 T, i64 g) {
    if (fresh_) {  // a new head: the pointers start where a search puts them
      fresh_ = false;
      for (u64& q : q_) q = static_cast<u64>(std::lower_bound(c_.s.begin(), c_.s.end(), T - g) - c_.s.begin());
      o_.fill(c_.fin_bound(T - g, false, 0, c_.n));
    }
    auto first_at = [&](u64& at, i64 step) {
      while (at < c_.n && c_.s[at] < step) ++at;
      return at;
    };
    auto clamp = [](u64 v, u64 a, u64 b) { return std::min(std::max(v, a), b); };
    const u64 a0 = first_at(q_[0], T - g), a1 = first_at(q_[1], T - g + 1);
    const u64 b0 = first_at(q_[2], T), b1 = first_at(q_[3], T + 1);
    const u64 qlo = clamp(P + 1, a0, a1), qhi = clamp(i + 1, b0, b1);
    u64 sum = qhi > qlo ? c_.q_prefix(qhi) - c_.q_prefix(qlo) : 0;
    auto by_finish = [&](u64& at, i64 step, u64 id) {
      for (; at < c_.n; ++at)
        if (const i64 f = c_.fin(at); f > step || (f == step && c_.fo[at] >= id)) break;
      return at;
    };
    const u64 olo = by_finish(o_[0], T - g, P), ohi = by_finish(o_[1], T, i);
    if (ohi > olo) sum += c_.o_prefix(ohi) - c_.o_prefix(olo);
    return sum;
  }

 private:
  const ChainGrid& c_;
  std::array<u64, 4> q_{};
  std::array<u64, 2> o_{};
  bool fresh_ = true;
};

void run(const ChainGrid& c, Tally& t) {
  Batches batches(t);
  ChainReads reads(c, t);
  const std::vector<std::uint64_t>& caps = t.capacities();
  auto bucket = [&, one = caps.size() == 1](u64 d) -> std::size_t {  // (one capacity, a report row's: a comparison)
    if (one) return d > caps[0];
    return static_cast<std::size_t>(std::lower_bound(caps.begin(), caps.end(), d) - caps.begin());
  };
  // First reads: in query-block-major order exact (their largest distance
  // bounds the largest from below), or counted where bounds put one in a
  // bucket below the largest distance found; in head-major order, first accesses.
  u64 floor_of_max = 0;
  // (A CTA that repeats an earlier one's distances takes its first reads'
  // buckets, and below its re-reads' bounds and evaluated counts.)
  const HeadRepeats repeats = find_repeats(c);
  u64 sources = 0;
  for (std::uint8_t v : repeats.source_full) sources += v;
  // (These and the kept bounds below are the run's largest arrays: mapped
  // with their pages, as the grid's.)
  Array<std::uint16_t> first_buckets(caps.size() < 0xffff && repeats.per_head > 0 ? sources * repeats.first_at.back() : 0, 0);
  QoWalk walk(c);
  u64 walking = no_cta;  // the L whose head the walk follows
  // (Every Q tile is a first access, every O tile written once: added at the end.)
  u64 q_read = 0, o_written = 0;
  if (c.rows.empty()) {
    const u64 rows = checked_mul(c.n, c.rows0, "L2 simulation bytes");
    q_read = checked_mul(rows, c.q_row, "L2 simulation bytes");
    o_written = checked_mul(rows, c.o_row, "L2 simulation bytes");
  } else {
    for (u64 i = 0; i < c.n; ++i) {
      q_read = checked_add(q_read, c.qb(i), "L2 simulation bytes");
      o_written = checked_add(o_written, c.ob(i), "L2 simulation bytes");
    }
  }
  u64 hf_at = no_cta, L = no_cta;  // i's head's first CTA (the last seen), and the pair's previous head's last CTA
  // (What a head's first reads share: its pair, the bytes of the pair's
  // blocks, the last step before the pair's CTAs and the first after them,
  // L's last step; and where the last search over L's head ended.)
  u64 pi = 0, zpair = 0, hint = 0;
  i64 before_pair = 0, after_pair = 0, fL = 0;
  for (u64 i = 0; i < c.n; ++i) {
    if (c.e[i] == 0) continue;
    if (c.hm) {
      for (u64 y = c.prev(i) == no_cta ? 0 : c.e[c.prev(i)]; y < c.e[i]; ++y) t.reads(infinite, 0, 1, c.kv_bytes(i, y));
      continue;
    }
    const u64 hf = c.first_of_head(i);
    const u64 m = hf == i ? 0 : c.e[i - 1];
    if (hf != hf_at) {
      hf_at = hf, L = hf > 0 && c.next_head(hf - 1) == hf ? hf - 1 : no_cta;
      if (L != no_cta) {
        pi = c.pair_of(i), zpair = c.zpair[pi], hint = L;
        before_pair = c.fmax_before[pi];
        after_pair = c.pair_end[pi] == c.n ? std::numeric_limits<i64>::max() : c.s[c.pair_end[pi]];
        fL = c.f(L);
      }
    }
    std::uint16_t* kept = nullptr;
    if (L != no_cta && !first_buckets.empty()) {
      if (const u64 from = repeats.first_of(i); from != no_cta) {
        const std::uint16_t* k = &first_buckets[repeats.first_kept(from)];
        for (u64 y = m; y < c.e[i]; ++y) t.read_in_bucket(k[y - m], c.kv_bytes(i, y));
        continue;
      }
      if (repeats.first_source_of_any(i)) kept = &first_buckets[repeats.first_kept(i)];
    }
    for (u64 y = m; y < c.e[i]; ++y) {
      const u64 z = c.kv_bytes(i, y);
      if (L == no_cta) {
        t.reads(infinite, 0, 1, z);
        continue;
      }
      const i64 T = c.s[i] + static_cast<i64>(y), p = c.s[L] + static_cast<i64>(y), g = c.s[i] - c.s[L];
      if (c.qo && walking != L) {
        walk.reset();
        walking = L;
      }
      u64 d = c.qo ? walk(i, L, T, g) : 0;  // the Q and O tiles in between
      // Started after L's last step, with no other pair's CTA running from p
      // to q: every other block of the pair is accessed in between.
      const bool alone = before_pair <= p && after_pair >= T;
      if (c.s[i] > fL && alone) {
        d += zpair;
      } else {
        // Alone, only the pair's other blocks can be accessed in between (at
        // most). At least: L's blocks after y read before T, joined by those
        // of its head's earlier CTAs whose reads in between begin at most a
        // block above them (a run [y + 1, top]: each a bisection), and CTA
        // i - 1's from the one it read at p's step on (below y).
        if (alone) {
          const i64 eL = static_cast<i64>(c.e[L]), Y = static_cast<i64>(y);
          i64 top = std::min<i64>(Y + g - 1, eL - 1);
          const i64 below = i == hf ? 0 : std::max<i64>(0, static_cast<i64>(c.e[i - 1]) - std::max<i64>(0, p - c.s[i - 1]));
          const u64 zmin = std::min(c.zfull(i), c.zlast(i));
          auto lower = [&] { return d + z + zmin * static_cast<u64>(std::max<i64>(0, top - Y) + below); };
          const u64 hi = d + zpair;
          u64 lo = lower();
          const u64 hL = c.first_of_head(L);
          for (u64 k = L, jumps = 0; hi < floor_of_max && bucket(lo) != bucket(hi) && top < eL - 1 && jumps < 64; ++jumps) {
            // (The first start at least p - top among [hL, k): near the last
            // read's, as p - top falls slowly from read to read.)
            const i64 v = p - top;
            const u64 k2 = first_not_from(std::min(hint, k), hL, k, [&](u64 j) { return c.s[j] < v; });
            if (jumps == 0) hint = k2;
            const i64 t2 = std::min<i64>(static_cast<i64>(c.e[k2]) - 1, T - 1 - c.s[k2]);
            if (k2 == k || t2 <= top) break;
            top = t2, k = k2, lo = lower();
          }
          if (hi < floor_of_max && bucket(lo) == bucket(hi)) {
            t.read_in_bucket(bucket(lo), z);
            if (kept != nullptr) kept[y - m] = static_cast<std::uint16_t>(bucket(lo));
            continue;
          }
        }
        d += z + static_cast<u64>(reads.between(i, L, T, g));
      }
      floor_of_max = std::max(floor_of_max, d);
      batches.of(z).reads(d, 0, 1);
      if (kept != nullptr) kept[y - m] = static_cast<std::uint16_t>(bucket(d));
    }
  }
  t.read(infinite, q_read);
  t.write(o_written);
  // Re-reads, in one pass: bounds first; where they put all of a CTA's in
  // one bucket below the largest distance found so far, counted; where they
  // straddle a capacity, evaluated; the rest (those that may hold the
  // largest distance) kept for the end.
  auto rereads = [&](u64 i) -> std::pair<u64, u64> {  // (P, blocks re-read)
    const u64 P = c.prev(i);
    return {P, c.e[i] == 0 || P == no_cta ? 0 : c.e[P]};
  };
  struct Range {  // bounds kept: hi 0 where none
    u64 lo = 0, hi = 0;
  };
  auto count = [&](u64 i, u64 m, u64 lo) {
    const bool part = m == c.nkb(i) && c.zlast(i) != c.zfull(i);  // its last re-read: the short last block
    t.read_in_bucket(bucket(lo), checked_add(checked_mul(m - part, c.zfull(i), "L2 simulation bytes"),
                                             part ? c.zlast(i) : 0, "L2 simulation bytes"));
  };
  struct Evaluated {
    Batches::Counts counts;
    u64 most;
  };
  // Re-readers that others repeat, by their place among the sources' CTAs.
  std::vector<Evaluated> evaluated;
  Array<std::uint32_t> evaluated_at(repeats.sources * repeats.per_head, ChainGrid::none32);
  Batches apart(t);
  auto exact = [&](u64 i, u64 P, u64 m, u64 hi) -> u64 {
    if (const u64 from = repeats.of(i); from != no_cta)
      if (const std::uint32_t at = evaluated_at[repeats.source_kept(from)]; at != ChainGrid::none32) {
        batches.add(evaluated[at].counts);
        // (A head may repeat one and be repeated by another of the other
        // pair relation: its counts are kept too.)
        if (repeats.source_of_any(i)) evaluated_at[repeats.source_kept(i)] = at;
        return evaluated[at].most;
      }
    // (Bounds below the largest distance found: not the largest. A repeat's
    // are its source's, and the floor only rises.)
    const bool need_most = hi == 0 || hi >= floor_of_max;
    if (!repeats.source_of_any(i)) return reads.chain(i, P, m, batches, need_most, floor_of_max);
    const u64 most = reads.chain(i, P, m, apart, need_most, floor_of_max);
    evaluated_at[repeats.source_kept(i)] = static_cast<std::uint32_t>(evaluated.size());
    evaluated.push_back({apart.take(), most});
    batches.add(evaluated.back().counts);
    return most;
  };
  ChainBounds bounds(c);
  Array<Range> kept(repeats.sources * repeats.per_head);  // the sources' bounds, for their repeats
  struct Top {
    u64 i;
    Range r;
  };
  std::vector<Top> top;
  BackOff tight;  // (as peak_hi below)
  // Runs of CTAs whose union of windows settles those it counts (a head's
  // in query-block-major order, any that re-read in head-major order):
  // tried where the quick bound fails, less often where they fail in a row.
  constexpr u64 run_length = 512;
  BackOff runs;
  u64 run_end = 0;
  Range run_r;
  u64 no_run_before = 0;
  // (The smallest g at which a run's lower bound may pass the smallest
  // capacity, and a step more: the g a run's CTAs need.)
  const i64 run_g = caps.empty() ? 0 : static_cast<i64>(caps[0] / (std::max<u64>(c.zfull(0), 1) * c.slots)) + 3;
  // (In head-major order with GQA, only the group's other heads (P = i - 1):
  // a pair's first CTA of a block has a g some group's worth larger, which
  // would lift the run's upper bound past the largest distance.)
  const bool run_near = c.hm && c.group > 1;
  auto counted_by_run = [&](u64 i, u64 P) { return c.s[i] - c.s[P] >= run_g && (!run_near || P + 1 == i); };
  auto settled_by_run = [&](u64 i) {
    if (i < no_run_before || !counted_by_run(i, c.prev(i)) || runs.pass_over()) return false;
    u64 j = i;
    if (c.hm) {
      for (const u64 end = std::min(c.n, i + run_length); j < end && rereads(j).second > 0; ++j) {}
    } else {
      for (const u64 end = std::min(c.n, c.first_of_head(i) + c.seq_q_blocks); j < std::min(end, i + run_length) && repeats.of(j) == no_cta; ++j) {}
    }
    const Bounds b = bounds.of_run(i, j, run_g, run_near);
    const bool settled = b.valid && bucket(b.lo) == bucket(b.hi) && b.hi < floor_of_max;
    runs.tried(settled);
    if (settled) run_end = j, run_r = {b.lo, b.hi};
    else no_run_before = j;
    return settled;
  };
  // long_lo over a run of a block's pairs' first CTAs at once (up to 64 that
  // re-read as many blocks): at most each one's, so where it reaches a CTA's
  // bucket the CTA's own is not needed; where it does not, the CTAs to the
  // run's end are taken one by one.
  std::vector<u64> lrun;
  u64 lrun_end = 0, lrun_lo = 0;
  auto long_lo = [&](u64 i, u64 P, u64 m, u64 need) {
    if (i >= lrun_end) {
      lrun.clear();
      for (u64 j = i; j < c.n && lrun.size() < 64; ++j) {
        const u64 Pj = c.prev(j);
        if (Pj == no_cta || Pj + 1 == j || c.e[j] == 0) continue;
        if (c.e[Pj] != m) break;
        lrun.push_back(j);
      }
      lrun_end = lrun.back() + 1, lrun_lo = lrun.size() > 1 ? reads.long_lo_run(lrun) : 0;
    }
    return lrun_lo >= need ? lrun_lo : reads.long_lo(i, P, m, need);
  };
  for (u64 i = 0; i < c.n; ++i) {
    const auto [P, m] = rereads(i);
    if (m == 0) continue;
    Range r;
    if (const u64 from = repeats.of(i); from != no_cta) {
      r = kept[repeats.source_kept(from)];
    } else if (i < run_end && counted_by_run(i, P)) {
      r = run_r;
    } else {
      Bounds b;
      const bool quick = !caps.empty() && bounds.quick(i, P, caps[0], b);
      if (!quick && !caps.empty() && c.dense && settled_by_run(i)) {
        b = {run_r.lo, run_r.hi, 0, true};
      } else if (!quick) {
        b = bounds.of(i, P);
        if (b.valid && bucket(b.lo) != bucket(b.hi)) {
          // refine_hi leaves at least hi - qo: lo must reach that bucket, and
          // refine_hi is tried only where it can then settle them.
          const std::size_t k = bucket(b.hi - b.qo);
          bounds.refine_lo(i, P, b, k == 0 ? 0 : caps[k - 1] + 1);
          if (bucket(b.lo) != bucket(b.hi) && bucket(b.lo) >= k && !reads.in_middle(i, m)) bounds.refine_hi(i, P, b);
          // In head-major order with GQA a pair's first CTA shares its slots
          // with the group's other heads, re-read a step or two later: the
          // windows' lower bound counts little more than those, the long gaps
          // resolved in time a good deal more.
          if (bucket(b.lo) != bucket(b.hi) && c.hm && c.group > 1 && P + 1 != i)
            b.lo = std::max(b.lo, long_lo(i, P, m, caps[bucket(b.hi) - 1] + 1));
        }
        // (One that may hold the largest distance: its upper bound as tight
        // as the Q and O tiles allow, so that it may fall below the largest
        // found; tried less often where that fails in a row, as in head-major
        // order, where the tiles are a small part of distances of gigabytes.)
        if (b.valid && b.qo > 0 && b.hi >= floor_of_max && bucket(b.lo) == bucket(b.hi) && !tight.pass_over()) {
          bounds.refine_hi_ahead(i, P, b);
          tight.tried(b.hi < floor_of_max);
        }
      }
      if (b.valid) r = {b.lo, b.hi};
      floor_of_max = std::max(floor_of_max, r.lo);
    }
    if (const u64 at = repeats.source_kept(i); at != no_cta) kept[at] = r;
    if (r.hi == 0 || bucket(r.lo) != bucket(r.hi)) floor_of_max = std::max(floor_of_max, exact(i, P, m, r.hi));
    else if (r.hi < floor_of_max) count(i, m, r.lo);
    else top.push_back({i, r});
  }
  // Those that may hold the largest distance, largest upper bound first,
  // until the rest lie below the largest distance found (every part of the
  // floor is at most the largest distance, so the reads that reach it are
  // never counted away). (A heap: once the largest upper bound left is
  // below the floor, the rest are counted in any order.)
  auto below = [](const Top& a, const Top& b) { return a.r.hi < b.r.hi; };
  std::make_heap(top.begin(), top.end(), below);
  // Their reads lie in one bucket, counted from the bounds; what is left to
  // know is the largest distance, a repeat's its source's (each evaluated
  // once: a repeat and its source have the same bounds).
  std::unordered_map<u64, u64> largest;
  auto largest_of = [&](u64 i) {
    const u64 from = repeats.of(i), k = from == no_cta ? i : from;
    const auto [it, fresh] = largest.try_emplace(k, 0);
    if (fresh) {
      const auto [P, m] = rereads(k);
      it->second = reads.chain(k, P, m, apart, true, floor_of_max);
      static_cast<void>(apart.take());  // (counted from the bounds)
      t.reached(it->second);
    }
    return it->second;
  };
  // (peak_hi costs about what an evaluation does; where it settles none in
  // a row, as when CTAs' largest distances lie just below the largest of
  // all, it is tried less often.)
  auto end = top.end();
  BackOff peak;
  for (; end != top.begin() && top.front().r.hi >= floor_of_max; --end) {
    const Top x = top.front();
    std::pop_heap(top.begin(), end, below);
    const auto [P, m] = rereads(x.i);
    count(x.i, m, x.r.lo);
    if (!peak.pass_over()) {
      const bool below_floor = bounds.peak_hi(x.i, P) < floor_of_max;
      peak.tried(below_floor);
      if (below_floor) continue;
    }
    floor_of_max = std::max(floor_of_max, largest_of(x.i));
  }
  for (auto it = top.begin(); it != end; ++it) count(it->i, rereads(it->i).second, it->r.lo);
  batches.flush(t);
}

}  // namespace
}  // namespace chains

bool flash_in_chains(const FlashGrid& grid) {
  // Every CTA reads key blocks [0, e); e does not decrease within a head
  // (query-block-major order) or along a kv pair (head-major order). A dense
  // batch's heads are all alike: its first head (its first sequence) tells,
  // in head-major order every H-th CTA.
  const bool hm = grid.order() == Rasterization::head_major;
  const std::uint64_t per = grid.sequence(0).q_blocks * (hm ? grid.shape().heads : 1);
  const std::uint64_t n = grid.dense() ? std::min(grid.ctas(), per) : grid.ctas();
  const std::uint64_t stride = hm && grid.dense() ? grid.shape().heads : 1;
  std::vector<std::uint64_t> last_e(hm ? grid.pairs() : 0, 0);
  std::uint64_t prev_head = chains::no_cta, prev_e = 0;
  for (std::uint64_t k = 0; k < n; k += stride) {
    const FlashCta t = grid.cta(k);
    if (t.blocks() > 0 && t.first != 0) return false;
    const std::uint64_t e = t.blocks() > 0 ? t.end : 0;
    if (hm) {
      if (e > 0 && e < last_e[t.pair]) return false;
      last_e[t.pair] = std::max(last_e[t.pair], e);
      continue;
    }
    if (t.head_key == prev_head && e < prev_e) return false;
    prev_head = t.head_key;
    prev_e = e;
  }
  return true;
}

FlashStats chains_flash(const Shape& s, const L2SimConfig& c, Tally& t) {
  const FlashGrid grid(s, c.order);
  const chains::ChainGrid cg(grid, c);
  chains::run(cg, t);
  FlashStats st;
  st.steps = cg.steps;
  st.waves = ceil_div(grid.ctas(), std::uint64_t{c.sm_count} * c.ctas_per_sm);
  count_in_flight(st, cg.n, grid.heads(), grid.pairs(), [&](std::uint64_t k) {
    return InFlight{cg.head_of(k), cg.pair_of(k), static_cast<std::uint64_t>(cg.s[k]), static_cast<std::uint64_t>(cg.f(k))};
  });
  return st;
}

}  // namespace hbmscope::l2
