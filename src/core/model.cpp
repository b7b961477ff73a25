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

}  // namespace

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
  validate(s);
  const std::uint64_t f =
      checked_product("FLOPs", 4, s.seq_q, s.seq_kv, s.head_dim, s.heads, s.batch);
  return s.causal ? f / 2 : f;
}

ModelBytes evaluate(const Shape& s) {
  return {standard_bytes(s), flash_no_l2_bytes(s), floor_bytes(s), attention_flops(s)};
}

}  // namespace hbmscope
