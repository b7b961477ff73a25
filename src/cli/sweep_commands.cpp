// The wiring of sweep, devices, compare, merge and submit: each subcommand's options
// and run are in its own file (sweep_command.cpp, devices_command.cpp,
// compare_command.cpp, merge_command.cpp, submit_command.cpp); the steps and checks they share
// with model and measure in run_steps.cpp and run_options.cpp.
#include "sweep_commands.hpp"

namespace hbmscope::cli {

SweepCommands::SweepCommands(CLI::App& app) {
  // In this order in `hbmscope --help`.
  add_sweep(app);
  add_devices(app);
  add_compare(app);
  add_merge(app);
  add_submit(app);
}

bool SweepCommands::run(int& rc) {
  if (sweep_->parsed()) rc = run_sweep();
  else if (devices_->parsed()) rc = run_devices();
  else if (compare_->parsed()) rc = run_compare();
  else if (merge_->parsed()) rc = run_merge();
  else if (submit_->parsed()) rc = run_submit();
  else return false;
  return true;
}

}  // namespace hbmscope::cli
