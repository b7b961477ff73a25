#pragma once
// The commands of issue 3 (sweep, devices, compare, merge) and issue 21
// (submit), one file each (sweep_command.cpp ...); and what `model`, `measure` and `reconcile` share
// with them: the device, roofline and plot options and the run's checks
// (run_options.cpp), the L2 and measurement steps and finish_report
// (run_steps.cpp); the run's rows made and printed one at a time are
// run_rows.hpp.
#include <functional>
#include <CLI/CLI.hpp>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hbmscope/backend.hpp"
#include "hbmscope/device_spec.hpp"
#include "hbmscope/l2_sim.hpp"
#include "hbmscope/measurement.hpp"
#include "hbmscope/report.hpp"
#include "hbmscope/shard.hpp"
#include "hbmscope/slurm.hpp"
#include "hbmscope/sweep_config.hpp"
#include "options.hpp"
#include "progress.hpp"
#include "run_shapes.hpp"

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

struct ShapeFacts;
class RunShapes;

// Which shapes of a run the L2 simulation runs on, decided shape by shape in
// the run's order before anything is simulated. Work is counted by the core's
// one budget (l2_sim_work): a shape over max_l2_sim_work is left out and named
// in a note (the run is refused when no shape is left and --l2-bytes asked
// for it); past max_l2_sim_run_work in all, a run with --l2-bytes is refused
// (at finish), and with only a device (`automatic`) the shapes past it are
// left out, with a note.
class L2Budget {
 public:
  explicit L2Budget(bool automatic) : automatic_(automatic) {}
  // The work units s takes with configuration c; 0: left out.
  std::uint64_t take(const Shape& s, const L2SimConfig& c);
  // Throws for a run refused; makes the notes.
  void finish();
  std::uint64_t total() const { return total_; }
  // Without "hbmscope: note: ", for the end of a run that succeeded.
  const std::vector<std::string>& notes() const { return notes_; }

 private:
  bool automatic_;
  std::uint64_t total_ = 0;
  std::size_t shapes_ = 0, simulated_ = 0, over_budget_ = 0, over_cap_ = 0;
  bool over_cap_masked_backward_ = false;  // a left-out backward row with a mask or a ragged batch
  bool over_cap_fit_by_order_ = false;     // one within the budget in query-block-major order
  std::vector<Shape> over_cap_named_;  // the first few, for the note
  std::optional<L2SimConfig> first_over_cap_;  // the first's configuration
  std::optional<std::pair<std::size_t, std::uint64_t>> refused_;  // (shapes, work) when over the run's budget
  std::vector<std::string> notes_;
};

// The run-level budget for a list of shapes (`reconcile`): which shapes the
// simulation runs on (cost[i] work units; 0: left out; a null shape is left
// out too) and the notes that say what was left out.
struct L2SimPlan {
  std::vector<std::uint64_t> cost;
  std::uint64_t total = 0;
  std::vector<std::string> notes;
};
L2SimPlan plan_l2_sims(const std::vector<const Shape*>& shapes, bool automatic,
                       const std::function<L2SimConfig(const Shape&)>& config_for);

// The L2 simulation of a run that streams its rows (model, sweep): the run's
// first pass calls take() on every simulated shape, then finish() (which
// refuses a run over its budget with --l2-bytes, or with nothing left to
// simulate, and makes the notes); later passes take() the same shapes again
// and get the same answers. Whole-model rows are not simulated (one kernel's
// traffic, not a model's: docs/models.md).
class L2Plan {
 public:
  L2Plan(const L2Options& l2, const DeviceOptions& dev);
  bool on() const { return config_.has_value(); }
  // The work units of s's simulation; 0: not simulated.
  std::uint64_t take(const Shape& s);
  void finish();
  // The simulation's parameters for s (its CTAs per SM).
  L2SimConfig config_for(const Shape& s) const;
  // Work units the run simulates (after finish).
  std::uint64_t work() const { return work_; }
  const std::vector<std::string>& notes() const { return notes_; }

 private:
  std::optional<L2SimConfig> config_;
  std::optional<DeviceSpec> spec_;
  bool automatic_ = true, ctas_given_ = false, finished_ = false;
  std::optional<L2Budget> budget_;
  std::uint64_t work_ = 0;
  std::vector<std::string> notes_;
};

