#pragma once
// What a measurement on a device produces: plain data, kept in report rows
// (report.hpp) and filled by a Backend (backend.hpp) and measure.hpp.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace hbmscope {

// The device as the runtime reports it (cudaDeviceGetAttribute, cudaMemGetInfo).
struct DeviceInfo {
  std::string name;
  int index = 0;
  int cc_major = 0, cc_minor = 0;
  int sm_count = 0;
  std::uint64_t l2_bytes = 0;
  std::uint64_t memory_clock_khz = 0;
  int bus_width_bits = 0;
  double peak_bandwidth = 0.0;  // bytes/s, 2 x memory clock x bus width / 8
  std::uint64_t total_memory = 0, free_memory = 0;
  int driver_version = 0, runtime_version = 0;  // 13000 = 13.0
};

// Event-timed samples of one kernel, each after an L2 flush ("cold"), and one
// figure from back-to-back launches with no flush ("warm"). Seconds.
struct TimingStats {
  double median = 0.0, min = 0.0, max = 0.0;
  double rel_spread = 0.0;  // (max - min) / median
  double warm_median = 0.0; // back-to-back launches: total / count
  std::vector<double> samples;
};

enum class MeasureStatus { ok, failed, skipped };

struct KernelMeasurement {
  std::string kernel;  // "standard", "flash", "flash_v1", "floor", "softmax", "copy"
  std::string variant; // the model variant its bytes come from ("flash_no_l2", ...)
  MeasureStatus status = MeasureStatus::skipped;
  std::string reason;  // why failed or skipped
  double rel_error = 0.0;   // ||out - ref|| / ||ref|| on the validation shape
  double lse_rel_error = 0.0;  // flash only: on the row log-sum-exp
  std::string validated_on; // describe() of the validation shape
  std::uint64_t block_rows = 0, block_cols = 0;  // flash: the instantiation's Br, Bc
  TimingStats timing;
  std::uint64_t model_bytes = 0;  // the model's bytes for this kernel's variant
  std::uint64_t flops = 0;        // the row's attention FLOPs (0 for copy)
  double bandwidth = 0.0;         // model_bytes / median, bytes/s
  double copy_fraction = 0.0;     // bandwidth / measured copy bandwidth
  double tflops = 0.0;            // flops / median / 1e12
  double predicted_copy = 0.0;    // model_bytes / measured copy bandwidth, s
  double predicted_peak = 0.0;    // model_bytes / peak bandwidth, s
  double measured_over_predicted = 0.0;  // median / predicted_copy
  std::uint64_t warps = 0;  // flash kernels: warps per CTA of the instantiation that ran
  // The kernel's output fits in the device's L2: its writes may still sit in
  // the L2 when the stop event fires, so the bandwidth reads high (not an HBM figure).
  bool output_fits_l2 = false;
  // `measure --counters`: DRAM bytes the GPU counted over one launch (CUPTI),
  // after the same L2 flush as the timed samples; `counters` is "ok", or why
  // there are none ("" when not asked for).
  std::optional<std::uint64_t> dram_read_bytes, dram_write_bytes;
  std::string counters;
};

// The device of a measuring run and its measured bandwidth ceiling.
struct DeviceReport {
  DeviceInfo info;
  KernelMeasurement copy;  // the device-to-device copy probe (bytes = read + write)
};

inline std::string status_name(MeasureStatus s) {
  switch (s) {
    case MeasureStatus::ok: return "ok";
    case MeasureStatus::failed: return "failed";
    case MeasureStatus::skipped: return "skipped";
  }
  return "?";
}

}  // namespace hbmscope
