#pragma once
// The decode kernels' part of the CUDA backend (src/cuda/decode_backend.cpp):
// buffers (contiguous cache or page pool + block table), validation against
// the CPU decode reference, timing through the backend's own timer.
#include <cuda_runtime.h>

#include <cstdint>
#include <functional>

#include "hbmscope/backend.hpp"

namespace hbmscope::cuda {

struct DecodeContext {
  cudaStream_t stream = nullptr;
  int sm_count = 0;
  std::function<std::uint64_t()> free_memory;  // bytes free on the device now
  // The backend's timing: warm-up, an L2 flush before every sample, events.
  std::function<TimingStats(const std::function<void()>&)> time;
  // measure --counters: DRAM bytes of one launch after the flush, into the
  // measurement (or the reason it could not be counted).
  std::function<void(const std::function<void()>&, KernelMeasurement&)> count;
};

// Backend::run for KernelKind::decode and decode_paged. shape.splits 0 takes
// the split heuristic with ctx.sm_count (decode_splits).
KernelMeasurement run_decode(const Shape& shape, KernelKind kind, const MeasureOptions& opt, const DecodeContext& ctx);

}  // namespace hbmscope::cuda
