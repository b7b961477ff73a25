#include "hbmscope/model.hpp"

#include "hbmscope/checked.hpp"

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

// Key columns visited by the full query blocks i in [0, full) under the causal
// mask. Block i's last row is r1 = (i+1)*Br - 1; it sees keys up to
// c = r1 + off; the visited key blocks are 0..floor(c/Bc), i.e. Bc*(floor(c/Bc)+1)
// columns, less the missing tail of a partial last key block.
u128 causal_columns_full_blocks(const Shape& s, std::uint64_t full) {
  const auto Br = static_cast<i128>(s.block_rows);
  const auto Bc = static_cast<i128>(s.block_cols);
  const auto off = static_cast<i128>(causal_offset(s));
  const auto nkb = static_cast<i128>(key_blocks(s));
  const i128 tail = nkb * Bc - static_cast<i128>(s.seq_kv);  // missing columns of the last key block
  const i128 b = Br - 1 + off;  // c_max(i) = Br*i + b

  // First block that sees any key: Br*i + b >= 0.
  i128 i0 = 0;
  if (b < 0) i0 = (-b + Br - 1) / Br;
  if (i0 >= static_cast<i128>(full)) return 0;
  const i128 count = static_cast<i128>(full) - i0;

  const u128 floors = floor_sum(static_cast<u128>(count), static_cast<u128>(Bc),
                                static_cast<u128>(Br), static_cast<u128>(Br * i0 + b));
  u128 cols = static_cast<u128>(Bc) * (floors + static_cast<u128>(count));

  // Blocks whose last visited key block is the (possibly partial) last one.
  const i128 last_start = (nkb - 1) * Bc;  // c_max >= last_start
  i128 i1 = 0;
  const i128 need = last_start - b;  // Br*i >= need
  if (need > 0) i1 = (need + Br - 1) / Br;
  if (i1 < i0) i1 = i0;
  if (i1 < static_cast<i128>(full))
    cols -= static_cast<u128>(tail) * static_cast<u128>(static_cast<i128>(full) - i1);
  return cols;
}

// Tiles visited by the full query blocks i in [0, full) under the causal mask:
// block i visits key blocks 0..floor(c_max(i)/Bc), c_max(i) = Br*i + Br - 1 + off.
u128 causal_tiles_full_blocks(const Shape& s, std::uint64_t full) {
  const auto Br = static_cast<i128>(s.block_rows);
  const auto Bc = static_cast<i128>(s.block_cols);
  const i128 b = Br - 1 + static_cast<i128>(causal_offset(s));
  i128 i0 = 0;
  if (b < 0) i0 = (-b + Br - 1) / Br;
  if (i0 >= static_cast<i128>(full)) return 0;
  const i128 count = static_cast<i128>(full) - i0;
  return floor_sum(static_cast<u128>(count), static_cast<u128>(Bc), static_cast<u128>(Br),
                   static_cast<u128>(Br * i0 + b)) +
         static_cast<u128>(count);
}

// (query, key) pairs one head computes: Nq*Nkv, or with the causal mask the
// pairs with c <= r + (Nkv - Nq). Row r sees min(Nkv, max(0, r + Nkv - Nq + 1))
// keys; the last row sees all Nkv, so the visible counts are the consecutive
// integers ending at Nkv: Nq of them from Nkv - Nq + 1 when Nq <= Nkv, else
// 1..Nkv (the first Nq - Nkv rows see nothing).
u128 visible_pairs(const Shape& s) {
  const u128 nq = s.seq_q, nkv = s.seq_kv;
  if (!s.causal) return nq * nkv;
  if (nq <= nkv) return nq * (2 * nkv - nq + 1) / 2;
  return nkv * (nkv + 1) / 2;
}

// Sums byte terms with every step checked.
struct Total {
  std::string_view what;
  std::uint64_t value = 0;
  template <typename... Ts>
  void add(std::uint64_t first, Ts... rest) {
    value = checked_add(value, checked_product(what, first, rest...), what);
  }
};

}  // namespace

std::uint64_t visited_tiles(const Shape& s) {
  validate(s);
  const std::uint64_t nqb = query_blocks(s);
  const std::uint64_t nkb = key_blocks(s);
  if (!s.causal) return checked_mul(nqb, nkb, "visited tiles");
  // The last query block ends at row Nq-1, which sees every key.
  const bool ragged = s.seq_q % s.block_rows != 0;
  u128 t = causal_tiles_full_blocks(s, ragged ? nqb - 1 : nqb);
  if (ragged) t += nkb;
  return to_u64(t, "visited tiles");
}

std::uint64_t streamed_query_rows(const Shape& s) {
  // Every visited tile has Br rows except those of a partial last query block,
  // which visits all key blocks: R = Br*T - (ceil(Nq/Br)*Br - Nq)*ceil(Nkv/Bc).
  const std::uint64_t t = visited_tiles(s);
  const std::uint64_t missing = query_blocks(s) * s.block_rows - s.seq_q;
  const u128 r = static_cast<u128>(s.block_rows) * t - static_cast<u128>(missing) * key_blocks(s);
  return to_u64(r, "streamed query rows");
}

