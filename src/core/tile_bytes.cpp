#include "hbmscope/tile_bytes.hpp"

#include "hbmscope/checked.hpp"

namespace hbmscope {

OperandBytes operand_bytes(const Shape& s) {
  constexpr std::string_view what = "tile bytes";
  const std::uint64_t e = elem_bytes(s.dtype), ekv = elem_bytes(key_value_dtype(s));
  const std::uint64_t dv = value_head_dim(s);
  OperandBytes b;
  b.q_row = checked_mul(e, s.head_dim, what);
  b.k_col = checked_mul(ekv, s.head_dim, what);
  b.v_col = s.latent_kv ? 0 : checked_mul(ekv, dv, what);
  b.o_row = checked_mul(e, dv, what);
  (void)checked_add(b.k_col, b.v_col, what);
  return b;
}

}  // namespace hbmscope
