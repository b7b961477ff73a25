// The options that model, sweep and measure share, and the checks every run
// makes before any work: device and plot, L2 simulation, variants, run size.
#include <algorithm>
#include <filesystem>
#include <set>
#include <utility>

#include "hbmscope/device_config.hpp"
#include "hbmscope/error.hpp"
#include "hbmscope/plot.hpp"
#include "hbmscope/roofline.hpp"
#include "command_io.hpp"
#include "plot_run.hpp"
#include "run_rows.hpp"
#include "sweep_commands.hpp"

namespace hbmscope::cli {

namespace {

const char* const device_help = R"(
With --device, a table of predicted times, one column per variant ("Time: ID" with
--wide) = max(bytes / (bandwidth x fraction), FLOPs / dense peak of the dtype), and
which term binds, "memory" or "compute" (time in ns, µs, ms or s); a standard-attention
time marked † is for a kernel whose S and P do not fit in the device's memory. --wide
adds "Ridge": the FLOP/B at which the two terms are equal; a variant whose intensity is
below it is memory-bound. --plot draws against --x seq (or seq_kv, head_dim, batch,
heads); rows that differ in another field are separate lines.
  hbmscope model --device h100 --seq 4K:64K:x2 --head-dim 128
  hbmscope model --device my-gpu.json --bandwidth-fraction 0.8 --wide
  hbmscope model --seq 1K:64K:x2 --plot bytes.svg       (needs gnuplot)
  hbmscope model --seq 1K:64K:x2 --device h200 --plot -  (chart in the terminal)
  hbmscope sweep --seq 4K --head-dim 64,128,256 --heads 8,32 --plot d.svg --x head_dim
`hbmscope devices` lists the presets and their sources.)";

}  // namespace

void add_device_options(CLI::App& app, DeviceOptions& o) {
  app.add_option("--device", o.device,
                 "Predict time on this GPU: a preset (h100-sxm or h100, h200, a100-80gb-sxm or a100, "
                 "b200, l40s, rtx-4090 or 4090; `hbmscope devices` lists ids and aliases) or a JSON "
                 "file of the same form, e.g. --device my-gpu.json")
      ->type_name("NAME|FILE");
  app.add_option("--bandwidth-fraction", o.bandwidth_fraction,
                 "Share of the datasheet bandwidth the roofline assumes, in (0, 1], e.g. 0.8 "
                 "[default: 1.0]; recorded in the report")
      ->type_name("F")
      ->check(finite_number());
  add_plot_options(app, o);
  app.footer(app.get_footer() + "\n" + device_help);
}

void add_plot_options(CLI::App& app, DeviceOptions& o) {
  app.add_option("--plot", o.plot,
                 "Chart through gnuplot: bytes (and, with --device, time) against sequence "
                 "length, one line per variant: FILE.svg, FILE.png (written as --output is, and "
                 "never the same file), or - for the terminal")
      ->type_name("FILE|-")
      ->check(not_empty());
  app.add_option("--x", o.x,
                 "The chart's x axis: seq, seq_kv, head_dim, batch or heads; rows that differ "
                 "in another field are separate lines [default: seq]")
      ->type_name("AXIS");
}

void check_device_options(const DeviceOptions& d, const OutputOptions& out) {
  if (d.bandwidth_fraction && !d.device)
    throw UsageError("--bandwidth-fraction: needs --device (the fraction of which device's bandwidth?)");
  if (d.bandwidth_fraction) validate_bandwidth_fraction(*d.bandwidth_fraction);
  if (d.x && !d.plot) throw UsageError("--x: needs --plot (the axis of which chart?)");
  if (d.x && !parse_plot_axis(*d.x))
    throw UsageError("--x: '" + *d.x + "' is not one of seq, seq_kv, head_dim, batch, heads");
  // Targets are checked before a long sweep, and so before anything is written.
  if (!to_stdout(out.output)) check_write_target(*out.output);
  // A device file is an input: --output or --plot naming it is refused.
  std::error_code ec;
  if (d.device && std::filesystem::exists(*d.device, ec)) {
    refuse_input_as_output(out.output, {*d.device}, "--output");
    if (d.plot && *d.plot != "-") refuse_input_as_output(d.plot, {*d.device}, "--plot");
  }
  if (d.plot) {
    (void)plot_terminal_for(*d.plot);
    if (*d.plot != "-") {
      check_write_target(*d.plot, "--plot: ");
      if (!to_stdout(out.output) && same_write_target(*out.output, *d.plot))
        throw UsageError("--plot: '" + *d.plot + "' is also the --output file; give the chart a name of its own");
    }
    (void)gnuplot_or_throw();
    const Format f = resolve_format(out.format, out.output);
    if (*d.plot == "-" && to_stdout(out.output) && (f == Format::json || f == Format::csv))
      throw UsageError(std::string("--plot -: the chart would be mixed into the ") +
                       (f == Format::json ? "json" : "csv") + " on stdout; write the report with --output FILE");
  }
}

