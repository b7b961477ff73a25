#pragma once
// `hbmscope reconcile`: options and wiring (the work is in reconcile.hpp,
// ncu_import.hpp and reconcile_report.hpp).
#include <CLI/CLI.hpp>
#include <optional>
#include <string>
#include <vector>

#include "options.hpp"

namespace hbmscope::cli {

class ReconcileCommand {
 public:
  explicit ReconcileCommand(CLI::App& app);
  // When `reconcile` was parsed: runs it, sets rc, returns true.
  bool run(int& rc);

 private:
  int run_reconcile();

  CLI::App* cmd_ = nullptr;
  std::vector<std::string> files_;
  ShapeOptions shape_;
  OutputOptions out_;
  std::optional<std::string> device_, plot_, kernel_table_;
  std::optional<std::string> model_config_;  // refused with the reason (a call is one layer's kernel)
  std::optional<double> bandwidth_fraction_;
};

extern const char* const reconcile_help;

}  // namespace hbmscope::cli
