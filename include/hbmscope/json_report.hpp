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
// The optional rows[].l2_sim object.
nlohmann::json l2_sim_to_json(const L2SimDetail& d);

}  // namespace hbmscope
