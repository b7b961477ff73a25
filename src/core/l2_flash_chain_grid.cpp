// The chains' grid (docs/l2-chains.md): per CTA in launch order, its key
// blocks, head and pair (by arithmetic in a dense batch), and list
// scheduling's start steps and slots, with the finish order and what the
// chains' run reads of them (R's prefix maxima, a head's last CTAs, per pair
// its run of CTAs, its blocks' bytes and the last step before it).
#include <algorithm>
#include <array>
#include <queue>

#include "hbmscope/checked.hpp"
#include "hbmscope/error.hpp"
#include "l2_flash_chains.hpp"

namespace hbmscope::l2::chains {

ChainGrid::ChainGrid(const FlashGrid& grid, const L2SimConfig& c)
    : qo(c.q_o_allocate),
      dense(grid.dense()),
      hm(grid.order() == Rasterization::head_major),
      n(grid.ctas()),
      slots(std::uint64_t{c.sm_count} * c.ctas_per_sm),
      q_row(grid.q_bytes(1)),
      o_row(grid.o_bytes(1)),
      seq_ctas(grid.dense() ? grid.ctas() / grid.sequences() : 0),
      kv_heads(grid.shape().kv_heads),
      group(grid.group()) {
  // (last step, id) in one word below: ids below 2^23, steps below 2^41
  // (every CTA's steps in a row stay below).
  constexpr u64 id_bits = chain_id_bits;
  if (n > max_chain_ctas || grid.max_key_blocks() >= none32 || grid.pairs() >= none32)
    throw Error("L2 simulation: too large a grid for the chains");
  for (u64 b = 0; b < (dense ? 1 : grid.sequences()); ++b) {
    const u64 nk = grid.sequence(b).k_blocks;
    seq_nkb.push_back(nk);
    seq_zfull.push_back(grid.kv_bytes(b, 0));
    seq_zlast.push_back(grid.kv_bytes(b, nk - 1));
  }
  // A dense batch's heads are alike: one head's CTAs (by query block), the
  // rest by arithmetic.
  std::vector<FlashCta> first_head;
  const u64 H = grid.shape().heads, G = grid.group(), Hkv = grid.shape().kv_heads;
  if (dense) {
    seq_q_blocks = grid.sequence(0).q_blocks;
    for (u64 q = 0; q < std::min(n, seq_q_blocks); ++q) first_head.push_back(grid.cta(hm ? q * H : q));
  }
  rows0 = first_head.empty() ? 0 : first_head[0].rows;
  const bool alike = dense && std::all_of(first_head.begin(), first_head.end(), [&](const FlashCta& t) { return t.rows == rows0; });
  if (alike && qo)  // (q_prefix and o_prefix then multiply: refused here where that would overflow)
    static_cast<void>(checked_mul(checked_mul(n, rows0, "L2 simulation bytes"), std::max(q_row, o_row), "L2 simulation bytes"));
  // A dense batch in query-block-major order: a CTA's head and pair by
  // arithmetic (8 bytes a CTA fewer), its key blocks (and rows) a copy of
  // the first head's.
  by_arithmetic = dense && !hm;
  e.resize(n);
  if (!by_arithmetic) pair.resize(n), head.resize(n);
  if (!alike) rows.resize(n);
  if (!dense) seq.resize(n);
  if (!dense && !hm) head_first.resize(n);
  auto put = [&](u64 k, const FlashCta& t, u64 h, u64 p) {
    e[k] = static_cast<std::uint32_t>(t.blocks() > 0 ? t.end : 0);
    if (!alike) rows[k] = static_cast<std::uint32_t>(t.rows);
    pair[k] = static_cast<std::uint32_t>(p);
    head[k] = static_cast<std::uint32_t>(h);
    if (!head_first.empty())
      head_first[k] = k > 0 && head[k - 1] == head[k] ? head_first[k - 1] : static_cast<std::uint32_t>(k);
  };
  if (by_arithmetic) {
    per_head = Divider(std::max<u64>(seq_q_blocks, 1));
    for (u64 h = 0; h < grid.heads(); ++h) head_pair.push_back(static_cast<std::uint32_t>(h / H * Hkv + h % H / G));
    std::vector<std::uint32_t> e_head(first_head.size()), rows_head(first_head.size());
    for (u64 q = 0; q < e_head.size(); ++q) {
      e_head[q] = static_cast<std::uint32_t>(first_head[q].blocks() > 0 ? first_head[q].end : 0);
      rows_head[q] = static_cast<std::uint32_t>(first_head[q].rows);
    }
    for (u64 k = 0; k < n; k += e_head.size()) {
      const u64 len = std::min<u64>(e_head.size(), n - k);
      std::copy_n(e_head.data(), len, e.data() + k);
      if (!alike) std::copy_n(rows_head.data(), len, rows.data() + k);
    }
  } else if (dense) {  // (sequence, head) h and its pair, then the CTAs in launch order
    const u64 nq = first_head.size(), per_q = hm ? H : 1;
    std::vector<u64> pair_in(per_q);  // a query block's CTAs' pairs from the first's
    for (u64 hh = 0; hh < per_q; ++hh) pair_in[hh] = hh / G;
    for (u64 k = 0, h0 = 0; k < n; h0 += per_q) {
      const u64 p0 = h0 / H * Hkv + h0 % H / G;  // (head-major: the sequence's first pair)
      for (u64 q = 0; q < nq && k < n; ++q)
        for (u64 hh = 0; hh < per_q && k < n; ++hh, ++k) put(k, first_head[q], h0 + hh, p0 + pair_in[hh]);
    }
  } else {
    for (u64 k = 0; k < n; ++k) {
      const FlashCta t = grid.cta(k);
      seq[k] = static_cast<std::uint32_t>(t.seq);
      put(k, t, t.head_key, t.pair);
    }
  }
  if (hm) {  // each pair's CTAs that read, in launch order
    prv.assign(n, none32), nxt.assign(n, none32);
    std::vector<u64> last(grid.pairs(), no_cta);
    for (u64 k = 0; k < n; ++k) {
      if (e[k] == 0) continue;
      const u64 l = last[pair[k]];
      if (l != no_cta) nxt[l] = static_cast<std::uint32_t>(k), prv[k] = static_cast<std::uint32_t>(l);
      last[pair[k]] = k;
    }
  }
  // List scheduling (as SegmentEngine::schedule): a CTA finishing at step t
  // frees its slot for the next CTA from t + 1. The slots leave in finish
  // order, which fo keeps (ties by id). A head's CTAs finish in launch order
  // (e does not decrease along it), so each head in flight waits in a queue
  // of its own, a ring; past `queues` heads in flight, a heap takes the
  // rest. The next to finish is the least of the fronts.
  s.resize(n), slot.resize(n), fo.clear();
  fo.reserve(n);
  {
    u64 total = 0;
    for (u64 k = 0; k < n; ++k) total += std::max<u64>(e[k], 1);
    if (total >= (u64{1} << (64 - id_bits))) throw Error("L2 simulation: too large a grid for the chains");
    std::priority_queue<u64, std::vector<u64>, std::greater<>> heap;
    constexpr std::size_t queues = 4;
    constexpr u64 empty = ~u64{0};  // (a front no key reaches: keys are below 2^64 - 1)
    const u64 ring = slots + 1;     // (at most `slots` keys wait in all)
    std::vector<u64> keys(queues * ring);
    std::array<u64, queues> front, back, head_at, tail_at;
    auto clear = [&] { front.fill(empty), back.fill(0), head_at.fill(0), tail_at.fill(0), heap = {}; };
    clear();
    const u64 id_mask = (u64{1} << id_bits) - 1;
    auto pop = [&]() __attribute__((always_inline)) {  // (inlined: once a CTA)
      std::size_t at = 0;
      for (std::size_t q = 1; q < queues; ++q) at = front[q] < front[at] ? q : at;
      u64 key = front[at];
      if (!heap.empty() && heap.top() < key) {
        key = heap.top();
        heap.pop();
      } else {
        head_at[at] = head_at[at] + 1 == ring ? 0 : head_at[at] + 1;
        front[at] = head_at[at] == tail_at[at] ? empty : keys[at * ring + head_at[at]];
      }
      const u64 done = key & id_mask;
      fo.push_back(static_cast<std::uint32_t>(done));
      return done;
    };
    auto push = [&](u64 key) __attribute__((always_inline)) {
      // (A queue whose last key is below, one a head keeps; else an empty one.)
      std::size_t at = queues;
      for (std::size_t q = 0; q < queues; ++q)
        if (front[q] != empty ? back[q] < key : at == queues) at = q;
      if (at == queues) return heap.push(key);
      if (front[at] == empty) front[at] = key;
      keys[at * ring + tail_at[at]] = key;
      back[at] = key;
      tail_at[at] = tail_at[at] + 1 == ring ? 0 : tail_at[at] + 1;
    };
    auto key_of = [](i64 last, u64 k) { return (static_cast<u64>(last) << id_bits) | k; };  // (last step, id)
    // Where the running CTAs are the last `slots` launched and finish in
    // launch order (a head's middle), CTA k takes the slot of k - slots as
    // it leaves, the queues aside (and filled again after).
    u64 done_below = 0, rising_from = 0;  // every CTA below done_below left; f rises from rising_from on
    for (u64 k = 0; k < n; ++k) {
      if (k >= slots && done_below <= k - slots && rising_from <= k - slots) {
        for (i64 last = f(k - 1); k < n; ++k) {
          const u64 done = k - slots;
          const i64 at = f(done) + 1, fk = at + static_cast<i64>(std::max<std::uint32_t>(e[k], 1)) - 1;
          if (fk < last) break;
          fo.push_back(static_cast<std::uint32_t>(done));
          s[k] = at, slot[k] = slot[done], last = fk;
          steps = std::max(steps, static_cast<u64>(fk) + 1);
          longest = std::max<u64>(longest, e[k]);
        }
        clear();
        for (u64 j = k - slots; j < k; ++j) push(key_of(f(j), j));
        done_below = k - slots;
        if (k == n) break;
      }
      i64 at = 0;
      slot[k] = static_cast<std::uint32_t>(k);
      if (k >= slots) {
        const u64 done = pop();
        at = f(done) + 1;
        slot[k] = slot[done];
        done_below = std::max(done_below, done + 1);
      }
      s[k] = at;
      const i64 fk = f(k);
      if (k > 0 && fk < f(k - 1)) rising_from = k;
      push(key_of(fk, k));
      steps = std::max(steps, static_cast<u64>(fk) + 1);
      longest = std::max<u64>(longest, e[k]);
    }
    while (fo.size() < n) pop();
  }
  if (hm) {
    PMh.resize(n);
  } else {
    PM.assign(grid.heads(), never);
  }
  i64 pm = never;
  if (by_arithmetic) {  // head by head: R from the next CTA's start but at the head's last
    for (u64 h0 = 0, h = 0; h0 < n; h0 += seq_q_blocks, ++h) {
      const u64 last = std::min(n, h0 + seq_q_blocks) - 1;
      for (u64 k = h0; k < last; ++k)
        if (e[k] > 0) pm = std::max(pm, s[k + 1] + static_cast<i64>(e[k]) - 1);
      if (e[last] > 0) {
        sp.push_back(last);
        sp_s.push_back(s[last]);
        spm.push_back(std::max(spm.empty() ? never : spm.back(), f(last)));
      }
      PM[h] = pm;
    }
  } else {
    for (u64 k = 0; k < n; ++k) {
      if (e[k] > 0 && last_in_chain(k)) {
        sp.push_back(k);
        sp_s.push_back(s[k]);
        spm.push_back(std::max(spm.empty() ? never : spm.back(), f(k)));
      }
      pm = std::max(pm, R(k));
      if (!hm) PM[head[k]] = pm;  // (a head's CTAs are consecutive: its last writes)
      if (hm) PMh[k] = pm;        // (one chain)
    }
  }
  // Ties of equal last steps were broken by id already: (last step, id) keys.
  if (hm) return;  // (the rest serves a head's first reads in query-block-major order)
  if (qo && !rows.empty()) {
    qpre.assign(n + 1, 0);
    opre.assign(n + 1, 0);
    for (u64 k = 0; k < n; ++k) {
      qpre[k + 1] = checked_add(qpre[k], qb(k), "L2 simulation bytes");
      opre[k + 1] = checked_add(opre[k], ob(fo[k]), "L2 simulation bytes");
    }
  }
  // A dense batch's heads are alike: the first CTA of a head that reads block
  // y, counted from the head's first.
  if (dense && !first_head.empty()) {
    first_reader.assign(grid.sequence(0).k_blocks, 0);
    u64 r = 0;
    for (u64 y = 0; y < first_reader.size(); ++y) {
      while (r < first_head.size() && e[r] <= y) ++r;
      first_reader[y] = r;
    }
  }
  // Per pair (a run of CTAs): where it ends, the last step of the CTAs before
  // it, and the bytes of the blocks its last CTA reads (every block its heads read).
  pair_end.assign(grid.pairs(), 0);
  fmax_before.assign(grid.pairs(), never);
  zpair.assign(grid.pairs(), 0);
  i64 fmax = never;
  for (u64 a = 0; a < n;) {
    u64 b = a;
    const u64 pa = pair_of(a);
    if (by_arithmetic) {  // (a: a head's first CTA; a pair's heads follow one another)
      u64 h = per_head(a);
      while (h + 1 < head_pair.size() && head_pair[h + 1] == pa) ++h;
      b = std::min(n, (h + 1) * seq_q_blocks);
    } else {
      while (b < n && pair[b] == pa) ++b;
    }
    u64 z = 0;
    for (u64 y = 0; y < e[b - 1]; ++y) z = checked_add(z, kv_bytes(b - 1, y), "L2 simulation bytes");
    pair_end[pa] = b;
    fmax_before[pa] = fmax;
    zpair[pa] = z;
    for (u64 k = a; k < b; ++k) fmax = std::max(fmax, f(k));
    a = b;
  }
}

u64 ChainGrid::next_reader(u64 k, u64 y) const {
  const u64 F = next_head(k);
  if (!first_reader.empty()) return F + first_reader[y];  // a dense batch: every head alike
  u64 lo = F, hi = F + (k + 1 - first_of_head(k));  // the next head has as many CTAs
  while (lo < hi) {
    const u64 mid = lo + (hi - lo) / 2;
    if (e[mid] > y) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

}  // namespace hbmscope::l2::chains
