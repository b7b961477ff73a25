// Bounds on a CTA's re-reads (docs/l2-simulation.md, "Chains"): a read g
// steps after its predecessor counts, on each slot, the K/V accesses of the
// last min(g, G) steps or so (G: the gap from an access to its object's next
// access), so while every slot runs CTAs that read a block each step, a read
// sees at least min(g, G) - 1 and at most min(g, G) accesses a slot. Where the
// bounds put all of a CTA's re-reads in one bucket of the tally, and below
// the largest distance, they are counted and not evaluated.
#include <algorithm>
#include <limits>
#include <queue>

#include "l2_flash_chains.hpp"

namespace hbmscope::l2::chains {

ChainBounds::ChainBounds(const ChainGrid& g) : c_(g) {
  // Bounds hold where every slot runs a CTA reading one K/V block at each step
  // of the window: no CTA without key blocks, the slots all busy (before the
  // last CTA starts), one block size.
  if (g.n < g.slots || !g.dense) return;
  for (u64 k = 0; k < g.n; ++k)
    if (g.e[k] == 0) return;
  usable_ = true;
  // Each CTA's gap to its blocks' next access, at least and at most (a head's
  // last CTA: at least to its next head's first start; none: unbounded).
  gap_lo_.assign(g.n, unbounded);
  gap_hi_.assign(g.n, unbounded);
  for (u64 k = 0; k + 1 < g.n; ++k) {
    if (g.R[k] != never) gap_lo_[k] = gap_hi_[k] = g.s[k + 1] - g.s[k];
    else if (g.next_head[k] != no_cta) gap_lo_[k] = g.s[k + 1] - g.s[k];
  }
  while (size_ < g.n) size_ *= 2;
  tree_.assign(2 * size_, unbounded);  // minimum of gap_lo_ over id ranges
  std::copy(gap_lo_.begin(), gap_lo_.end(), tree_.begin() + static_cast<std::ptrdiff_t>(size_));
  for (u64 v = size_; v-- > 1;) tree_[v] = std::min(tree_[2 * v], tree_[2 * v + 1]);
  // The CTAs of each slot in order (list scheduling: a finishing CTA's slot
  // takes the next one).
  const u64 S = g.slots;
  slot_start_.assign(S + 1, 0);
  slot_cta_.resize(g.n);
  std::vector<u64> count(S, 0), slot_of(g.n);
  std::priority_queue<std::pair<i64, u64>, std::vector<std::pair<i64, u64>>, std::greater<>> free;
  for (u64 k = 0; k < g.n; ++k) {
    u64 slot = k;
    if (k >= S) {
      slot = free.top().second;
      free.pop();
    }
    slot_of[k] = slot;
    ++count[slot];
    free.push({g.f[k], slot});
  }
  for (u64 v = 0; v < S; ++v) slot_start_[v + 1] = slot_start_[v] + count[v];
  cur_.assign(slot_start_.begin(), slot_start_.end() - 1);
  std::vector<u64> at = cur_;
  for (u64 k = 0; k < g.n; ++k) {
    auto clip = [](i64 v) { return static_cast<std::int32_t>(std::min<i64>(v, std::numeric_limits<std::int32_t>::max())); };
    slot_cta_[at[slot_of[k]]++] = {g.s[k], g.f[k], clip(gap_lo_[k]), clip(gap_hi_[k])};
  }
  zhi_ = g.zfull[0];
  zlo_ = std::min(g.zfull[0], g.zlast[0]);
  qmax_ = *std::max_element(g.qb.begin(), g.qb.end());
  omax_ = *std::max_element(g.ob.begin(), g.ob.end());
}

Bounds ChainBounds::coarse(u64 i) {
  Bounds b;
  if (!usable_ || i == 0 || c_.head_first[i] == i || c_.e[i - 1] == 0) return b;
  const i64 g = c_.s[i] - c_.s[i - 1], X = c_.s[i - 1], Thi = c_.s[i] + static_cast<i64>(c_.e[i - 1]) - 1;
  // The smallest id running at X (X does not decrease from call to call):
  // every CTA running from X on has an id at least this.
  while (pushed_ < c_.n && c_.s[pushed_] <= X) {
    running_.push_back(pushed_++);
    std::push_heap(running_.begin(), running_.end(), std::greater<>());
  }
  while (!running_.empty() && c_.f[running_.front()] < X) {
    std::pop_heap(running_.begin(), running_.end(), std::greater<>());
    running_.pop_back();
  }
  if (Thi > c_.s[c_.n - 1]) return b;
  u64 lo = size_ + (running_.empty() ? i : running_.front());
  // Ids started by Thi, and O tiles ended from X to Thi: pointers that move
  // up with X and (within a head) Thi, searched again where Thi drops.
  auto upto = [&](u64& at, const std::vector<i64>& v, i64 step) {  // first index past step
    if (at > 0 && v[at - 1] > step) at = static_cast<u64>(std::upper_bound(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(at), step) - v.begin());
    while (at < v.size() && v[at] <= step) ++at;
    return at;
  };
  const u64 started = upto(started_, c_.s, Thi);
  u64 hi = size_ + started;
  i64 G = unbounded;
  for (; lo < hi; lo /= 2, hi /= 2) {
    if (lo & 1) G = std::min(G, tree_[lo++]);
    if (hi & 1) G = std::min(G, tree_[--hi]);
  }
  u64 qo = 0;
  if (c_.qo) {  // every Q tile started and O tile ended from X to Thi
    u64 from = i - 1;  // the first id started at X
    while (from > 0 && c_.s[from - 1] == X) --from;
    while (ended_from_ < c_.n && c_.fo_f[ended_from_] < X) ++ended_from_;
    const u64 ended = upto(ended_, c_.fo_f, Thi);
    qo = (started - from) * qmax_ + (ended - std::min(ended, ended_from_)) * omax_;
  }
  const u64 S = c_.slots;
  b.lo = zlo_ + zlo_ * S * static_cast<u64>(std::max<i64>(0, std::min(g, G) - 1));
  b.hi = zhi_ + zhi_ * S * static_cast<u64>(g) + qo;
  b.valid = true;
  return b;
}

Bounds ChainBounds::fine(u64 i) {
  Bounds b;
  if (!usable_ || i == 0 || c_.head_first[i] == i || c_.e[i - 1] == 0) return b;
  const i64 g = c_.s[i] - c_.s[i - 1], X = c_.s[i - 1], Thi = c_.s[i] + static_cast<i64>(c_.e[i - 1]) - 1;
  if (Thi > c_.s[c_.n - 1]) return b;
  // Per slot, over its CTAs running in [X, Thi]: each read counts at least
  // min(g, smallest gap) - 1 of its accesses and at most min(g, largest gap).
  u64 blocks_lo = 0, blocks_hi = 0;
  for (u64 v = 0; v < c_.slots; ++v) {
    u64& k = cur_[v];  // the slot's CTA running at X (X does not decrease from call to call)
    const u64 end = slot_start_[v + 1];
    while (k + 1 < end && slot_cta_[k].f < X) ++k;
    i64 lo = unbounded, hi = 0;
    for (u64 j = k; j < end && slot_cta_[j].s <= Thi; ++j) {
      lo = std::min<i64>(lo, slot_cta_[j].gap_lo);
      hi = std::max<i64>(hi, slot_cta_[j].gap_hi);
    }
    blocks_lo += static_cast<u64>(std::max<i64>(0, std::min(g, lo) - 1));
    blocks_hi += static_cast<u64>(std::min(g, hi));
  }
  u64 qo = 0;
  if (c_.qo) {  // Q tiles start and O tiles end in the last g + 1 steps: the densest such window
    auto densest = [&](const std::vector<i64>& v) {
      const i64* first = v.data() + (std::lower_bound(v.begin(), v.end(), X) - v.begin());
      const i64* last = v.data() + (std::upper_bound(v.begin(), v.end(), Thi) - v.begin());
      u64 best = 0;
      for (const i64 *lo = first, *hi = first; hi != last; ++hi) {
        while (*hi - *lo > g) ++lo;
        best = std::max(best, static_cast<u64>(hi - lo + 1));
      }
      return best;
    };
    qo = densest(c_.s) * qmax_ + densest(c_.fo_f) * omax_;
  }
  b.lo = zlo_ + zlo_ * blocks_lo;
  b.hi = zhi_ + zhi_ * blocks_hi + qo;
  b.valid = true;
  return b;
}

}  // namespace hbmscope::l2::chains
