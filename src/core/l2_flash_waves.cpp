// The waves' closed form of the forward pass (docs/model.md, "Waves in
// lockstep"): with no mask and one sequence length every CTA visits every key
// block, so wave w (CTAs [wS, wS + S)) runs its n key blocks in steps
// [wn, wn + n). A K/V read then has its previous access either earlier in the
// same step (the same kv head's previous CTA of the wave) or in the last wave
// that held its kv head, and the distinct tiles in between are counted from
// the waves' sets of kv heads, or, between CTAs of one wave or two in a row,
// from marks at each kv head's last CTA. One pass over the CTAs, O(log S) each.
#include <algorithm>
#include <array>
#include <vector>

#include "hbmscope/checked.hpp"
#include "l2_flash.hpp"
#include "l2_wave_keys.hpp"

namespace hbmscope::l2 {

namespace {

using wave::Ids;
using wave::Keys;

// Rows of the CTAs with ids in [x, y): Br each but the last query block's.
struct Rows {
  std::uint64_t Br, last_rows, nqb, H;
  bool qbm;
  // ids in [0, n) whose query block is the last
  std::uint64_t lasts_below(std::uint64_t n) const {
    if (qbm) return n / nqb;  // id = (b H + h) nqb + i: one per nqb ids, the last
    const std::uint64_t period = nqb * H, base = (nqb - 1) * H;  // rows b nqb + nqb - 1
    const std::uint64_t full = n / period, rem = n % period;
    return full * H + (rem > base ? rem - base : 0);
  }
  std::uint64_t sum(std::uint64_t x, std::uint64_t y) const {
    if (x >= y) return 0;
    if (last_rows == Br) return (y - x) * Br;  // (every query block full: no division)
    const std::uint64_t lasts = lasts_below(y) - lasts_below(x);
    return (y - x - lasts) * Br + lasts * last_rows;
  }
};

// The kv pairs of a dense grid's CTAs in launch order, one CTA after
// another (no division a CTA).
struct PairWalk {
  std::uint64_t H, G, Hkv, nqb;
  bool qbm;
  std::uint64_t b = 0, h = 0, i = 0, hg = 0, hr = 0;  // sequence, head, query block; h / G and h % G
  std::uint64_t pair() const { return b * Hkv + hg; }
  void next() {
    auto next_head = [&] {
      ++h;
      if (++hr == G) hr = 0, ++hg;
    };
    if (qbm) {
      if (++i < nqb) return;
      i = 0;
      next_head();
      if (h < H) return;
    } else {
      next_head();
      if (h < H) return;
      if (++i < nqb) {
        h = hg = hr = 0;
        return;
      }
      i = 0;
    }
    h = hg = hr = 0;
    ++b;
  }
};

// The distinct kv pairs of the CTAs between two of this wave and the one
// before: a mark at each pair's last CTA so far, counted by a Fenwick tree
// over the two waves' places (rebuilt at each wave).
class LastSeen {
 public:
  explicit LastSeen(std::uint64_t S) : S_(S), mark_(2 * S, 0), tree_(2 * S + 1, 0) {}
  // Wave w starts at id L: the previous wave's marks move to the first half.
  void wave(std::uint64_t L) {
    const std::uint64_t base = L >= S_ ? L - S_ : 0;
    if (base > base_) {
      const std::uint64_t shift = base - base_;
      for (std::uint64_t p = 0; p < 2 * S_; ++p) mark_[p] = p + shift < 2 * S_ ? mark_[p + shift] : 0;
    }
    base_ = base;
    std::fill(tree_.begin(), tree_.end(), 0);
    for (std::uint64_t p = 0; p < 2 * S_; ++p)
      if (mark_[p] != 0) add(p, 1);
  }
  bool holds(std::uint64_t id) const { return id >= base_; }
  // CTA id reads pair's blocks; prev: the pair's last CTA before it (if held).
  void seen(std::uint64_t id, std::uint64_t prev) {
    if (prev != ~std::uint64_t{0} && holds(prev)) mark_[prev - base_] = 0, add(prev - base_, -1);
    mark_[id - base_] = 1, add(id - base_, 1);
  }
  // The pairs whose last CTA lies in (a, b), both held.
  std::uint64_t between(std::uint64_t a, std::uint64_t b) const {
    return static_cast<std::uint64_t>(below(b - base_) - below(a - base_ + 1));
  }

