#pragma once
// Measuring shapes through a Backend: which kernels, the flash instantiation
// per shape, and the figures derived from a timing (bandwidth, % of the copy
// ceiling, TFLOP/s, roofline predictions). Host-side and GPU-free; sweep can
// call measure_row for each of its shapes.
#include <string_view>
#include <vector>

#include "hbmscope/backend.hpp"
#include "hbmscope/report.hpp"

namespace hbmscope {

// "standard,flash,floor" -> kinds, in the given order; throws Error naming a
// bad or repeated item.
std::vector<KernelKind> parse_kernels(std::string_view text);
std::string_view kernel_name(KernelKind k);
// The model variant whose bytes a kernel is held against ("softmax": the part
// of the standard variant the softmax kernel moves, S read + P written).
std::string_view kernel_variant(KernelKind k);
// Those bytes for a row (its model variants; softmax_bytes for softmax).
std::uint64_t kernel_model_bytes(const Row& row, KernelKind k);
// 2 * e * batch * heads * Nq * Nkv: S read once and P written once.
std::uint64_t softmax_bytes(const Shape& s);

// The shape a measurement uses: shape.block_rows/block_cols replaced by the
// flash instantiation for its head dim (explicit values must name one). Other
// head dims keep the shape's blocks.
Shape with_flash_blocks(const Shape& s, bool blocks_given);

// Fills the derived figures of m from its timing, the shape's model bytes and
// the device: bandwidth, copy_fraction, tflops, predicted_copy/peak and
// measured_over_predicted. copy_bandwidth 0 leaves the copy-based ones 0.
void complete_measurement(KernelMeasurement& m, std::uint64_t model_bytes, std::uint64_t flops,
                          double copy_bandwidth, double peak_bandwidth);

// Median, min, max, relative spread of samples (seconds).
TimingStats summarize(std::vector<double> samples, double warm_median);

// The floor kernel's output on the CPU: O = Q + K + V element by element over
// Q's elements (K/V contribute where they have an element of the same flat
// index), rounded to the shape's dtype.
std::vector<float> floor_reference(const Shape& s, const std::vector<float>& q, const std::vector<float>& k,
                                   const std::vector<float>& v);

// Bytes the kernel writes for a shape (O, plus the LSE for flash; P for the
// softmax): when they fit in the L2 the measured bandwidth is not HBM's.
std::uint64_t kernel_output_bytes(const Shape& s, KernelKind k);

// Bytes/s of a copy probe measurement (0 unless it succeeded).
double copy_bandwidth(const KernelMeasurement& copy);

// Runs every kind on one shape (already with_flash_blocks) and returns the
// model row with its measurements. Throws Error if the backend has no device.
Row measure_row(Backend& backend, const Shape& shape, const std::vector<KernelKind>& kinds,
                const MeasureOptions& opt, double copy_bandwidth);

// The device report: the device's info and the copy probe. Throws Error if
// the backend has no device.
DeviceReport measure_device(Backend& backend, const MeasureOptions& opt);

}  // namespace hbmscope
