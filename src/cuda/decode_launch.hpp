#pragma once
// Host entry point of the decode kernels (src/cuda/decode.cu): launches on
// `stream` and checks the launches; does not synchronise.
#include <cuda_runtime.h>

#include "decode_params.hpp"
#include "hbmscope/decode_plan.hpp"

namespace hbmscope::cuda {

// The split kernel for plan.splits splits, then (splits > 1) the combine.
void launch_decode(const DecodePlan& plan, const decode::DecodeParams& p, cudaStream_t stream);

}  // namespace hbmscope::cuda
