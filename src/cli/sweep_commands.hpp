#pragma once
// The commands of issue 3: sweep, devices, compare, merge (one file each:
// sweep_command.cpp ...); and what `model`, `measure` and `reconcile` share
// with them: the device, roofline and plot options and the run's checks
// (run_options.cpp), the L2 and measurement steps and finish_report
// (run_steps.cpp); the run's rows made and printed one at a time are
// run_rows.hpp.
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

// Checks the device and plot options before any work is done.
void check_device_options(const DeviceOptions& d, const OutputOptions& out);

struct ShapeFacts;

// The L2 simulation runs with --l2-bytes, or with a device (its L2 size and SM
// count). With only a device, shapes whose simulation would exceed
// auto_l2_sim_accesses are left out (a note on stderr says how many).
inline constexpr std::uint64_t auto_l2_sim_accesses = std::uint64_t{1} << 25;

// Which rows of a run the L2 simulation runs on, decided shape by shape in the
// run's order from access counts alone (cheap), before anything is simulated:
// the run's first pass calls take() on every shape, then finish() (which
// refuses a run over its budget with --l2-bytes, or with nothing left to
// simulate, and makes the notes); later passes take() the same shapes again
// and get the same answers. The sum over shapes is capped
// (max_l2_sim_run_accesses): with --l2-bytes a run over it is refused; with
// only a device the shapes past it are left out, with a note.
class L2Plan {
 public:
  L2Plan(const L2Options& l2, const DeviceOptions& dev);
  bool on() const { return config_.has_value(); }
  bool take(const Shape& s);
  void finish();
  // The simulation's parameters for s (its CTAs per SM).
  L2SimConfig config_for(const Shape& s) const;
  // Accesses simulated by the run (after finish), and by one shape taken.
  std::uint64_t accesses() const { return accesses_; }
  static std::uint64_t cost(const Shape& s);
  // Without "hbmscope: note: ", for the end of a run that succeeded.
  const std::vector<std::string>& notes() const { return notes_; }

 private:
  void restart();
  std::optional<L2SimConfig> config_;
  std::optional<DeviceSpec> spec_;
  bool automatic_ = true, ctas_given_ = false, finished_ = false;
  std::uint64_t total_ = 0, accesses_ = 0;
  std::size_t shapes_ = 0, too_large_ = 0, over_budget_ = 0, over_cap_ = 0, forward_ = 0;
  std::vector<Shape> over_cap_named_;  // the first few, for the note
  std::optional<std::pair<std::size_t, std::uint64_t>> refused_;  // (shapes, accesses) when over budget
  std::vector<std::string> notes_;
};

// What add_l2_sim (l2_sim.hpp) adds to a row, without simulating: its variant
// ids (with no bytes) and the detail's parameters, for the printers' columns
// and title before the first row is simulated.
void preview_l2_sim(Row& row, const L2SimConfig& c);

// The measuring backend, or Error saying why there is none (or why the shapes
// cannot be measured): made before any shape is modelled.
std::unique_ptr<Backend> measuring_backend(const MeasureCliOptions& mo, const ShapeFacts& shapes);

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

// `compare --fail-on`: a verdict said so (1 is bad input, 2 usage, 3 internal error).
inline constexpr int compare_fail_exit = 4;

class SweepCommands {
 public:
  explicit SweepCommands(CLI::App& app);
  // When one of these commands was parsed: runs it, sets rc, returns true.
  bool run(int& rc);

 private:
  // Each subcommand's options, help and run: in its own file.
  void add_sweep(CLI::App& app);
  void add_devices(CLI::App& app);
  void add_compare(CLI::App& app);
  void add_merge(CLI::App& app);
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
  L2Options l2_;
  ModelOptions variants_opts_;
  bool measure_ = false;
  MeasureCliOptions measure_opts_;
  std::optional<std::string> config_, shard_, variants_;
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
  std::string merge_format_;  // empty: from --output's extension, else json
  std::optional<std::string> merge_output_;
};

}  // namespace hbmscope::cli
