// Sums of a mask over one sequence (mask.hpp; docs/model.md, "Masks"): the
// visible pairs, the visited tiles and the key columns and query rows they
// stream, in closed form. Query block i (rows r0..r1, positions x = r0 + Nkv -
// Nq and r1 + Nkv - Nq) visits key blocks [begin(i), end(i)): end(i) is the
// causal one, floor((r1 + Nkv - Nq) / Bc) + 1, and begin(i) is where the first
// row's window or chunk starts, in blocks. Every sum is a sum of ends less a
// sum of begins, each a floor sum of a linear function of i (chunks: nested).
#include <numeric>

#include "hbmscope/checked.hpp"
#include "hbmscope/mask.hpp"

namespace hbmscope {

namespace {

__extension__ typedef unsigned __int128 u128;
__extension__ typedef __int128 i128;

// sum_{t=0}^{n-1} floor((a*t + b) / m) in O(log) steps (Euclid-like reduction).
u128 floor_sum(u128 n, u128 m, u128 a, u128 b) {
  u128 total = 0;
  while (n != 0) {
    if (a >= m) {
      total += (n * (n - 1) / 2) * (a / m);
      a %= m;
    }
    if (b >= m) {
      total += n * (b / m);
      b %= m;
    }
    const u128 y_max = a * n + b;
    if (y_max < m) break;
    n = y_max / m;
    b = y_max % m;
    const u128 t = m;
    m = a;
    a = t;
  }
  return total;
}

std::uint64_t to_u64(u128 v, std::string_view what) {
  if (v > ~std::uint64_t{0}) throw_overflow(what);
  return static_cast<std::uint64_t>(v);
}

i128 ceil_div_signed(i128 a, i128 b) {  // b > 0
  return a >= 0 ? (a + b - 1) / b : -((-a) / b);
}

// sum_{p=0}^{n-1} (keys position p sees), n <= Nkv: p + 1 causal, min(p + 1, W)
// with a window, (p mod C) + 1 with a chunk.
u128 keys_seen_before(const Shape& s, u128 n) {
  if (s.window != 0) {
    const u128 w = s.window;
    return n <= w ? n * (n + 1) / 2 : w * (w + 1) / 2 + (n - w) * w;
  }
  if (s.chunk != 0) {
    const u128 c = s.chunk, q = n / s.chunk, r = n % s.chunk;
    return q * (c * (c + 1) / 2) + r * (r + 1) / 2;
  }
  return n * (n + 1) / 2;
}

// The block sums of one sequence, in 128 bits.
struct BlockSums {
  u128 tiles = 0, columns = 0, rows = 0;
};

struct Sequence {
  const Shape& s;
  std::uint64_t nq, nkv;
  i128 off() const { return static_cast<i128>(nkv) - static_cast<i128>(nq); }
  std::uint64_t query_blocks() const { return ceil_div(nq, s.block_rows); }
  std::uint64_t key_blocks() const { return ceil_div(nkv, s.block_cols); }
};

// sum over the full query blocks i < full that see a key of end(i) (tiles) and
// of min(Nkv, Bc * end(i)) (columns), end(i) = floor(c(i) / Bc) + 1 with
// c(i) = Br*i + Br - 1 + off the last row's position.
std::pair<u128, u128> causal_ends(const Sequence& q, std::uint64_t full) {
  const auto Br = static_cast<i128>(q.s.block_rows);
  const auto Bc = static_cast<i128>(q.s.block_cols);
  const auto nkb = static_cast<i128>(q.key_blocks());
  const i128 tail = nkb * Bc - static_cast<i128>(q.nkv);  // missing columns of the last key block
  const i128 b = Br - 1 + q.off();
  const i128 i0 = b < 0 ? ceil_div_signed(-b, Br) : 0;  // first block that sees a key
  if (i0 >= static_cast<i128>(full)) return {0, 0};
  const i128 count = static_cast<i128>(full) - i0;
  const u128 ends = floor_sum(static_cast<u128>(count), static_cast<u128>(Bc), static_cast<u128>(Br),
                              static_cast<u128>(Br * i0 + b)) +
                    static_cast<u128>(count);
  u128 cols = static_cast<u128>(Bc) * ends;
  // Blocks whose last key block is the (possibly partial) last one lose its tail.
  const i128 need = (nkb - 1) * Bc - b;  // Br*i >= need
  i128 i1 = need > 0 ? ceil_div_signed(need, Br) : 0;
  if (i1 < i0) i1 = i0;
  if (i1 < static_cast<i128>(full)) cols -= static_cast<u128>(tail) * static_cast<u128>(static_cast<i128>(full) - i1);
  return {ends, cols};
}

// sum_{t=0}^{n-1} floor(floor((A*t + B) / C) * C / Bc): the first key blocks of
// chunked query blocks (docs/model.md, "Masks"). C a multiple or a divisor of
// Bc is one floor sum; otherwise the cheapest of three exact sums.
u128 chunk_begin_sum(u128 n, u128 A, u128 B, u128 C, u128 Bc) {
  if (n == 0) return 0;
  if (C % Bc == 0) return (C / Bc) * floor_sum(n, C, A, B);
  if (Bc % C == 0) return floor_sum(n, Bc, A, B);  // floor(floor(x/C) / (Bc/C)) = floor(x/Bc)
  const u128 q_lo = B / C, q_hi = (A * (n - 1) + B) / C;
  const u128 chunks = q_hi - q_lo + 1;
  const u128 blocks = q_hi * C / Bc;  // key blocks j >= 1 some begin reaches
  const u128 g = std::gcd(static_cast<std::uint64_t>(C), static_cast<std::uint64_t>(Bc));
  const u128 bp = Bc / g, cp = C / g;
  u128 total = 0;
  if (chunks <= blocks && chunks <= 64 * bp) {
    // By chunk q: the t whose first row lies in chunk q, times floor(q*C/Bc).
    for (u128 q = q_lo; q <= q_hi; ++q) {
      const u128 t0 = q * C <= B ? 0 : (q * C - B + A - 1) / A;
      const u128 t1 = std::min(n, ((q + 1) * C - B + A - 1) / A);
      if (t1 > t0) total += (t1 - t0) * (q * C / Bc);
    }
    return total;
  }
  if (blocks <= 64 * bp) {
    // By key block j >= 1: the t whose chunk starts at or after j*Bc.
    for (u128 j = 1; j <= blocks; ++j) {
      const u128 start = (j * Bc + C - 1) / C * C;  // first chunk start >= j*Bc
      const u128 t0 = start <= B ? 0 : (start - B + A - 1) / A;
      if (t0 < n) total += n - t0;
    }
    return total;
  }
  // By residue: q = floor(x/C); floor(q*cp/bp) = cp*floor(q/bp) + h(q mod bp),
  // h(r) = floor(r*cp/bp); floor(q/bp) = floor(x/(C*bp)), and the t with
  // q mod bp >= r are floor((x + (bp - r)*C) / (C*bp)) - floor(x / (C*bp)).
  const u128 M = C * bp;
  const u128 base = floor_sum(n, M, A, B);
  total = cp * base;
  for (u128 r = 1; r < bp; ++r) {
    const u128 step = r * cp / bp - (r - 1) * cp / bp;
    if (step != 0) total += step * (floor_sum(n, M, A, B + (bp - r) * C) - base);
  }
  return total;
}

// begin(i) of query block i: its first row's first visible key, in blocks (0
// when that row sees nothing: the block then holds position 0, which sees key 0).
u128 begin_block(const Sequence& q, std::uint64_t i) {
  return visible_keys(q.s, q.nq, q.nkv, i * q.s.block_rows).begin / q.s.block_cols;
}

// sum over all query blocks of begin(i).
u128 begin_sum(const Sequence& q) {
  const Shape& s = q.s;
  if (s.window == 0 && s.chunk == 0) return 0;
  const auto Br = static_cast<i128>(s.block_rows);
  const auto nqb = static_cast<i128>(q.query_blocks());
  // begin(i) = floor(max(0, Br*i + a) / Bc) (window, a = off + 1 - W) or
  // floor(floor((Br*i + off) / C) * C / Bc) (chunk), 0 while Br*i + a < 0.
  const i128 a = s.window != 0 ? q.off() + 1 - static_cast<i128>(s.window) : q.off();
  const i128 i_s = a >= 0 ? 0 : ceil_div_signed(-a, Br);
  if (i_s >= nqb) return 0;
  const auto n = static_cast<u128>(nqb - i_s);
  const auto b = static_cast<u128>(Br * i_s + a);
  if (s.window != 0) return floor_sum(n, s.block_cols, static_cast<u128>(Br), b);
  return chunk_begin_sum(n, static_cast<u128>(Br), b, s.chunk, s.block_cols);
}

BlockSums block_sums(const Sequence& q) {
  const Shape& s = q.s;
  const u128 nqb = q.query_blocks(), nkb = q.key_blocks(), Br = s.block_rows, Bc = s.block_cols;
  if (!s.causal) return {nqb * nkb, nqb * q.nkv, nkb * q.nq};
  // The last query block ends at row Nq - 1, which sees key Nkv - 1: it visits
  // the last key block. Its rows may be fewer than Br.
  const bool partial = q.nq % s.block_rows != 0;
  auto [tiles, cols] = causal_ends(q, partial ? q.query_blocks() - 1 : q.query_blocks());
  if (partial) tiles += nkb, cols += q.nkv;
  const u128 begins = begin_sum(q);
  BlockSums r;
  r.tiles = tiles - begins;
  r.columns = cols - Bc * begins;
  const u128 last_rows = q.nq - (nqb - 1) * Br;
  const u128 last_tiles = nkb - begin_block(q, q.query_blocks() - 1);
  r.rows = Br * r.tiles - (Br - last_rows) * last_tiles;
  return r;
}

}  // namespace

std::uint64_t visible_pairs(const Shape& s, std::uint64_t nq, std::uint64_t nkv) {
  if (!s.causal) return checked_mul(nq, nkv, "visible (query, key) pairs");
  // Rows at positions p0 .. Nkv - 1 (p0 = max(0, Nkv - Nq); earlier rows see nothing).
  const std::uint64_t p0 = nkv > nq ? nkv - nq : 0;
  return to_u64(keys_seen_before(s, nkv) - keys_seen_before(s, p0), "visible (query, key) pairs");
}

std::uint64_t first_seen_key(const Shape& s, std::uint64_t nq, std::uint64_t nkv) {
  // The first row that sees a key (position max(0, Nkv - Nq)) has the smallest begin.
  const std::uint64_t row = nq > nkv ? nq - nkv : 0;
  return visible_keys(s, nq, nkv, row).begin;
}

std::uint64_t visited_tiles(const Shape& s, std::uint64_t nq, std::uint64_t nkv) {
  return to_u64(block_sums({s, nq, nkv}).tiles, "visited tiles");
}

std::uint64_t streamed_key_columns(const Shape& s, std::uint64_t nq, std::uint64_t nkv) {
  return to_u64(block_sums({s, nq, nkv}).columns, "streamed key columns");
}

std::uint64_t streamed_query_rows(const Shape& s, std::uint64_t nq, std::uint64_t nkv) {
  return to_u64(block_sums({s, nq, nkv}).rows, "streamed query rows");
}

std::uint64_t visited_key_columns(const Shape& s, std::uint64_t nq, std::uint64_t nkv) {
  return nkv - first_seen_key(s, nq, nkv) / s.block_cols * s.block_cols;
}

}  // namespace hbmscope
