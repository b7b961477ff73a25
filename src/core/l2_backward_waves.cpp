// The backward pass in waves (docs/l2-backward.md, "The backward in
// waves"): with no mask and one sequence length every CTA streams all n query
// blocks, so wave w runs steps [wn, wn + n) in lockstep. The four row objects
// a step reads (Q with LSE, dO, D, the dQ accumulator) are read together, so
// in the main loop they share one stack distance; each read is one of four
// kinds (a head's first CTA, a head's first CTA in a later wave, a CTA after
// one of its own head in the same step, a K/V re-read), each distance a count
// of the distinct objects between, in closed form over sets of head keys
// (l2_wave_keys.hpp). Per CTA O(1), per row O(1), and per head the upper
// envelope of a few lines for D's write-back. Both launch orders.
#include <algorithm>
#include <vector>

#include "hbmscope/checked.hpp"
#include "l2_backward.hpp"
#include "l2_wave_keys.hpp"

namespace hbmscope::l2 {

namespace {

using u64 = std::uint64_t;
__extension__ typedef __int128 i128;

// Consecutive reads (or write-backs) merged into arithmetic runs before they
// reach the tally: a CTA's distances come one after another.
class RunSink {
 public:
  enum class Kind { reads, writebacks };
  RunSink(Tally& t, Kind k) : t_(t), kind_(k) {}
  ~RunSink() { flush(); }
  RunSink(const RunSink&) = delete;
  RunSink& operator=(const RunSink&) = delete;

  void add(u64 d, u64 bytes) { add_run(d, 0, 1, bytes); }
  void add_run(u64 d0, std::int64_t step, u64 count, u64 bytes) {
    if (count == 0 || bytes == 0) return;
    if (count_ > 0 && bytes == bytes_) {
      // A run of one takes the step to the next value; a longer one keeps its own.
      const i128 gap = static_cast<i128>(d0) - static_cast<i128>(d0_);
      const bool fits = count_ == 1 ? gap >= INT64_MIN && gap <= INT64_MAX
                                    : gap == static_cast<i128>(step_) * static_cast<i128>(count_);
      const std::int64_t s = count_ == 1 ? static_cast<std::int64_t>(fits ? gap : 0) : step_;
      if (fits && (count == 1 || step == s)) {
        step_ = s;
        count_ += count;
        return;
      }
    }
    flush();
    d0_ = d0, step_ = count > 1 ? step : 0, count_ = count, bytes_ = bytes;
  }
  void flush() {
    if (count_ == 0) return;
    if (kind_ == Kind::reads) t_.reads(d0_, step_, count_, bytes_);
    else t_.writebacks(d0_, step_, count_, bytes_);
    count_ = 0;
  }

 private:
  Tally& t_;
  Kind kind_;
  u64 d0_ = 0, count_ = 0, bytes_ = 0;
  std::int64_t step_ = 0;
};

// A distance as a function of the step t of a CTA: any value at t = 0 and
// t = n - 1, affine on [1, n - 2] (where every query block is full).
struct Line {
  u64 first = 0, last = 0;  // at t = 0 and t = n - 1
  u64 at1 = 0;              // at t = 1
  std::int64_t slope = 0;
  i128 mid(u64 t) const { return static_cast<i128>(at1) + static_cast<i128>(slope) * static_cast<i128>(t - 1); }
  friend bool operator==(const Line&, const Line&) = default;
};

// The dense grid: CTA c is key block j of head key k (sequence * H + head);
// query-block-major: c = k m + j; head-major: c = (b m + j) H + h.
struct Grid {
  u64 n = 0, m = 0, K = 0, N = 0, S = 0, G = 0, H = 0;
  u64 Br = 0, last_rows = 0, Bc = 0, last_cols = 0;
  u64 P = 0;        // bytes of the four row objects a step reads, per row
  u64 kvc = 0;      // K and V per key
  bool dkv = false; // the final dK, dV take L2 space (GQA: intermediates; else with --l2-qo)
  bool qbm = true;
  wave::Ids ids{};

