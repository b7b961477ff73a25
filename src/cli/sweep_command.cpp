// `hbmscope sweep`: many shapes from the shape options or a config file,
// modelled, simulated, optionally measured, sharded.
#include <algorithm>
#include <cstdlib>

#include "hbmscope/error.hpp"
#include "hbmscope/measure.hpp"
#include "hbmscope/shard.hpp"
#include "hbmscope/sweep_config.hpp"
#include "hbmscope/whole_model.hpp"
#include "command_io.hpp"
#include "model_configs.hpp"
#include "progress.hpp"
#include "run_rows.hpp"
#include "sweep_commands.hpp"

namespace hbmscope::cli {

namespace {

std::optional<std::string> environment(std::string_view name) {
  const char* v = std::getenv(std::string(name).c_str());
  return v ? std::optional<std::string>(v) : std::nullopt;
}

const char* const sweep_help = R"(Columns: as `hbmscope model` (see `hbmscope model --help`), plus "Group"
for the groups of a config file and, with --device, the roofline time per variant.

A sweep's axes come from the shape options (each takes lists and ranges; every
combination is swept) or from a config file, docs/sweep-config.md. Shape options
given with --config replace that axis in every group of the config.
Shipped configs (by name or as configs/sweeps/NAME.json):
  seed          the design note's three rows
  llm           causal prefill of Llama-3 8B / 70B and Mistral 7B, 4K..128K tokens
  long-context  causal prefill at 128K..1M tokens
  decode        decode of Llama-3 8B / 70B: batch 1..256, KV cache 1K..128K tokens

Examples:
  hbmscope sweep --config seed                          the note's table
  hbmscope sweep --config llm --device h100 --wide      roofline per model
  hbmscope sweep --seq 1K:1M:x2 --head-dim 64,128 --causal --format csv --output s.csv
  hbmscope sweep --config llm --shard 2/4 --format json --output part2.json
  hbmscope merge part*.json --output all.json
  hbmscope submit --tasks 16 --dir runs/llm -- --config llm --output all.json
                    the same on a Slurm cluster: `hbmscope submit --help`
  hbmscope sweep --config long-context --device b200 --plot long.svg
A progress bar appears on stderr for sweeps of 100000 shapes or more when stderr
is a terminal; never in a pipe or a file.)";

}  // namespace

void SweepCommands::add_sweep(CLI::App& app) {
  sweep_ = app.add_subcommand(
      "sweep", "Count bytes (and predict time on a device) over many shapes, from options or a config file");
  add_shape_options(*sweep_, shape_);
  add_l2_options(*sweep_, l2_);
  sweep_->add_flag("--fa1", variants_opts_.flash1,
                   "Add the FlashAttention-1 loop order variant (flash1_no_l2; forward pass only)");
  add_output_options(*sweep_, out_);
  sweep_->add_option("--config", config_,
                     "Axes from a config file: a shipped name (seed, llm, long-context, decode) or a path, "
                     "e.g. --config configs/sweeps/llm.json")
      ->type_name("NAME|FILE");
  sweep_->add_option("--variants", variants_,
                     "Report only these variants, e.g. flash_no_l2,floor [default: all, or the "
                     "config's \"variants\"]")
      ->type_name("LIST");
  sweep_->add_option("--shard", shard_,
                     "Run only slice I of N of the sweep (contiguous, disjoint; the N slices make "
                     "the whole), e.g. --shard 2/8; join with `hbmscope merge`. auto: I and N from a "
                     "Slurm array job's environment (task ID of the array MIN-MAX:STEP is slice "
                     "(ID - MIN) / STEP + 1 of SLURM_ARRAY_TASK_COUNT; a list such as 1,3,7 is refused)")
      ->type_name("I/N|auto");
  sweep_->add_option("--progress", progress_,
                     "Progress bar on stderr: auto (when stderr is a terminal and the sweep has "
                     "100000 shapes or more), always, never [default: auto]")
      ->type_name("auto|always|never");
  sweep_->add_flag("--measure", measure_,
                   "Also run and time our kernels on each shape (a CUDA device needed; the "
                   "flash blocks become the kernel's instantiation), as `hbmscope measure`");
  add_measure_options(*sweep_, measure_opts_);
  sweep_->footer(sweep_help);
  add_model_config_option(*sweep_, model_config_);
  sweep_->footer(sweep_->get_footer() + "\n\n" + whole_models_help);
  add_device_options(*sweep_, dev_);
}

