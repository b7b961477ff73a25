#pragma once
// A decode row for the decode kernels' CPU tests (test_decode_plan.cpp,
// test_decode_emulation.cpp): `lengths` one per sequence (ragged), or one
// length for all.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "hbmscope/shape.hpp"

namespace hbmscope::testing {

inline Shape decode_shape(std::uint64_t batch, std::uint64_t heads, std::uint64_t kv_heads, std::uint64_t nq,
                          std::vector<std::uint64_t> lengths, std::uint64_t d, bool causal = false) {
  Shape s;
  s.decode = true;
  s.batch = batch;
  s.heads = heads;
  s.kv_heads = kv_heads;
  s.seq_q = nq;
  s.head_dim = d;
  s.causal = causal;
  s.seq_kv = *std::max_element(lengths.begin(), lengths.end());
  if (lengths.size() == batch) s.context_lengths = std::move(lengths);
  return s;
}

}  // namespace hbmscope::testing
