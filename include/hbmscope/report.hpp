#pragma once
// What a run produces: rows of figures per shape, kept apart from how they are
// printed (src/report) and how they were computed (src/core).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hbmscope/measurement.hpp"
#include "hbmscope/shape.hpp"

namespace hbmscope {

inline constexpr std::string_view report_schema = "hbmscope.report/1";

// One variant's traffic on one shape.
struct VariantResult {
  std::string id;            // "standard", "flash_no_l2", "floor"
  std::uint64_t bytes = 0;   // HBM bytes, reads + writes
  double intensity = 0.0;    // FLOPs per HBM byte
};

struct Row {
  Shape shape;
  std::uint64_t flops = 0;   // attention FLOPs (halved when causal)
  std::vector<VariantResult> variants;
  std::vector<KernelMeasurement> measurements;  // `measure`: one per kernel run on this shape

  const VariantResult* variant(std::string_view id) const {
    for (const auto& v : variants)
      if (v.id == id) return &v;
    return nullptr;
  }
};

struct Report {
  std::string command = "model";
  std::vector<Row> rows;
  std::optional<DeviceReport> device;  // `measure`: the device and its copy ceiling
};

}  // namespace hbmscope
