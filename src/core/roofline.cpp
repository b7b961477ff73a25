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

void check_fraction(double f) {
  if (!(std::isfinite(f) && f > 0 && f <= 1))
    throw Error("--bandwidth-fraction: " + std::to_string(f) + " is not in (0, 1]");
}

double checked_peak(const DeviceSpec& d, Dtype t) {
  const double p = peak_flops(d, t);
  if (!positive(p))
    throw Error("device '" + d.name + "' has no " + std::string(dtype_name(t)) +
                " peak FLOP/s; pick another --dtype or --device");
  return p;
}

}  // namespace

void validate(const DeviceSpec& d) {
  if (d.name.empty()) throw Error("device spec has no name");
  if (!positive(d.bandwidth))
    throw Error("device '" + d.name + "': memory bandwidth must be a positive number of bytes/s");
  if (!(positive(d.peak.fp32) || positive(d.peak.fp16) || positive(d.peak.bf16) ||
        positive(d.peak.fp8)))
    throw Error("device '" + d.name + "': no peak FLOP/s for any dtype");
  for (double p : {d.peak.fp32, d.peak.fp16, d.peak.bf16, d.peak.fp8})
    if (!(std::isfinite(p) && p >= 0))
      throw Error("device '" + d.name + "': a peak FLOP/s is negative or not finite");
}

double ridge_point(const DeviceSpec& d, Dtype dtype, double bandwidth_fraction) {
  check_fraction(bandwidth_fraction);
  return checked_peak(d, dtype) / (d.bandwidth * bandwidth_fraction);
}

Prediction predict(std::uint64_t bytes, std::uint64_t flops, Dtype dtype, const DeviceSpec& d,
                   double bandwidth_fraction) {
  check_fraction(bandwidth_fraction);
  validate(d);
  Prediction p;
  p.memory_seconds = static_cast<double>(bytes) / (d.bandwidth * bandwidth_fraction);
  p.compute_seconds = static_cast<double>(flops) / checked_peak(d, dtype);
  p.bound = p.compute_seconds > p.memory_seconds ? Bound::compute : Bound::memory;
  p.seconds = std::max(p.memory_seconds, p.compute_seconds);
  return p;
}

}  // namespace hbmscope
