#pragma once
// Roofline predictions for the rows of a report (maths in device_spec.hpp).
#include "hbmscope/device_spec.hpp"
#include "hbmscope/report.hpp"

namespace hbmscope {

// Fills every variant's prediction and each row's ridge point, and records the
// device and fraction in the report. Throws Error (naming the shape) when the
// device has no peak for a row's dtype.
void add_predictions(Report& report, const DeviceSpec& device, double bandwidth_fraction);
// The same for one row (a run that streams its rows): the report's roofline
// field is the caller's to set.
void add_predictions(Row& row, const DeviceSpec& device, double bandwidth_fraction);

}  // namespace hbmscope
