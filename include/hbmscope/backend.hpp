#pragma once
// The measuring backend: the CUDA implementation (src/cuda/cuda_backend.cpp)
// or the no-GPU one (src/cuda/no_gpu_backend.cpp). Only CMake and the
// generated config header decide which make_backend returns.
#include <cstdint>
#include <memory>
#include <string>

#include "hbmscope/launch_plan.hpp"
#include "hbmscope/measurement.hpp"
#include "hbmscope/shape.hpp"

namespace hbmscope {

struct MeasureOptions {
  int repeats = 20;  // timed samples, each after an L2 flush
  int warmup = 3;    // untimed launches first (module load, cuBLAS heuristics)
  std::uint64_t seed = 1;
  bool validate = true;
  // Validate on the shape itself even when it is large (the GPU tests do);
  // otherwise on validation_shape(shape).
  bool validate_full_shape = false;
  std::uint64_t copy_bytes = 1ull << 30;  // copy probe size (each of source and destination)
  std::uint64_t flush_bytes = 0;  // L2 flush buffer; 0: flush_bytes(l2) (twice the L2)
  // Also count DRAM bytes read and written over one launch (CUPTI), after the
  // same L2 flush; without counter permission the timings still run.
  bool counters = false;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual bool available() const = 0;
  // Why there is no device, one line (the driver's own error included).
  virtual std::string unavailable_reason() const = 0;
  virtual DeviceInfo device() const = 0;
  // Validates (unless told not to) and times one kernel family on one shape.
  // For flash, shape.block_rows/block_cols name the instantiation. Fills
  // status, reason, rel_error, validated_on, block sizes and timing; the
  // derived figures are measure.hpp's. A shape that does not fit the device's
  // free memory is `skipped`, a wrong result `failed` and not timed.
  virtual KernelMeasurement run(const Shape& shape, KernelKind kind, const MeasureOptions& opt) = 0;
  // The device-to-device copy probe (bytes = read + write).
  virtual KernelMeasurement copy_probe(const MeasureOptions& opt) = 0;
};

// The CUDA backend for device `device_index` when compiled with CUDA and the
// device exists; otherwise the no-GPU backend saying why.
std::unique_ptr<Backend> make_backend(int device_index);

// The backend with no device; `reason` is what unavailable_reason() says.
std::unique_ptr<Backend> make_no_gpu_backend(std::string reason);

}  // namespace hbmscope
