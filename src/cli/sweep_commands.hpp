#pragma once
// The commands of issue 3: sweep, devices, compare, merge; and the device,
// roofline and plot options that `model` shares with `sweep`.
#include <CLI/CLI.hpp>
#include <optional>
#include <string>
#include <vector>

#include "hbmscope/report.hpp"
#include "options.hpp"

namespace hbmscope::cli {

struct DeviceOptions {
  std::optional<std::string> device;  // preset name or path to a JSON file
  std::optional<double> bandwidth_fraction;
  std::optional<std::string> plot;    // FILE.svg, FILE.png or "-"
};

void add_device_options(CLI::App& app, DeviceOptions& o);

// Checks the device and plot options before any work is done.
void check_device_options(const DeviceOptions& d, const OutputOptions& out);

// Adds predictions (with a device), renders, writes (stdout or --output,
// atomically) and plots. Returns the exit code.
int finish_report(Report& report, const OutputOptions& out, const DeviceOptions& dev);

class SweepCommands {
 public:
  explicit SweepCommands(CLI::App& app);
  // When one of these commands was parsed: runs it, sets rc, returns true.
  bool run(int& rc);

 private:
  int run_sweep();
  int run_devices();
  int run_compare();
  int run_merge();

  CLI::App* sweep_ = nullptr;
  CLI::App* devices_ = nullptr;
  CLI::App* compare_ = nullptr;
  CLI::App* merge_ = nullptr;

  ShapeOptions shape_;
  OutputOptions out_;
  DeviceOptions dev_;
  std::optional<std::string> config_, shard_, variants_;
  std::string progress_ = "auto";

  std::optional<std::string> devices_which_;
  std::string devices_format_ = "table";

  std::vector<std::string> compare_files_;
  double threshold_ = 5.0;
  std::optional<std::string> metric_;
  std::string compare_format_ = "table";
  std::optional<std::string> compare_output_;

  std::vector<std::string> merge_files_;
  std::string merge_format_ = "json";
  std::optional<std::string> merge_output_;
};

}  // namespace hbmscope::cli