  u64 rows(u64 t) const { return t + 1 == n ? last_rows : Br; }
  u64 rows_sum(u64 a, u64 b) const {  // rows of query blocks [a, b)
    if (a >= b) return 0;
    return (b - a) * Br - (b == n ? Br - last_rows : 0);
  }
  u64 u(u64 t) const { return P * rows(t); }
  u64 ub(u64 a, u64 b) const { return P * rows_sum(a, b); }
  u64 kv(u64 j) const { return kvc * (j + 1 == m ? last_cols : Bc); }
  u64 kv_sum(u64 a, u64 b) const {  // K/V bytes of key blocks [a, b)
    if (a >= b) return 0;
    return kvc * ((b - a) * Bc - (b == m ? Bc - last_cols : 0));
  }
  u64 key(u64 c) const { return qbm ? c / m : (c / (m * H)) * H + c % H; }
  u64 block(u64 c) const { return qbm ? c % m : (c / H) % m; }
  u64 cta(u64 b, u64 h, u64 j) const { return qbm ? (b * H + h) * m + j : (b * m + j) * H + h; }
  u64 last_cta(u64 k) const { return cta(k / H, k % H, m - 1); }
  u64 wave_start(u64 c) const { return c / S * S; }
  u64 wave_end(u64 c) const { return std::min(N, wave_start(c) + S); }
  wave::Keys keys(u64 x, u64 y) const { return ids.keys(x, y, 1); }
  u64 nkeys(u64 x, u64 y) const { return keys(x, y).size(); }
  // Head keys whose first CTA is below x.
  u64 keys_started(u64 x) const {
    if (qbm) return (x + m - 1) / m;
    return x / (m * H) * H + std::min(x % (m * H), H);
  }
  // Head keys whose last CTA is below x (the rest have a CTA at x or later).
  u64 keys_done(u64 x) const {
    if (qbm) return x / m;
    const u64 b = x / (m * H), rem = x % (m * H), tail = (m - 1) * H;
    return b * H + (rem > tail ? std::min(rem - tail, H) : 0);
  }
  // K/V bytes of key-block columns [a, b) of the head-major grid (one key block each).
  u64 kv_cols(u64 a, u64 b) const {
    if (a >= b) return 0;
    const u64 lasts = b / m - a / m;
    return kvc * ((b - a - lasts) * Bc + lasts * last_cols);
  }
  // K/V bytes of the CTAs [x, y), one each (the dK, dV they write).
  u64 kv_of(u64 x, u64 y) const {
    if (x >= y) return 0;
    if (qbm) return kv_cols(x, y);
    const u64 cx = x / H, cy = (y - 1) / H;
    if (cx == cy) return (y - x) * kv(cx % m);
    return (H * (cx + 1) - x) * kv(cx % m) + H * kv_cols(cx + 1, cy) + (y - cy * H) * kv(cy % m);
  }
  u64 dk(u64 x, u64 y) const { return dkv ? kv_of(x, y) : 0; }
  // Distinct K/V objects (sequence, kv head, key block) read by the CTAs [x, y).
  u64 kv_distinct(u64 x, u64 y) const {
    if (x >= y) return 0;
    if (!qbm) {  // a column of H heads reads H / G objects of its key block
      const u64 cx = x / H, cy = (y - 1) / H, hx = x % H, hy = (y - 1) % H;
      const u64 Hkv = H / G;
      if (cx == cy) return (hy / G - hx / G + 1) * kv(cx % m);
      return (Hkv - hx / G) * kv(cx % m) + Hkv * kv_cols(cx + 1, cy) + (hy / G + 1) * kv(cy % m);
    }
    const u64 kx = x / m, jx = x % m, ky = (y - 1) / m, jy = (y - 1) % m + 1;
    if (kx == ky) return kv_sum(jx, jy);
    const u64 full = kv_sum(0, m);
    const u64 px = kx / G, py = ky / G;
    if (px == py) {
      if (ky - kx >= 2 || jy >= jx) return full;
      return kv_sum(0, jy) + kv_sum(jx, m);
    }
    u64 d = (py - px - 1) * full;
    d += kx + 1 < (px + 1) * G ? full : kv_sum(jx, m);
    d += ky > py * G ? full : kv_sum(0, jy);
    return d;
  }
};

// f(t) for t in [0, n): its values at t = 0 and n - 1, and the run between.
template <class F>
Line line_of(const Grid& g, F f) {
  Line l;
  l.first = f(0);
  l.last = g.n == 1 ? l.first : f(g.n - 1);
  if (g.n >= 3) l.at1 = f(1);
  if (g.n >= 4) l.slope = static_cast<std::int64_t>(static_cast<i128>(f(2)) - l.at1);
  return l;
}

// The reads (or write-backs) of a line, bytes(t) each.
template <class B>
void emit(const Grid& g, const Line& l, B bytes, RunSink& sink) {
  sink.add(l.first, bytes(0));
  if (g.n == 1) return;
  if (g.n >= 3) sink.add_run(l.at1, l.slope, g.n - 2, bytes(1));
  sink.add(l.last, bytes(g.n - 1));
}

// The lines not below another at both ends of [a, b] (an affine line at or
// above another at both ends is at or above it between).
void pareto(std::vector<Line>& lines, u64 a, u64 b) {
  std::sort(lines.begin(), lines.end(), [&](const Line& x, const Line& y) {
    const i128 xa = x.mid(a), ya = y.mid(a);
    return xa != ya ? xa > ya : x.mid(b) > y.mid(b);
  });
  std::size_t out = 0;
  i128 best_b = 0;
  for (std::size_t i = 0; i < lines.size(); ++i)
    if (out == 0 || lines[i].mid(b) > best_b) {
      best_b = lines[i].mid(b);
      lines[out++] = lines[i];
    }
  lines.resize(out);
}

// The upper envelope of lines on [a, b] (each affine there) as runs.
void envelope(const std::vector<Line>& lines, u64 a, u64 b, u64 bytes, RunSink& sink) {
  auto best = [&](u64 t, bool prefer_steep) {
    std::size_t k = 0;
    for (std::size_t i = 1; i < lines.size(); ++i) {
      const i128 v = lines[i].mid(t), w = lines[k].mid(t);
      if (v > w || (v == w && (prefer_steep ? lines[i].slope > lines[k].slope : lines[i].slope < lines[k].slope))) k = i;
    }
    return k;
  };
  const std::size_t la = best(a, true), lb = best(b, false);
  if (la == lb || lines[la].mid(b) == lines[lb].mid(b)) {
    sink.add_run(static_cast<u64>(lines[la].mid(a)), lines[la].slope, b - a + 1, bytes);
    return;
  }
  const u64 mid = a + (b - a) / 2;
  envelope(lines, a, mid, bytes, sink);
  envelope(lines, mid + 1, b, bytes, sink);
}

}  // namespace

bool backward_in_waves(const Shape& s) {
  return !masked(s) && s.seq_lens.empty();
}

std::uint64_t waves_backward_work(const Shape& s, const L2SimConfig& c) {
  // About 60 ns a CTA and 40 a row (a few runs each), and the heads' envelopes
  // (a line for each wave a head is in).
  const BackwardGrid g(s, c.order);
  const FlashSeq& f = g.forward().sequence(0);
  u64 w = 0, r = 0;
  if (__builtin_mul_overflow(g.ctas(), 60, &w)) return ~u64{0};
  if (__builtin_mul_overflow(s.batch * s.heads, f.q_blocks * 40 + 4000, &r)) return ~u64{0};
  return __builtin_add_overflow(w, r, &w) ? ~u64{0} : w;
}

FlashStats waves_backward(const Shape& s, const L2SimConfig& c, Tally& t) {
  const BackwardGrid bg(s, c.order);
  const FlashSeq& f = bg.forward().sequence(0);
  const bool gqa = s.heads != s.kv_heads, qo = c.q_o_allocate;
  Grid g;
  g.n = f.q_blocks;
  g.m = f.k_blocks;
  g.H = s.heads;
  g.K = s.batch * s.heads;
  g.N = bg.ctas();
  g.S = u64{c.sm_count} * c.ctas_per_sm;
  g.G = bg.forward().group();
  g.Br = s.block_rows;
  g.last_rows = f.shape.seq_q - (g.n - 1) * s.block_rows;
  g.Bc = s.block_cols;
  g.last_cols = f.shape.seq_kv - (g.m - 1) * s.block_cols;
  g.P = bg.ql_row() + bg.do_row() + 4 + bg.acc_row();
  g.kvc = bg.kv_col();
  g.dkv = gqa || qo;
  g.qbm = c.order == Rasterization::query_block_major;
  g.ids = wave::Ids{g.H, g.m, g.N, g.qbm};
  const u64 n = g.n, m = g.m, K = g.K, N = g.N, S = g.S;
  const u64 ar = bg.acc_row(), orow = qo ? bg.o_row() : 0, dqr = qo ? bg.dq_row() : 0;
  const u64 all_rows = g.rows_sum(0, n);
  const u64 pre = bg.do_row() + 4 + ar + orow;  // per row, the preprocessing's objects
  constexpr std::string_view what = "L2 simulation bytes";
  // Every distance below is at most the bytes of all objects: checked once.
  {
    u64 total = checked_mul(checked_add(checked_add(g.P, pre, what), checked_add(dqr, bg.o_row(), what), what),
                            checked_mul(K, all_rows, what), what);
    total = checked_add(total, checked_mul(8, checked_mul(K, g.kv_sum(0, m), what), what), what);
    (void)total;
  }

  FlashStats st;
  st.waves = ceil_div(N, S);
  st.steps = st.waves * n;
  {
    u64 keys_sum = 0, pairs_sum = 0;  // over the waves
    for (u64 L = 0; L < N; L += S) {
      const u64 U = std::min(N, L + S);
      keys_sum += g.nkeys(L, U);
      pairs_sum += g.ids.keys(L, U, g.G).size();
    }
    st.heads = static_cast<double>(keys_sum * n) / static_cast<double>(st.steps);
    st.kv_heads = static_cast<double>(pairs_sum * n) / static_cast<double>(st.steps);
  }

  // First accesses and writes that reach DRAM whatever the L2: the
  // preprocessing's dO and O, every Q (first read by its head's first CTA),
  // the K/V of each group's first head, and the outputs.
  const u64 kv_all = checked_mul(K, g.kv_sum(0, m), what);
  t.reads(infinite, 0, 1, checked_mul(K * all_rows, bg.do_row() + bg.o_row() + bg.ql_row(), what));
  t.reads(infinite, 0, 1, kv_all / g.G);
  t.write(checked_mul(K * all_rows, bg.dq_row(), what));
  t.write(gqa ? kv_all / g.G : kv_all);

  RunSink rows4(t, RunSink::Kind::reads), rows3(t, RunSink::Kind::reads), dos(t, RunSink::Kind::reads);
  RunSink kvr(t, RunSink::Kind::reads), acc_wb(t, RunSink::Kind::writebacks), d_wb(t, RunSink::Kind::writebacks);
  RunSink conv(t, RunSink::Kind::reads), red(t, RunSink::Kind::reads), red_wb(t, RunSink::Kind::writebacks);
  auto P_bytes = [&](u64 tt) { return g.u(tt); };
  auto acc_bytes = [&](u64 tt) { return ar * g.rows(tt); };
  auto d3_bytes = [&](u64 tt) { return (4 + ar) * g.rows(tt); };
  auto do_bytes = [&](u64 tt) { return bg.do_row() * g.rows(tt); };

  // Per head key: the lines of D's distances (its write-back is below the
  // largest), and the most a CTA after one of its own head adds.
  struct Head {
    std::vector<Line> lines;
    u64 b_first = 0, b_mid = 0, b_last = 0;
    bool b_any = false;
  };
  std::vector<Head> heads(K);
  constexpr u64 none = ~u64{0};
  std::vector<u64> last_cta(K, none);

  // The head's last access: what the main loop moves past its rows after it.
  struct After {
    u64 cl, Ll, Ul;          // the head's last CTA, its wave
    u64 later, jp, rest;     // head keys moved past its rows: all rows, rows >= t, rows > t
    u64 later_lt, rest_lt;   // those below the head key (the CTAs after its last in
                             // the same wave are all of later head keys, in either order)
  };
  auto after_last = [&](u64 k) {
    After a{};
    a.cl = g.last_cta(k), a.Ll = g.wave_start(a.cl), a.Ul = g.wave_end(a.cl);
    const wave::Keys later = g.keys(a.Ul, N), step = g.keys(a.cl + 1, a.Ul);
    const wave::Keys moved = wave::Keys::unite(step, later), wl = g.keys(a.Ll, a.Ul);
    a.later = later.size();
    a.jp = step.size_minus(later);
    a.rest = wl.size_minus(moved);
    a.later_lt = later.below(k).size();
    a.rest_lt = wl.below(k).size_minus(moved);
    return a;
  };

  // Head-major: groups of the heads after h, and up to h.
  std::vector<u64> groups_after(g.H), groups_upto(g.H);
  for (u64 h = 0; h < g.H; ++h) {
    groups_after[h] = h + 1 < g.H ? g.H / g.G - (h + 1) / g.G : 0;
    groups_upto[h] = h / g.G + 1;
  }
  std::vector<u64> seen(K, none);  // the reduction's sweep: the last wave a head key was met in
  const u64 full = g.kv_sum(0, m);
  const u64 conv_all = ar * K * all_rows + dqr * K * all_rows;

  struct Earlier {  // the sets of an earlier wave w1 and the waves between it and this one
    u64 w1 = none, nm = 0, na = 0, nb = 0;
    wave::Keys mid;
  };
  for (u64 L = 0; L < N; L += S) {
    const u64 U = std::min(N, L + S);
    const wave::Keys wk = g.keys(L, U);
    Earlier earlier;
    for (u64 cta = L; cta < U; ++cta) {
      const u64 k = g.key(cta), p = last_cta[k];
      last_cta[k] = cta;
      Head& hd = heads[k];
      if (p == none) {
        // The head's first CTA: the rows' first reads after the preprocessing.
        const u64 kA = g.keys_started(L), kB = k - kA, kC = g.keys_started(U) - g.keys_started(cta + 1);
        const u64 kv0 = g.kv_distinct(0, cta + 1), kv1 = g.kv_distinct(0, U), dk0 = g.dk(0, cta), dk1 = g.dk(0, L);
        auto common = [&](u64 tt) {
          u64 d = pre * (g.rows_sum(tt + 1, n) + (K - k - 1) * all_rows);
          d += kA * g.ub(0, n) + kB * g.ub(0, tt + 1) + g.ub(0, tt) + kC * bg.ql_row() * g.rows_sum(0, tt);
          d += tt > 0 ? kv1 : kv0;
          d += tt + 1 == n ? dk0 : dk1;
          return g.u(tt) + d;
        };
        const Line l = line_of(g, common);
        emit(g, line_of(g, [&](u64 tt) { return common(tt) + orow * g.rows(tt); }), do_bytes, dos);
        emit(g, l, d3_bytes, rows3);
        emit(g, l, acc_bytes, acc_wb);
        hd.lines.push_back(l);
      } else if (p < L) {
        // The head's first CTA in this wave: its previous access was the
        // head's last CTA p of an earlier wave, at the same step.
        const u64 L1 = g.wave_start(p), U1 = L1 + S;
        if (L1 / S != earlier.w1) {
          earlier.w1 = L1 / S;
          earlier.mid = g.keys(U1, L);
          earlier.nm = earlier.mid.size();
          earlier.na = g.keys(L1, U1).size_minus(earlier.mid);
          earlier.nb = wk.size_minus(earlier.mid);
        }
        const u64 nm = earlier.nm, na = earlier.na, nb = earlier.nb;
        // (the CTAs between p and this one, less those of the waves between)
        const u64 nj = !g.qbm && cta - p <= g.H && U1 == L ? cta - p - 1 : g.keys(p + 1, cta).size_minus(earlier.mid);
        const u64 kv0 = g.kv_distinct(p + 1, cta + 1), kv1 = g.kv_distinct(U1, U), dk0 = g.dk(L1, L), dk1 = g.dk(p, cta);
        auto d = [&](u64 tt) {
          u64 x = g.u(tt) + nm * g.ub(0, n) + na * g.ub(tt + 1, n) + nb * g.ub(0, tt) + nj * g.u(tt);
          x += tt > 0 ? kv1 : kv0;
          x += tt + 1 < n ? dk0 : dk1;
          return x;
        };
        const Line l = line_of(g, d);
        emit(g, l, P_bytes, rows4);
        emit(g, l, acc_bytes, acc_wb);
        if (hd.lines.empty() || !(hd.lines.back() == l)) hd.lines.push_back(l);
      } else {
        // After p, of the same head, in the same step: the CTAs between are of
        // as many other head keys (query-block-major: none; head-major: the
        // other heads of its sequence, one key block either side).
        const u64 j = g.block(cta), x = cta - p - 1;
        u64 kvx = g.kv(j), dkx = g.dkv ? g.kv(j - 1) : 0;
        if (!g.qbm) {
          const u64 h = cta % g.H;
          kvx = groups_after[h] * g.kv(j - 1) + groups_upto[h] * g.kv(j);
          dkx = g.dkv ? (g.H - h) * g.kv(j - 1) + h * g.kv(j) : 0;
        }
        Line l;
        l.first = g.u(0) * (1 + x) + kvx + (n == 1 ? dkx : 0);
        l.at1 = g.u(1) * (1 + x);
        l.last = n == 1 ? l.first : g.u(n - 1) * (1 + x) + dkx;
        emit(g, l, P_bytes, rows4);
        emit(g, l, acc_bytes, acc_wb);
        hd.b_any = true;
        hd.b_first = std::max(hd.b_first, l.first);
        hd.b_last = std::max(hd.b_last, l.last);
        hd.b_mid = std::max(hd.b_mid, x);
      }
      if (cta != g.last_cta(k)) continue;

      // The head is done: D's write-back (D dies after the main loop: written
      // back where evicted since the preprocessing, i.e. below the largest of
      // its distances and its depth then), and the dQ conversion's reads.
      const auto a = after_last(k);
      const u64 kv0 = g.kv_distinct(a.cl + 1, N), kv1 = g.kv_distinct(a.Ul, N), dk0 = g.dk(a.Ll, N),
                dk1 = g.dk(a.cl, N);
      auto after = [&](u64 tt) {
        u64 x = a.later * g.ub(0, n) + a.jp * g.ub(tt, n) + a.rest * g.ub(tt + 1, n);
        x += tt == 0 ? kv0 : kv1;
        x += tt + 1 < n ? dk0 : dk1;
        return x;
      };
      std::vector<Line>& lines = hd.lines;
      lines.push_back(line_of(g, [&](u64 tt) { return (4 + ar) * g.rows(tt) + after(tt); }));
      if (hd.b_any) {
        Line l;
        l.first = hd.b_first;
        l.last = hd.b_last;
        l.at1 = g.u(1) * (1 + hd.b_mid);
        lines.push_back(l);
      }
      {
        u64 first = 0, last = 0;
        for (const Line& l : lines) first = std::max(first, l.first), last = std::max(last, l.last);
        d_wb.add(first, 4 * g.rows(0));
        if (n >= 3) {
          pareto(lines, 1, n - 2);
          envelope(lines, 1, n - 2, 4 * g.Br, d_wb);
        }
        if (n >= 2) d_wb.add(last, 4 * g.rows(n - 1));
      }
      // The dQ conversion reads each accumulator once more, in row order
      // (written back below the same distance).
      const Line conv_l = line_of(g, [&](u64 tt) {
        const u64 below = k * all_rows + g.rows_sum(0, tt);
        const u64 moved_below = a.later_lt * all_rows + a.rest_lt * g.rows_sum(tt + 1, n);
        return ar * g.rows(tt) + after(tt) + ar * (below - moved_below) + dqr * below;
      });
      emit(g, conv_l, acc_bytes, conv);
      emit(g, conv_l, acc_bytes, acc_wb);
      std::vector<Line>().swap(lines);
    }

    // GQA: the reduction reads each head's dK, dV once (written back below
    // the same distance), in (sequence, kv head, key block, head) order,
    // after the main loop and the conversion. Swept here from the wave's
    // last CTA down: the head keys of the CTAs after one that have no CTA in
    // a later wave read only their last query block after its dK, dV.
    if (gqa) {
      const u64 nl = K - g.keys_done(U), w = L / S;
      const u64 kv_later = g.kv_distinct(U, N), dk_later = g.dk(U, N);
      u64 kw = 0, dk_after = 0;  // (the CTAs after this one in the wave)
      for (u64 cta = U; cta-- > L;) {
        const u64 k = g.key(cta), b = k / g.H, h = k % g.H, j = g.block(cta), kvh = h / g.G, g0 = kvh * g.G;
        const u64 rows_in = kw * g.rows(n - 1) + nl * all_rows;
        u64 d = g.kv(j) + g.P * rows_in + (n == 1 ? g.kv_distinct(cta + 1, N) : kv_later) + dk_after + dk_later;
        d += conv_all - ar * rows_in;
        if (g.qbm) d += full * (b * g.H + g0) + (h - g0 + 1) * g.kv_sum(0, j) + (h - g0) * g.kv(j);
        else d += full * b * g.H + g0 * g.kv_sum(0, j + 1) + g.G * g.kv_sum(0, j) + (h - g0) * g.kv(j);
        if (qo) d += (b * s.kv_heads + kvh) * full + g.kv_sum(0, j);
        red.add(d, g.kv(j));
        red_wb.add(d, g.kv(j));
        dk_after += g.kv(j);
        if (seen[k] != w) {
          seen[k] = w;
          if (g.last_cta(k) < U) ++kw;
        }
      }
    }
  }

  // K/V reads of the heads after a group's first: the same key block one
  // head before (query-block-major: m CTAs, whose other reads are every other
  // key block of the group once; head-major: the CTA before).
  if (g.G > 1) {
    u64 cached_Lp = none, cached_L = none, nk = 0, dkw = 0;
    for (u64 cta = 0; cta < N; ++cta) {
      const u64 k = g.key(cta);
      if (k % g.G == 0) continue;
      const u64 j = g.block(cta), p = g.qbm ? cta - m : cta - 1, Lp = g.wave_start(p), L = g.wave_start(cta);
      if (Lp != cached_Lp || L != cached_L) cached_Lp = Lp, cached_L = L, nk = g.nkeys(Lp, L), dkw = g.dk(Lp, L);
      const u64 between = g.qbm ? full - g.kv(j) : 0, step_keys = g.qbm && j > 0 ? 2 : 1;
      u64 d = g.kv(j) + between + g.u(0) * step_keys + g.ub(1, n) * nk;
      d += n > 1 ? dkw : (g.dkv ? (g.qbm ? full : g.kv(j)) : 0);
      kvr.add(d, g.kv(j));
    }
  }
  return st;
}

}  // namespace hbmscope::l2
