// hbmscope: how many bytes an attention kernel moves through HBM.
#include <CLI/CLI.hpp>
#include <fcntl.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <new>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "hbmscope/config.hpp"
#include "hbmscope/animations.hpp"
#include "hbmscope/backend.hpp"
#include "hbmscope/error.hpp"
#include "hbmscope/measure.hpp"
#include "hbmscope/printers.hpp"
#include "hbmscope/sweep_config.hpp"
#include "hbmscope/whole_model.hpp"
#include "../report/json_check.hpp"
#include "model_configs.hpp"
#include "options.hpp"
#include "reconcile_command.hpp"
#include "run_rows.hpp"
#include "sweep_commands.hpp"

namespace {

using namespace hbmscope;

int run_model(const cli::ShapeOptions& shape, const cli::L2Options& l2_given,
              const cli::OutputOptions& out, ModelOptions variants,
              const cli::DeviceOptions& dev, const std::optional<std::string>& only,
              const std::optional<std::string>& model_config) {
  (void)cli::to_print_options(out);
  cli::check_device_options(dev, out);
  std::vector<ModelConfigRef> models;
  if (model_config) {  // whole models: the step from the shape options, the rest from the models
    cli::check_model_shape_options(shape);
    models = cli::model_configs(*model_config);
    cli::refuse_model_files_as_output(models, out.output, dev.plot);
  }
  // Before the shapes are modelled (--sms alone serves decode rows' split heuristic).
  const bool sims =
      cli::check_l2_options(cli::decode_l2_options(l2_given, dev, shape.decode || shape.context_lengths), dev);
  SweepConfig axes;
  axes.groups.push_back({"", model_config ? cli::model_config_axes(shape, models) : cli::to_axes(shape)});
  const cli::RunShapes shapes(std::move(axes));  // counted, none made yet
  const cli::ShapeFacts& facts = shapes.facts();
  cli::check_variants(variants, facts);
  cli::RunSpec spec;
  spec.command = "model";
  spec.l2 = cli::prepare_decode(variants, l2_given, dev, facts);
  spec.variants = only ? cli::variant_list(*only) : std::vector<std::string>{};
  spec.variants_where = "--variants";
  if (only) cli::check_variant_ids(spec.variants, "--variants", facts, variants, sims);
  spec.model = variants;
  spec.dev = dev;
  spec.out = out;
  return cli::run_rows(shapes, std::move(spec));
}

int run_walk(const cli::ShapeOptions& shape, const cli::WalkOptions& o) {
  const Shape s = cli::walk_shape(shape);
  cli::check_walk_options(s, shape, o);
  const unsigned delay = o.delay_ms.value_or(100);
  Playback p = cli::playback(o.animate, delay);
  if (s.decode) {
    const std::uint64_t splits = cli::walk_decode_splits(s, o);
    if (p.animate) p.every = cli::decode_walk_stride(s, splits, delay);
    play_decode_walk(s, cli::walk_decode_variant(o), splits, p, stdout);
    return 0;
  }
  const LoopOrder order = cli::parse_order(o.order.value_or("fa2"));
  if (p.animate) p.every = cli::walk_stride(s, delay, stderr);
  play_walk(s, order, p, stdout);
  return 0;
}

int run_softmax(const cli::SoftmaxOptions& o) {
  const SoftmaxTrace t = trace_online_softmax(cli::softmax_values(o), cli::softmax_block(o));
  play_softmax(t, cli::playback(o.animate, o.delay_ms.value_or(500)), stdout);
  return 0;
}

int run_measure(const cli::ShapeOptions& shape, const cli::OutputOptions& out,
                const cli::MeasureCliOptions& mo) {
  (void)cli::to_print_options(out);  // refuse a bad --format before any kernel runs
  cli::check_device_options(cli::DeviceOptions{}, out);  // and a --output that cannot be written
  SweepConfig axes;
  axes.groups.push_back({"", cli::to_axes(shape)});
  cli::RunShapes shapes(std::move(axes));  // counted, none made yet
  shapes.flash_blocks(shape.block_rows || shape.block_cols);
  cli::RunSpec spec;
  spec.command = "measure";
  spec.backend = cli::measuring_backend(mo, shapes);  // before the shapes are modelled
  spec.measure = &mo;
  spec.out = out;
  spec.progress = cli::ProgressMode::never;
  return cli::run_rows(shapes, std::move(spec));
}

// `hbmscope` and `hbmscope --seq ...` mean `hbmscope model ...`.
std::vector<std::string> with_default_command(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  const bool top_level_only =
      !args.empty() && (args[0] == "--help" || args[0] == "-h" || args[0] == "--version");
  if (args.empty() || (args[0].rfind('-', 0) == 0 && !top_level_only))
    args.insert(args.begin(), "model");
  std::reverse(args.begin(), args.end());  // CLI11 takes a reversed vector
  return args;
}

// A closed standard stream gets a descriptor on which every write fails
// (EBADF), so that output is reported lost and no file we open takes its place.
void guard_standard_streams() {
  for (int fd = 0; fd <= 2; ++fd)
    if (::fcntl(fd, F_GETFD) < 0 && errno == EBADF) ::open("/dev/null", fd == 0 ? O_WRONLY : O_RDONLY);
}

// A sweep's rows each build and free simulation arrays of megabytes. glibc
// hands such blocks back to the kernel when they are freed, and every page
// of the next row's arrays then faults in zeroed again (half the time of
// `sweep --config decode`): blocks up to 32 MiB come from the heap, and up to
// 256 MiB freed at its top stay with the process. (Larger blocks are still
// mapped apart, as glibc does by default: a buffer that grows by doubling
// then moves without leaving a copy behind, which a 1 GB input read under a
// 512 MB address-space limit needs.)
void keep_freed_memory() {
#if defined(__GLIBC__)
  ::mallopt(M_MMAP_THRESHOLD, 32 << 20);
  ::mallopt(M_TRIM_THRESHOLD, 256 << 20);
#endif
}

// The end of every command: output that did not reach stdout is an error, not
// a silent exit 0. Writers that know errno report it themselves (write_stdout).
int finish_stdout(int rc) {
  errno = 0;
  const bool flushed = std::fflush(stdout) == 0;
  if (flushed && !std::ferror(stdout)) return rc;
  const int err = !flushed && errno ? errno : EIO;
  std::fprintf(stderr, "hbmscope: error: writing standard output: %s\n", std::strerror(err));
  return 1;
}

// --help and --version, written in one piece so that a failure keeps its errno.
int print_help(const CLI::App& app, const CLI::Error& e) {
  std::ostringstream text;
  const int rc = app.exit(e, text, std::cerr);
  try {
    write_stdout(text.str());
  } catch (const Error& err) {
    std::fprintf(stderr, "hbmscope: error: %s\n", err.what());
    return 1;
  }
  return finish_stdout(rc);
}

}  // namespace

