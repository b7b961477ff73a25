#pragma once
// DRAM bytes counted by the GPU for one range of work (CUPTI Range Profiler +
// Profiler Host API, CUDA 13): dram__bytes_read.sum and dram__bytes_write.sum.
// The CUPTI side (dram_counters_cupti.cpp) is compiled only with CUDA; the
// value checks and messages below are host code, tested without a GPU.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace hbmscope::cuda {

struct DramCounts {
  std::uint64_t read_bytes = 0;
  std::uint64_t write_bytes = 0;
};

// The metrics counted, in the order of DramCounts.
inline constexpr const char* dram_metrics[] = {"dram__bytes_read.sum", "dram__bytes_write.sum"};

class DramCounter {
 public:
  virtual ~DramCounter() = default;
  // Counts the work `launch` enqueues as one range. The metrics may need
  // several passes: each pass runs `before` (the L2 flush, then a
  // synchronisation), then `launch`, then `sync`. Throws Error.
  virtual DramCounts count(const std::function<void()>& before, const std::function<void()>& launch,
                           const std::function<void()>& sync) = 0;
};

// A counter on the current CUDA context of device `device`, or nullptr with a
// one-line `why` (no permission to read counters, another profiler attached,
// an unsupported device). CUDA builds only.
std::unique_ptr<DramCounter> make_dram_counter(int device, std::string& why);

// A metric value as bytes: finite, not negative, below 2^64, rounded to the
// nearest byte. Throws Error naming the metric otherwise.
std::uint64_t counter_bytes(double value, std::string_view metric);

// The line `measure --counters` prints when counters cannot be read, from the
// CUPTI result code and name of the call that failed.
std::string counters_unavailable(int cupti_code, std::string_view code_text, std::string_view call);

// CUPTI result codes the messages tell apart (cupti_result.h).
inline constexpr int cupti_insufficient_privileges = 35;
inline constexpr int cupti_virtualized_insufficient_privileges = 40;
inline constexpr int cupti_multiple_subscribers = 39;
inline constexpr int cupti_not_supported = 27;

}  // namespace hbmscope::cuda