SweepPlan SweepCommands::plan_sweep() {
  SweepPlan p;
  p.mode = progress_ == "auto"     ? ProgressMode::auto_
           : progress_ == "always" ? ProgressMode::always
           : progress_ == "never"  ? ProgressMode::never
                                   : throw UsageError("--progress: '" + progress_ + "' is not one of auto, always, never");
  (void)to_print_options(out_);
  check_device_options(dev_, out_);
  // Checked even without --measure: a typo must not pass silently.
  (void)parse_kernels(measure_opts_.kernels);
  // Nor may a measure option that nothing would use (as --sms without the L2 simulation).
  if (!measure_)
    for (const char* name : {"--kernels", "--repeats", "--warmup", "--device-index", "--seed", "--no-validate",
                             "--counters", "--copy-bytes", "--flush-bytes"})
      if (sweep_->count(name) > 0) throw UsageError(std::string(name) + ": needs --measure");
  if (config_) {  // a config file is an input of the run too
    refuse_input_as_output(out_.output, {*config_}, "--output");
    if (dev_.plot && *dev_.plot != "-") refuse_input_as_output(dev_.plot, {*config_}, "--plot");
  }
  if (shard_) p.shard = *shard_ == "auto" ? shard_from_slurm_array(environment) : parse_shard(*shard_);
  if (variants_) p.variant_list = split_list(*variants_, "--variants");
  SweepConfig& cfg = p.cfg;
  if (config_) {
    cfg = find_sweep_config(*config_);
    const ShapeOptions& o = shape_;
    if (o.any()) {
      for (auto& g : cfg.groups) apply_shape_options(g.axes, shape_);
    }
  } else if (!model_config_) {
    cfg.groups.push_back({"", to_axes(shape_)});
  }
  // --model-config: the models of every group (or, alone, the sweep's one group).
  if (model_config_) {
    const auto models = model_configs(*model_config_);
    if (!config_) cfg.groups.push_back({"", model_config_axes(shape_, models)});
    for (auto& g : cfg.groups) g.axes.model_config = models;
  }
  const bool any_models = std::any_of(cfg.groups.begin(), cfg.groups.end(),
                                      [](const SweepGroup& g) { return !g.axes.model_config.empty(); });
  if (any_models) {
    for (const auto& g : cfg.groups) refuse_model_files_as_output(g.axes.model_config, out_.output, dev_.plot);
    if (measure_) throw UsageError("--measure: whole-model rows (model_config) are not measured; measure a layer's "
                                   "shape with `hbmscope measure`");
    check_model_shape_options(shape_);
  }
  // Every option is checked before the sweep is computed (--sms alone serves decode rows' heuristic).
  const bool any_decode =
      std::any_of(cfg.groups.begin(), cfg.groups.end(), [](const SweepGroup& g) { return g.axes.decode; });
  p.sims = check_l2_options(decode_l2_options(l2_, dev_, any_decode), dev_);
  p.shapes.emplace(cfg);  // counted, none made yet
  RunShapes& shapes = *p.shapes;
  if (p.shard) shapes.shard(*p.shard);
  if (measure_) shapes.flash_blocks(shape_.block_rows || shape_.block_cols);
  const ShapeFacts& facts = shapes.facts();
  check_variants(variants_opts_, facts);
  if (variants_) check_variant_ids(p.variant_list, "--variants", facts, variants_opts_, p.sims);
  else if (config_ && !cfg.variants.empty())
    check_variant_ids(cfg.variants, *config_ + ": variants", facts, variants_opts_, p.sims);
  return p;
}

LabelledShapes SweepCommands::plan_points(const SweepPlan& plan) const {
  LabelledShapes all = expand(plan.cfg);
  if (measure_) {
    const bool blocks_given = shape_.block_rows || shape_.block_cols;
    for (Shape& s : all.shapes) s = with_flash_blocks(s, blocks_given);
  }
  return all;
}

std::size_t plan_rows(const LabelledShapes& all, std::size_t b, std::size_t e) {
  std::size_t n = 0;
  for (std::size_t i = b; i < e; ++i) n += i < all.models.size() ? point_row_count(all.models[i]) : 1;
  return n;
}

int SweepCommands::run_sweep() {
  SweepPlan plan = plan_sweep();
  const RunShapes& shapes = *plan.shapes;
  const ShapeFacts& facts = shapes.facts();
  RunSpec spec;
  spec.command = "sweep";
  spec.progress = plan.mode;
  // Shards cut between points, never through a model's rows; the total is the whole sweep's rows.
  if (plan.shard) spec.shard = ShardInfo{plan.shard->index, plan.shard->count, shapes.total_rows()};
  if (variants_) {
    spec.variants = plan.variant_list;
    spec.variants_where = "--variants";
  } else if (config_ && !plan.cfg.variants.empty()) {
    spec.variants = plan.cfg.variants;
    spec.variants_where = *config_ + ": variants";
  }
  spec.l2 = prepare_decode(variants_opts_, l2_, dev_, facts);
  spec.model = variants_opts_;
  // A device to measure on is found before the sweep is modelled.
  if (measure_) {
    spec.backend = measuring_backend(measure_opts_, shapes);
    spec.measure = &measure_opts_;
  }
  spec.dev = dev_;
  spec.out = out_;
  return run_rows(shapes, std::move(spec));
}

}  // namespace hbmscope::cli
