// hbmscope: how many bytes an attention kernel moves through HBM.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "hbmscope/config.hpp"
#include "hbmscope/error.hpp"
#include "options.hpp"
#include "sweep_commands.hpp"

namespace {

using namespace hbmscope;

// Prints the whole output at once, or writes it atomically to --output.
// (model and sweep now go through cli::finish_report; kept for other commands.)
[[maybe_unused]] void emit(const std::string& text, const cli::OutputOptions& out) {
  if (out.output) {
    write_file_atomic(*out.output, text);
    std::fprintf(stderr, "hbmscope: wrote %s\n", out.output->c_str());
  } else {
    std::fwrite(text.data(), 1, text.size(), stdout);
  }
}

int run_model(const cli::ShapeOptions& shape, const cli::OutputOptions& out,
              const cli::DeviceOptions& dev) {
  (void)cli::to_print_options(out);
  cli::check_device_options(dev, out);
  Report report;
  report.command = "model";
  report.rows = model_rows(expand(cli::to_axes(shape)));
  return cli::finish_report(report, out, dev);
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

}  // namespace

int main(int argc, char** argv) {
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
  cli::add_shape_options(*model, model_shape);
  cli::add_output_options(*model, model_out);
  model->footer(cli::model_columns_help);
  cli::DeviceOptions model_device;
  cli::add_device_options(*model, model_device);
  cli::SweepCommands sweep_commands(app);

  try {
    auto args = with_default_command(argc, argv);
    app.parse(args);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "hbmscope: error: %s (see --help)\n", e.what());
    return 2;
  }

  try {
    if (model->parsed()) return run_model(model_shape, model_out, model_device);
    if (int rc = 0; sweep_commands.run(rc)) return rc;
  } catch (const Error& e) {
    std::fprintf(stderr, "hbmscope: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "hbmscope: internal error: %s\n", e.what());
    return 3;
  }
  return 0;
}