std::uint64_t flash1_no_l2_bytes(const Shape& s) {
  validate(s);
  Total t{"FlashAttention-1 bytes"};
  const std::uint64_t e = elem_bytes(s.dtype);
  const std::uint64_t H = s.heads, d = s.head_dim;
  t.add(e, H, s.seq_q, d);           // O initialised to 0
  t.add(8, H, s.seq_q);              // l = 0 and m = -inf initialised (fp32)
  t.add(2, e, H, s.seq_kv, d);       // K_j, V_j read once per (query head, key block)
  const std::uint64_t r = streamed_query_rows(s);
  t.add(3, e, d, H, r);              // per tile: read Q_i, read O_i, write O_i
  t.add(16, H, r);                   // per tile: read and write l_i, m_i (fp32)
  return checked_mul(t.value, s.batch, t.what);
}

namespace {
// With GQA the kernels write dK and dV per query head; a reduction then reads
// those and writes the kv head's sum (docs/model.md).
void add_gqa_reduction(Total& t, const Shape& s, std::uint64_t e) {
  if (s.heads == s.kv_heads) return;
  t.add(2, e, s.heads, s.seq_kv, s.head_dim);     // read per-query-head dK, dV
  t.add(2, e, s.kv_heads, s.seq_kv, s.head_dim);  // write the group sums
}
}  // namespace

std::uint64_t standard_bwd_bytes(const Shape& s) {
  validate(s);
  Total t{"standard attention backward bytes"};
  const std::uint64_t e = elem_bytes(s.dtype);
  const std::uint64_t H = s.heads, Nq = s.seq_q, Nkv = s.seq_kv, d = s.head_dim;
  // dV = P^T dO: read P, read dO, write dV.
  // dP = dO V^T: read dO, read V, write dP.
  // dS = P o (dP - rowsum(dP o P)): read P, read dP, write dS.
  // dQ = scale dS K: read dS, read K, write dQ.
  // dK = scale dS^T Q: read dS, read Q, write dK.
  t.add(7, e, H, Nq, Nkv);  // P twice, dP twice, dS three times
  t.add(4, e, H, Nq, d);    // dO twice, Q, dQ
  t.add(4, e, H, Nkv, d);   // V, K, dV, dK
  add_gqa_reduction(t, s, e);
  return checked_mul(t.value, s.batch, t.what);
}

std::uint64_t flash_bwd_no_l2_bytes(const Shape& s) {
  validate(s);
  Total t{"FlashAttention backward bytes"};
  const std::uint64_t e = elem_bytes(s.dtype);
  const std::uint64_t H = s.heads, Nq = s.seq_q, Nkv = s.seq_kv, d = s.head_dim;
  // Preprocessing: read dO and O, write D (fp32), zero the fp32 dQ accumulator.
  t.add(2, e, H, Nq, d);
  t.add(4, H, Nq);
  t.add(4, H, Nq, d);
  // Main loop, one CTA per (query head, key block): K_j, V_j read once, dK_j,
  // dV_j written once; per visited tile Q_i, dO_i (e), LSE_i, D_i (fp32) read
  // and the fp32 dQ_i tile read and written by the atomic adds.
  t.add(4, e, H, Nkv, d);
  const std::uint64_t r = streamed_query_rows(s);
  t.add(2, e, d, H, r);
  t.add(8, H, r);
  t.add(8, d, H, r);
  // dQ conversion: read the fp32 accumulator, write dQ.
  t.add(4, H, Nq, d);
  t.add(e, H, Nq, d);
  add_gqa_reduction(t, s, e);
  return checked_mul(t.value, s.batch, t.what);
}

std::uint64_t floor_bwd_bytes(const Shape& s) {
  validate(s);
  Total t{"backward floor bytes"};
  const std::uint64_t e = elem_bytes(s.dtype);
  t.add(4, e, s.heads, s.seq_q, s.head_dim);       // read Q, O, dO; write dQ
  t.add(4, e, s.kv_heads, s.seq_kv, s.head_dim);   // read K, V; write dK, dV
  t.add(4, s.heads, s.seq_q);                      // read the log-sum-exp (fp32)
  return checked_mul(t.value, s.batch, t.what);
}

std::uint64_t pass_flops(const Shape& s) {
  validate(s);
  // Forward 4*d per visible (query, key) pair, backward 10 (2.5x), both 14
  // (3.5x). Checked on the final count in 128 bits, so that a count that fits
  // is not refused for an intermediate product that does not.
  const std::uint64_t k = s.pass == Pass::fwd ? 4 : s.pass == Pass::bwd ? 10 : 14;
  u128 f = visible_pairs(s);
  for (const std::uint64_t x : {k, s.head_dim, s.heads, s.batch})
    if (__builtin_mul_overflow(f, static_cast<u128>(x), &f)) throw_overflow("FLOPs");
  return to_u64(f, "FLOPs");
}

