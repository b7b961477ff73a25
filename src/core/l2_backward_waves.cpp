// The backward pass in waves (docs/l2-simulation.md, "The backward in
// waves"): with no mask, one sequence length and query-block-major order,
// every CTA streams all n query blocks, so wave w runs steps [wn, wn + n) in
// lockstep and a head's CTAs are one contiguous run of ids. The four row
// objects a step reads (Q with LSE, dO, D, the dQ accumulator) are read
// together, so in the main loop they share one stack distance; each read is
// one of four kinds (a head's first CTA, a wave's first CTA continuing a head,
// a CTA after one of its own head, a K/V re-read), each distance a count of
// the distinct objects between, in closed form. Per CTA O(1), per row O(1),
// and per head the upper envelope of a few lines for D's write-back.
#include <algorithm>
#include <vector>

#include "hbmscope/checked.hpp"
#include "l2_backward.hpp"

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
      const i128 next = static_cast<i128>(d0_) + static_cast<i128>(step_) * static_cast<i128>(count_);
      if (count_ == 1 && (count == 1 || step == static_cast<std::int64_t>(static_cast<i128>(d0) - d0_))) {
        const i128 s = static_cast<i128>(d0) - static_cast<i128>(d0_);
        if (s >= INT64_MIN && s <= INT64_MAX) {
          step_ = static_cast<std::int64_t>(s);
          count_ += count;
          return;
        }
      } else if (static_cast<i128>(d0) == next && (count == 1 || step == step_)) {
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
};

