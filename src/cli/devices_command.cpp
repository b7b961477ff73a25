// `hbmscope devices`: the roofline's GPU presets, or one device in full.
#include "hbmscope/device_config.hpp"
#include "hbmscope/error.hpp"
#include "hbmscope/json_report.hpp"
#include "hbmscope/printers.hpp"
#include "sweep_commands.hpp"

namespace hbmscope::cli {

namespace {

Format format_or_throw(const std::string& f) {
  const auto p = parse_format(f);
  if (!p) throw UsageError("--format: '" + f + "' is not one of table, json, csv, md");
  return *p;
}

}  // namespace

void SweepCommands::add_devices(CLI::App& app) {
  devices_ = app.add_subcommand("devices", "List the GPU presets of the roofline, or show one with its sources");
  devices_->add_option("device", devices_which_, "A preset name or a device JSON file to show in full")
      ->type_name("NAME|FILE");
  devices_->add_option("--format", devices_format_, "table, json, csv or md [default: table]")
      ->type_name("table|json|csv|md");
  devices_->footer(R"(Columns: memory bandwidth (datasheet, bytes/s in decimal units), L2 size, SM count,
dense peak FLOP/s per dtype (no 2:4 sparsity; "-" where the GPU has no such path),
and the bf16 ridge point: FLOP per byte where memory time equals compute time.
Examples:
  hbmscope devices
  hbmscope devices h100            every figure with its source
  hbmscope devices my-gpu.json     check a file of your own (schema: docs/devices.md))");
}

int SweepCommands::run_devices() {
  const Format f = format_or_throw(devices_format_);
  std::vector<DeviceSpec> list;
  if (devices_which_) list.push_back(find_device(*devices_which_, "devices"));
  else list = preset_devices();
  if (f == Format::json) {
    const bool detail = devices_which_.has_value();
    nlohmann::json j = nlohmann::json::array();
    for (const auto& d : list) j.push_back(device_spec_to_json(d));
    write_stdout((detail ? j[0] : j).dump(2) + "\n");
    return 0;
  }
  write_stdout(render_devices(list, devices_which_.has_value(), f));
  return 0;
}

}  // namespace hbmscope::cli