// What add_l2_sim (l2_sim.hpp) adds to a row, without simulating: its variant
// ids (with no bytes) and the detail's parameters, for the printers' columns
// and title before the first row is simulated.
void preview_l2_sim(Row& row, const L2SimConfig& c);

// The measuring backend, or Error saying why there is none (or why the shapes
// cannot be measured): made before any shape is modelled.
std::unique_ptr<Backend> measuring_backend(const MeasureCliOptions& mo, const RunShapes& shapes);

// Runs the kernels of --kernels on each row (`measure`, `sweep --measure`):
// device() once before the first row (the copy probe), measure() per row.
class MeasureStep {
 public:
  MeasureStep(const MeasureCliOptions& mo, std::unique_ptr<Backend> backend);
  DeviceReport device();
  // The kernels' names only (for the printers' columns before the first run).
  void preview(Row& row) const;
  void measure(Row& row, std::uint64_t i, std::uint64_t n);
  // The counters' note, once, when some could not be read.
  void finish() const;

 private:
  const std::vector<KernelKind>& kinds_for(const Shape& s) const;
  std::vector<KernelKind> kinds_, decode_kinds_;
  bool default_kernels_ = true, counters_ = false;
  MeasureOptions opt_;
  std::unique_ptr<Backend> backend_;
  double ceiling_ = 0;
  std::string counter_note_;
};

// Checks the L2 simulation options (--sms without --l2-bytes...) before any
// work; true when the simulation will run.
bool check_l2_options(const L2Options& l2, const DeviceOptions& dev);

// Refuses a --variants id that no row of this run would have, before the run
// is computed (one row of each kind is modelled to learn the ids).
void check_variant_ids(const std::vector<std::string>& ids, const std::string& where, const ShapeFacts& shapes,
                       const ModelOptions& v, bool sims);

// Decode rows: sets the split heuristic's SM count in `variants` (--sms, the
// --device's, else 132). Returns the L2 options to simulate with: --sms alone
// serves the heuristic and does not turn the simulation on.
L2Options decode_l2_options(const L2Options& l2, const DeviceOptions& dev, bool decode);
L2Options prepare_decode(ModelOptions& variants, const L2Options& l2, const DeviceOptions& dev,
                         const ShapeFacts& shapes);

// "a,b" -> {"a", "b"} for --variants; UsageError for an empty item.
std::vector<std::string> variant_list(const std::string& text);

// Refuses --fa1 when no shape has a forward pass (the column would be silently empty).
void check_variants(const ModelOptions& v, const ShapeFacts& shapes);

// The print options, with the checks that need the device: --columns time
// without --device is refused.
PrintOptions checked_print_options(const OutputOptions& out, const DeviceOptions& dev);

// For a run that holds its rows (the terminal table, a chart): renders,
// writes (stdout or --output, atomically) and plots, then prints the notes on
// stderr. The rows have their predictions. Returns the exit code.
int finish_report(Report& report, const OutputOptions& out, const DeviceOptions& dev,
                  const std::vector<std::string>& notes = {});
// finish_report's last step, for a report already rendered as `text`: writes
// it and the chart of dev.plot (both on disk before either is renamed), then
// the notes. Returns the exit code.
int write_report(const Report& report, std::string text, const OutputOptions& out, const DeviceOptions& dev,
                 const std::vector<std::string>& notes = {});

// `compare --fail-on`: a verdict said so (1 is bad input, 2 usage, 3 internal error).
inline constexpr int compare_fail_exit = 4;

// A sweep with every option checked, its shapes counted and visited once for
// the checks (none held; cut to --shard): what `sweep` runs and `submit`
// hands to Slurm.
struct SweepPlan {
  SweepConfig cfg;
  std::optional<RunShapes> shapes;  // of cfg, with --shard and --measure's flash blocks
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
  // The plan's points, held (`submit`: the tasks' ranges and the fingerprint).
  LabelledShapes plan_points(const SweepPlan& plan) const;
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
  bool compare_wide_ = false;

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