L2Options decode_l2_options(const L2Options& l2, const DeviceOptions& dev, bool decode) {
  L2Options out = l2;
  if (decode && !l2.l2_bytes && !dev.device) out.sms.reset();
  return out;
}

L2Options prepare_decode(ModelOptions& variants, const L2Options& l2, const DeviceOptions& dev,
                         const ShapeFacts& shapes) {
  if (!shapes.any_decode) return l2;
  if (l2.order && shapes.all_decode)
    throw UsageError("--l2-order: decode rows are simulated in FlashAttention's split-KV launch order "
                "(row block, split, head, sequence); drop --l2-order");
  std::optional<DeviceSpec> spec;
  if (dev.device) spec = find_device(*dev.device);
  variants.sm_count = decode_sm_count(l2, spec ? &*spec : nullptr);
  return decode_l2_options(l2, dev, true);
}

std::vector<std::string> variant_list(const std::string& text) { return split_list(text, "--variants"); }

bool check_l2_options(const L2Options& l2, const DeviceOptions& dev) {
  std::optional<DeviceSpec> spec;
  if (dev.device) spec = find_device(*dev.device);
  return to_l2_config(l2, spec ? &*spec : nullptr).has_value();
}

void check_variant_ids(const std::vector<std::string>& ids, const std::string& where, const ShapeFacts& shapes,
                       const ModelOptions& v, bool sims) {
  // The ids a run can make: those of one modelled row per kind (cheap), and
  // the simulated variants when the L2 simulation runs.
  std::vector<std::string> known;
  const bool decode = shapes.any_decode;
  for (const Shape& s : shapes.kinds) {
    for (const auto& x : model_row(s, v).variants)
      if (std::find(known.begin(), known.end(), x.id) == known.end()) known.push_back(x.id);
  }
  if (sims)
    for (const char* id : {"flash_l2_sim", "standard_l2_sim"}) known.push_back(id);
  if (sims && decode)
    for (const char* id : {"decode_split_l2_sim", "decode_split_unpacked_l2_sim", "decode_paged_l2_sim"})
      known.push_back(id);
  for (const auto& id : ids)
    if (shapes.count > 0 && std::find(known.begin(), known.end(), id) == known.end()) {
      std::string list;
      for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
      const std::string msg = where + ": '" + id + "' is not a variant of these rows (" + list + ")";
      // On the command line, a value that names no variant: exit 2 (a config file's: 1).
      if (where.rfind("--", 0) == 0) throw UsageError(msg);
      throw Error(msg);
    }
}

void check_variants(const ModelOptions& v, const ShapeFacts& shapes) {
  if (!v.flash1 || shapes.any_forward_prefill) return;
  if (shapes.count > 0 && shapes.all_decode)
    throw UsageError("--fa1: decode rows have their own variants (no FlashAttention-1 order); drop --fa1");
  throw UsageError("--fa1: FlashAttention-1's order is modelled for the forward pass only; add fwd to --pass");
}

PrintOptions checked_print_options(const OutputOptions& out, const DeviceOptions& dev) {
  const PrintOptions print = to_print_options(out);
  if (!dev.device && out.columns && std::find(print.columns.begin(), print.columns.end(), "time") != print.columns.end() &&
      out.columns->find("time") != std::string::npos)
    throw UsageError("--columns: 'time' needs --device (the roofline time of which GPU?)");
  return print;
}

}  // namespace hbmscope::cli
