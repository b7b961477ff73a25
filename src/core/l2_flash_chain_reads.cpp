// Exact distances of the chains (docs/l2-chains.md): a read's
// distance is a sum over the accesses between it and its predecessor whose
// next access comes after it. For one CTA's re-reads each neighbour adds a
// trapezoid in the read's step, placed as slope changes in an array over the
// CTA's steps and summed in one pass; a single read sums its neighbours'
// counts directly.
#include <algorithm>
#include <limits>
#include <type_traits>

#include "l2_flash_chains.hpp"

namespace hbmscope::l2::chains {

ChainReads::ChainReads(const ChainGrid& g, const Tally& t)
    : c_(g), single_(t.capacities().size() == 1 && t.capacities()[0] > 0 ? t.capacities()[0] : 0) {
  d2_.assign(g.longest + 3, 0);  // (no CTA reads more blocks than the longest)
  middle_ok_ = single_ != 0 && !g.hm && g.dense && g.n > 0 && g.zlast(0) == g.zfull(0) && !g.first_reader.empty();
}

i64 ChainReads::between(u64 i, u64 P, i64 T, i64 g) const {
  i64 sum = 0;
  // CTAs that are not their head's last: the next access of each block is
  // the next CTA's, G steps later.
  const u64 up_to = static_cast<u64>(std::upper_bound(c_.s.begin(), c_.s.end(), T) - c_.s.begin());
  c_.regular_from(up_to, T - 1, [&](u64 k, i64 r) {
    const i64 b = c_.s[k] + static_cast<i64>(c_.e[k]) - 1, G = r - b;
    const i64 lo = std::max({c_.s[k], T - g + (k <= P), T - G + (k + 1 <= i)});
    const i64 hi = std::min(b, T - (k >= i));
    if (lo > hi) return;
    const bool part = c_.reads_partial(k);
    const i64 full_hi = part ? std::min(hi, b - 1) : hi;
    if (full_hi >= lo) sum += (full_hi - lo + 1) * static_cast<i64>(c_.zfull(k));
    if (part && lo <= b && b <= hi) sum += static_cast<i64>(c_.zlast(k));
  });
  // Heads' last CTAs: block y's next access is the next head's (or none).
  u64 j = static_cast<u64>(std::upper_bound(c_.sp_s.begin(), c_.sp_s.end(), T) - c_.sp_s.begin());
  while (j-- > 0 && c_.spm[j] >= T - g) {
    const u64 h = c_.sp[j];
    const i64 ylo = std::max<i64>(0, T - g + (h <= P) - c_.s[h]);
    const i64 yhi = std::min<i64>(static_cast<i64>(c_.e[h]) - 1, T - (h >= i) - c_.s[h]);
    if (ylo > yhi) continue;
    i64 y0 = ylo;
    if (c_.next_head(h) != no_cta) {  // the first y whose next access comes after the read
      i64 lo = ylo, hi = yhi + 1;
      while (lo < hi) {
        const i64 mid = lo + (hi - lo) / 2;
        const u64 r = c_.next_reader(h, static_cast<u64>(mid));
        const i64 N = c_.s[r] + mid;
        if (N > T || (N == T && r > i)) hi = mid;
        else lo = mid + 1;
      }
      y0 = lo;
    }
    if (y0 > yhi) continue;
    const i64 top = std::min<i64>(yhi, static_cast<i64>(c_.nkb(h)) - 2);  // full blocks, then the last one
    if (top >= y0) sum += (top - y0 + 1) * static_cast<i64>(c_.zfull(h));
    if (static_cast<u64>(yhi) + 1 == c_.nkb(h)) sum += static_cast<i64>(c_.zlast(h));
  }
  return sum;
}

u64 ChainReads::chain(u64 i, u64 P, u64 m, Batches& b, bool most, u64 floor) {
  if (profiles_on_ && in_middle(i, m)) return middle(i, m, b, most, floor);
  return evaluate<false>(i, P, m, &b, most);
}

// Regular neighbours: every block's next access G steps later. An access at
// t counts for the reads at t + d to t + E. (Lo: those re-read within g / 8
// steps left out.) For a run of readers (first to last, P their latest
// predecessor, g their least gap, reads at steps [Tlo, Thi]), at most each
// one's: each access counts for the reads from the latest d to the least E.
template <bool Lo, class R>
void ChainReads::place_regular(const Readers& rd, R& ramps) const {
  const i64 Tlo = rd.Tlo, Thi = rd.Thi, g = rd.g;
  const u64 P = rd.P, first = rd.first, last = rd.last;
  const i64 gamma = Lo ? g / 8 : -1;
  const u64 up_to = static_cast<u64>(std::upper_bound(c_.s.begin(), c_.s.end(), Thi) - c_.s.begin());
  // (A dense batch's blocks are all alike but perhaps the last.)
  const bool any_partial = !c_.dense || c_.zlast(0) != c_.zfull(0);
  const i64 z0 = static_cast<i64>(c_.zfull(0));
  auto regular = [&]<bool HM>(std::bool_constant<HM>) {
    auto visit = [&](u64 k, i64 r) {
      const i64 b = c_.s[k] + static_cast<i64>(c_.e[k]) - 1;
      if (Lo && r - b <= gamma) return;
      const u64 nx = HM ? c_.nxt[k] : k + 1;
      const i64 d = k >= first, E = std::min(g - (k <= P), r - b - (nx <= last)), M = E - d + 1;
      if (any_partial && c_.reads_partial(k)) {
        ramps.trapezoid(c_.s[k] + d, b - 1 + d, M, static_cast<i64>(c_.zfull(k)));
        ramps.range(b + d, b + d + M - 1, static_cast<i64>(c_.zlast(k)));
      } else {
        ramps.trapezoid(c_.s[k] + d, b + d, M, c_.dense ? z0 : static_cast<i64>(c_.zfull(k)));
      }
    };
    if (Lo && HM && c_.dense && c_.group > 1) {
      // A dense batch in head-major order: the long gaps are the groups'
      // last heads' (ids G - 1 mod G), read directly from the first id whose
      // prefix maximum of R reaches the reads.
      const u64 G = c_.group, k0 = static_cast<u64>(
                                  std::partition_point(c_.PMh.begin(), c_.PMh.begin() + static_cast<std::ptrdiff_t>(up_to),
                                                       [&](i64 r) { return r < Tlo - 1; }) -
                                  c_.PMh.begin());
      for (u64 k = k0 + (G - 1 + G - k0 % G) % G; k < up_to; k += G)
        if (const i64 r = c_.R(k); r >= Tlo - 1) visit(k, r);
    } else {
      c_.regular_from(up_to, Tlo - 1, visit);
    }
  };
  if (c_.hm) regular(std::true_type{});
  else regular(std::false_type{});
}

i64 least_of_cells(SlopeCell* cells, u64 steps, i64 v0, i64 s0, i64* ends) {
  constexpr u64 w = SlopeCells::width;
  i64 V = v0, S = s0, least = V;
  for (u64 k = 0; k * w + 1 < steps; ++k) {
    SlopeCell& cell = cells[k];
    const i64 n = static_cast<i64>(std::min(w, steps - 1 - k * w));  // (the last may be short)
    const i64 end = V + n * S + cell.weighted - (static_cast<i64>(w) - n) * cell.sum;
    least = std::min(least, std::max(V + n * std::min<i64>(0, S + cell.neg), end - (n - 1) * std::max<i64>(0, S + cell.pos)));
    if (ends != nullptr) ends[k] = end;
    V = end, S += cell.sum, cell = {};
  }
  return least;
}

// (From cells of 16 steps: the value at each cell's end exact, and within it
// at least the start's value less the cell's steps times its falling slope
// at most, or the end's less its rising slope at most, at a 16th of the
// steps. own: the readers' least block.)
u64 ChainReads::long_lo_cells(const Readers& rd, u64 own) {
  const auto m = static_cast<u64>(rd.Thi - rd.Tlo + 1);
  constexpr u64 w = SlopeCells::width;
  if (const u64 cells = (m + w - 2) / w; cells_.size() < cells) cells_.resize(cells);  // (over steps [1, m))
  BasicRamps<SlopeCells> ramps(SlopeCells{cells_.data(), m}, rd.Tlo, rd.Thi);
  place_regular<true>(rd, ramps);
  return own + static_cast<u64>(std::max<i64>(least_of_cells(cells_.data(), m, ramps.v0, ramps.s0), 0));
}

u64 ChainReads::long_lo(u64 i, u64 P, u64 m, u64 need) {
  // (Most calls settle from the cells.)
  if (m > 4 * SlopeCells::width)
    if (const u64 lo = long_lo_cells(Readers::of(c_, i, P, m), std::min(c_.zfull(i), c_.zlast(i))); lo >= need) return lo;
  return evaluate<true>(i, P, m, nullptr);
}

ChainReads::Readers ChainReads::readers_of(const std::vector<u64>& ctas, u64* own) const {
  // (The readers' least block, the latest predecessor, the least gap, the
  // union of their reads.)
  Readers rd{c_.s[ctas.front()], c_.s[ctas.front()], std::numeric_limits<i64>::max(), 0, ctas.front(), ctas.back()};
  for (const u64 i : ctas) {
    const u64 P = c_.prev(i);
    rd.Thi = std::max(rd.Thi, c_.s[i] + static_cast<i64>(c_.e[P]) - 1);
    rd.g = std::min(rd.g, c_.s[i] - c_.s[P]);
    rd.P = std::max(rd.P, P);
    if (own != nullptr) *own = std::min({*own, c_.zfull(i), c_.zlast(i)});
  }
  return rd;
}

u64 ChainReads::long_lo_run(const std::vector<u64>& ctas) {
  u64 own = ~u64{0};
  const Readers rd = readers_of(ctas, &own);
  return long_lo_cells(rd, own);
}

std::vector<i64> ChainReads::long_values(const std::vector<u64>& ctas, bool every) const {
  // (A single CTA as evaluate places it, not through readers_of: the
  // tests' reference for a run.)
  const Readers rd = ctas.size() == 1 ? Readers::of(c_, ctas[0], c_.prev(ctas[0]), c_.e[c_.prev(ctas[0])]) : readers_of(ctas, nullptr);
  const auto m = static_cast<std::size_t>(rd.Thi - rd.Tlo + 1);
  std::vector<i64> d2(m + 3, 0), v(m);
  Ramps ramps(d2.data(), rd.Tlo, rd.Thi);
  if (every) place_regular<false>(rd, ramps);
  else place_regular<true>(rd, ramps);
  i64 V = ramps.v0, S = ramps.s0;
  for (std::size_t x = 0; x < m; ++x) {
    if (x > 0) S += d2[x], V += S;
    v[x] = V;
  }
  return v;
}

template <bool Lo>
u64 ChainReads::evaluate(u64 i, u64 P, u64 m, Batches* batches, bool need_most) {
  const i64 base = c_.s[i], g = c_.s[i] - c_.s[P];
  const i64 Tlo = base, Thi = base + static_cast<i64>(m) - 1, mm = static_cast<i64>(m);
  i64* d2 = d2_.data();
  // D over the CTA's re-reads as second differences.
  Ramps ramps(d2, Tlo, Thi);
  place_regular<Lo>(Readers::of(c_, i, P, m), ramps);
  if constexpr (Lo) {
    // The smallest sum over the re-reads, the short last block's read too (at least the smaller block).
    i64 V = ramps.v0, S = ramps.s0, least = V;
    for (i64 x = 1; x < mm; ++x) {
      S += d2[x];
      V += S;
      least = std::min(least, V);
    }
    std::fill(d2 + 1, d2 + mm + 2, 0);  // (after the pass: no store in it)
    return std::min(c_.zfull(i), c_.zlast(i)) + static_cast<u64>(least);
  }
  // Heads' last CTAs: per block, up to its next access in the next head.
  u64 j = static_cast<u64>(std::upper_bound(c_.sp_s.begin(), c_.sp_s.end(), Thi) - c_.sp_s.begin());
  while (j-- > 0 && c_.spm[j] >= Tlo - g) {
    const u64 kk = c_.sp[j];
    const i64 d = kk >= i, le = kk <= P;
    const i64 ylo = std::max<i64>(0, Tlo - g - c_.s[kk]);
    const i64 yhi = std::min<i64>(static_cast<i64>(c_.e[kk]) - 1, Thi - c_.s[kk]);
    if (ylo > yhi) continue;
    i64 ystar = ylo;
    auto upper = [&](i64 y) {  // the last step at which y's access counts, by its next access
      const u64 r = c_.next_reader(kk, static_cast<u64>(y));
      return c_.s[r] + y - (r <= i);
    };
    if (c_.next_head(kk) != no_cta) {
      i64 lo = ylo, hi = yhi + 1;
      while (lo < hi) {
        const i64 mid = lo + (hi - lo) / 2;
        if (upper(mid) >= c_.s[kk] + mid + g - le) hi = mid;
        else lo = mid + 1;
      }
      ystar = lo;
      // Block by block (the next reader r(y) does not go down as y grows).
      u64 r = ystar > ylo ? c_.next_reader(kk, static_cast<u64>(ylo)) : 0;
      for (i64 y = ylo; y < ystar; ++y) {
        while (c_.e[r] <= static_cast<u64>(y)) ++r;
        const i64 t = c_.s[kk] + y;
        ramps.range(t + d, c_.s[r] + y - (r <= i), static_cast<i64>(c_.kv_bytes(kk, static_cast<u64>(y))));
      }
    }
    if (ystar > yhi) continue;
    const i64 lastfull = std::min<i64>(yhi, static_cast<i64>(c_.nkb(kk)) - 2);
    if (lastfull >= ystar)
      ramps.trapezoid(c_.s[kk] + ystar + d, c_.s[kk] + lastfull + d, g - le - d + 1, static_cast<i64>(c_.zfull(kk)));
    if (static_cast<u64>(yhi) + 1 == c_.nkb(kk) && ystar <= yhi) {
      const i64 t = c_.s[kk] + yhi;
      ramps.range(t + d, t + g - le, static_cast<i64>(c_.zlast(kk)));
    }
  }
  if (c_.qo) {
    const u64 q0 = static_cast<u64>(std::lower_bound(c_.s.begin(), c_.s.end(), Tlo - g) - c_.s.begin());
    const u64 q1 = static_cast<u64>(std::upper_bound(c_.s.begin(), c_.s.end(), Thi) - c_.s.begin());
    for (u64 q = q0; q < q1; ++q) ramps.range(c_.s[q] + (q > i), c_.s[q] + g - (q <= P), static_cast<i64>(c_.qb(q)));
    const u64 o0 = c_.fin_bound(Tlo - g, false, 0, c_.n), o1 = c_.fin_bound(Thi, true, o0, c_.n);
    for (u64 o = o0; o < o1; ++o) {
      const u64 kk = c_.fo[o];
      const i64 f = c_.f(kk);
      ramps.range(f + (kk >= i), f + g - (kk < P), static_cast<i64>(c_.ob(kk)));
    }
  }
  // One pass: pieces of constant slope to the tally.
  const bool part = m == c_.nkb(i) && c_.zlast(i) != c_.zfull(i);
  const i64 zf = static_cast<i64>(c_.zfull(i));
  Tally::Batch& full = batches->of(c_.zfull(i));
  i64 V = ramps.v0, S = ramps.s0;
  if (single_ != 0) {  // one capacity (a report row): counted step by step, without branches
    const i64 C = static_cast<i64>(single_) - zf, full_steps = part ? mm - 1 : mm;  // (V against C less the read)
    i64 le = 0, top = 0;
    if (full_steps > 0) {
      le += V <= C;
      top = std::max(top, V);
    }
    auto pass = [&]<bool Top>(std::bool_constant<Top>) {
#pragma GCC unroll 4
      for (i64 x = 1; x < full_steps; ++x) {
        S += d2[x];
        V += S;
        le += V <= C;
        if constexpr (Top) top = std::max(top, V);
      }
    };
    if (need_most) pass(std::true_type{});
    else pass(std::false_type{});
    u64 most = full_steps > 0 && need_most ? static_cast<u64>(zf + top) : 0;
    full.counted(static_cast<u64>(le), static_cast<u64>(full_steps - le), most);
    if (part) {
      if (mm > 1) {
        S += d2[mm - 1];
        V += S;
      }
      batches->of(c_.zlast(i)).reads(c_.zlast(i) + static_cast<u64>(V), 0, 1);
      most = std::max(most, c_.zlast(i) + static_cast<u64>(V));
    }
    std::fill(d2 + 1, d2 + mm + 2, 0);  // (after the pass: no store in it)
    return most;
  }
  u64 most = 0;
  for (i64 x = 0; x < mm;) {
    const i64 cap = part && x < mm - 1 ? mm - 1 : mm;
    i64 x1 = x + 1;
    while (x1 < cap && d2[x1] == 0) ++x1;
    const i64 z = part && x == mm - 1 ? static_cast<i64>(c_.zlast(i)) : zf;
    Tally::Batch& to = z == zf ? full : batches->of(static_cast<u64>(z));
    to.reads(static_cast<u64>(z + V), S, static_cast<u64>(x1 - x));
    V += S * (x1 - x - 1);
    most = std::max(most, static_cast<u64>(z + std::max(V, V - S * (x1 - x - 1))));
    if (x1 < mm) {
      S += d2[x1];
      d2[x1] = 0;
      V += S;
    }
    x = x1;
  }
  d2[mm] = 0, d2[mm + 1] = 0;
  return most;
}

}  // namespace hbmscope::l2::chains
