// The forward's enumeration by units (docs/l2-windows.md, "Units that
// repeat"): in a dense batch a unit is CTAs one after another in launch
// order whose reads' predecessors lie in a span of steps known from the
// schedule: the CTAs that read one set of K/V objects (a kv pair's heads, a
// sequence), or finer, a head from its pair's previous head on, a head-major
// query block from block i - K on. Each unit is enumerated over its span
// alone, the other CTAs' accesses then visited but not counted; a unit whose
// span holds the same CTAs at the same offsets as an earlier unit's takes
// that unit's tally.
#include <algorithm>
#include <limits>
#include <unordered_map>

#include "hbmscope/checked.hpp"
#include "hbmscope/error.hpp"
#include "l2_flash.hpp"
#include "l2_list.hpp"
#include "l2_segments.hpp"
#include "l2_stack.hpp"

namespace hbmscope::l2 {

namespace {

using u64 = std::uint64_t;
using i64 = std::int64_t;

i64 last_step(const FlashUnits& p, u64 x) { return static_cast<i64>(p.start[x] + p.length[x]) - 1; }

// Where the first boundary of pair_ctas runs (kv pairs; head-major,
// sequences) at or after unit u's CTA lo lies, from its first CTA (past hi:
// none). Two units' spans rename their objects one to one only where those
// boundaries part them alike.
i64 first_cut(const FlashUnits& p, u64 u) {
  const u64 cut = (p.lo[u] + p.pair_ctas - 1) / p.pair_ctas * p.pair_ctas;
  return cut >= p.hi[u] ? std::numeric_limits<i64>::max() : static_cast<i64>(cut) - static_cast<i64>(u * p.per);
}

// Unit u's steps: the CTAs of [lo, hi) at their offsets from its first step.
// Units of a query block (by_blocks) are compared block by block over the
// query blocks their spans touch: each block's first step from the span's,
// its CTAs' starts (as a class of alike blocks), and what its CTAs read
// (key blocks from the unit's first, rows); where sequences part the span,
// first_cut.
u64 context_hash(const FlashUnits& p, u64 u) {
  u64 h = 0x9e3779b97f4a7c15ull;
  auto mix = [&](u64 v) {
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    h *= 0xbf58476d1ce4e5b9ull;
  };
  const u64 base = u * p.per;
  mix(p.lo[u] - base);  // (lo may lie below base: the subtraction wraps alike for alike units)
  mix(p.hi[u] - base);
  mix(static_cast<u64>(p.last[u] - p.first[u]));
  mix(static_cast<u64>(first_cut(p, u)));
  if (!p.by_blocks) {
    for (u64 x = p.lo[u]; x < p.hi[u]; ++x) mix(static_cast<u64>(static_cast<i64>(p.start[x]) - p.first[u]));
    return h;
  }
  const u64 iu = u % p.q_blocks;
  for (u64 q = p.lo[u] / p.per; q * p.per < p.hi[u]; ++q) {
    const u64 i = q % p.q_blocks;
    mix(static_cast<u64>(static_cast<i64>(p.start[q * p.per]) - p.first[u]));
    mix(p.pattern[q]);
    mix(p.q_first[i] - p.q_first[iu]);
    mix(p.q_end[i] - p.q_first[iu]);
    mix(p.q_rows[i] + (p.q_end[i] == p.k_blocks ? u64{1} << 40 : 0));
  }
  return h;
}

bool same_context(const FlashUnits& p, u64 u, u64 v) {
  const u64 d = (u - v) * p.per;
  if (p.lo[u] - d != p.lo[v] || p.hi[u] - d != p.hi[v] || p.last[u] - p.first[u] != p.last[v] - p.first[v] ||
      first_cut(p, u) != first_cut(p, v))
    return false;
  if (!p.by_blocks) {
    for (u64 x = p.lo[u]; x < p.hi[u]; ++x)
      if (static_cast<i64>(p.start[x]) - p.first[u] != static_cast<i64>(p.start[x - d]) - p.first[v]) return false;
    return true;
  }
  const u64 iu = u % p.q_blocks, iv = v % p.q_blocks;
  for (u64 q = p.lo[u] / p.per; q * p.per < p.hi[u]; ++q) {
    const u64 r = q - (u - v), i = q % p.q_blocks, j = r % p.q_blocks;
    if (static_cast<i64>(p.start[q * p.per]) - p.first[u] != static_cast<i64>(p.start[r * p.per]) - p.first[v] ||
        p.pattern[q] != p.pattern[r] || p.q_first[i] - p.q_first[iu] != p.q_first[j] - p.q_first[iv] ||
        p.q_end[i] - p.q_first[iu] != p.q_end[j] - p.q_first[iv] || p.q_rows[i] != p.q_rows[j] ||
        (p.q_end[i] == p.k_blocks) != (p.q_end[j] == p.k_blocks))
      return false;
  }
  return true;
}

// Unit u's steps through the LRU: its CTAs' accesses counted, the others'
// visited (as the enumeration makes them: resident CTAs in launch order, Q at
// a CTA's first step, a key block a step, O at its last).
template <class Sink>
void replay(const FlashGrid& grid, const L2SimConfig& c, const FlashUnits& p, u64 u, Sink& l2) {
  const u64 lo = p.lo[u], hi = p.hi[u], own_lo = u * p.per, own_hi = own_lo + p.per;
  const i64 first = p.first[u], last = p.last[u];
  std::vector<FlashCta> ct(hi - lo);
  u64 pair_lo = ~u64{0}, pair_hi = 0;
  for (u64 x = lo; x < hi; ++x) {
    ct[x - lo] = grid.cta(x);
    pair_lo = std::min(pair_lo, ct[x - lo].pair);
    pair_hi = std::max(pair_hi, ct[x - lo].pair);
  }
  const FlashSeq& q = grid.sequence(0);
  const u64 nkb = q.k_blocks, last_j = nkb - 1;
  const u64 full = grid.kv_bytes(0, 0), last_bytes = grid.kv_bytes(0, last_j);
  u64 objects = 0;
  if (__builtin_mul_overflow(pair_hi - pair_lo + 1, nkb, &objects) || objects >= none)
    throw Error("shape " + describe(grid.shape()) + ": too many K/V tiles in flight to simulate");
  l2.reserve_objects(static_cast<std::size_t>(objects));
  const bool qo = c.q_o_allocate;

  struct Run {
    u64 x, next_j;
  };
  std::vector<Run> resident;
  u64 nx = lo;
  for (; nx < hi && static_cast<i64>(p.start[nx]) < first; ++nx)  // under way at the first step
    if (last_step(p, nx) >= first)
      resident.push_back({nx, ct[nx - lo].first + static_cast<u64>(first - static_cast<i64>(p.start[nx]))});
  for (i64 step = first; step <= last; ++step) {
    for (; nx < hi && static_cast<i64>(p.start[nx]) == step; ++nx) resident.push_back({nx, ct[nx - lo].first});
    std::size_t kept = 0;
    for (std::size_t r = 0; r < resident.size(); ++r) {
      Run run = resident[r];
      const FlashCta& t = ct[run.x - lo];
      const bool own = run.x >= own_lo && run.x < own_hi;
      if (run.next_j == t.first) {
        if (own) l2.read(none, grid.q_bytes(t.rows), qo);
        else if (qo) l2.visit(none, grid.q_bytes(t.rows));
      }
      if (run.next_j < t.end) {
        const u64 j = run.next_j++;
        const auto obj = static_cast<std::uint32_t>((t.pair - pair_lo) * nkb + j);
        const u64 bytes = j == last_j ? last_bytes : full;
        if (own) l2.read(obj, bytes);
        else l2.visit(obj, bytes);
      }
      if (run.next_j < t.end) {
        resident[kept++] = run;
        continue;
      }
      if (own) l2.write(none, grid.o_bytes(t.rows), qo);
      else if (qo) l2.visit(none, grid.o_bytes(t.rows));
    }
    resident.resize(kept);
  }
}

// A unit's span is replayed with its CTAs at hand (64 bytes each): at most
// 2^21 of them (128 MB).
bool spans_fit(const FlashUnits& p) {
  for (u64 u = 0; u < p.units(); ++u)
    if (p.hi[u] - p.lo[u] > (u64{1} << 21)) return false;
  return true;
}

// Splits the schedule in p into units of `per` CTAs (kv pairs of pair_ctas),
// unit u's span opening at step opens[u]: their steps, the CTAs then, their
// sources and the accesses of those enumerated (pre: a prefix of accesses
// over `pre_per` CTAs, every such run alike).
void split(FlashUnits& p, u64 per, u64 pair_ctas, const std::vector<i64>& opens, const std::vector<u64>& pre) {
  const u64 n = p.start.size(), units = n / per, pre_per = pre.size() - 1;
  p.per = per;
  p.pair_ctas = pair_ctas;
  p.enumerated = 0;
  p.lo.assign(units, 0);
  p.hi.assign(units, 0);
  p.first.assign(units, 0);
  p.last.assign(units, 0);
  p.source.assign(units, 0);
  u64 longest = 0;
  for (u64 x = 0; x < pre_per && x < n; ++x) longest = std::max(longest, p.length[x]);
  for (u64 u = 0; u < units; ++u) {
    p.first[u] = opens[u];
    p.last[u] = p.first[u];
    for (u64 x = u * per; x < (u + 1) * per; ++x) p.last[u] = std::max(p.last[u], last_step(p, x));
    // The first CTA still running at the span's first step: it started at
    // most `longest` steps before.
    const i64 from = std::max<i64>(0, p.first[u] - static_cast<i64>(longest) + 1);
    u64 a = static_cast<u64>(std::lower_bound(p.start.begin(), p.start.end(), static_cast<u64>(from)) - p.start.begin());
    while (last_step(p, a) < p.first[u]) ++a;
    p.lo[u] = a;
    p.hi[u] = static_cast<u64>(std::upper_bound(p.start.begin(), p.start.end(), static_cast<u64>(p.last[u])) -
                               p.start.begin());
  }
  auto accesses_below = [&](u64 x) { return x / pre_per * pre[pre_per] + pre[x % pre_per]; };
  std::unordered_map<u64, std::vector<u64>> by_hash;
  for (u64 u = 0; u < units; ++u) {
    std::vector<u64>& alike = by_hash[context_hash(p, u)];
    p.source[u] = u;
    for (const u64 v : alike)
      if (same_context(p, u, v)) {
        p.source[u] = v;
        break;
      }
    if (p.source[u] != u) continue;
    alike.push_back(u);
    p.enumerated = checked_add(p.enumerated, accesses_below(p.hi[u]) - accesses_below(p.lo[u]), "L2 simulation");
  }
}

// Head-major units of a query block: where every sequence's query blocks'
// first and last key blocks do not fall, the grid's per query block
// geometry in f (else false).
bool query_block_units(const FlashGrid& grid, FlashUnits& f) {
  const FlashSeq& q = grid.sequence(0);
  f.by_blocks = true;
  f.heads = grid.shape().heads;
  f.group = grid.group();
  f.q_blocks = q.q_blocks;
  f.k_blocks = q.k_blocks;
  f.q_first.resize(q.q_blocks);
  f.q_end.resize(q.q_blocks);
  f.q_rows.resize(q.q_blocks);
  for (u64 i = 0; i < q.q_blocks; ++i) {
    const FlashCta t = grid.cta(i * f.heads);
    f.q_first[i] = t.first;
    f.q_end[i] = t.end;
    f.q_rows[i] = t.rows;
    if (i > 0 && (t.first < f.q_first[i - 1] || t.end < f.q_end[i - 1])) return false;
  }
  return true;
}

// Each head-major query block's CTAs' starts from its first, as a class:
// blocks of one class start alike (compared in full, found by a hash).
void start_patterns(FlashUnits& f) {
  const u64 blocks = f.start.size() / f.heads;
  f.pattern.assign(blocks, 0);
  std::unordered_map<u64, std::vector<u64>> by_hash;  // representatives
  for (u64 q = 0; q < blocks; ++q) {
    const u64 x0 = q * f.heads;
    u64 h = 0x84222325cbf29ce4ull;
    for (u64 x = x0; x < x0 + f.heads; ++x) h = (h ^ (f.start[x] - f.start[x0])) * 0x100000001b3ull;
    std::vector<u64>& reps = by_hash[h];
    f.pattern[q] = q;
    for (const u64 r : reps)
      if (std::equal(f.start.begin() + static_cast<std::ptrdiff_t>(x0), f.start.begin() + static_cast<std::ptrdiff_t>(x0 + f.heads),
                     f.start.begin() + static_cast<std::ptrdiff_t>(r * f.heads),
                     [&](u64 a, u64 b) { return a - f.start[x0] == b - f.start[r * f.heads]; })) {
        f.pattern[q] = r;
        break;
      }
    if (f.pattern[q] == q) reps.push_back(q);
  }
}

// Where each head-major query block unit's span opens: at query block i - K
// of its sequence, K the least such that each kv group's first CTA there
// reads every object it shares with block i's CTAs no later than they do
// (it starts first(i) - first(i - K) steps before the group's first CTA of
// block i, or earlier; a tie goes to it, launched first). The objects block
// i - K does not read are first read from block i - K + 1 on. Block 0 of a
// sequence: its own steps.
std::vector<i64> query_block_opens(const FlashUnits& f) {
  const u64 units = f.start.size() / f.heads, groups = f.heads / f.group;
  std::vector<i64> opens(units);
  auto start = [&](u64 unit, u64 g) { return static_cast<i64>(f.start[unit * f.heads + g * f.group]); };
  for (u64 u = 0; u < units; ++u) {
    const u64 i = u % f.q_blocks;
    u64 k = 1;
    for (; k <= i; ++k) {
      bool all = true;
      for (u64 g = 0; g < groups && all; ++g)
        all = start(u - k, g) + static_cast<i64>(f.q_first[i] - f.q_first[i - k]) <= start(u, g);
      if (all) break;
    }
    opens[u] = start(u - std::min(k, i), 0);
  }
  return opens;
}

}  // namespace

std::optional<FlashUnits> plan_flash_units(const FlashGrid& grid, std::uint64_t slots, UnitsOf of) {
  if (!grid.dense()) return std::nullopt;
  const FlashSeq& q = grid.sequence(0);
  const bool qbm = grid.order() == Rasterization::query_block_major;
  // (CTAs of a head, query-block-major, or of a sequence, head-major, alike)
  const u64 alike = (qbm ? 1 : grid.shape().heads) * q.q_blocks;
  const u64 per = (qbm ? grid.group() : grid.shape().heads) * q.q_blocks;
  const u64 n = grid.ctas();
  // (At most 2^25 CTAs: the schedule's 16 bytes a CTA in 512 MB.)
  if (per == 0 || n % per != 0 || n / per < 2 || n > max_unit_ctas) return std::nullopt;
  FlashUnits p;
  p.length.resize(n);
  std::vector<u64> pre(alike + 1, 0);  // accesses of the first CTAs
  for (u64 x = 0; x < alike; ++x) {
    const FlashCta t = grid.cta(x);
    if (t.steps() >= (u64{1} << 30)) return std::nullopt;
    p.length[x] = t.steps();
    pre[x + 1] = pre[x] + t.blocks() + 2;
  }
  for (u64 x = alike; x < n; ++x) p.length[x] = p.length[x - alike];
  p.start.resize(n);
  p.steps = SegmentEngine::schedule(slots, p.length.data(), n, p.start.data());

  // Units of a kv pair (head-major: a sequence), each over its own steps.
  // Finer units, whichever enumerates less:
  // - with GQA in query-block-major order, a head: its CTA of query block i
  //   starts no earlier than its pair's previous head's, and after it in
  //   launch order, so it reads each object after that one does and its
  //   reads' predecessors are its own or that head's;
  // - in head-major order, a query block: its reads' predecessors lie from
  //   query block i - K on (query_block_opens).
  // (At most max_units units a split: about 60 bytes each.)
  const u64 units = n / per, finer_units = n / (qbm ? q.q_blocks : grid.shape().heads);
  const bool whole = of != UnitsOf::finer && units <= max_units;
  FlashUnits f;
  const bool finer = of != UnitsOf::whole && finer_units <= max_units &&
                     (qbm ? grid.group() > 1 : query_block_units(grid, f));
  std::vector<i64> opens;
  if (whole) {
    opens.resize(units);
    for (u64 u = 0; u < units; ++u) opens[u] = static_cast<i64>(p.start[u * per]);
    split(p, per, per, opens, pre);
  }
  if (!finer) return whole && spans_fit(p) ? std::optional<FlashUnits>(std::move(p)) : std::nullopt;
  if (qbm) {
    opens.assign(finer_units, 0);
    for (u64 u = 0; u < finer_units; ++u)
      opens[u] = static_cast<i64>(p.start[(u % grid.group() != 0 ? u - 1 : u) * q.q_blocks]);
  }
  f.start = std::move(p.start);
  f.length = std::move(p.length);
  f.steps = p.steps;
  if (qbm) {
    split(f, q.q_blocks, per, opens, pre);
  } else {
    start_patterns(f);
    split(f, grid.shape().heads, per, query_block_opens(f), pre);
  }
  const bool f_fits = spans_fit(f), p_fits = whole && spans_fit(p);
  if (f_fits && (!p_fits || f.enumerated < p.enumerated)) return f;
  if (!p_fits) return std::nullopt;
  p.start = std::move(f.start);
  p.length = std::move(f.length);
  return p;
}

FlashStats dense_schedule_stats(const FlashGrid& grid, const u64* start, const u64* length, u64 steps, u64 slots) {
  // Heads and kv heads in flight, from the schedule (a CTA's head key: its
  // head counted over the batch; its pair: that over the group).
  FlashStats st;
  st.steps = steps;
  st.waves = ceil_div(grid.ctas(), slots);
  const u64 H = grid.shape().heads, qb = grid.sequence(0).q_blocks, G = grid.group();
  const bool qbm = grid.order() == Rasterization::query_block_major;
  u64 head = 0, i = 0, block = 0;  // (the CTAs asked in launch order: the grid walked as they are)
  count_in_flight(st, grid.ctas(), grid.heads(), grid.pairs(), [&](u64 x) {
    const InFlight at{head, head / G, start[x], start[x] + length[x] - 1};
    // (query-block-major: qb CTAs a head, in turn; head-major: H heads a
    // query block, a sequence's H after the last's)
    if (qbm) {
      if (++i == qb) i = 0, ++head;
    } else if (++i == H) {
      i = 0;
      head -= H - 1;  // the same sequence's first head, or the next sequence's
      if (++block == qb) block = 0, head += H;
    } else {
      ++head;
    }
    return at;
  });
  return st;
}

FlashStats units_flash(const Shape& s, const L2SimConfig& c, Tally& t, const FlashUnits& p) {
  const FlashGrid grid(s, c.order);
  const u64 units = p.units(), slots = u64{c.sm_count} * c.ctas_per_sm;
  std::vector<u64> times(units, 0);  // per unit enumerated: the units that take its tally
  for (u64 u = 0; u < units; ++u) ++times[p.source[u]];
  for (u64 u = 0; u < units; ++u) {
    if (p.source[u] != u) continue;
    Tally one(t.capacities());
    with_lru(one, [&](auto& l2) { replay(grid, c, p, u, l2); });
    t.merge(one, times[u]);
  }

  return dense_schedule_stats(grid, p.start.data(), p.length.data(), p.steps, slots);
}

FlashStats units_flash(const Shape& s, const L2SimConfig& c, Tally& t) {
  const FlashGrid grid(s, c.order);
  const std::optional<FlashUnits> p = plan_flash_units(grid, u64{c.sm_count} * c.ctas_per_sm, UnitsOf::cheaper);
  return p ? units_flash(s, c, t, *p) : enumerate_flash(s, c, t);
}

}  // namespace hbmscope::l2
