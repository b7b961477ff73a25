// The backward's main loop by rows: a fan of open reads evaluated at once
// (docs/l2-backward.md, "A fan's reads at once"). Where a generation of CTAs
// starts together, each one's first row has often been read last by the same
// earlier CTA P: CTA k0 + j reads row i0 + j at step T, after P read it at
// S0 + j. Each access between is there for a range of j, so the fan costs
// the CTAs beside it and its rows once, not once a read.
#include <algorithm>
#include <limits>

#include "l2_backward_rows_loop.hpp"

namespace hbmscope::l2::rows {

// Whether the single read o extends `fan` (a fan, or a single read) as its
// next CTA and row: one head, one step, each CTA's first row, after P.
bool Loop::fan_member(const Open& fan, const Open& o) const {
  if (o.i1 == none || o.i1 != o.i2 || fan.i1 == none || (!fan.fan && fan.i1 != fan.i2)) return false;
  const u64 n = fan.i2 - fan.i1 + 1;
  if (o.P != fan.P || o.k != fan.k + n || o.i1 != fan.i2 + 1) return false;
  if (ct_[o.k].head_key != ct_[fan.k].head_key || s_[o.k] != s_[fan.k]) return false;
  // (Each read at its CTA's start, and at least a step after P's.)
  auto first_read = [&](u64 k, u64 i) { return i == ct_[k].first && s_[k] > offset(fan.P) + static_cast<i64>(i); };
  return first_read(o.k, o.i1) && (n > 1 || first_read(fan.k, fan.i1));
}

// Between (S0 + j, P, row) and (T, k0 + j, row), in the order (step, CTA,
// K/V before row before dK, dV):
// - CTA x's K/V at (s, x) for j < s + [x > P] - S0, and where s = T only
//   from j = x - k0 (its own read comes after it; x < k0: all; past the fan:
//   none);
// - its dK, dV at (e, x) for j < e + [x >= P] - S0, and where e = T only
//   from j = x - k0 + 1;
// - its rows read at steps [max(s, S0 + j + [x <= P]), min(last, T - [x past
//   the fan])]: row r (read at t = r - base) for j <= r - base - S0 - [x <=
//   P], so each row is between for the reads j from 0 to the largest such
//   bound over the CTAs that read it, painted from the largest down;
// - a fan CTA k0 + m (not before P's reads, all at T) its first row, for
//   j > m.
bool Loop::fan_exact(const Open& o, const std::vector<u64>& near, std::vector<u64>& out) {
  const u64 k0 = o.k, P = o.P, n = o.i2 - o.i1 + 1, kn = k0 + n;
  if (n < 4) return false;  // (read by read costs less)
  const i64 T = s_[k0], S0 = offset(P) + static_cast<i64>(o.i1), last_j = static_cast<i64>(n) - 1;
  // (The fan's reads j in [0, last_j] as a run's window ends.)
  const RunWindow w{0, last_j, 0, 0, 0};
  fan_d_.assign(n + 1, 0);
  // (Where x lies among the fan's CTAs: the first read it comes before.)
  auto from = [&](u64 x, i64 past) { return x < k0 ? 0 : x < kn ? static_cast<i64>(x - k0) + past : last_j + 1; };
  fan_kv_.clear();
  fan_rows_.clear();
  i64 lo_row = std::numeric_limits<i64>::max(), hi_row = std::numeric_limits<i64>::min();
  for (const u64 x : near) {
    const i64 sx = s_[x], ex = e_[x];
    if (sx > T || ex < S0) continue;
    const BackwardCta c = ct_[x];
    const i64 bytes = static_cast<i64>(in_.kv_col * c.cols);
    if (const i64 lo = sx == T ? from(x, 0) : 0, hi = sx + (x > P ? 1 : 0) - S0 - 1; lo <= std::min(hi, last_j))
      fan_kv_.push_back({(*in_.kv_of)[x], lo, hi, bytes});
    if (dk_on_ && ex <= T) add(w, fan_d_, ex == T ? from(x, 1) : 0, ex + (x >= P ? 1 : 0) - S0 - 1, bytes);
    const i64 rows = static_cast<i64>(reads_rows(x));
    if (rows == 0 || (x >= k0 && x < kn)) continue;  // (a fan CTA's first row: below)
    const i64 base = static_cast<i64>(head_row0_[c.head_key] + c.first) - sx, before_p = x <= P ? 1 : 0;
    const i64 t_lo = std::max(sx, S0 + before_p), t_hi = std::min(sx + rows - 1, T - (x >= kn ? 1 : 0));
    if (t_lo > t_hi) continue;
    fan_rows_.push_back({base + t_lo, base + t_hi, -base - S0 - before_p});
    lo_row = std::min(lo_row, base + t_lo);
    hi_row = std::max(hi_row, base + t_hi);
  }
  const u64 span = fan_rows_.empty() ? 0 : static_cast<u64>(hi_row - lo_row) + 1;
  if (span > n * near.size() / 2) return false;
  add_fan_kv(w);
  // Rows: each its largest bound (none: below every read), painted from the
  // largest down, each row once.
  paint_fan_rows(lo_row, span);
  for (u64 r = 0; r < span; ++r)
    if (fan_c_[r] != unpainted) {
      const i64 row = lo_row + static_cast<i64>(r);
      add(w, fan_d_, 0, row + fan_c_[r], row_bytes(row));
    }
  for (u64 m = 0; m < n; ++m) {  // a fan CTA's first row, for the later reads where not already between
    const i64 row = static_cast<i64>(head_row0_[ct_[k0 + m].head_key] + ct_[k0 + m].first);
    const i64 at = row - lo_row;
    const i64 painted = at >= 0 && at < static_cast<i64>(span) && fan_c_[static_cast<u64>(at)] != unpainted
                            ? row + fan_c_[static_cast<u64>(at)]
                            : -1;
    add(w, fan_d_, std::max(static_cast<i64>(m) + 1, painted + 1), last_j, row_bytes(row));
  }
  distances(o, out);
  return true;
}

void Loop::add_fan_kv(const RunWindow& w) {
  std::sort(fan_kv_.begin(), fan_kv_.end(), [](const FanKv& a, const FanKv& b) { return a.object < b.object; });
  for (std::size_t i = 0; i < fan_kv_.size();) {
    const FanKv& f = fan_kv_[i];
    kv_ranges_.clear();
    for (; i < fan_kv_.size() && fan_kv_[i].object == f.object; ++i) kv_ranges_.push_back({fan_kv_[i].lo, fan_kv_[i].hi});
    add_union(w, fan_d_, kv_ranges_, f.bytes);
  }
}

void Loop::distances(const Open& o, std::vector<u64>& out) const {
  const u64 n = o.i2 - o.i1 + 1, r0 = (*in_.row0)[o.k];
  out.resize(n);
  i64 between = 0;
  for (u64 j = 0; j < n; ++j) {
    between += fan_d_[j];
    out[j] = (*in_.u)[r0 + o.i1 + j] + static_cast<u64>(between);
  }
}

void Loop::paint_fan_rows(i64 lo_row, u64 span) {
  fan_c_.assign(span, unpainted);
  fan_paint_.reset(span);
  std::sort(fan_rows_.begin(), fan_rows_.end(), [](const FanRows& a, const FanRows& b) { return a.c > b.c; });
  for (const FanRows& f : fan_rows_)
    fan_paint_.paint(f.lo - lo_row, f.hi - lo_row, [&](i64 r) { fan_c_[static_cast<u64>(r)] = f.c; });
}

}  // namespace hbmscope::l2::rows
