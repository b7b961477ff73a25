// Bounds on a CTA's re-reads (docs/l2-chains.md): a read g
// steps after its predecessor counts, on each slot, the K/V accesses of the
// last min(g, G) steps or so (G: the gap from an access to its object's next
// access), so while every slot runs CTAs that read a block each step, a read
// sees at least min(g, G_min) - 1 and at most min(g, G_max) accesses a slot
// (over the slot's CTAs in the window; one more in head-major order). Each
// slot's window of CTAs moves with the readers, and counts of the slots'
// G_min and G_max give the sums over slots for any g. Where the bounds put all of a CTA's re-reads in
// one bucket of the tally, and below the largest distance, they are counted
// and not evaluated.
#include <algorithm>
#include <array>
#include <limits>
#include <span>

#include "l2_flash_chain_bounds.hpp"

namespace hbmscope::l2::chains {

void ChainBounds::Sums::reset() {
  count.assign(cap, 0);
  count16.assign(cap / 16 + 1, 0), sum16.assign(cap / 16 + 1, 0);
  count256.assign(cap / 256 + 1, 0), sum256.assign(cap / 256 + 1, 0);
  total = 0;
}

void ChainBounds::Sums::add(i64 value, i64 sign) {
  const u64 v = static_cast<u64>(std::min<i64>(value, cap - 1));
  const i64 w = sign * static_cast<i64>(v);
  count[v] += static_cast<std::int32_t>(sign);
  count16[v / 16] += sign, sum16[v / 16] += w;
  count256[v / 256] += sign, sum256[v / 256] += w;
  total += sign;
}

template <std::size_t N>
void ChainBounds::Sums::below(const std::array<const Sums*, N>& t, i64 g, std::array<i64, N>& c,
                              std::array<i64, N>& s) {
  const u64 n = static_cast<u64>(g);
  c.fill(0), s.fill(0);
  for (u64 b = 0; b < n / 256; ++b)
    for (std::size_t j = 0; j < N; ++j) c[j] += t[j]->count256[b], s[j] += t[j]->sum256[b];
  for (u64 b = n / 256 * 16; b < n / 16; ++b)
    for (std::size_t j = 0; j < N; ++j) c[j] += t[j]->count16[b], s[j] += t[j]->sum16[b];
  for (u64 v = n / 16 * 16; v < n; ++v)
    for (std::size_t j = 0; j < N; ++j) c[j] += t[j]->count[v], s[j] += static_cast<i64>(v) * t[j]->count[v];
}

// Values from cap - 1 on are kept as cap - 1: below that the sums are exact;
// from there, at least the sum at cap - 1, at most that and g for each such value.
i64 ChainBounds::Sums::capped_lo(i64 g) const { return capped(std::min(g, cap - 1)); }

i64 ChainBounds::Sums::capped_hi(i64 g) const {
  if (g < cap) return capped(g);
  std::array<i64, 1> c, s;
  below<1>({this}, cap - 1, c, s);  // the values at cap - 1 stand for any value from there: g each
  return s[0] + g * (total - c[0]);
}

void ChainBounds::Sums::capped_both(const Sums& a, const Sums& b, i64 g, i64& sa, i64& sb) {
  std::array<i64, 2> c, s;
  below<2>({&a, &b}, g, c, s);
  sa = s[0] + g * (a.total - c[0]);
  sb = s[1] + g * (b.total - c[1]);
}

i64 ChainBounds::Sums::capped(i64 g) const {  // the sum over slots of min(g, value), g < cap
  std::array<i64, 1> c, s;
  below<1>({this}, g, c, s);
  return s[0] + g * (total - c[0]);
}

ChainBounds::ChainBounds(const ChainGrid& g, bool wide) : c_(g) {
  // Bounds hold where every slot runs a CTA reading one K/V block at each step
  // of the window: no CTA without key blocks, the slots all busy (before the
  // last CTA starts), one block size.
  if (g.n < g.slots || !g.dense) return;
  for (u64 k = 0; k < g.n; ++k)
    if (g.e[k] == 0) return;
  usable_ = true;
  // The CTAs of each slot in order (list scheduling: a finishing CTA's slot
  // takes the next one), with their gaps to their blocks' next access, at
  // least and at most (a head's last CTA: at least to its next head's first
  // start; none: unbounded).
  const u64 S = g.slots;
  slot_start_.assign(S + 1, 0);
  slot_cta_.resize(g.n);
  wide_ = wide || g.steps > 0xffffffffu;
  if (wide_) place_s_.resize(g.n);
  else place_s32_.resize(g.n);
  slot_last_.assign(S, never);
  pos_.resize(g.n);
  std::vector<u64> count(S, 0);
  for (u64 k = 0; k < g.n; ++k) ++count[g.slot[k]];
  for (u64 v = 0; v < S; ++v) slot_start_[v + 1] = slot_start_[v] + count[v];
  std::vector<u64> at(slot_start_.begin(), slot_start_.end() - 1);
  auto put = [&](u64 k, i64 lo, i64 hi) __attribute__((always_inline)) {
    const u64 v = g.slot[k], place = at[v]++;
    pos_[k] = static_cast<std::uint32_t>(place - slot_start_[v]);
    if (wide_) place_s_[place] = g.s[k];
    else place_s32_[place] = static_cast<std::uint32_t>(g.s[k]);
    slot_last_[v] = g.f(k);  // (a slot's CTAs in launch order: the last stays)
    slot_cta_[place] = {static_cast<std::uint16_t>(std::min<i64>(lo, Sums::cap)),
                        static_cast<std::uint16_t>(std::min<i64>(hi, Sums::cap))};
  };
  if (g.by_arithmetic) {  // head by head: a CTA's gap is the steps to the next one's start, but at the head's last
    for (u64 h0 = 0; h0 < g.n; h0 += g.seq_q_blocks) {
      const u64 last = std::min(g.n, h0 + g.seq_q_blocks) - 1;
      for (u64 k = h0; k < last; ++k) put(k, g.s[k + 1] - g.s[k], g.s[k + 1] - g.s[k]);
      put(last, g.next_head(last) != no_cta ? g.s[last + 1] - g.s[last] : Sums::cap, Sums::cap);
    }
  } else {
    for (u64 k = 0; k < g.n; ++k) {
      i64 lo = Sums::cap, hi = Sums::cap;
      if (g.R(k) != never) lo = hi = g.gap(k);
      else if (g.next_head(k) != no_cta) lo = g.s[k + 1] - g.s[k];
      put(k, lo, hi);
    }
  }
  // Every slot's window starts empty: its G_min and G_max as large as can be.
  for (Cursor& w : std::span(cursor_, g.hm ? 2 : 1)) {  // query-block-major: every re-reader's P is i - 1
    for (Sums* t : {&w.min, &w.max}) t->reset();
    w.win.assign(S, Window{});
    for (u64 v = 0; v < S; ++v) {
      w.win[v].lo = w.win[v].hi = w.win[v].seen_lo = w.win[v].seen_hi = slot_start_[v];
      w.win[v].gmin = w.win[v].gmax = Sums::cap;
      w.min.add(Sums::cap, +1);
      w.max.add(Sums::cap, +1);
    }
  }
  dirty_.assign(S, 0);
  touched_.assign(S, 0);
  rising_ = g.hm && g.seq_ctas > 0;
  for (u64 k = 1; rising_ && k < std::min(g.n, g.seq_ctas); ++k) rising_ = g.e[k] >= g.e[k - 1];
  zhi_ = g.zfull(0);
  zlo_ = std::min(g.zfull(0), g.zlast(0));
  const u64 most_rows = g.rows.empty() ? g.rows0 : *std::max_element(g.rows.begin(), g.rows.end());
  qmax_ = g.q_row * most_rows;
  omax_ = g.o_row * most_rows;
}

void ChainBounds::move_to(Cursor& cu, i64 X, i64 Thi) {
  // Far ahead (past a repeated head's CTAs, whose bounds are not asked
  // for): every slot's window found by a search in its list, not CTA by CTA
  // (some slots' worth of searches against more CTAs' steps).
  const u64 far = 8 * c_.slots;
  if (cu.started + far < c_.n && c_.s[cu.started + far] <= Thi && cu.ended + far < c_.n && c_.fin(cu.ended + far) < X) {
    cu.started = static_cast<u64>(std::upper_bound(c_.s.begin(), c_.s.end(), Thi) - c_.s.begin());
    cu.ended = c_.fin_bound(X, false, 0, c_.n);
    // (From where each window was: both ends only move on, and the arrays
    // are large, so nearby probes cost less than a bisection over the whole slot.)
    for (u64 v = 0; v < c_.slots; ++v) {
      seek(v, X, Thi, cu.win[v].lo, cu.win[v].hi);
      touch(v);
    }
  }
  // Right ends: CTAs started by Thi (Thi drops at a head's start: those
  // started after it leave).
  while (cu.started > 0 && c_.s[cu.started - 1] > Thi) {
    const u64 k = --cu.started, v = c_.slot[k];
    Window& w = cu.win[v];
    w.hi = std::max(w.lo, std::min(w.hi, slot_start_[v] + pos_[k]));
    touch(v);
  }
  while (cu.started < c_.n && c_.s[cu.started] <= Thi) {
    const u64 k = cu.started++, v = c_.slot[k];
    Window& w = cu.win[v];
    w.hi = std::max(w.hi, slot_start_[v] + pos_[k] + 1);
    touch(v);
  }
  // Left ends: CTAs that ended before X leave for good.
  while (cu.ended < c_.n && c_.fin(cu.ended) < X) {
    const u64 k = c_.fo[cu.ended++], v = c_.slot[k];
    Window& w = cu.win[v];
    w.lo = std::max(w.lo, slot_start_[v] + pos_[k] + 1);
    w.hi = std::max(w.hi, w.lo);
    touch(v);
  }
  for (u64 t = 0; t < ntouched_; ++t) {
    const u64 v = touched_[t];
    dirty_[v] = 0;
    Window& w = cu.win[v];
    // (A window that only grew on the right adds its new CTAs' gaps.)
    const bool grew = w.lo == w.seen_lo && w.hi >= w.seen_hi && w.seen_hi > w.seen_lo;
    i64 lo = grew ? w.gmin : Sums::cap, hi = grew ? w.gmax : 0;
    for (u64 j = grew ? w.seen_hi : w.lo; j < w.hi; ++j) {
      lo = std::min<i64>(lo, slot_cta_[j].gap_lo);
      hi = std::max<i64>(hi, slot_cta_[j].gap_hi);
    }
    if (w.lo == w.hi) hi = Sums::cap;
    w.seen_lo = w.lo, w.seen_hi = w.hi;
    if (lo != w.gmin) {
      cu.min.add(w.gmin, -1);
      cu.min.add(lo, +1);
      w.gmin = lo;
    }
    if (hi != w.gmax) {
      cu.max.add(w.gmax, -1);
      cu.max.add(hi, +1);
      w.gmax = hi;
    }
  }
  ntouched_ = 0;
}

Bounds ChainBounds::of(u64 i, u64 P) {
  Bounds b;
  at_ = nullptr;
  const std::optional<Span> w = reread_span(i, P);
  if (!w) return b;
  const auto [g, X, Thi] = *w;
  Cursor& cu = cursor_[P + 1 == i ? 0 : 1];
  if (X < cu.last_x) return b;
  cu.last_x = X;
  move_to(cu, X, Thi);
  at_ = &cu;
  // Per slot at least min(g, G_min) - 1 (none where G_min is 0), at most
  // min(g, G_max); in head-major order one more (a CTA between P and i, or
  // one before i whose next reader comes after i, counts a step more). Q
  // tiles started and O tiles ended from X to Thi.
  // (Σ min(g, G_min) - 1 over the slots whose G_min is not 0: less the count of those.)
  const i64 nonzero = cu.min.total - cu.min.count[0];
  i64 lo_sum = 0, hi_sum = 0;
  if (g < Sums::cap) Sums::capped_both(cu.min, cu.max, g, lo_sum, hi_sum);
  else lo_sum = cu.min.capped_lo(g), hi_sum = cu.max.capped_hi(g);
  const u64 blocks_lo = g == 0 ? 0 : static_cast<u64>(std::max<i64>(0, lo_sum - nonzero));
  const u64 blocks_hi = static_cast<u64>(hi_sum) + (c_.hm ? c_.slots : 0);
  u64 qo = 0;
  if (c_.qo) {
    cu.from = P;  // the first id started at X
    while (cu.from > 0 && c_.s[cu.from - 1] == X) --cu.from;
    // O tiles ended by Thi: a pointer that moves up with Thi, searched again where it drops.
    if (cu.ended_by > 0 && c_.fin(cu.ended_by - 1) > Thi) cu.ended_by = c_.fin_bound(Thi, true, 0, cu.ended_by);
    while (cu.ended_by < c_.n && c_.fin(cu.ended_by) <= Thi) ++cu.ended_by;
    qo = (cu.started - cu.from) * qmax_ + (std::max(cu.ended_by, cu.ended) - cu.ended) * omax_;
  }
  b.lo = zlo_ + zlo_ * blocks_lo;
  b.hi = zhi_ + zhi_ * blocks_hi + qo;
  if (rising_) {
    // Head-major order, a dense batch: at most every object the CTAs that
    // run in the window can access, each pair's blocks below the largest e
    // among them (tight where all the heads' CTAs read all of theirs in between).
    const i64 x0 = X - static_cast<i64>(c_.longest) + 1;
    while (cu.alive < c_.n && c_.s[cu.alive] < x0) ++cu.alive;
    while ((cu.alive_seq + 1) * c_.seq_ctas <= cu.alive) ++cu.alive_seq;
    b.hi = std::min(b.hi, kv_of(cu.alive_seq, cu.started) + qo);
  }
  b.qo = qo;
  b.valid = true;
  return b;
}

Bounds ChainBounds::of_run(u64 a, u64 b, i64 g_lo, bool near_only) {
  Bounds r;
  // (Query-block-major: a run that starts a head or reaches the next one
  // holds a head's first CTA, which re-reads nothing: none, below.)
  if (!usable_ || b <= a) return r;
  // The union of the counted CTAs' windows (those whose g is at least g_lo,
  // P = i - 1 alone where near_only): from the earliest predecessor's start
  // to the latest last re-read; their smallest and largest g.
  i64 X = std::numeric_limits<i64>::max(), Thi = std::numeric_limits<i64>::min();
  i64 gmin = std::numeric_limits<i64>::max(), gmax = 0;
  for (u64 k = a; k < b; ++k) {
    const u64 P = c_.prev(k);
    if (P == no_cta || c_.e[P] == 0) return r;
    const i64 g = c_.s[k] - c_.s[P];
    if (g < g_lo || (near_only && P + 1 != k)) continue;
    X = std::min(X, c_.s[P]);
    gmin = std::min(gmin, g), gmax = std::max(gmax, g);
    Thi = std::max(Thi, c_.s[k] + static_cast<i64>(c_.e[P]) - 1);
  }
  if (X == std::numeric_limits<i64>::max() || Thi > c_.s[c_.n - 1]) return r;  // (none counted)
  const u64 S = c_.slots;
  if (run_lo_.size() != S) run_lo_.assign(slot_start_.begin(), slot_start_.end() - 1), run_hi_ = run_lo_;
  // (Each slot's window from where the last call's was: a run moves it by a
  // CTA or two, back where a run starts in another head.)
  i64 lo_blocks = 0, hi_blocks = 0;
  for (u64 v = 0; v < S; ++v) {
    seek(v, X, Thi, run_lo_[v], run_hi_[v]);
    const u64 lo = run_lo_[v], hi = run_hi_[v];
    // (As of(): an empty window's gaps as large as can be; a gap from cap - 1
    // on stands for any, g above.)
    i64 Gmin = Sums::cap, Gmax = lo == hi ? Sums::cap : 0;
    for (u64 j = lo; j < hi; ++j) Gmin = std::min<i64>(Gmin, slot_cta_[j].gap_lo), Gmax = std::max<i64>(Gmax, slot_cta_[j].gap_hi);
    lo_blocks += std::max<i64>(0, std::min({gmin, Gmin, Sums::cap - 1}) - 1);
    hi_blocks += (Gmax >= Sums::cap - 1 ? gmax : std::min(gmax, Gmax)) + (c_.hm ? 1 : 0);
  }
  u64 qo = 0;
  if (c_.qo) {
    const u64 q0 = static_cast<u64>(std::lower_bound(c_.s.begin(), c_.s.end(), X) - c_.s.begin());
    const u64 q1 = static_cast<u64>(std::upper_bound(c_.s.begin() + static_cast<std::ptrdiff_t>(q0), c_.s.end(), Thi) - c_.s.begin());
    const u64 o0 = c_.fin_bound(X, false, 0, c_.n), o1 = c_.fin_bound(Thi, true, o0, c_.n);
    qo = (q1 - q0) * qmax_ + (o1 - o0) * omax_;
  }
  r.lo = zlo_ + zlo_ * static_cast<u64>(lo_blocks);
  r.hi = zhi_ + zhi_ * static_cast<u64>(hi_blocks) + qo;
  r.qo = qo;
  r.valid = true;
  return r;
}

bool ChainBounds::quick(Quick& k, u64 i, u64 P, u64 first, Bounds& b) {
  const std::optional<Span> w = reread_span(i, P);
  if (!w) return false;
  const auto [g, X, Thi] = *w;
  // (As of(): at most min(g, G_max) a slot, one more in head-major order.)
  const u64 kv = zhi_ + zhi_ * c_.slots * static_cast<u64>(g + (c_.hm ? 1 : 0));
  if (kv > first) return false;  // (g alone: no tiles counted, no backing off)
  u64 qo = 0;
  if (c_.qo) {
    // Pointers that move with X and Thi: searched from where they were, up
    // in steps that double (calls may be far apart), down by bisection.
    auto count = [&](u64& at, auto v, i64 step, bool by) {  // the values v(j) below step (by: up to it)
      return at = first_not_from(at, 0, c_.n, [&](u64 j) { return by ? v(j) <= step : v(j) < step; });
    };
    auto start = [&](u64 j) { return c_.s[j]; };
    auto fin = [&](u64 j) { return c_.fin(j); };
    const u64 q0 = count(k.at[0], start, X, false), q1 = count(k.at[1], start, Thi, true);
    const u64 o0 = count(k.at[2], fin, X, false), o1 = count(k.at[3], fin, Thi, true);
    qo = (q1 - q0) * qmax_ + (o1 - o0) * omax_;
  }
  const u64 hi = kv + qo;
  k.back_off.tried(hi <= first);
  if (hi > first) return false;
  b.lo = std::min(zlo_, hi);  // (at least its own block)
  b.hi = hi;
  b.qo = qo;
  b.valid = true;
  return true;
}

namespace {
// The most of the sorted values v(j), j in [first, last), within width of each other.
// (A count reached is only ever passed: each j compares v(j) with the value
// that would make one more.)
template <class V>
u64 densest(V v, u64 first, u64 last, i64 width) {
  if (first >= last) return 0;
  u64 best = 1;
  for (u64 j = first; j + best < last; ++j) {
    // (Four places at a time while none makes one more: no branch a place.)
    for (; j + best + 4 <= last; j += 4)
      if ((static_cast<int>(v(j + best) - v(j) <= width) | static_cast<int>(v(j + 1 + best) - v(j + 1) <= width) |
           static_cast<int>(v(j + 2 + best) - v(j + 2) <= width) | static_cast<int>(v(j + 3 + best) - v(j + 3) <= width)) != 0)
        break;
    while (j + best < last && v(j + best) - v(j) <= width) ++best;
  }
  return best;
}
}  // namespace

void ChainBounds::refine_lo(u64 i, u64 P, Bounds& b, u64 reach) const {
  // A slot adds at least min(g, G_min) accesses to a read at T, one less
  // where its first CTA launched from i on starts in the last g steps up to
  // T (its CTAs before count up to T, the others up to T - 1): at most as
  // many slots as such starts in g steps.
  // (With P = i - 1; in head-major order a CTA's window is never shorter
  // than in query-block-major order, so the count holds there too.)
  if (at_ == nullptr || P + 1 != i) return;
  const i64 g = c_.s[i] - c_.s[P];
  if (g < 1) return;
  const i64 most = at_->min.capped_lo(g);  // (no dips)
  if (most <= 0 || zlo_ + zlo_ * static_cast<u64>(most) < reach) return;
  const u64 dips = densest([&](u64 j) { return c_.s[j]; }, i, at_->started, g - 1);
  const i64 blocks = most - static_cast<i64>(dips);
  if (blocks > 0) b.lo = std::max(b.lo, zlo_ + zlo_ * static_cast<u64>(blocks));
}

void ChainBounds::refine_hi(u64 i, u64 P, Bounds& b) const {
  if (b.qo == 0 || at_ == nullptr) return;
  // Q tiles start and O tiles end in the last g + 1 steps up to a read: at
  // most those of the densest g + 1 steps of the window.
  const auto [q, o] = densest_tiles(at_->from, at_->started, at_->ended, at_->ended_by, c_.s[i] - c_.s[P]);
  b.hi = b.hi - b.qo + q * qmax_ + o * omax_;
  b.qo = 0;
}

std::pair<u64, u64> ChainBounds::densest_tiles(u64 q_from, u64 q_to, u64 o_from, u64 o_to, i64 width) const {
  return {densest([&](u64 j) { return c_.s[j]; }, q_from, q_to, width), densest([&](u64 j) { return c_.fin(j); }, o_from, o_to, width)};
}

void ChainBounds::refine_hi_ahead(u64 i, u64 P, Bounds& b) {
  if (b.qo == 0 || at_ == nullptr) return;
  const i64 g = c_.s[i] - c_.s[P];
  Densest& d = ahead_;
  if (!(d.q_from <= at_->from && at_->started <= d.q_to && d.o_from <= at_->ended && at_->ended_by <= d.o_to && g <= d.width)) {
    d.q_from = at_->from, d.q_to = std::min(c_.n, at_->started + c_.slots);
    d.o_from = at_->ended, d.o_to = std::min(c_.n, at_->ended_by + c_.slots);
    d.width = g + g / 16 + 2;
    const auto [q, o] = densest_tiles(d.q_from, d.q_to, d.o_from, d.o_to, d.width);
    d.q = q, d.o = o;
  }
  b.hi = b.hi - b.qo + d.q * qmax_ + d.o * omax_;
  b.qo = 0;
}

u64 ChainBounds::peak_hi(u64 i, u64 P) {
  const i64 g = c_.s[i] - c_.s[P], Tlo = c_.s[i], Thi = c_.s[i] + static_cast<i64>(c_.e[P]) - 1, from = Tlo - g;
  const i64 gamma = g / 8;  // gaps up to it are short (the group's other heads, in head-major order)
  if (short_gap_.size() != c_.slots) short_gap_.assign(c_.slots, -1);
  events_.clear();
  // Slope changes: those up to Tlo summed at once (at T past them: A T - B),
  // those up to Thi kept as keys (steps past Tlo, sign) to sort, the rest dropped.
  i64 A = 0, B = 0;
  auto event = [&](i64 x, i64 w) {
    if (x <= Tlo) A += w, B += w * (x - 1);
    else if (x <= Thi) events_.push_back(static_cast<u64>(x - Tlo) << 1 | (w > 0 ? 1 : 0));
  };
  auto lasting = [&](u64 k, i64 M) {  // |[T - M, T] ∩ [s_k, b_k]| in T, as slope changes
    const i64 a = c_.s[k], b = c_.s[k] + static_cast<i64>(c_.e[k]) - 1;  // (every such CTA reads)
    if (b < from) return;
    event(a, 1), event(a + M + 1, -1), event(b + 1, -1), event(b + M + 2, 1);
  };
  const u64 up_to = static_cast<u64>(std::upper_bound(c_.s.begin(), c_.s.end(), Thi) - c_.s.begin());
  auto regular = [&](u64 k, i64 G) {  // k's last access at from or later
    if (G > gamma) return lasting(k, std::min(g, G));
    i64& v = short_gap_[c_.slot[k]];
    if (v < 0) short_slots_.push_back(c_.slot[k]);
    v = std::max(v, G);
  };
  if (c_.hm) {
    // One chain of launches: the regular CTAs alive at from are among the ids
    // from the first whose prefix maximum of R reaches it, read in order.
    const u64 k0 = static_cast<u64>(
        std::partition_point(c_.PMh.begin(), c_.PMh.begin() + static_cast<std::ptrdiff_t>(up_to),
                             [&](i64 r) { return r < from; }) -
        c_.PMh.begin());
    for (u64 k = k0; k < up_to; ++k) {
      const i64 b = c_.s[k] + static_cast<i64>(c_.e[k]) - 1;
      if (const i64 r = c_.R(k); r != never && b >= from) regular(k, r - b);
    }
  } else {
    c_.regular_from(up_to, from, [&](u64 k, i64 r) {
      const i64 b = c_.s[k] + static_cast<i64>(c_.e[k]) - 1;
      if (b >= from) regular(k, r - b);
    });
  }
  for (u64 j = static_cast<u64>(std::upper_bound(c_.sp_s.begin(), c_.sp_s.end(), Thi) - c_.sp_s.begin());
       j-- > 0 && c_.spm[j] >= from;)
    lasting(c_.sp[j], g);
  i64 blocks = 0;
  for (u64 v : short_slots_) {
    blocks += std::min(g, short_gap_[v]) + 1;
    short_gap_[v] = -1;
  }
  short_slots_.clear();
  // The worst read: the largest of a piecewise linear sum, at an end of a piece.
  std::sort(events_.begin(), events_.end());
  i64 best = A * Tlo - B;
  for (std::size_t at = 0; at < events_.size();) {
    const i64 x = Tlo + static_cast<i64>(events_[at] >> 1);
    best = std::max(best, A * (x - 1) - B);
    for (; at < events_.size() && Tlo + static_cast<i64>(events_[at] >> 1) == x; ++at) {
      const i64 w = (events_[at] & 1) != 0 ? 1 : -1;
      A += w, B += w * (x - 1);
    }
    best = std::max(best, A * x - B);
  }
  best = std::max(best, A * Thi - B);
  // Q tiles started and O tiles ended from the first read's predecessor on.
  auto in = [](const auto& v, i64 lo, i64 hi) {
    return static_cast<u64>(std::upper_bound(v.begin(), v.end(), hi) - std::lower_bound(v.begin(), v.end(), lo));
  };
  u64 qo = 0;
  if (c_.qo) {
    const u64 o1 = c_.fin_bound(Thi, true, 0, c_.n);
    qo = in(c_.s, from, Thi) * qmax_ + (o1 - c_.fin_bound(from, false, 0, o1)) * omax_;
  }
  return zhi_ + zhi_ * static_cast<u64>(blocks + best) + qo;
}

u64 ChainBounds::kv_of(u64 q0, u64 b) const {
  // Per sequence from q0 on, its pairs' blocks below the largest e: that of its last CTA before b.
  u64 sum = 0;
  for (u64 q = q0; q * c_.seq_ctas < b; ++q) {
    const u64 E = c_.e[std::min(b, (q + 1) * c_.seq_ctas) - 1];
    sum += c_.kv_heads * ((E - 1) * zhi_ + (E == c_.nkb(0) ? c_.zlast(0) : zhi_));
  }
  return sum;
}

}  // namespace hbmscope::l2::chains
