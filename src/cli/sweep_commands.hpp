#pragma once
// The commands of issue 3 (sweep, devices, compare, merge) and issue 21
// (submit), one file each (sweep_command.cpp ...); and what `model`, `measure` and `reconcile` share
// with them: the device, roofline and plot options and the run's checks
// (run_options.cpp), the L2 and measurement steps and finish_report
// (run_steps.cpp).
#include <CLI/CLI.hpp>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hbmscope/backend.hpp"
#include "hbmscope/report.hpp"
#include "hbmscope/shard.hpp"
#include "hbmscope/slurm.hpp"
#include "hbmscope/sweep_config.hpp"
#include "options.hpp"
#include "progress.hpp"

namespace hbmscope::cli {

struct DeviceOptions {
  std::optional<std::string> device;  // preset name or path to a JSON file
  std::optional<double> bandwidth_fraction;
  std::optional<std::string> plot;    // FILE.svg, FILE.png or "-"
  std::optional<std::string> x{};     // --x: the chart's x axis
};

void add_device_options(CLI::App& app, DeviceOptions& o);
// --plot and --x alone (add_device_options adds them too): for `merge`.
void add_plot_options(CLI::App& app, DeviceOptions& o);

// Checks the device and plot options before any work is done.
void check_device_options(const DeviceOptions& d, const OutputOptions& out);

// Adds the L2 simulation to the forward rows when --l2-bytes or a device is
// given. With only a device, shapes whose simulation would exceed
// auto_l2_sim_accesses are left out (a note on stderr says how many).
inline constexpr std::uint64_t auto_l2_sim_accesses = std::uint64_t{1} << 25;
// The sum over shapes is capped too (max_l2_sim_run_accesses): with
// --l2-bytes a run over it is refused before anything is simulated; with only a
// device the shapes past it are left out, with a note. A progress bar as the
// sweep's shows for long simulations.
// Returns the notes (without "hbmscope: note: ") for finish_report to print
// once the run has succeeded.
std::vector<std::string> add_l2_sims(Report& report, const L2Options& l2, const DeviceOptions& dev,
                                     ProgressMode mode = ProgressMode::auto_);

// The run-level budget of the L2 simulation, shared by every command that
// simulates (add_l2_sims above, `reconcile`): which shapes it runs on (cost[i]
// accesses; 0: left out; a null shape is left out too) and the notes that say
// what was left out.
// `automatic` (a device alone turned it on): shapes past the budgets are left
// out; otherwise (--l2-bytes) a run over the run's budget is refused.
struct L2SimPlan {
  std::vector<std::uint64_t> cost;
  std::uint64_t total = 0;
  std::vector<std::string> notes;
};
L2SimPlan plan_l2_sims(const std::vector<const Shape*>& shapes, bool automatic);

// Runs the kernels of --kernels on every row's shape (a CUDA device needed:
// Error saying why otherwise) and attaches the measurements and the device.
// Rows must be forward-pass shapes with the flash instantiation's blocks.
// backend: one made (and checked) before the rows were modelled, so that a
// run without a device is refused at once; nullptr: made here.
void add_measurements(Report& report, const MeasureCliOptions& mo, std::unique_ptr<Backend> backend = nullptr);

// The measuring backend, or Error saying why there is none (or why the shapes
// cannot be measured): called before any shape is modelled.
std::unique_ptr<Backend> measuring_backend(const MeasureCliOptions& mo, const std::vector<Shape>& shapes);

// Checks the L2 simulation options (--sms without --l2-bytes...) before any
// work; true when the simulation will run.
bool check_l2_options(const L2Options& l2, const DeviceOptions& dev);

// Refuses a --variants id that no row of this run would have, before the run
// is computed (one row per pass is modelled to learn the ids).
void check_variant_ids(const std::vector<std::string>& ids, const std::string& where,
                       const std::vector<Shape>& shapes, const ModelOptions& v, bool sims);

// Decode rows: sets the split heuristic's SM count in `variants` (--sms, the
// --device's, else 132). Returns the L2 options to simulate with: --sms alone
// serves the heuristic and does not turn the simulation on.
L2Options decode_l2_options(const L2Options& l2, const DeviceOptions& dev, bool decode);
L2Options prepare_decode(ModelOptions& variants, const L2Options& l2, const DeviceOptions& dev,
                         const std::vector<Shape>& shapes);

// "a,b" -> {"a", "b"} for --variants; UsageError for an empty item.
std::vector<std::string> variant_list(const std::string& text);

// Refuses --fa1 when no shape has a forward pass (the column would be silently empty).
void check_variants(const ModelOptions& v, const std::vector<Shape>& shapes);

// Refuses a run of more than max_run_shapes shapes (after --shard), pointing
// to --shard: every row is held in memory until the report is written.
void check_run_size(std::size_t shapes, std::string_view command);

// Adds predictions (with a device), renders, writes (stdout or --output,
// atomically) and plots, then prints the notes on stderr. Returns the exit code.
int finish_report(Report& report, const OutputOptions& out, const DeviceOptions& dev,
                  const std::vector<std::string>& notes = {});
// finish_report's last step, for a report already rendered as `text`: writes
// it and the chart of dev.plot (both on disk before either is renamed), then
// the notes. Returns the exit code.
int write_report(const Report& report, std::string text, const OutputOptions& out, const DeviceOptions& dev,
                 const std::vector<std::string>& notes = {});

// `compare --fail-on`: a verdict said so (1 is bad input, 2 usage, 3 internal error).
inline constexpr int compare_fail_exit = 4;

// A sweep with every option checked and its shapes expanded (not yet cut to
// --shard): what `sweep` runs and `submit` hands to Slurm.
struct SweepPlan {
  SweepConfig cfg;
  LabelledShapes all;
  std::vector<std::string> variant_list;  // --variants
  std::optional<Shard> shard;
  ProgressMode mode = ProgressMode::auto_;
  bool sims = false;  // the L2 simulation will run
};

// The report rows of points [b, e) of a plan: a whole-model point makes a row
// per kind of layer and a total, any other point one row.
std::size_t plan_rows(const LabelledShapes& all, std::size_t b, std::size_t e);

class SweepCommands {
 public:
  explicit SweepCommands(CLI::App& app);
  // When one of these commands was parsed: runs it, sets rc, returns true.
  bool run(int& rc);
  // `submit ... -- SWEEP-OPTIONS`: takes the words after the first "--" out of
  // CLI11's (reversed) argument vector as the sweep's, before CLI11 parses the
  // rest, so that they are never read as submit's own.
  void take_submit_sweep(std::vector<std::string>& reversed_args);

