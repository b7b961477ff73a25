#include "hbmscope/error.hpp"
#include "hbmscope/model.hpp"
#include "hbmscope/roofline.hpp"
#include "hbmscope/whole_model.hpp"

namespace hbmscope {

void add_predictions(Row& row, const DeviceSpec& device, double bandwidth_fraction) {
  try {
    row.ridge_point = ridge_point(device, row.shape.dtype, bandwidth_fraction);
    for (auto& v : row.variants) {
      v.prediction = predict(v.bytes, row.flops, row.shape.dtype, device, bandwidth_fraction);
      // Standard attention materialises its N x N matrices: on a device of
      // known memory, say when they cannot be held.
      if (v.id.rfind("standard", 0) == 0 && device.memory_bytes > 0) {
        v.prediction->footprint_bytes = standard_resident_bytes(row.shape);
        v.prediction->fits_in_memory = v.prediction->footprint_bytes <= device.memory_bytes;
      }
    }
  } catch (const Error& e) {
    throw Error("shape " + describe(row.shape) + ": " + e.what());
  }
}

void add_predictions(Report& report, const DeviceSpec& device, double bandwidth_fraction) {
  validate(device);
  for (Row& row : report.rows) add_predictions(row, device, bandwidth_fraction);
  sum_whole_model_predictions(report);
  report.roofline = RooflineInfo{device, bandwidth_fraction};
}

}  // namespace hbmscope
