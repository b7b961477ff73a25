// Host-side checks of counter values and the messages of `measure --counters`
// (no CUDA here: compiled in every build and tested without a GPU).
#include <cmath>
#include <cstdio>

#include "dram_counters.hpp"
#include "hbmscope/error.hpp"

namespace hbmscope::cuda {

std::uint64_t counter_bytes(double value, std::string_view metric) {
  // 2^64 as a double; values at or above it do not fit.
  if (!std::isfinite(value) || value < 0 || value >= 18446744073709551616.0) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.17g", value);
    throw Error(std::string(metric) + ": the GPU reported " + buf + ", not a byte count");
  }
  return static_cast<std::uint64_t>(std::nearbyint(value));
}

std::string counters_unavailable(int code, std::string_view code_text, std::string_view call) {
  const std::string tail = " (" + std::string(call) + ": " + std::string(code_text) + "); timings only";
  if (code == cupti_insufficient_privileges || code == cupti_virtualized_insufficient_privileges)
    return "DRAM counters: no permission to read GPU performance counters: run as root, or load the NVIDIA driver "
           "with NVreg_RestrictProfilingToAdminUsers=0 (https://developer.nvidia.com/ERR_NVGPUCTRPERM)" +
           tail;
  if (code == cupti_multiple_subscribers)
    return "DRAM counters: another profiler holds the counters (Nsight Compute, Nsight Systems or DCGM): run "
           "without it" + tail;
  if (code == cupti_not_supported) return "DRAM counters: not supported on this device or configuration" + tail;
  return "DRAM counters unavailable" + tail;
}

}  // namespace hbmscope::cuda
