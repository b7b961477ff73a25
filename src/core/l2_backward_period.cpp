// The masked backward's schedule in a period of heads (docs/l2-backward.md,
// "The outside by periods"): where every head key is alike, the slots settle
// into a pattern that repeats every few heads, each CTA starting a fixed
// number of steps after the CTA as many heads before. Found from a hash of
// each head's starts relative to its first, then checked CTA by CTA.
#include <algorithm>

#include "l2_backward_outside.hpp"

namespace hbmscope::l2 {

using u64 = std::uint64_t;

BackwardPeriod backward_period(const BackwardKeys& in, const CtasByHead& by_head) {
  const Array<BackwardCta>& ct = *in.ct;
  const Array<u64>& start = *in.start;
  const std::vector<u64>& row0 = *in.head_row0;
  const Array<std::uint32_t>& n_rows = *in.n_rows;
  const u64 H = row0.size() - 1, n = ct.size();
  if (!in.periods || H < 3 || n == 0 || n % H != 0 || !by_head.ids.empty()) return {};
  const u64 m = n / H, nq = row0[1] - row0[0];
  // Every head alike (row by row and CTA by CTA where the grid does not make
  // them so).
  for (u64 h = 0; h < H; ++h) {
    if (by_head.at[h] != h * m || row0[h + 1] - row0[h] != nq) return {};
    for (u64 i = 0; i < nq && !in.heads_alike; ++i)
      if (n_rows[row0[h] + i] != n_rows[row0[0] + i]) return {};
  }
  for (u64 h = 1; h < H && !in.heads_alike; ++h)
    for (u64 j = 0, x = h * m; j < m; ++j, ++x)
      if (ct[x].first != ct[j].first || ct[x].end != ct[j].end || ct[x].cols != ct[j].cols) return {};
  // Each head's starts, relative to its first, hashed (a sum weighted by
  // position, with no chain between the terms; matches are checked below).
  std::vector<u64> hash(H), base(H);
  for (u64 h = 0; h < H; ++h) {
    base[h] = start[h * m];
    u64 k = 0;
    for (u64 j = 0, x = h * m; j < m; ++j, ++x) k += (start[x] - base[h] + 1) * ((j * 0x9e3779b97f4a7c15ull) | 1);
    hash[h] = k;
  }
  // The period whose heads begin earliest: for each number of heads, the
  // last heads back from the end that repeat the one as many before, by
  // hash and shift (a budget of work, for grids of very many heads).
  u64 from = H, delta = 0;
  for (u64 d = 1, budget = 8 * H + 65536; d < H && d < from && budget > 0; ++d) {
    const u64 sigma = base[H - 1] - base[H - 1 - d];
    u64 f = H;
    for (u64 h = H; h-- > d && budget > 0; --budget) {
      if (hash[h] != hash[h - d] || base[h] - base[h - d] != sigma) break;
      f = h;
    }
    if (f < from) from = f, delta = d;
  }
  if (delta == 0) return {};
  // Checked CTA by CTA, from the end.
  const u64 D = delta * m, sigma = base[H - 1] - base[H - 1 - delta];
  u64 checked = H;
  for (u64 h = H; h-- > from;) {
    bool same = true;
    for (u64 x = h * m; x < (h + 1) * m && same; ++x) same = start[x] - start[x - D] == sigma;
    if (!same) break;
    checked = h;
  }
  if (checked == H) return {};
  return {delta, D, sigma, checked, m};
}

}  // namespace hbmscope::l2