// The dense grid in query-block-major order: CTA c is key block c % m of head
// key c / m (sequence * H + head).
struct Grid {
  u64 n = 0, m = 0, K = 0, N = 0, S = 0, G = 0;
  u64 Br = 0, last_rows = 0, Bc = 0, last_cols = 0;
  u64 P = 0;        // bytes of the four row objects a step reads, per row
  u64 kvc = 0;      // K and V per key
  bool dkv = false; // the final dK, dV take L2 space (GQA: intermediates; else with --l2-qo)

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
  u64 key(u64 c) const { return c / m; }
  u64 wave_start(u64 c) const { return c / S * S; }
  u64 wave_end(u64 c) const { return std::min(N, wave_start(c) + S); }
  // Distinct head keys of the CTAs [x, y).
  u64 keys(u64 x, u64 y) const { return x < y ? (y - 1) / m - x / m + 1 : 0; }
  // K/V bytes of the CTAs [x, y), one each (the dK, dV they write).
  u64 kv_of(u64 x, u64 y) const {
    if (x >= y) return 0;
    const u64 lasts = y / m - x / m;  // ids with j = m - 1 in [x, y)
    return kvc * ((y - x - lasts) * Bc + lasts * last_cols);
  }
  u64 dk(u64 x, u64 y) const { return dkv ? kv_of(x, y) : 0; }
  // Distinct K/V objects (sequence, kv head, key block) read by the CTAs [x, y).
  u64 kv_distinct(u64 x, u64 y) const {
    if (x >= y) return 0;
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

// Emits f(t) for t in [0, n): single reads at t = 0 and n - 1, one run between.
template <class F, class B>
void by_step(const Grid& g, F f, B bytes, RunSink& sink) {
  sink.add(f(0), bytes(0));
  if (g.n == 1) return;
  if (g.n >= 3) {
    const u64 d1 = f(1);
    const std::int64_t step = g.n >= 4 ? static_cast<std::int64_t>(static_cast<i128>(f(2)) - d1) : 0;
    sink.add_run(d1, step, g.n - 2, bytes(1));
  }
  sink.add(f(g.n - 1), bytes(g.n - 1));
}

template <class F>
Line line_of(const Grid& g, F f) {
  Line l;
  l.first = f(0);
  l.last = f(g.n - 1);
  if (g.n >= 3) l.at1 = f(1);
  if (g.n >= 4) l.slope = static_cast<std::int64_t>(static_cast<i128>(f(2)) - l.at1);
  return l;
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

bool backward_in_waves(const Shape& s, Rasterization order) {
  return !masked(s) && s.seq_lens.empty() && order == Rasterization::query_block_major;
}

std::uint64_t waves_backward_work(const Shape& s) {
  // About 60 ns a CTA and 40 a row (a few runs each), and the heads' envelopes.
  const BackwardGrid g(s, Rasterization::query_block_major);
  const FlashSeq& f = g.forward().sequence(0);
  u64 w = 0, r = 0;
  if (__builtin_mul_overflow(g.ctas(), 60, &w)) return ~u64{0};
  if (__builtin_mul_overflow(s.batch * s.heads, f.q_blocks * 40 + 4000, &r)) return ~u64{0};
  return __builtin_add_overflow(w, r, &w) ? ~u64{0} : w;
}

FlashStats waves_backward(const Shape& s, const L2SimConfig& c, Tally& t) {
  const BackwardGrid bg(s, Rasterization::query_block_major);
  const FlashSeq& f = bg.forward().sequence(0);
  const bool gqa = s.heads != s.kv_heads, qo = c.q_o_allocate;
  Grid g;
  g.n = f.q_blocks;
  g.m = f.k_blocks;
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
  const u64 n = g.n, m = g.m, K = g.K, N = g.N, S = g.S;
  const u64 ar = bg.acc_row(), orow = qo ? bg.o_row() : 0, dqr = qo ? bg.dq_row() : 0;
  const u64 all_rows = g.rows_sum(0, n);
  const u64 pre = bg.do_row() + 4 + ar + orow;  // per row, the preprocessing's objects
  constexpr std::string_view what = "L2 simulation bytes";
  // Every distance below is at most the bytes of all objects: checked once.
  {
    u64 total = checked_mul(checked_add(checked_add(g.P, pre, what), checked_add(dqr, bg.o_row(), what), what),
                            checked_mul(K, all_rows, what), what);
    total = checked_add(total, checked_mul(3, checked_mul(K, g.kv_sum(0, m), what), what), what);
    (void)total;
  }

  FlashStats st;
  st.waves = ceil_div(N, S);
  st.steps = st.waves * n;
  {
    u64 heads = 0, pairs = 0;
    for (u64 L = 0; L < N; L += S) {
      const u64 U = std::min(N, L + S);
      heads += g.keys(L, U);
      pairs += g.key(U - 1) / g.G - g.key(L) / g.G + 1;
    }
    st.heads = static_cast<double>(heads * n) / static_cast<double>(st.steps);
    st.kv_heads = static_cast<double>(pairs * n) / static_cast<double>(st.steps);
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

  std::vector<Line> lines;
  for (u64 k = 0; k < K; ++k) {
    const u64 c0 = k * m, c_last = c0 + m - 1;
    lines.clear();
    // A head's first CTA: the rows' first reads after the preprocessing.
    {
      const u64 L = g.wave_start(c0), U = g.wave_end(c0);
      const u64 kA = L > 0 ? (L - 1) / m + 1 : 0;
      const u64 kB = k - (L + m - 1) / m;
      const u64 kC = (U - 1) / m - k;
      auto common = [&](u64 tt) {
        u64 d = pre * (g.rows_sum(tt + 1, n) + (K - k - 1) * all_rows);
        d += kA * g.ub(0, n) + kB * g.ub(0, tt + 1) + g.ub(0, tt) + kC * bg.ql_row() * g.rows_sum(0, tt);
        d += tt > 0 ? g.kv_distinct(0, U) : g.kv_distinct(0, c0 + 1);
        d += tt + 1 == n ? g.dk(0, c0) : g.dk(0, L);
        return g.u(tt) + d;
      };
      by_step(g, [&](u64 tt) { return common(tt) + orow * g.rows(tt); }, do_bytes, dos);
      by_step(g, common, d3_bytes, rows3);
      by_step(g, common, acc_bytes, acc_wb);
      lines.push_back(line_of(g, common));
    }
    // A wave's first CTA continuing the head: its previous access was the
    // previous wave's last CTA, n steps before.
    for (u64 L = (c0 / S + 1) * S; L <= c_last; L += S) {
      const u64 U = std::min(N, L + S), A = g.keys(L - S, L), B = g.keys(L, U);
      auto d = [&](u64 tt) {
        u64 x = g.u(tt) + A * g.ub(tt + 1, n) + B * g.ub(0, tt);
        x += tt > 0 ? g.kv_distinct(L, U) : g.kv(L % m);
        x += tt + 1 < n ? g.dk(L - S, L) : g.dk(L - 1, L);
        return x;
      };
      by_step(g, d, P_bytes, rows4);
      by_step(g, d, acc_bytes, acc_wb);
      lines.push_back(line_of(g, d));
    }
    // A CTA after one of its own head in the same wave: a step's worth apart.
    {
      u64 most_kv = 0, most_dk = 0;
      bool any = false;
      for (u64 cta = c0 + 1; cta <= c_last; ++cta) {
        if (cta % S == 0) continue;
        auto d = [&](u64 tt) {
          return g.u(tt) + (tt == 0 ? g.kv(cta % m) : 0) + (tt + 1 == n ? g.dk(cta - 1, cta) : 0);
        };
        by_step(g, d, P_bytes, rows4);
        by_step(g, d, acc_bytes, acc_wb);
        most_kv = std::max(most_kv, g.kv(cta % m));
        most_dk = std::max(most_dk, g.dk(cta - 1, cta));
        any = true;
      }
      if (any)
        lines.push_back(line_of(g, [&](u64 tt) {
          return g.u(tt) + (tt == 0 ? most_kv : 0) + (tt + 1 == n ? most_dk : 0);
        }));
    }
    // After the head's last CTA: what the main loop moves past its rows.
    const u64 Ll = g.wave_start(c_last), Ul = g.wave_end(c_last);
    const u64 before = k - g.key(Ll) + 1;
    const u64 later = Ul < N ? K - Ul / m : 0;
    const u64 only = (K - k - 1) - later;
    auto after = [&](u64 tt) {
      u64 x = before * g.ub(tt + 1, n) + only * g.ub(tt, n) + later * g.ub(0, n);
      x += tt == 0 ? g.kv_distinct(c_last + 1, N) : g.kv_distinct(Ul, N);
      x += tt + 1 < n ? g.dk(Ll, N) : g.dk(c_last, N);
      return x;
    };
    // D dies after the main loop: written back where evicted since the
    // preprocessing, i.e. below the largest of its distances and its depth then.
    lines.push_back(line_of(g, [&](u64 tt) { return (4 + ar) * g.rows(tt) + after(tt); }));
    {
      u64 first = 0, last = 0;
      for (const Line& l : lines) first = std::max(first, l.first), last = std::max(last, l.last);
      d_wb.add(first, 4 * g.rows(0));
      if (n >= 3) envelope(lines, 1, n - 2, 4 * g.Br, d_wb);
      if (n >= 2) d_wb.add(last, 4 * g.rows(n - 1));
    }
    // The dQ conversion reads each accumulator once more (written back below
    // the same distance).
    auto conv_d = [&](u64 tt) {
      const u64 below = k * all_rows + g.rows_sum(0, tt);
      return ar * g.rows(tt) + after(tt) + ar * (below - (before - 1) * g.rows_sum(tt + 1, n)) + dqr * below;
    };
    by_step(g, conv_d, acc_bytes, conv);
    by_step(g, conv_d, acc_bytes, acc_wb);
  }

  // K/V reads of the heads after a group's first: the same key block one
  // head (m CTAs) before.
  if (g.G > 1)
    for (u64 cta = 0; cta < N; ++cta) {
      if (g.key(cta) % g.G == 0) {
        cta += m - 1;
        continue;
      }
      const u64 p = cta - m, Lp = g.wave_start(p), L = g.wave_start(cta);
      u64 d = g.kv(cta % m) + g.kv_distinct(p + 1, cta) + g.u(0) * g.keys(p, cta) + g.ub(1, n) * g.keys(Lp, L);
      d += n > 1 ? g.dk(Lp, L) : g.dk(p, cta);
      kvr.add(d, g.kv(cta % m));
    }

  // GQA: the reduction reads each head's dK, dV once (written back below the
  // same distance); in (sequence, kv head, key block, head) order.
  if (gqa) {
    const u64 full = g.kv_sum(0, m);
    const u64 conv_all = ar * K * all_rows + dqr * K * all_rows;
    for (u64 b = 0; b < s.batch; ++b)
      for (u64 kvh = 0; kvh < s.kv_heads; ++kvh)
        for (u64 j = 0; j < m; ++j)
          for (u64 h = kvh * g.G; h < (kvh + 1) * g.G; ++h) {
            const u64 cta = (b * s.heads + h) * m + j, U = g.wave_end(cta);
            const bool overlap = cta + 1 < U && U < N && g.key(U - 1) == g.key(U);
            const u64 kw = g.keys(cta + 1, U) - (overlap ? 1 : 0), nl = U < N ? K - g.key(U) : 0;
            const u64 rows_in = kw * g.rows(n - 1) + nl * all_rows;
            u64 d = g.kv(j) + g.P * rows_in + (n == 1 ? g.kv_distinct(cta + 1, N) : g.kv_distinct(U, N)) + g.dk(cta + 1, N);
            d += conv_all - ar * rows_in;
            d += full * (b * s.heads + kvh * g.G) + (h - kvh * g.G + 1) * g.kv_sum(0, j) + (h - kvh * g.G) * g.kv(j);
            if (qo) d += (b * s.kv_heads + kvh) * full + g.kv_sum(0, j);
            red.add(d, g.kv(j));
            red_wb.add(d, g.kv(j));
          }
  }
  return st;
}

}  // namespace hbmscope::l2
