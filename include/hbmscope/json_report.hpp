#pragma once
// The JSON form of a Report: schema "hbmscope.report/2" (reads /1 too), documented in
// docs/report-schema.md. Fields are added over time, never renamed.
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "hbmscope/report.hpp"

namespace hbmscope {

nlohmann::json shape_to_json(const Shape& s);
nlohmann::json measurement_to_json(const KernelMeasurement& m);
nlohmann::json device_to_json(const DeviceReport& d);
nlohmann::json report_to_json(const Report& r);
// The optional rows[].model object of whole-model rows (docs/report-schema.md).
nlohmann::json model_layers_to_json(const ModelLayers& m);
// The optional rows[].l2_sim object.
nlohmann::json l2_sim_to_json(const L2SimDetail& d);
// report_to_json(r).dump(2) + "\n", built row by row (fast for big sweeps).
std::string report_json_text(const Report& r);

// That text in pieces, for a report written as its rows come: open() (the
// header up to the rows' '['), row() for each row in order, close(). head is
// the report but its rows.
class JsonReportText {
 public:
  explicit JsonReportText(const Report& head);
  const std::string& open() const { return open_; }
  std::string row(const Row& r);
  std::string close() const;

 private:
  std::string open_, tail_;
  bool with_measurements_ = false;
  std::size_t rows_ = 0;
};

// A device spec as JSON (the form of docs/devices.md, as `hbmscope devices
// --format json` prints it and reports hold it in roofline.device).
nlohmann::json device_spec_to_json(const DeviceSpec& d);

// Reads a report back (for compare and merge). Checks the schema and every
// field this version writes; fields it does not know are ignored. Throws
// Error "ORIGIN: KEY: expected ..., got ..." on anything malformed.
Report report_from_json(const nlohmann::json& j, std::string_view origin);
// One element of "rows" (rows[i] in messages), checked as report_from_json
// checks it: for readers that stream a report's rows.
Row row_from_json(const nlohmann::json& row, std::string_view origin, std::size_t i);
Shape shape_from_json(const nlohmann::json& j, std::string_view origin, const std::string& key);
// What only the printers use, read back after the reader has checked it
// (json_report_detail.cpp): rows[].l2_sim (a decode row's simulations in the
// order of `variants`), a measurement, the measured `device`.
L2SimDetail l2_sim_from_json(const nlohmann::json& l2, const std::vector<VariantResult>& variants);
KernelMeasurement measurement_from_json(const nlohmann::json& m, std::string_view origin, const std::string& path);
DeviceReport device_report_from_json(const nlohmann::json& d, std::string_view origin);

}  // namespace hbmscope