std::uint64_t streamed_key_columns(const Shape& s) {
  validate(s);
  const std::uint64_t nqb = query_blocks(s);
  if (!s.causal) return checked_mul(nqb, s.seq_kv, "streamed key columns");
  // The last query block always ends at row Nq-1, which sees every key.
  const bool ragged = s.seq_q % s.block_rows != 0;
  const std::uint64_t full = ragged ? nqb - 1 : nqb;
  u128 cols = causal_columns_full_blocks(s, full);
  if (ragged) cols += s.seq_kv;
  return to_u64(cols, "streamed key columns");
}

std::uint64_t standard_bytes(const Shape& s) {
  validate(s);
  constexpr std::string_view what = "standard attention bytes";
  const std::uint64_t e = elem_bytes(s.dtype);
  const std::uint64_t qo = checked_product(what, 2, s.heads, s.seq_q, s.head_dim);
  const std::uint64_t kv = checked_product(what, 2, s.heads, s.seq_kv, s.head_dim);
  const std::uint64_t sp = checked_product(what, 4, s.heads, s.seq_q, s.seq_kv);
  const std::uint64_t per_batch = checked_add(checked_add(qo, kv, what), sp, what);
  return checked_product(what, per_batch, e, s.batch);
}

std::uint64_t flash_no_l2_bytes(const Shape& s) {
  validate(s);
  constexpr std::string_view what = "FlashAttention bytes";
  const std::uint64_t e = elem_bytes(s.dtype);
  const std::uint64_t qo = checked_product(what, 2, s.heads, s.seq_q, s.head_dim);
  const std::uint64_t kv = checked_product(what, 2, s.head_dim, s.heads, streamed_key_columns(s));
  return checked_product(what, checked_add(qo, kv, what), e, s.batch);
}

std::uint64_t floor_bytes(const Shape& s) {
  validate(s);
  constexpr std::string_view what = "floor bytes";
  const std::uint64_t e = elem_bytes(s.dtype);
  const std::uint64_t qo = checked_product(what, 2, s.heads, s.seq_q, s.head_dim);
  const std::uint64_t kv = checked_product(what, 2, s.kv_heads, s.seq_kv, s.head_dim);
  return checked_product(what, checked_add(qo, kv, what), e, s.batch);
}

std::uint64_t attention_flops(const Shape& s) {
  Shape f = s;
  f.pass = Pass::fwd;
  return pass_flops(f);
}

std::uint64_t visible_pairs_per_head(const Shape& s) {
  validate(s);
  return to_u64(visible_pairs(s), "visible (query, key) pairs");
}

std::uint64_t standard_resident_bytes(const Shape& s) {
  validate(s);
  const u128 e = elem_bytes(s.dtype), B = s.batch, H = s.heads, Hkv = s.kv_heads;
  const u128 nq = s.seq_q, nkv = s.seq_kv, d = s.head_dim;
  const u128 matrices = s.pass == Pass::fwd ? 2 : 3;
  const u128 tensors = (s.pass == Pass::fwd ? 1 : 2) * (2 * H * nq * d + 2 * Hkv * nkv * d);
  // Each factor is below 2^64 and the matrices' product below 2^(2+64+64+...):
  // checked step by step, saturating.
  u128 m = matrices * e;
  for (const u128 x : {B, H, nq, nkv})
    if (__builtin_mul_overflow(m, x, &m)) return ~std::uint64_t{0};
  u128 t = 0;
  if (__builtin_mul_overflow(tensors, e * B, &t) || __builtin_add_overflow(m, t, &m)) return ~std::uint64_t{0};
  return m > ~std::uint64_t{0} ? ~std::uint64_t{0} : static_cast<std::uint64_t>(m);
}

std::uint64_t forward_lse_bytes(const Shape& s) {
  validate(s);
  return checked_product("log-sum-exp bytes", 4, s.heads, s.seq_q, s.batch);
}

ModelBytes evaluate(const Shape& s) {
  const std::uint64_t flops = pass_flops(s);
  if (s.pass == Pass::fwd) return {standard_bytes(s), flash_no_l2_bytes(s), floor_bytes(s), flops};
  const ModelBytes bwd{standard_bwd_bytes(s), flash_bwd_no_l2_bytes(s), floor_bwd_bytes(s), flops};
  if (s.pass == Pass::bwd) return bwd;
  constexpr std::string_view what = "forward + backward bytes";
  // A training forward pass writes the log-sum-exp that FlashAttention's
  // backward (and its floor) reads; standard attention's backward reads P instead.
  const std::uint64_t lse = forward_lse_bytes(s);
  return {checked_add(standard_bytes(s), bwd.standard, what),
          checked_add(checked_add(flash_no_l2_bytes(s), lse, what), bwd.flash_no_l2, what),
          checked_add(checked_add(floor_bytes(s), lse, what), bwd.floor, what), flops};
}

}  // namespace hbmscope