 private:
  void add(std::uint64_t p, std::int32_t v) {
    for (std::uint64_t k = p + 1; k <= 2 * S_; k += k & (~k + 1)) tree_[k] += v;
  }
  std::int64_t below(std::uint64_t p) const {  // marks at places [0, p)
    std::int64_t n = 0;
    for (std::uint64_t k = p; k > 0; k -= k & (~k + 1)) n += tree_[k];
    return n;
  }
  std::uint64_t S_, base_ = 0;
  std::vector<std::uint8_t> mark_;
  std::vector<std::int32_t> tree_;
};

}  // namespace

bool flash_in_waves(const Shape& s) { return !masked(s) && s.seq_lens.empty(); }

std::uint64_t waves_flash_work(const FlashGrid& grid, std::uint64_t slots) {
  (void)slots;
  // About 40 ns a CTA (a few tally runs), plus the waves.
  std::uint64_t w = 0;
  return __builtin_mul_overflow(grid.ctas(), 40, &w) ? ~std::uint64_t{0} : w;
}

FlashStats waves_flash(const Shape& s, const L2SimConfig& c, Tally& t) {
  const FlashGrid grid(s, c.order);
  const FlashSeq& seq = grid.sequence(0);
  const std::uint64_t N = grid.ctas(), n = seq.k_blocks, G = grid.group();
  const std::uint64_t S = std::uint64_t{c.sm_count} * c.ctas_per_sm;
  const bool qo = c.q_o_allocate;
  const Ids ids{s.heads, seq.q_blocks, N, c.order == Rasterization::query_block_major};
  const Rows rows{s.block_rows, seq.shape.seq_q - (seq.q_blocks - 1) * s.block_rows, seq.q_blocks, s.heads, ids.qbm};
  const std::uint64_t z = grid.kv_bytes(0, 0), zl = grid.kv_bytes(0, n - 1);
  const std::uint64_t qr = qo ? grid.q_bytes(1) : 0, orow = qo ? grid.o_bytes(1) : 0;  // per row, in the stack
  auto zj = [&](std::uint64_t j) { return j + 1 == n ? zl : z; };
  auto Z = [&](std::uint64_t a, std::uint64_t b) {  // bytes of blocks [a, b)
    if (a >= b) return std::uint64_t{0};
    return (b - a) * z - (a <= n - 1 && n - 1 < b ? z - zl : 0);
  };
  auto Q = [&](std::uint64_t x, std::uint64_t y) { return qr * rows.sum(x, y); };
  auto O = [&](std::uint64_t x, std::uint64_t y) { return orow * rows.sum(x, y); };

  FlashStats st;
  st.waves = ceil_div(N, S);
  st.steps = st.waves * n;
  std::uint64_t heads_sum = 0, kv_sum = 0;
  // Q tiles: first accesses; O tiles: written once.
  {
    const std::uint64_t all_rows = rows.sum(0, N);
    t.reads(infinite, 0, 1, checked_mul(grid.q_bytes(1), all_rows, "L2 simulation bytes"));
    t.write(checked_mul(grid.o_bytes(1), all_rows, "L2 simulation bytes"));
  }
  std::vector<std::uint64_t> last_in_wave(grid.pairs(), ~std::uint64_t{0});
  PairWalk walk{s.heads, G, s.kv_heads, seq.q_blocks, ids.qbm};
  LastSeen seen(S);
  for (std::uint64_t w = 0; w < st.waves; ++w) {
    const std::uint64_t L = w * S, U = std::min(N, L + S);
    const Keys pairs_w = ids.keys(L, U, G);
    heads_sum += ids.keys(L, U, 1).size() * n;
    kv_sum += pairs_w.size() * n;
    seen.wave(L);
    struct {
      std::uint64_t w1 = ~std::uint64_t{0}, nm = 0, na = 0, nb = 0;
      Keys mid;
    } earlier;  // (the sets of the waves between an earlier wave w1 and this one)
    for (std::uint64_t cta = L; cta < U; ++cta, walk.next()) {
      const std::uint64_t pair = walk.pair();
      const std::uint64_t prev = last_in_wave[pair];
      last_in_wave[pair] = cta;
      seen.seen(cta, prev);
      if (prev != ~std::uint64_t{0} && prev >= L) {
        // Within the step: this kv head's previous CTA of the wave read it just before.
        const std::uint64_t X = seen.between(prev, cta);
        const std::uint64_t q = Q(prev + 1, cta + 1), o = O(prev, cta);
        if (n == 1) {
          t.read(zl * (1 + X) + q + o, zl);
        } else {
          t.read(z * (1 + X) + q, z);
          t.reads(z * (1 + X), 0, n - 2, z);
          t.read(zl * (1 + X) + o, zl);
        }
        continue;
      }
      const std::uint64_t c1 = prev;  // the kv head's last CTA before this wave
      if (c1 == ~std::uint64_t{0}) {  // the kv head's first CTA: first reads
        t.reads(infinite, 0, n - 1, z);
        t.read(infinite, zl);
        continue;
      }
      // The kv head's last CTA c1 of wave w1, n (w - w1) steps before.
      const std::uint64_t w1 = c1 / S, L1 = w1 * S, U1 = L1 + S;
      if (w1 != earlier.w1) {  // (once a pair of waves)
        earlier.w1 = w1;
        earlier.mid = ids.keys(U1, L, G);
        earlier.nm = earlier.mid.size();
        earlier.na = ids.keys(L1, U1, G).size_minus(earlier.mid);
        earlier.nb = pairs_w.size_minus(earlier.mid);
      }
      const Keys& mid = earlier.mid;
      const std::uint64_t nm = earlier.nm, na = earlier.na, nb = earlier.nb;
      // (From the wave before, the CTAs between are one run: counted as within a wave.)
      const std::uint64_t nj = U1 == L ? seen.between(c1, cta)
                                       : Keys::unite(ids.keys(c1 + 1, U1, G), ids.keys(L, cta, G)).size_minus(mid);
      const std::uint64_t qo_mid = Q(U1, L) + O(U1, L);
      auto D = [&](std::uint64_t j) {
        std::uint64_t d = zj(j) + nm * Z(0, n) + na * Z(j + 1, n) + nb * Z(0, j) + nj * zj(j) + qo_mid;
        d += j + 1 < n ? O(L1, U1) : O(c1, U1);
        if (j == 0) d += Q(c1 + 1, U1) + Q(L, cta + 1);
        else d += Q(L, U);
        if (j + 1 == n) d += O(L, cta);
        return d;
      };
      if (n == 1) {
        t.read(D(0), zl);
        continue;
      }
      t.read(D(0), z);
      if (n > 2) {
        const std::uint64_t d1 = D(1);
        const auto step = static_cast<std::int64_t>(nb * z) - static_cast<std::int64_t>(na * z);
        t.reads(d1, step, n - 2, z);
      }
      t.read(D(n - 1), zl);
    }
  }
  st.heads = static_cast<double>(heads_sum) / static_cast<double>(st.steps);
  st.kv_heads = static_cast<double>(kv_sum) / static_cast<double>(st.steps);
  return st;
}

}  // namespace hbmscope::l2