 private:
  // Each subcommand's options, help and run: in its own file.
  void add_sweep(CLI::App& app);
  void add_devices(CLI::App& app);
  void add_compare(CLI::App& app);
  void add_merge(CLI::App& app);
  void add_submit(CLI::App& app);
  SweepPlan plan_sweep();
  int run_sweep();
  int run_devices();
  int run_compare();
  int run_merge();
  int run_submit();
  // merge --from DIR: the shard files of a submitted sweep (Error naming the
  // missing ones); merge_command.cpp.
  std::vector<std::string> submitted_shards(const std::string& dir, const SubmitManifest& m);

  CLI::App* sweep_ = nullptr;
  CLI::App* devices_ = nullptr;
  CLI::App* compare_ = nullptr;
  CLI::App* merge_ = nullptr;
  CLI::App* submit_ = nullptr;

  ShapeOptions shape_;
  OutputOptions out_;
  DeviceOptions dev_;
  L2Options l2_;
  ModelOptions variants_opts_;
  bool measure_ = false;
  MeasureCliOptions measure_opts_;
  std::optional<std::string> config_, shard_, variants_;
  std::optional<std::string> model_config_;  // --model-config: whole models
  std::string progress_ = "auto";

  std::optional<std::string> devices_which_;
  std::string devices_format_ = "table";

  std::vector<std::string> compare_files_;
  double threshold_ = 5.0;
  std::optional<std::string> metric_;
  std::string compare_format_;  // empty: from --output's extension, else table
  std::optional<std::string> compare_output_;
  std::optional<std::string> match_, ignore_, metrics_, fail_on_;

  std::vector<std::string> merge_files_;
  OutputOptions merge_out_;  // format empty: from --output's extension, else json
  DeviceOptions merge_dev_;  // --plot and --x only
  std::optional<std::string> merge_from_;

  SlurmJobs submit_jobs_;  // submit's own options (submit_command.cpp)
  std::string submit_dir_;
  std::optional<std::string> submit_program_;
  bool submit_dry_run_ = false;
  std::vector<std::string> submit_sweep_args_;
};

}  // namespace hbmscope::cli