int main(int argc, char** argv) {
  guard_standard_streams();
  keep_freed_memory();
  // Past the file size limit (ulimit -f), writes fail with EFBIG and are reported.
  std::signal(SIGXFSZ, SIG_IGN);
  CLI::App app{
      "hbmscope: how many bytes an attention kernel moves through HBM (standard attention, "
      "FlashAttention-2 with no L2 reuse, and the floor where every value moves once), and how "
      "long that takes."};
  app.name("hbmscope");
  app.set_version_flag("--version", std::string("hbmscope ") + config::version +
                                        (config::have_cuda ? " (CUDA backend)" : " (no CUDA backend)"));
  app.require_subcommand(1, 1);
  app.footer("With no command, `hbmscope` runs `hbmscope model`: the design note's table.\n"
             "Run `hbmscope COMMAND --help` for a command's options and examples.");

  cli::ShapeOptions model_shape;
  cli::OutputOptions model_out;
  CLI::App* model = app.add_subcommand(
      "model", "Count the HBM bytes of each attention variant for one or more shapes");
  cli::L2Options model_l2;
  cli::add_shape_options(*model, model_shape);
  cli::add_l2_options(*model, model_l2);
  cli::add_output_options(*model, model_out);
  ModelOptions model_variants;
  model->add_flag("--fa1", model_variants.flash1,
                  "Add the FlashAttention-1 loop order column (flash1_no_l2; forward pass only)");
  std::optional<std::string> model_only;
  model->add_option("--variants", model_only,
                    "Report only these variants, e.g. flash_no_l2,floor (flash_l2_sim and "
                    "standard_l2_sim stay with flash_no_l2 and standard) [default: all]")
      ->type_name("LIST");
  std::optional<std::string> model_config;
  cli::add_model_config_option(*model, model_config);
  model->footer(std::string(cli::model_columns_help) + "\n\n" + cli::whole_models_help);
  cli::DeviceOptions model_device;
  cli::add_device_options(*model, model_device);
  cli::SweepCommands sweep_commands(app);

  cli::ShapeOptions walk_shape;
  cli::WalkOptions walk_opts;
  CLI::App* walk = app.add_subcommand(
      "walk", "Animate FlashAttention's tile loop on one head, counting bytes as it goes");
  cli::add_shape_options(*walk, walk_shape);
  cli::add_walk_options(*walk, walk_opts);
  walk->footer(cli::walk_help);

  cli::SoftmaxOptions softmax_opts;
  CLI::App* softmax = app.add_subcommand(
      "softmax", "Step through online softmax block by block, beside the two-pass softmax");
  cli::add_softmax_options(*softmax, softmax_opts);
  softmax->footer(cli::softmax_help);

  cli::ShapeOptions measure_shape;
  cli::OutputOptions measure_out;
  cli::MeasureCliOptions measure_opts;
  CLI::App* measure = app.add_subcommand(
      "measure", "Run and time the standard, flash and floor kernels on a CUDA device, next to the model");
  cli::add_shape_options(*measure, measure_shape);
  cli::add_measure_options(*measure, measure_opts);
  cli::add_output_options(*measure, measure_out);
  measure->footer(cli::measure_help);
  cli::ReconcileCommand reconcile_command(app);
  cli::ModelsCommand models_command(app);

  try {
    auto args = with_default_command(argc, argv);
    sweep_commands.take_submit_sweep(args);
    // CLI11 would only say "A subcommand is required" for a misspelt command.
    std::string names;
    bool known = false;
    for (const CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
      names += (names.empty() ? "" : ", ") + sub->get_name();
      known = known || sub->get_name() == args.back();
    }
    if (const std::string& first = args.back(); first.rfind('-', 0) != 0 && !known) {
      std::fprintf(stderr, "hbmscope: error: unknown command '%s' (commands: %s; see --help)\n",
                   json_check::printable(first).c_str(), names.c_str());
      return 2;
    }
    app.parse(args);
  } catch (const CLI::CallForHelp& e) {
    return print_help(app, e);
  } catch (const CLI::CallForAllHelp& e) {
    return print_help(app, e);
  } catch (const CLI::CallForVersion& e) {
    return print_help(app, e);
  } catch (const CLI::ParseError& e) {
    // CLI11 quotes argv in its messages: escaped, the error stays one line.
    std::fprintf(stderr, "hbmscope: error: %s (see --help)\n", json_check::printable(e.what()).c_str());
    return 2;
  }

  try {
    int rc = 0;
    if (model->parsed())
      rc = run_model(model_shape, model_l2, model_out, model_variants, model_device, model_only, model_config);
    else if (sweep_commands.run(rc)) (void)0;
    else if (walk->parsed()) rc = run_walk(walk_shape, walk_opts);
    else if (softmax->parsed()) rc = run_softmax(softmax_opts);
    else if (measure->parsed()) rc = run_measure(measure_shape, measure_out, measure_opts);
    else if (reconcile_command.run(rc)) (void)0;
    else if (models_command.run(rc)) (void)0;
    return finish_stdout(rc);
  } catch (const UsageError& e) {
    // A malformed command line, as CLI11's own errors: exit 2 (README).
    std::fprintf(stderr, "hbmscope: error: %s\n", json_check::printable(e.what()).c_str());
    return 2;
  } catch (const Error& e) {
    // Messages quote paths and values as given: escaped, the error stays one line.
    std::fprintf(stderr, "hbmscope: error: %s\n", json_check::printable(e.what()).c_str());
    return 1;
  } catch (const std::bad_alloc&) {
    // Limits should refuse a run long before this; if memory still runs out
    // (a ulimit, a small machine), say so plainly, with advice only where it helps.
    const auto parsed = app.get_subcommands();
    const std::string cmd = parsed.empty() ? "" : parsed.front()->get_name();
    const char* advice = cmd == "sweep"                      ? " (try a smaller sweep, or --shard I/N)"
                         : cmd == "model" || cmd == "measure" ? " (try fewer shapes)"
                                                              : "";
    std::fprintf(stderr, "hbmscope: error: out of memory%s\n", advice);
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "hbmscope: internal error: %s\n", e.what());
    return 3;
  }
  return 0;
}
