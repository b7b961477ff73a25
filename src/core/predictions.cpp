#include "hbmscope/error.hpp"
#include "hbmscope/roofline.hpp"

namespace hbmscope {

void add_predictions(Report& report, const DeviceSpec& device, double bandwidth_fraction) {
  validate(device);
  for (Row& row : report.rows) {
    try {
      row.ridge_point = ridge_point(device, row.shape.dtype, bandwidth_fraction);
      for (auto& v : row.variants)
        v.prediction = predict(v.bytes, row.flops, row.shape.dtype, device, bandwidth_fraction);
    } catch (const Error& e) {
      throw Error("shape " + describe(row.shape) + ": " + e.what());
    }
  }
  report.roofline = RooflineInfo{device, bandwidth_fraction};
}

}  // namespace hbmscope
