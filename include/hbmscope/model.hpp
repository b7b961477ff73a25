#pragma once
// The analytic HBM byte model of the design note (see docs/model.md).
// Every count is exact and 64-bit; a shape whose count overflows throws Error.
#include <cstdint>

#include "hbmscope/shape.hpp"

namespace hbmscope {

// Number of key columns streamed past all query blocks of one head in
// FlashAttention-2 order (C in docs/model.md): ceil(Nq/Br)*Nkv without a mask.
std::uint64_t streamed_key_columns(const Shape& s);

// Standard three-kernel attention: S and P each written and read once.
std::uint64_t standard_bytes(const Shape& s);
// FlashAttention-2, every K/V tile re-read from HBM for every query block.
std::uint64_t flash_no_l2_bytes(const Shape& s);
// Every value read or written exactly once.
std::uint64_t floor_bytes(const Shape& s);
// 4*Nq*Nkv*d per head, halved when causal (FlashAttention benchmarks' convention).
std::uint64_t attention_flops(const Shape& s);

struct ModelBytes {
  std::uint64_t standard = 0;
  std::uint64_t flash_no_l2 = 0;
  std::uint64_t floor = 0;
  std::uint64_t flops = 0;
};

ModelBytes evaluate(const Shape& s);

inline double intensity(std::uint64_t flops, std::uint64_t bytes) {
  return bytes == 0 ? 0.0 : static_cast<double>(flops) / static_cast<double>(bytes);
}

}  // namespace hbmscope
