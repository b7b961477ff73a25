#pragma once
// The bytes of one row or column of each operand of a shape: the one place the
// L2 simulation (and anything else that moves whole tiles) takes tile sizes
// from (docs/model.md, "Operand shapes"). Q rows have head_dim values of
// dtype, O rows head_dim_v values of dtype; K columns head_dim values of the
// KV dtype and V columns head_dim_v values of it, except for a latent KV
// (MLA absorbed), whose one latent vector of head_dim values serves as K and
// its first head_dim_v values as V: no V of its own.
#include <cstdint>

#include "hbmscope/shape.hpp"

namespace hbmscope {

struct OperandBytes {
  std::uint64_t q_row = 0;  // e * d
  std::uint64_t k_col = 0;  // e_kv * d
  std::uint64_t v_col = 0;  // e_kv * dv (0 for a latent KV)
  std::uint64_t o_row = 0;  // e * dv
  // K_j and V_j are read together: one L2 object of kv_col() bytes per key.
  std::uint64_t kv_col() const { return k_col + v_col; }
};

// Checked: a shape whose row bytes overflow is refused (Error).
OperandBytes operand_bytes(const Shape& s);

}  // namespace hbmscope
