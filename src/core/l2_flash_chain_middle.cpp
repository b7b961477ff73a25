// A head's middle (docs/l2-chains.md, "A head's middle"):
// where every neighbour of a re-read is on a side of its reader known
// without the reader (CTAs that start within the read's window come after
// it, those that end within it before, later heads' after), the distance is
// one function of (step, g) for all of a head's readers of that g, but at a
// reader's first read (its own Q tile, its predecessor's starting peers')
// and its last (its predecessor's O tile, its own peers' ending then).
// Profiles of that function over stretches of steps serve many readers; a
// reader whose g has none is placed between those of the nearest g below
// and above, as a distance does not decrease with g.
#include <algorithm>
#include <limits>

#include "l2_flash_chains.hpp"

namespace hbmscope::l2::chains {

bool ChainReads::in_middle(u64 i, u64 m) const {
  if (!middle_ok_ || m == 0) return false;
  const u64 hf = c_.first_of_head(i);
  if (hf == i) return false;
  const i64 Tlo = c_.s[i], g = Tlo - c_.s[i - 1], Thi = Tlo + static_cast<i64>(m) - 1;
  if (g < 1) return false;
  // Heads' last CTAs accessed in the windows: this head's and later ones'
  // come after i (as their blocks' next readers do); an earlier one's
  // blocks there must be next read after i, or never.
  u64 j = static_cast<u64>(std::upper_bound(c_.sp_s.begin(), c_.sp_s.end(), Thi) - c_.sp_s.begin());
  while (j-- > 0 && c_.spm[j] >= Tlo - g) {
    const u64 kk = c_.sp[j];
    if (kk >= hf || c_.f(kk) < Tlo - g) continue;
    const i64 ylo = std::max<i64>(0, Tlo - g - c_.s[kk]);
    if (c_.next_head(kk) != no_cta && ylo < static_cast<i64>(c_.e[kk]) && c_.next_reader(kk, static_cast<u64>(ylo)) <= i)
      return false;
  }
  return true;
}

void ChainReads::build(Profile& p, i64 A, i64 B) {
  const i64 g = p.g, L = B - A + 1;
  const u64 nh = p.hf + c_.seq_q_blocks;  // later heads' CTAs: after every reader
  const std::size_t at0 = p.phi.size();
  ++stats_.builds, stats_.steps += static_cast<u64>(L);
  p.B = B;
  p.phi.resize(at0 + static_cast<std::size_t>(L));
  p.le.resize(at0 + static_cast<std::size_t>(L) + 1);
  if (pd2_.size() < static_cast<std::size_t>(L) + 2) pd2_.assign(static_cast<std::size_t>(L) + 2, 0);
  i64* d2 = pd2_.data();
  Ramps ramps(d2, A, B);  // (as evaluate places them)
  const i64 z = static_cast<i64>(c_.zfull(0));
  // Regular CTAs: M = min(g, G). An earlier CTA's access at t counts for the
  // reads at t to t + M - 1; a later one's from t + 1 to t + M. A CTA of
  // this head or an earlier one ends as an earlier one (it ends within a
  // reader's window only if it is) and starts as a later one (likewise).
  const u64 up_to = static_cast<u64>(std::upper_bound(c_.s.begin(), c_.s.end(), B) - c_.s.begin());
  c_.regular_from(up_to, A - 1, [&](u64 k, i64 r) {
    const i64 b = c_.s[k] + static_cast<i64>(c_.e[k]) - 1, M = std::min(g, r - b);
    if (k >= nh) return ramps.trapezoid(c_.s[k] + 1, b + 1, M, z);
    // (Its accesses from s on, less the first's box where that ends by b:
    // the accesses from s + 1 on.)
    if (c_.s[k] + M - 1 <= b) return ramps.trapezoid(c_.s[k] + 1, b, M, z);
    ramps.trapezoid(c_.s[k], b, M, z);
    ramps.range(c_.s[k], b, -z);
  });
  // Heads' last CTAs: block y counts up to its next access (by the next
  // head's first reader of y, after every reader) or g steps; an earlier
  // head's from its access, this head's last and later ones' a step later.
  u64 j = static_cast<u64>(std::upper_bound(c_.sp_s.begin(), c_.sp_s.end(), B) - c_.sp_s.begin());
  while (j-- > 0 && c_.spm[j] >= A - g) {
    const u64 kk = c_.sp[j];
    const i64 sk = c_.s[kk], d = kk >= p.hf;
    const i64 ylo = std::max<i64>(0, A - g - sk), yhi = std::min<i64>(static_cast<i64>(c_.e[kk]) - 1, B - sk);
    if (ylo > yhi) continue;
    i64 ystar = ylo;
    if (c_.next_head(kk) != no_cta) {
      // (The blocks whose next access comes sooner than g steps: a prefix.)
      ystar = static_cast<i64>(first_not(static_cast<u64>(ylo), static_cast<u64>(yhi) + 1,
                                         [&](u64 y) { return c_.s[c_.next_reader(kk, y)] < sk + g - 1 + d; }));
      for (i64 y = ylo; y < ystar; ++y) ramps.range(sk + y + d, c_.s[c_.next_reader(kk, static_cast<u64>(y))] + y, z);
    }
    ramps.trapezoid(sk + ystar + d, sk + yhi + d, g, z);
  }
  if (c_.qo) {
    // Q tiles as later CTAs' (from a step after their start); O tiles as
    // earlier ones' (from their last step), later heads' a step later.
    const u64 q0 = static_cast<u64>(std::lower_bound(c_.s.begin(), c_.s.end(), A - g) - c_.s.begin());
    for (u64 q = q0; q < up_to; ++q) ramps.range(c_.s[q] + 1, c_.s[q] + g, static_cast<i64>(c_.qb(q)));
    const u64 o0 = c_.fin_bound(A - g, false, 0, c_.n), o1 = c_.fin_bound(B, true, o0, c_.n);
    for (u64 o = o0; o < o1; ++o) {
      const i64 f = c_.fin(o), d = c_.fo[o] >= nh;
      ramps.range(f + d, f + g - 1 + d, static_cast<i64>(c_.ob(c_.fo[o])));
    }
  }
  const i64 C = static_cast<i64>(single_) - z;
  i64 V = ramps.v0, S = ramps.s0;
  i64* phi = p.phi.data() + at0;
  std::uint32_t* le = p.le.data() + at0;
  std::uint32_t n = le[0];
  // (Each block of 64 steps' largest as it is summed; a part block's so far,
  // from where the last extension left it.)
  constexpr std::size_t w = Profile::block;
  p.top.resize((at0 + static_cast<std::size_t>(L) + w - 1) / w);
  for (std::size_t x = 0, at = at0; x < static_cast<std::size_t>(L); at = at0 + x) {
    const std::size_t end = std::min(static_cast<std::size_t>(L), x + w - at % w);
    i64 top = at % w == 0 ? std::numeric_limits<i64>::min() : p.top[at / w];
    for (; x < end; ++x) {
      if (x > 0) S += d2[x], V += S;
      phi[x] = V;
      n += V <= C;
      le[x + 1] = n;
      top = std::max(top, V);
    }
    p.top[at / w] = top;
  }
  std::fill(d2 + 1, d2 + L + 2, 0);  // (after the pass: one store a step less in it)
}

i64 ChainReads::Profile::largest(std::size_t x0, std::size_t x1) const {
  constexpr std::size_t w = block;
  const i64* v = phi.data();
  i64 r = std::numeric_limits<i64>::min();
  for (; x0 < x1 && x0 % w != 0; ++x0) r = std::max(r, v[x0]);
  for (; x0 + w <= x1; x0 += w) r = std::max(r, top[x0 / w]);
  for (; x0 < x1; ++x0) r = std::max(r, v[x0]);
  return r;
}

u64 ChainReads::middle(u64 i, u64 m, Batches& b, bool most, u64 floor) {
  const i64 Tlo = c_.s[i], g = Tlo - c_.s[i - 1], Thi = Tlo + static_cast<i64>(m) - 1;
  const u64 hf = c_.first_of_head(i), nh = hf + c_.seq_q_blocks;
  ++stats_.ctas;
  // At the first read its own Q tile counts, not those of the CTAs started
  // with its predecessor (counted as later CTAs'); at the last, its
  // predecessor's O tile counts, not those of CTAs after it ending then.
  i64 first = 0, lastc = 0;
  if (c_.qo) {
    first += static_cast<i64>(c_.qb(i));
    for (u64 q = i; q-- > 0 && c_.s[q] == c_.s[i - 1];) first -= static_cast<i64>(c_.qb(q));
    lastc += static_cast<i64>(c_.ob(i - 1));
    for (u64 k = i; k < nh && c_.f(k) == Thi; ++k) lastc -= static_cast<i64>(c_.ob(k));
  }
  const i64 C = static_cast<i64>(single_) - static_cast<i64>(c_.zfull(0));
  auto corr = [&](i64 T) { return (T == Tlo ? first : 0) + (T == Thi ? lastc : 0); };
  auto val = [](const Profile& q, i64 T) { return q.phi[static_cast<std::size_t>(T - q.A)]; };
  auto cnt = [](const Profile& q, i64 a, i64 z) -> u64 {  // steps of [a, z] at most the capacity
    return a > z ? 0 : q.le[static_cast<std::size_t>(z - q.A + 1)] - q.le[static_cast<std::size_t>(a - q.A)];
  };
  Profile *p = nullptr, *lo = nullptr, *hi = nullptr;  // of g, the nearest g below and above: over the reads
  for (Profile& q : profiles_) {
    if (q.hf != hf || q.phi.empty() || q.A > Tlo || Thi > q.B) continue;
    if (q.g == g) p = &q;
    else if (q.g < g && (lo == nullptr || q.g > lo->g)) lo = &q;
    else if (q.g > g && (hi == nullptr || q.g < hi->g)) hi = &q;
  }
  // A profile of g over [A, B], in place of `stale` (one of g that ends before
  // the reads: no later CTA can use it) or of the least recently used one.
  auto fresh = [&](i64 A, i64 B, Profile* stale = nullptr) {
    Profile* e = stale != nullptr ? stale : &*std::min_element(profiles_.begin(), profiles_.end(), [](const Profile& x, const Profile& y) { return x.used < y.used; });
    e->g = g, e->hf = hf, e->A = A, e->used = ++clock_;
    e->phi.clear(), e->le.assign(1, 0), e->top.clear();
    build(*e, A, B);
    return e;
  };
  // A profile of g over [a, z]: one that begins by a and reaches it (extended
  // ahead where it ends before z; its steps before the reads dropped where
  // they are most of it), or one built from a ahead, as the head's next
  // readers of this g start later and read about as many blocks.
  // (At least ahead_ steps, fewer builds each with its neighbours to place;
  // not past the head's last read: no reader of this profile reads later.)
  const i64 ahead = std::min(Thi + std::clamp<i64>(64 * (g + 1), ahead_, std::max<i64>(static_cast<i64>(m), ahead_)), std::max(Thi, c_.f(nh - 1)));
  auto own = [&](i64 a, i64 z) -> Profile* {
    Profile *e = nullptr, *stale = nullptr;
    for (Profile& q : profiles_) {
      if (q.hf != hf || q.g != g || q.phi.empty()) continue;
      if (q.A <= a && a <= q.B + 1) e = &q;
      else if (q.B < a) stale = &q;  // (no later reader of g can use it)
    }
    if (e == nullptr) return fresh(a, std::max(z, ahead), stale);
    if (e->B < z) {
      // (Whole blocks of 64 steps: the largest of each stays as it is.)
      if (const i64 drop = (Tlo - e->A) / static_cast<i64>(Profile::block) * static_cast<i64>(Profile::block); 2 * drop > static_cast<i64>(e->phi.size())) {  // (a >= Tlo)
        e->phi.erase(e->phi.begin(), e->phi.begin() + drop);
        e->le.erase(e->le.begin(), e->le.begin() + drop);
        e->A += drop;
        e->top.erase(e->top.begin(), e->top.begin() + drop / static_cast<i64>(Profile::block));
      }
      build(*e, e->B + 1, std::max(z, ahead));
    }
    e->used = ++clock_;
    return e;
  };
  // The largest distance less a block over the reads, from a profile that
  // covers them (q's own g: exact; a larger g: at least that).
  auto top_of = [&](const Profile& q) {
    i64 top = val(q, Tlo) + corr(Tlo);
    if (Thi > Tlo) top = std::max(top, val(q, Thi) + lastc);
    if (m > 2) {
      const auto x = static_cast<std::size_t>(Tlo - q.A);
      top = std::max(top, q.largest(x + 1, x + m - 1));
    }
    return top;
  };
  // (With most, the nearest g above bounds the largest distance: where that
  // lies below the floor, the reads cannot hold the largest of all.)
  auto below_floor = [&] {
    return hi != nullptr &&
           static_cast<i64>(c_.zfull(0)) + top_of(*hi) < static_cast<i64>(std::min<u64>(floor, std::numeric_limits<i64>::max()));
  };
  if (p == nullptr && (lo != nullptr || hi != nullptr) && (!most || below_floor())) {
    // Between the nearest g below and above (where one is missing, every
    // step open on its side): a step is settled where both lie on one side
    // of the capacity; the open ones, a stretch, are profiled for g (unless
    // that is most of the reads).
    auto lo_le = [&](i64 x, i64 y) -> u64 { return lo != nullptr ? cnt(*lo, x, y) : x > y ? 0 : static_cast<u64>(y - x + 1); };
    auto hi_le = [&](i64 x, i64 y) -> u64 { return hi != nullptr ? cnt(*hi, x, y) : 0; };
    u64 le = 0;
    i64 a = Thi + 1, z = Tlo - 1;
    bool open_first = false, open_last = false;
    auto settle = [&](i64 T, bool& open) {
      if (hi != nullptr && val(*hi, T) + corr(T) <= C) ++le;
      else if (lo == nullptr || val(*lo, T) + corr(T) <= C) open = true, a = std::min(a, T), z = std::max(z, T);
    };
    settle(Tlo, open_first);
    if (Thi > Tlo) settle(Thi, open_last);
    const i64 u = Tlo + 1, v = Thi - 1;  // the reads between
    if (u <= v) {
      le += hi_le(u, v);
      if (lo_le(u, v) != hi_le(u, v)) {
        // (The open steps so far, lo's count less hi's, only grow.)
        auto open_to = [&](u64 T) { return lo_le(u, static_cast<i64>(T)) == hi_le(u, static_cast<i64>(T)); };
        auto open_from = [&](u64 T) { return lo_le(static_cast<i64>(T), v) != hi_le(static_cast<i64>(T), v); };
        a = std::min(a, static_cast<i64>(first_not(static_cast<u64>(u), static_cast<u64>(v) + 1, open_to)));
        z = std::max(z, static_cast<i64>(first_not(static_cast<u64>(u), static_cast<u64>(v) + 1, open_from)) - 1);
      }
    }
    {
      if (lo != nullptr) lo->used = ++clock_;
      if (hi != nullptr) hi->used = ++clock_;
      if (a <= z) {
        const Profile& e = *own(a, z);
        const i64 iu = std::max(a, u), iv = std::min(z, v);
        le += cnt(e, iu, iv) - hi_le(iu, iv);
        if (open_first) le += val(e, Tlo) + corr(Tlo) <= C;
        if (open_last) le += val(e, Thi) + corr(Thi) <= C;
      }
      ++stats_.between;
      b.of(c_.zfull(0)).counted(le, m - le, 0);
      return 0;
    }
  }
  if (p != nullptr) ++stats_.hits;
  else p = own(Tlo, Thi);
  p->used = ++clock_;
  u64 le = val(*p, Tlo) + corr(Tlo) <= C;
  if (Thi > Tlo) le += (val(*p, Thi) + lastc <= C) + cnt(*p, Tlo + 1, Thi - 1);
  const u64 largest = most ? c_.zfull(0) + static_cast<u64>(top_of(*p)) : 0;
  b.of(c_.zfull(0)).counted(le, m - le, largest);
  return largest;
}

}  // namespace hbmscope::l2::chains
