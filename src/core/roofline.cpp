#include <charconv>
#include <cmath>
#include <string>

#include "hbmscope/device_spec.hpp"
#include "hbmscope/error.hpp"

namespace hbmscope {

double peak_flops(const DeviceSpec& d, Dtype t) {
  switch (t) {
    case Dtype::fp32: return d.peak.fp32;
    case Dtype::fp16: return d.peak.fp16;
    case Dtype::bf16: return d.peak.bf16;
    case Dtype::fp8: return d.peak.fp8;
  }
  return 0;
}

std::string_view bound_name(Bound b) { return b == Bound::compute ? "compute" : "memory"; }

namespace {

bool positive(double v) { return std::isfinite(v) && v > 0; }

// Shortest round-trip form: "%g" would print 1.0000001 as 1.
std::string g(double v) {
  char b[64];
  const auto r = std::to_chars(b, b + sizeof b, v);
  return std::string(b, r.ptr);
}

bool in_rate_range(double v) { return v >= min_device_rate && v <= max_device_rate; }

// A last guard: the ranges above keep results finite, but a report must never
// hold a null time, whatever the inputs.
double finite(double v, const char* what) {
  if (!std::isfinite(v))
    throw Error(std::string("roofline: the ") + what + " is not a finite number; check the device's "
                "bandwidth and peak FLOP/s and --bandwidth-fraction");
  return v;
}

double checked_peak(const DeviceSpec& d, Dtype t) {
  const double p = peak_flops(d, t);
  if (!positive(p))
    throw Error("device '" + d.name + "' has no " + std::string(dtype_name(t)) +
                " peak FLOP/s; pick another --dtype or --device");
  return p;
}

}  // namespace

void validate_bandwidth_fraction(double f) {
  if (!(std::isfinite(f) && f > 0 && f <= 1))
    throw UsageError("--bandwidth-fraction: " + g(f) + " is not in (0, 1]");
  if (f < min_bandwidth_fraction)
    throw UsageError("--bandwidth-fraction: " + g(f) + " is below " + g(min_bandwidth_fraction) +
                ": no prediction could be finite");
}

void validate(const DeviceSpec& d) {
  if (d.name.empty()) throw Error("device spec has no name");
  if (!positive(d.bandwidth))
    throw Error("device '" + d.name + "': memory bandwidth must be a positive number of bytes/s");
  if (!(positive(d.peak.fp32) || positive(d.peak.fp16) || positive(d.peak.bf16) ||
        positive(d.peak.fp8)))
    throw Error("device '" + d.name + "': no peak FLOP/s for any dtype");
  if (!in_rate_range(d.bandwidth))
    throw Error("device '" + d.name + "': memory bandwidth " + g(d.bandwidth) + " B/s is not in [" +
                g(min_device_rate) + ", " + g(max_device_rate) + "]");
  for (double p : {d.peak.fp32, d.peak.fp16, d.peak.bf16, d.peak.fp8}) {
    if (!(std::isfinite(p) && p >= 0))
      throw Error("device '" + d.name + "': a peak FLOP/s is negative or not finite");
    if (p != 0 && !in_rate_range(p))  // 0: no peak for that dtype
      throw Error("device '" + d.name + "': peak " + g(p) + " FLOP/s is not in [" + g(min_device_rate) +
                  ", " + g(max_device_rate) + "]");
  }
  if (d.sm_count > max_sm_count)
    throw Error("device '" + d.name + "': " + std::to_string(d.sm_count) + " SMs is more than " +
                std::to_string(max_sm_count));
}

double ridge_point(const DeviceSpec& d, Dtype dtype, double bandwidth_fraction) {
  validate_bandwidth_fraction(bandwidth_fraction);
  return finite(checked_peak(d, dtype) / (d.bandwidth * bandwidth_fraction), "ridge point");
}

Prediction predict(std::uint64_t bytes, std::uint64_t flops, Dtype dtype, const DeviceSpec& d,
                   double bandwidth_fraction) {
  validate_bandwidth_fraction(bandwidth_fraction);
  validate(d);
  Prediction p;
  p.memory_seconds = static_cast<double>(bytes) / (d.bandwidth * bandwidth_fraction);
  p.compute_seconds = static_cast<double>(flops) / checked_peak(d, dtype);
  p.bound = p.compute_seconds > p.memory_seconds ? Bound::compute : Bound::memory;
  p.seconds = std::max(p.memory_seconds, p.compute_seconds);
  (void)finite(p.memory_seconds, "predicted memory time");
  (void)finite(p.compute_seconds, "predicted compute time");
  return p;
}

}  // namespace hbmscope
