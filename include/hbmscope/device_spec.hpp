#pragma once
// A GPU as the roofline sees it: plain data, filled from a preset, a user's
// JSON file (src/config) or, later, the CUDA runtime. No I/O here.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "hbmscope/shape.hpp"

namespace hbmscope {

// Dense (no 2:4 sparsity) peak FLOP/s per element type; 0 = the device has no
// such path (e.g. fp8 on the A100).
struct PeakFlops {
  double fp32 = 0;
  double fp16 = 0;
  double bf16 = 0;
  double fp8 = 0;
};

struct DeviceSpec {
  std::string id;                 // preset name ("h100-sxm") or the file it came from
  std::string name;               // "H100 SXM"
  std::vector<std::string> aliases;  // other names --device takes ("h100")
  std::string memory;             // free text, e.g. "80 GB HBM3"
  double bandwidth = 0;           // DRAM bandwidth, bytes/s (datasheet)
  std::uint64_t l2_bytes = 0;
  std::uint64_t sm_count = 0;
  PeakFlops peak;
  // Device memory in bytes (JSON memory_bytes, optional): 0 = not given, and
  // no variant is then checked against it.
  std::uint64_t memory_bytes = 0;
  // Where each figure comes from, keyed by its JSON name
  // ("memory_bandwidth_bytes_per_s", "peak_flops_dense.bf16", ...).
  std::map<std::string, std::string> sources;
};

// The ranges a device's figures and the bandwidth fraction must lie in, for
// device files and the command line alike: wide enough for any GPU, narrow
// enough that no count is narrowed later and every prediction is finite
// (bytes and FLOPs below 2^64 over at least 1 B/s or 1e6 FLOP/s).
inline constexpr std::uint64_t max_sm_count = 1'000'000;  // also --sms, --ctas-per-sm
inline constexpr double min_device_rate = 1e6;             // bytes/s, FLOP/s
inline constexpr double max_device_rate = 1e18;
inline constexpr double min_bandwidth_fraction = 1e-6;

// Throws Error "--bandwidth-fraction: ..." unless f is in [1e-6, 1].
void validate_bandwidth_fraction(double f);

// 0 when the device has no peak for that type.
double peak_flops(const DeviceSpec& d, Dtype t);

enum class Bound { memory, compute };
std::string_view bound_name(Bound b);  // "memory" / "compute"

// The roofline of one variant on one device: time = max(bytes / (bandwidth *
// fraction), flops / peak). See docs/devices.md.
struct Prediction {
  double seconds = 0;          // the larger of the two terms
  double memory_seconds = 0;   // bytes / effective bandwidth
  double compute_seconds = 0;  // flops / peak
  Bound bound = Bound::memory; // which term binds (memory on a tie)
  // Bytes the variant holds in device memory at once (0: not modelled; today
  // the standard variants' S and P with Q, K, V, O), and whether that fits in
  // the device's memory_bytes (true when either is unknown).
  std::uint64_t footprint_bytes = 0;
  bool fits_in_memory = true;
};

// Throws Error when the fraction is not in [1e-6, 1], the device lacks a figure
// or has no peak for the dtype, or the result is not finite.
Prediction predict(std::uint64_t bytes, std::uint64_t flops, Dtype dtype, const DeviceSpec& d,
                   double bandwidth_fraction);

// FLOP per byte at which the two terms are equal: peak / (bandwidth * fraction).
double ridge_point(const DeviceSpec& d, Dtype dtype, double bandwidth_fraction);

// Throws Error naming the field when a spec cannot be used (non-positive
// bandwidth, no peak at all, ...).
void validate(const DeviceSpec& d);

}  // namespace hbmscope
