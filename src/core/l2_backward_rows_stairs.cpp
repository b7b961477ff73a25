// The backward's main loop by rows: a staircase of open reads evaluated at
// once (docs/l2-backward.md, "Staircases"). Where the CTAs of a head start a
// step or two apart (B200's 296 slots at d = 64), the open reads after one
// earlier CTA P come as short runs and fans, each CTA taking a few of P's
// rows in turn: read j of row i1 + j at (T_j, k_j), after P's at S0 + j.
// Where every one of P's reads comes before the first of them, each access
// between is there for a prefix of the reads (those before the first read)
// or a suffix (those after it), so the staircase costs the CTAs beside it
// and its rows once, not once a piece.
#include <algorithm>
#include <limits>
#include <unordered_map>

#include "l2_backward_rows_loop.hpp"

namespace hbmscope::l2::rows {

namespace {

struct Ends {
  i64 T0, T1;  // the steps of its first and last read
  u64 k0, k1;  // their CTAs
};

}  // namespace

void Loop::join_stairs() {
  // A run's or a fan's first and last read.
  auto ends = [&](const Open& o) {
    if (o.fan) return Ends{s_[o.k], s_[o.k], o.k, o.k + (o.i2 - o.i1)};
    return Ends{offset(o.k) + static_cast<i64>(o.i1), offset(o.k) + static_cast<i64>(o.i2), o.k, o.k};
  };
  // The staircase still open for each P: its pieces (open_'s places) and
  // where it stands.
  struct Stair {
    std::vector<std::size_t> at;
    u64 i2;
    Ends first, last;
  };
  std::vector<Stair> stairs;
  std::unordered_map<u64, std::size_t> open_for;
  std::vector<std::size_t> stair_of(open_.size(), ~std::size_t{0});
  for (std::size_t a = 0; a < open_.size(); ++a) {
    const Open& o = open_[a];
    if (o.i1 == none) continue;
    const Ends e = ends(o);
    const auto it = open_for.find(o.P);
    if (it != open_for.end()) {
      Stair& s = stairs[it->second];
      // (Rows in turn, each read later, and P's last read before the first.)
      const bool later = e.T0 > s.last.T1 || (e.T0 == s.last.T1 && e.k0 > s.last.k1);
      if (o.i1 == s.i2 + 1 && later && offset(o.P) + static_cast<i64>(o.i2) < s.first.T0) {
        s.at.push_back(a);
        s.i2 = o.i2;
        s.last = e;
        stair_of[a] = it->second;
        continue;
      }
    }
    open_for[o.P] = stairs.size();
    stair_of[a] = stairs.size();
    stairs.push_back({{a}, o.i2, e, e});
  }
  std::vector<Open> joined;
  joined.reserve(open_.size());
  for (std::size_t a = 0; a < open_.size(); ++a) {
    if (stair_of[a] == ~std::size_t{0} || stairs[stair_of[a]].at.size() == 1) {
      joined.push_back(open_[a]);
      continue;
    }
    const Stair& s = stairs[stair_of[a]];
    if (s.at.front() != a) continue;  // (taken with its first piece)
    Open st = open_[a];
    st.fan = false;
    st.i2 = s.i2;
    st.piece0 = static_cast<u32>(stair_pieces_.size());
    st.pieces = static_cast<u32>(s.at.size());
    for (const std::size_t b : s.at) stair_pieces_.push_back(open_[b]);
    joined.push_back(st);
  }
  open_.swap(joined);
}

void Loop::stair_reads(const Open& o) {
  stair_k_.clear();
  stair_T_.clear();
  for (u32 p = o.piece0; p < o.piece0 + o.pieces; ++p) {
    const Open& q = stair_pieces_[p];
    for (u64 i = q.i1; i <= q.i2; ++i) {
      stair_k_.push_back(q.fan ? q.k + (i - q.i1) : q.k);
      stair_T_.push_back(q.fan ? s_[q.k] : offset(q.k) + static_cast<i64>(i));
    }
  }
}

// Between (S0 + j, P, row) and (T_j, k_j, row), in the order (step, CTA,
// K/V before row before dK, dV): an access e = (t, x, sub) is there for
// the reads j from the first whose (T_j, k_j, row) follows e (0 for every
// access before the first read) to t - S0 - 1 + [(x, sub) after (P, row)]
// (past the last read for every access at or after the first read, as P's
// last read comes before it). So a K/V object is between over the union of
// its readers' ranges, a dK, dV over its one range, and a row over the
// prefix its accesses before the first read reach (the largest bound,
// painted from the largest down) and the suffix its accesses after it start.
bool Loop::stair_exact(const Open& o, const std::vector<u64>& near, std::vector<u64>& out) {
  const u64 P = o.P, n = o.i2 - o.i1 + 1;
  const i64 S0 = offset(P) + static_cast<i64>(o.i1), last_j = static_cast<i64>(n) - 1;
  const i64* const T = stair_T_.data();
  const u64* const K = stair_k_.data();
  const RunWindow w{0, last_j, 0, 0, 0};
  // Whether read j comes after the access (t, x, sub).
  auto follows = [&](i64 j, i64 t, u64 x, u64 sub) {
    return T[j] > t || (T[j] == t && (K[j] > x || (K[j] == x && sub < row_sub)));
  };
  // (Per step of the reads' span, the first read at it or later: a search is
  // then the reads of one step.)
  const i64 T_first = T[0], T_last = T[last_j];
  stair_at_.resize(static_cast<u64>(T_last - T_first) + 1);
  for (i64 q = 0, j = 0; q <= T_last - T_first; ++q) {
    while (T[j] < T_first + q) ++j;  // (T[last_j] is the span's last step)
    stair_at_[static_cast<u64>(q)] = j;
  }
  auto first_after = [&](i64 t, u64 x, u64 sub) {
    if (t < T_first) return i64{0};
    if (t > T_last) return last_j + 1;
    i64 j = stair_at_[static_cast<u64>(t - T_first)];
    while (j <= last_j && !follows(j, t, x, sub)) ++j;
    return j;
  };
  fan_d_.assign(n + 1, 0);
  fan_kv_.clear();
  fan_rows_.clear();
  stair_late_.clear();
  i64 lo_row = std::numeric_limits<i64>::max(), hi_row = std::numeric_limits<i64>::min();
  for (const u64 x : near) {
    const i64 sx = s_[x], ex = e_[x];
    if (sx > T_last || ex < S0) continue;
    const BackwardCta c = ct_[x];
    const i64 bytes = static_cast<i64>(in_.kv_col * c.cols), after_p = x > P ? 1 : 0;
    if (const i64 lo = first_after(sx, x, kv_sub), hi = std::min(sx - S0 - 1 + after_p, last_j); lo <= hi)
      fan_kv_.push_back({(*in_.kv_of)[x], lo, hi, bytes});
    if (dk_on_) add(w, fan_d_, first_after(ex, x, dk_sub), ex - S0 - 1 + (x >= P ? 1 : 0), bytes);
    const i64 rows = static_cast<i64>(reads_rows(x));
    if (rows == 0) continue;
    // Row base + t at step t; before the first read a prefix of the reads
    // up to t - S0 - 1 + [x after P], after it a suffix.
    const i64 base = static_cast<i64>(head_row0_[c.head_key] + c.first) - sx;
    const i64 t_lo = std::max(sx, S0 + 1 - after_p), t_end = std::min(sx + rows - 1, T_last);
    const i64 t_early = std::min(t_end, T_first - 1 + (x < K[0] ? 1 : 0));
    if (t_lo <= t_early) {
      fan_rows_.push_back({base + t_lo, base + t_early, -base - S0 - 1 + after_p});
      lo_row = std::min(lo_row, base + t_lo);
      hi_row = std::max(hi_row, base + t_early);
    }
    // (After the first read and before the last.)
    const i64 t_late = std::max(t_lo, t_early + 1), t_late_end = std::min(t_end, T_last - 1 + (x < K[last_j] ? 1 : 0));
    if (t_late > t_late_end) continue;
    if (t_late - S0 - 1 + after_p < last_j) return false;  // (P's last read after the first: not a staircase)
    stair_late_.push_back({base + t_late, base + t_late_end, base, x});
    lo_row = std::min(lo_row, base + t_late);
    hi_row = std::max(hi_row, base + t_late_end);
  }
  const u64 span = lo_row > hi_row ? 0 : static_cast<u64>(hi_row - lo_row) + 1;
  if (span > n * near.size() / 2) return false;
  // K/V: each object once for a read, over the union of its readers' ranges.
  add_fan_kv(w);
  // Rows: the prefix each reaches (its largest bound, painted from the
  // largest down, each row once) and the suffix it starts.
  paint_fan_rows(lo_row, span);
  // A row's suffix starts at the first read after its earliest access past
  // the first read: its readers (all of one head) taken by (step, CTA) at
  // that row, the largest base first, each row painted once.
  std::sort(stair_late_.begin(), stair_late_.end(),
            [](const LateRows& a, const LateRows& b) { return a.base != b.base ? a.base > b.base : a.x < b.x; });
  stair_from_.assign(span, last_j + 1);
  stair_paint_.reset(span);
  for (const LateRows& l : stair_late_) {
    i64 j = -1;  // (the reads that follow its accesses: later rows, later steps, from the first found on)
    stair_paint_.paint(l.lo - lo_row, l.hi - lo_row, [&](i64 r) {
      const i64 t = lo_row + r - l.base;
      if (j < 0) j = first_after(t, l.x, row_sub);
      while (j <= last_j && !follows(j, t, l.x, row_sub)) ++j;
      stair_from_[static_cast<u64>(r)] = j;
    });
  }
  for (u64 r = 0; r < span; ++r) {
    const i64 row = lo_row + static_cast<i64>(r);
    const i64 upto = fan_c_[r] == unpainted ? -1 : std::min(row + fan_c_[r], last_j), from = stair_from_[r];
    if (upto < 0 && from > last_j) continue;
    const i64 z = row_bytes(row);
    add(w, fan_d_, 0, upto, z);
    add(w, fan_d_, std::max(from, upto + 1), last_j, z);
  }
  distances(o, out);
  return true;
}

}  // namespace hbmscope::l2::rows
