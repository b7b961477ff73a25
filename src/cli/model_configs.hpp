#pragma once
// Whole models on the command line: `--model-config` on model and sweep, its
// checks, and the `models` command (model_configs.cpp).
#include <CLI/CLI.hpp>
#include <optional>
#include <string>
#include <vector>

#include "hbmscope/model_config.hpp"
#include "hbmscope/sweep.hpp"
#include "options.hpp"

namespace hbmscope::cli {

void add_model_config_option(CLI::App& app, std::optional<std::string>& o);
// The help of whole-model rows, for model's and sweep's footers.
extern const char* const whole_models_help;

// The models of `--model-config LIST`: shipped names or config.json files,
// comma-separated, each read once; a model named twice is refused.
std::vector<ModelConfigRef> model_configs(const std::string& list);

// --output and --plot naming a model's config.json (an input of the run) are
// refused before anything is read or written.
void refuse_model_files_as_output(const std::vector<ModelConfigRef>& models, const std::optional<std::string>& output,
                                  const std::optional<std::string>& plot);

// Before any work, for a run with whole-model rows: the shape options a model
// gives (--heads, --kv-heads, --head-dim, --head-dim-v, --mla, --window,
// --chunk) are refused as usage errors.
void check_model_shape_options(const ShapeOptions& o);

// `model --model-config`: the step from the shape options (--seq for a
// prefill; --decode with --seq-kv or --context-lengths for a decode step),
// with the models as an axis. UsageError when no step is given.
SweepAxes model_config_axes(const ShapeOptions& o, std::vector<ModelConfigRef> models);

// `hbmscope models [NAME|FILE]`.
class ModelsCommand {
 public:
  explicit ModelsCommand(CLI::App& app);
  // When `models` was parsed: runs it, sets rc, returns true.
  bool run(int& rc);

 private:
  CLI::App* cmd_ = nullptr;
  std::optional<std::string> which_;
  std::string format_ = "table";
};

}  // namespace hbmscope::cli
