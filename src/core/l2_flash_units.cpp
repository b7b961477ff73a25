// The forward's enumeration by units (docs/l2-simulation.md, "Units that
// repeat"): in a dense batch a unit is the CTAs that read one set of K/V
// objects, one after another in launch order. Its reads' distances are fixed
// by the accesses between its first step and its last, so each unit is
// enumerated over those steps alone, the other CTAs' accesses then visited
// but not counted; a unit whose steps hold the same CTAs at the same offsets
// as an earlier unit's takes that unit's tally.
#include <algorithm>
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

// Unit u's steps: the CTAs of [lo, hi) at their offsets from its first step.
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
  for (u64 x = p.lo[u]; x < p.hi[u]; ++x) mix(static_cast<u64>(static_cast<i64>(p.start[x]) - p.first[u]));
  return h;
}

bool same_context(const FlashUnits& p, u64 u, u64 v) {
  const u64 d = (u - v) * p.per;
  if (p.lo[u] - d != p.lo[v] || p.hi[u] - d != p.hi[v] || p.last[u] - p.first[u] != p.last[v] - p.first[v])
    return false;
  for (u64 x = p.lo[u]; x < p.hi[u]; ++x)
    if (static_cast<i64>(p.start[x]) - p.first[u] != static_cast<i64>(p.start[x - d]) - p.first[v]) return false;
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

}  // namespace

std::optional<FlashUnits> plan_flash_units(const FlashGrid& grid, std::uint64_t slots) {
  if (!grid.dense()) return std::nullopt;
  const FlashSeq& q = grid.sequence(0);
  const u64 per = (grid.order() == Rasterization::query_block_major ? grid.group() : grid.shape().heads) * q.q_blocks;
  const u64 n = grid.ctas();
  if (per == 0 || n % per != 0 || n / per < 2 || n >= (u64{1} << 32)) return std::nullopt;
  FlashUnits p;
  p.per = per;
  p.length.resize(n);
  std::vector<u64> pre(per + 1, 0);  // accesses of a unit's first CTAs
  for (u64 x = 0; x < per; ++x) {
    const FlashCta t = grid.cta(x);
    if (t.steps() >= (u64{1} << 30)) return std::nullopt;
    p.length[x] = t.steps();
    pre[x + 1] = pre[x] + t.blocks() + 2;
  }
  for (u64 x = per; x < n; ++x) p.length[x] = p.length[x - per];
  p.start.resize(n);
  p.steps = SegmentEngine::schedule(slots, p.length.data(), n, p.start.data());

  const u64 units = n / per;
  p.lo.resize(units);
  p.hi.resize(units);
  p.first.resize(units);
  p.last.resize(units);
  p.source.resize(units);
  u64 a = 0, b = 0;
  for (u64 u = 0; u < units; ++u) {
    p.first[u] = static_cast<i64>(p.start[u * per]);
    p.last[u] = p.first[u];
    for (u64 x = u * per; x < (u + 1) * per; ++x) p.last[u] = std::max(p.last[u], last_step(p, x));
    while (last_step(p, a) < p.first[u]) ++a;  // (starts rise with the unit: so does the first CTA still running)
    while (b < n && static_cast<i64>(p.start[b]) <= p.last[u]) ++b;
    p.lo[u] = a;
    p.hi[u] = b;
  }
  auto accesses_below = [&](u64 x) { return x / per * pre[per] + pre[x % per]; };
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
  return p;
}

FlashStats units_flash(const Shape& s, const L2SimConfig& c, Tally& t, const FlashUnits& p) {
  const FlashGrid grid(s, c.order);
  const u64 units = p.units(), slots = u64{c.sm_count} * c.ctas_per_sm;
  std::vector<Tally> evaluated;
  std::vector<std::size_t> at(units, 0);
  for (u64 u = 0; u < units; ++u) {
    if (p.source[u] != u) continue;
    at[u] = evaluated.size();
    evaluated.emplace_back(t.capacities());
    with_lru(evaluated.back(), [&](auto& l2) { replay(grid, c, p, u, l2); });
  }
  for (u64 u = 0; u < units; ++u) t.merge(evaluated[at[p.source[u]]]);

  // Heads and kv heads in flight, from the schedule (a CTA's head key: its
  // head counted over the batch; its pair: that over the group).
  FlashStats st;
  st.steps = p.steps;
  st.waves = ceil_div(grid.ctas(), slots);
  KeySteps heads(grid.heads()), pairs(grid.pairs());
  const u64 H = s.heads, qb = grid.sequence(0).q_blocks, G = grid.group();
  const bool qbm = grid.order() == Rasterization::query_block_major;
  for (u64 x = 0, head = 0, i = 0; x < grid.ctas(); ++x) {
    // (query-block-major: qb CTAs a head, in turn; head-major: H heads a
    // query block, a sequence's H after the last's)
    const u64 f = p.start[x], l = f + p.length[x] - 1;
    heads.add(head, f, l);
    pairs.add(head / G, f, l);
    if (qbm) {
      if (++i == qb) i = 0, ++head;
    } else if (++i == H) {
      i = 0;
      head -= H - 1;  // the same sequence's first head, or the next sequence's
      if ((x + 1) % (H * qb) == 0) head += H;
    } else {
      ++head;
    }
  }
  st.heads = heads.mean(st.steps);
  st.kv_heads = pairs.mean(st.steps);
  return st;
}

FlashStats units_flash(const Shape& s, const L2SimConfig& c, Tally& t) {
  const FlashGrid grid(s, c.order);
  const std::optional<FlashUnits> p = plan_flash_units(grid, u64{c.sm_count} * c.ctas_per_sm);
  return p ? units_flash(s, c, t, *p) : enumerate_flash(s, c, t);
}

}  // namespace hbmscope::l2
