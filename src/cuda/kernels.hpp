#pragma once
// Host entry points of the kernels in src/cuda/*.cu. Each launches on `stream`
// and checks the launch; none synchronises.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "flash_params.hpp"
#include "hbmscope/launch_plan.hpp"

namespace hbmscope::cuda {

// flash_d64.cu, flash_d128.cu: the instantiation `config`.
void launch_flash(const FlashConfig& config, const flash::FlashParams& p, const LaunchGeometry& g,
                  cudaStream_t stream);

// softmax.cu: P = softmax(S) row by row, S already scaled; rows of `row_stride`
// values of which the first `cols` are real. Row r of a head (r = row % rows_per_head)
// sees keys c <= r + causal_offset when causal, and with a window (or a chunk)
// only those flash_layout.hpp's row_keys gives; masked and padding entries of P are 0.
struct SoftmaxArgs {
  const __nv_bfloat16* s;
  __nv_bfloat16* p;
  std::uint64_t rows;
  int rows_per_head;
  int cols;
  int row_stride;
  int causal;
  int causal_offset;
  int window;  // 0: none
  int chunk;   // 0: none
};
void launch_softmax(const SoftmaxPlan& plan, const SoftmaxArgs& a, cudaStream_t stream);

// floor.cu: O = Q + K + V chunk by chunk (each value read or written once).
void launch_floor(const FloorPlan& plan, const __nv_bfloat16* q, const __nv_bfloat16* k,
                  const __nv_bfloat16* v, __nv_bfloat16* o, cudaStream_t stream);

// floor.cu: reads `bytes` (a multiple of 16) of `buffer`; the L2 flush's read pass.
void launch_read_pass(const void* buffer, std::uint64_t bytes, int sm_count, cudaStream_t stream);

// floor.cu: n values uniform in [-1, 1) from a hash of (index, seed), as bf16.
void launch_fill_random(__nv_bfloat16* x, std::uint64_t n, std::uint64_t seed, cudaStream_t stream);

}  // namespace hbmscope::cuda
