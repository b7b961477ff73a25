#pragma once
// The JSON form of a Report: schema "hbmscope.report/1", documented in
// docs/report-schema.md. Fields are added over time, never renamed.
#include <nlohmann/json.hpp>

#include "hbmscope/report.hpp"

namespace hbmscope {

nlohmann::json shape_to_json(const Shape& s);
nlohmann::json measurement_to_json(const KernelMeasurement& m);
nlohmann::json device_to_json(const DeviceReport& d);
nlohmann::json report_to_json(const Report& r);

}  // namespace hbmscope
