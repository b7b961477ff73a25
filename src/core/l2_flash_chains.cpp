// The chains of the forward pass (docs/l2-simulation.md, "Chains"): the
// schedule, and the run that counts a CTA's re-reads from bounds where they
// fall in one bucket below the largest distance, and evaluates them exactly
// elsewhere. Exact, and in long causal heads O(log) for most CTAs.
#include "l2_flash_chains.hpp"

#include <algorithm>

#include "hbmscope/checked.hpp"
#include "l2_segments.hpp"

namespace hbmscope::l2 {

double mean_distinct(const std::vector<std::uint64_t>& key, const std::vector<std::uint64_t>& start,
                     const std::vector<std::uint64_t>& length, std::uint64_t keys, std::uint64_t steps);

namespace chains {

ChainGrid::ChainGrid(const FlashGrid& grid, const L2SimConfig& c)
    : qo(c.q_o_allocate), dense(grid.dense()), n(grid.ctas()), slots(std::uint64_t{c.sm_count} * c.ctas_per_sm) {
  su.resize(n), len.resize(n), e.resize(n), nkb.resize(n), zfull.resize(n), zlast.resize(n);
  qb.resize(n), ob.resize(n), head_first.resize(n), next_head.assign(n, no_cta), pair_end.resize(n);
  std::vector<u64> pair(n), head(n);
  for (u64 k = 0; k < n; ++k) {
    const FlashCta t = grid.cta(k);
    len[k] = t.steps();
    e[k] = t.blocks() > 0 ? t.end : 0;
    nkb[k] = grid.sequence(t.seq).k_blocks;
    zfull[k] = grid.kv_bytes(t.seq, 0);
    zlast[k] = grid.kv_bytes(t.seq, nkb[k] - 1);
    qb[k] = grid.q_bytes(t.rows);
    ob[k] = grid.o_bytes(t.rows);
    pair[k] = t.pair;
    head[k] = t.head_key;
    head_first[k] = k > 0 && head[k - 1] == head[k] ? head_first[k - 1] : k;
  }
  steps = SegmentEngine::schedule(slots, len.data(), n, su.data());
  s.resize(n), f.resize(n);
  for (u64 k = 0; k < n; ++k) {
    s[k] = static_cast<i64>(su[k]);
    f[k] = s[k] + static_cast<i64>(len[k]) - 1;
  }
  R.assign(n, never);
  PM.resize(n);
  for (u64 k = 0; k < n; ++k) {
    const bool last = k + 1 == n || head[k + 1] != head[k];
    if (e[k] > 0 && !last) R[k] = s[k] + static_cast<i64>(e[k]) - 1 + (s[k + 1] - s[k]);
    if (e[k] > 0 && last) {
      if (k + 1 < n && pair[k + 1] == pair[k]) next_head[k] = k + 1;
      sp.push_back(k);
      sp_s.push_back(s[k]);
      spm.push_back(std::max(spm.empty() ? never : spm.back(), f[k]));
    }
    PM[k] = std::max(k > 0 ? PM[k - 1] : never, R[k]);
  }
  fo.resize(n);
  for (u64 k = 0; k < n; ++k) fo[k] = k;
  std::sort(fo.begin(), fo.end(), [&](u64 a, u64 b) { return f[a] != f[b] ? f[a] < f[b] : a < b; });
  fo_f.resize(n);
  qpre.assign(n + 1, 0);
  opre.assign(n + 1, 0);
  for (u64 k = 0; k < n; ++k) {
    fo_f[k] = f[fo[k]];
    qpre[k + 1] = checked_add(qpre[k], qb[k], "L2 simulation bytes");
    opre[k + 1] = checked_add(opre[k], ob[fo[k]], "L2 simulation bytes");
  }
  // Per pair (a run of CTAs): where it ends, the last step of the CTAs before
  // it, and the bytes of the blocks its last CTA reads (every block its heads read).
  fmax_before.resize(n);
  zpair.resize(n);
  i64 fmax = never;
  for (u64 a = 0; a < n;) {
    u64 b = a;
    while (b < n && pair[b] == pair[a]) ++b;
    u64 z = 0;
    for (u64 y = 0; y < e[b - 1]; ++y) z = checked_add(z, kv_bytes(b - 1, y), "L2 simulation bytes");
    for (u64 k = a; k < b; ++k) {
      pair_end[k] = b;
      fmax_before[k] = fmax;
      zpair[k] = z;
    }
    for (u64 k = a; k < b; ++k) fmax = std::max(fmax, f[k]);
    a = b;
  }
}

u64 ChainGrid::next_reader(u64 k, u64 y) const {
  const u64 F = next_head[k];
  u64 lo = F, hi = F + (k + 1 - head_first[k]);  // the next head has as many CTAs
  while (lo < hi) {
    const u64 mid = lo + (hi - lo) / 2;
    if (e[mid] > y) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

// The bytes of the Q and O tiles accessed in (p, q) = ((T - g, P, 1), (T, i, 1)):
// Q tiles at (start, id, 0), O tiles at (last step, id, 2).
u64 ChainGrid::qo_between(u64 i, u64 P, i64 T, i64 g) const {
  const ChainGrid& c = *this;
  auto first_at = [&](i64 step) { return static_cast<u64>(std::lower_bound(c.s.begin(), c.s.end(), step) - c.s.begin()); };
  auto clamp = [](u64 v, u64 a, u64 b) { return std::min(std::max(v, a), b); };
  u64 sum = 0;
  const u64 qlo = clamp(P + 1, first_at(T - g), first_at(T - g + 1));
  const u64 qhi = clamp(i + 1, first_at(T), first_at(T + 1));
  if (qhi > qlo) sum += c.qpre[qhi] - c.qpre[qlo];
  auto by_finish = [&](i64 step, u64 id) {
    u64 lo = 0, hi = c.n;
    while (lo < hi) {
      const u64 mid = lo + (hi - lo) / 2;
      if (c.fo_f[mid] < step || (c.fo_f[mid] == step && c.fo[mid] < id)) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  };
  const u64 olo = by_finish(T - g, P), ohi = by_finish(T, i);
  if (ohi > olo) sum += c.opre[ohi] - c.opre[olo];
  return sum;
}

namespace {

void run(const ChainGrid& c, Tally& t) {
  Batches batches(t);
  ChainReads reads(c);
  // First reads in a head: exact one by one; their largest distance bounds
  // the largest from below.
  u64 floor_of_max = 0;
  for (u64 i = 0; i < c.n; ++i) {
    t.read(infinite, c.qb[i]);
    t.write(c.ob[i]);
    if (c.e[i] == 0) continue;
    const u64 hf = c.head_first[i];
    const u64 m = hf == i ? 0 : c.e[i - 1];
    const u64 L = hf > 0 && c.next_head[hf - 1] == hf ? hf - 1 : no_cta;  // the pair's previous head's last CTA
    for (u64 y = m; y < c.e[i]; ++y) {
      const u64 z = c.kv_bytes(i, y);
      if (L == no_cta) {
        t.reads(infinite, 0, 1, z);
        continue;
      }
      const i64 T = c.s[i] + static_cast<i64>(y), p = c.s[L] + static_cast<i64>(y);
      u64 d = 0;
      // Started after L's last step, with no other pair's CTA running from p
      // to q: every other block of the pair is accessed in between.
      if (c.s[i] > c.f[L] && c.fmax_before[i] <= p && (c.pair_end[i] == c.n || c.s[c.pair_end[i]] >= T))
        d = c.zpair[i] + (c.qo ? c.qo_between(i, L, T, c.s[i] - c.s[L]) : 0);
      else
        d = z + static_cast<u64>(reads.between(i, L, T, c.s[i] - c.s[L]));
      floor_of_max = std::max(floor_of_max, d);
      batches.of(z).reads(d, 0, 1);
    }
  }
  // Re-reads: where bounds put all of a CTA's in one bucket below the largest
  // distance, counted; else evaluated.
  ChainBounds bounds(c);
  std::vector<Bounds> coarse(c.n);
  for (u64 i = 0; i < c.n; ++i) {
    coarse[i] = bounds.coarse(i);
    if (coarse[i].valid) floor_of_max = std::max(floor_of_max, coarse[i].lo);
  }
  const std::vector<std::uint64_t>& caps = t.capacities();
  auto bucket = [&](u64 d) {
    return static_cast<std::size_t>(std::lower_bound(caps.begin(), caps.end(), d) - caps.begin());
  };
  auto decided = [&](const Bounds& b) { return b.valid && b.hi < floor_of_max && bucket(b.lo) == bucket(b.hi); };
  for (u64 i = 0; i < c.n; ++i) {
    if (c.e[i] == 0 || c.head_first[i] == i || c.e[i - 1] == 0) continue;
    const u64 m = c.e[i - 1];
    Bounds b = coarse[i];
    if (!decided(b)) b = bounds.fine(i);
    if (decided(b)) {
      const bool part = m == c.nkb[i] && c.zlast[i] != c.zfull[i];
      const u64 bytes = checked_add(checked_mul(m - part, c.zfull[i], "L2 simulation bytes"), part ? c.zlast[i] : 0,
                                    "L2 simulation bytes");
      t.read_in_bucket(bucket(b.lo), bytes);
    } else {
      reads.chain(i, m, batches);
    }
  }
  batches.flush(t);
}

}  // namespace
}  // namespace chains

bool flash_in_chains(const FlashGrid& grid) {
  if (grid.order() != Rasterization::query_block_major) return false;
  // A dense batch's heads are all alike: its first head tells.
  const std::uint64_t n = grid.dense() ? std::min(grid.ctas(), grid.sequence(0).q_blocks) : grid.ctas();
  std::uint64_t prev_head = chains::no_cta, prev_e = 0;
  for (std::uint64_t k = 0; k < n; ++k) {
    const FlashCta t = grid.cta(k);
    if (t.blocks() > 0 && t.first != 0) return false;
    const std::uint64_t e = t.blocks() > 0 ? t.end : 0;
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
  std::vector<std::uint64_t> head(grid.ctas()), pair(grid.ctas());
  for (std::uint64_t id = 0; id < grid.ctas(); ++id) {
    const FlashCta ct = grid.cta(id);
    head[id] = ct.head_key;
    pair[id] = ct.pair;
  }
  st.heads = mean_distinct(head, cg.su, cg.len, grid.heads(), st.steps);
  st.kv_heads = mean_distinct(pair, cg.su, cg.len, grid.pairs(), st.steps);
  return st;
}

}  // namespace hbmscope::l2
