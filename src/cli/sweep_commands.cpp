#include "sweep_commands.hpp"

#include <algorithm>
#include <filesystem>
#include <cstdio>
#include <map>
#include <set>
#include <unordered_map>

#include <fmt/format.h>

#include "hbmscope/compare.hpp"
#include "hbmscope/device_config.hpp"
#include "hbmscope/error.hpp"
#include "hbmscope/json_report.hpp"
#include "hbmscope/measure.hpp"
#include "hbmscope/plot.hpp"
#include "hbmscope/printers.hpp"
#include "hbmscope/roofline.hpp"
#include "hbmscope/shard.hpp"
#include "hbmscope/sweep_config.hpp"
#include "../report/json_check.hpp"
#include "plot_run.hpp"
#include "progress.hpp"

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
  hbmscope sweep --config long-context --device b200 --plot long.svg
A progress bar appears on stderr for sweeps of 100000 shapes or more when stderr
is a terminal; never in a pipe or a file.)";

// "--output -", like no --output, means standard output.
bool to_stdout(const std::optional<std::string>& output) { return !output || *output == "-"; }

void emit(const std::string& text, const std::optional<std::string>& output) {
  if (to_stdout(output)) {
    write_stdout(text);
  } else {
    write_file_atomic(*output, text);
    std::fprintf(stderr, "hbmscope: wrote %s\n", json_check::printable(*output).c_str());
  }
}

Format format_or_throw(const std::string& f) {
  const auto p = parse_format(f);
  if (!p) throw UsageError("--format: '" + f + "' is not one of table, json, csv, md");
  return *p;
}

// The first place where a and b differ, as "PATH: A vs B" (for messages);
// depth is bounded by the parser's limit.
std::string first_difference(const nlohmann::json& a, const nlohmann::json& b, const std::string& path) {
  if (a.is_object() && b.is_object()) {
    for (const auto& [k, v] : a.items()) {
      const std::string p = path + "." + k;
      if (!b.contains(k)) return p + ": " + json_check::brief(v) + " vs none";
      if (v != b[k]) return first_difference(v, b[k], p);
    }
    for (const auto& [k, v] : b.items())
      if (!a.contains(k)) return path + "." + k + ": none vs " + json_check::brief(v);
  }
  const auto side = [](const nlohmann::json& x) { return x.is_null() ? std::string("none") : json_check::brief(x); };
  return path + ": " + side(a) + " vs " + side(b);
}

// --output (or --plot) naming a file this run reads would destroy the input
// (or, replaced atomically, leave the run's own input changed under it): it is
// refused before anything is read.
void refuse_input_as_output(const std::optional<std::string>& output, const std::vector<std::string>& inputs,
                            const char* option) {
  if (to_stdout(output)) return;
  for (const auto& input : inputs)
    if (same_write_target(*output, input))
      throw Error(std::string(option) + ": '" + *output + "' is also an input of this run ('" + input +
                  "'); write the result to another file");
}

// A comma-separated list option: "a,b" -> {a, b}; empty items refused.
std::vector<std::string> split_list(const std::string& text, const char* option) {
  std::vector<std::string> out;
  for (std::size_t pos = 0; pos <= text.size();) {
    const std::size_t comma = std::min(text.find(',', pos), text.size());
    std::string item = text.substr(pos, comma - pos);
    if (item.empty()) throw UsageError(std::string(option) + ": '" + text + "' has an empty item");
    out.push_back(std::move(item));
    pos = comma + 1;
  }
  return out;
}

std::string row_key(const nlohmann::json& row) {
  return row.value("label", std::string()) + "\n" + row["shape"].dump();
}

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
  app.footer(app.get_footer() + "\n" + device_help);
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

std::vector<std::string> add_l2_sims(Report& report, const L2Options& l2, const DeviceOptions& dev,
                                     ProgressMode mode) {
  std::optional<DeviceSpec> spec;
  if (dev.device) spec = find_device(*dev.device);
  const auto config = to_l2_config(l2, spec ? &*spec : nullptr);
  if (!config) return {};
  const bool automatic = !l2.l2_bytes;
  // Work is counted in simulated accesses (both simulations), all counted in
  // O(1) per shape before any runs, so that a run too long is refused at once.
  std::vector<std::uint64_t> cost(report.rows.size(), 0);
  std::size_t too_large = 0, over_budget = 0, shapes = 0;
  std::vector<std::size_t> over_cap;
  std::uint64_t total = 0;
  for (std::size_t i = 0; i < report.rows.size(); ++i) {
    const Shape& s = report.rows[i].shape;
    if (s.pass != Pass::fwd) continue;  // the simulation models the forward pass
    if (automatic && l2_sim_accesses(s) > auto_l2_sim_accesses) {
      ++too_large;
      continue;
    }
    // With --l2-bytes a shape over the per-shape cap is left out and named;
    // the run is refused only when no shape is left to simulate.
    if (!automatic && l2_sim_accesses(s) > max_l2_sim_accesses) {
      over_cap.push_back(i);
      continue;
    }
    const std::uint64_t c = flash_l2_sim_accesses(s) + standard_l2_sim_accesses(s);
    if (automatic && total + c > max_l2_sim_run_accesses) {
      ++over_budget;
      continue;
    }
    cost[i] = c;
    total += c;  // no overflow: each c is at most 2 x max_l2_sim_accesses
    ++shapes;
    if (!automatic && total > max_l2_sim_run_accesses) {
      std::size_t fwd = 0;
      for (const Row& r : report.rows) fwd += r.shape.pass == Pass::fwd;
      throw Error("L2 simulation: the first " + std::to_string(shapes) + " of " + std::to_string(fwd) +
                  " shapes already make " + std::to_string(total) + " simulated accesses, more than " +
                  std::to_string(max_l2_sim_run_accesses) +
                  " per run; simulate fewer or shorter shapes (--shard I/N splits a sweep) or use "
                  "bigger --block-rows/--block-cols");
    }
  }
  if (!over_cap.empty() && shapes == 0) check_l2_sim_size(report.rows[over_cap.front()].shape);  // throws
  {
    // About 2^26 accesses take a second: shorter runs show no bar.
    ProgressBar bar(stderr, mode, "hbmscope L2 simulation", std::size_t{1} << 26, 1);
    std::uint64_t done = 0;
    for (std::size_t i = 0; i < report.rows.size(); ++i) {
      if (cost[i] == 0) continue;
      bar.update(done, total);
      // Without --ctas-per-sm: as many CTAs as the flash kernel this shape
      // would run fits on one SM of the device (launch_plan's ptxas figures).
      L2SimConfig c = *config;
      // Decode rows: two split-KV CTAs an SM, as FlashAttention's split heuristic assumes.
      if (!l2.ctas_per_sm)
        c.ctas_per_sm = report.rows[i].shape.decode
                            ? 2
                            : shape_ctas_per_sm(report.rows[i].shape, sm_limits_for_device(spec ? spec->name : ""));
      add_l2_sim(report.rows[i], c);
      done += cost[i];
    }
    bar.update(total, total);
  }
  std::vector<std::string> notes;
  if (too_large)
    notes.push_back(fmt::format("L2 simulation left out for {} shape(s) of more than {} tile accesses; "
                                "--l2-bytes runs it on every shape up to {}",
                                too_large, auto_l2_sim_accesses, max_l2_sim_accesses));
  if (!over_cap.empty()) {
    std::string named;
    for (std::size_t k = 0; k < over_cap.size() && k < 5; ++k)
      named += (k ? "; " : "") + describe(report.rows[over_cap[k]].shape);
    if (over_cap.size() > 5) named += "; and " + std::to_string(over_cap.size() - 5) + " more";
    notes.push_back(fmt::format("L2 simulation left out for {} shape(s) of more than {} tile accesses: {} "
                                "(bigger --block-rows/--block-cols or shorter sequences simulate them)",
                                over_cap.size(), max_l2_sim_accesses, named));
  }
  if (over_budget)
    notes.push_back(fmt::format("L2 simulation left out for {} shape(s) past the run's budget of {} "
                                "simulated accesses; --shard I/N splits the sweep",
                                over_budget, max_l2_sim_run_accesses));
  return notes;
}

L2Options decode_l2_options(const L2Options& l2, const DeviceOptions& dev, bool decode) {
  L2Options out = l2;
  if (decode && !l2.l2_bytes && !dev.device) out.sms.reset();
  return out;
}

L2Options prepare_decode(ModelOptions& variants, const L2Options& l2, const DeviceOptions& dev,
                         const std::vector<Shape>& shapes) {
  const bool decode = std::any_of(shapes.begin(), shapes.end(), [](const Shape& s) { return s.decode; });
  if (!decode) return l2;
  if (l2.order && std::all_of(shapes.begin(), shapes.end(), [](const Shape& s) { return s.decode; }))
    throw Error("--l2-order: decode rows are simulated in FlashAttention's split-KV launch order "
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

void check_variant_ids(const std::vector<std::string>& ids, const std::string& where,
                       const std::vector<Shape>& shapes, const ModelOptions& v, bool sims) {
  // The ids a run can make: those of one modelled row per pass (cheap), and
  // the simulated variants when the L2 simulation runs.
  std::vector<std::string> known;
  std::set<std::pair<Pass, bool>> kinds;  // (pass, decode): a decode row has its own variants
  bool decode = false;
  for (const Shape& s : shapes) {
    decode |= s.decode;
    if (!kinds.insert({s.pass, s.decode}).second) continue;
    for (const auto& x : model_row(s, v).variants)
      if (std::find(known.begin(), known.end(), x.id) == known.end()) known.push_back(x.id);
  }
  if (sims)
    for (const char* id : {"flash_l2_sim", "standard_l2_sim"}) known.push_back(id);
  if (sims && decode)
    for (const char* id : {"decode_split_l2_sim", "decode_split_unpacked_l2_sim", "decode_paged_l2_sim"})
      known.push_back(id);
  for (const auto& id : ids)
    if (!shapes.empty() && std::find(known.begin(), known.end(), id) == known.end()) {
      std::string list;
      for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
      const std::string msg = where + ": '" + id + "' is not a variant of these rows (" + list + ")";
      // On the command line, a value that names no variant: exit 2 (a config file's: 1).
      if (where.rfind("--", 0) == 0) throw UsageError(msg);
      throw Error(msg);
    }
}

void check_variants(const ModelOptions& v, const std::vector<Shape>& shapes) {
  if (!v.flash1) return;
  for (const Shape& s : shapes)
    if (s.pass == Pass::fwd && !s.decode) return;
  if (!shapes.empty() && shapes.front().decode)
    throw Error("--fa1: decode rows have their own variants (no FlashAttention-1 order); drop --fa1");
  throw Error("--fa1: FlashAttention-1's order is modelled for the forward pass only; add fwd to --pass");
}

void check_run_size(std::size_t shapes, std::string_view command) {
  if (shapes <= max_run_shapes) return;
  const std::size_t n = (shapes + max_run_shapes - 1) / max_run_shapes;
  throw Error(std::string(command) + " too large: " + std::to_string(shapes) + " shapes in one run (at most " +
              std::to_string(max_run_shapes) + ", a few GB of report); split it with `hbmscope sweep ... --shard I/" +
              std::to_string(n) + "` (I = 1.." + std::to_string(n) + ") and `hbmscope merge`");
}

namespace {

void require_forward(const Shape& s) {
  if (s.pass != Pass::fwd)
    throw Error("--pass: measure runs forward kernels only (got '" + std::string(pass_name(s.pass)) + "')");
}

}  // namespace

std::unique_ptr<Backend> measuring_backend(const MeasureCliOptions& mo, const std::vector<Shape>& shapes) {
  (void)parse_kernels(mo.kernels);
  for (const Shape& s : shapes) require_forward(s);
  MeasureOptions sizes;
  apply_measure_sizes(mo, sizes);  // --copy-bytes, --flush-bytes refused before the device is opened
  auto backend = make_backend(mo.device_index);
  if (!backend->available()) throw Error(backend->unavailable_reason());
  return backend;
}

void add_measurements(Report& report, const MeasureCliOptions& mo, std::unique_ptr<Backend> backend) {
  const auto kinds = parse_kernels(mo.kernels);
  for (const Row& row : report.rows) require_forward(row.shape);
  // Without --kernels, decode rows run the decode kernels (the prefill ones
  // do not take a decode row).
  const bool default_kernels = mo.kernels == MeasureCliOptions{}.kernels;
  const auto decode_kinds = parse_kernels("decode,decode_paged");
  MeasureOptions opt;
  opt.repeats = mo.repeats;
  opt.warmup = mo.warmup;
  opt.seed = mo.seed;
  opt.validate = !mo.no_validate;
  apply_measure_sizes(mo, opt);
  opt.counters = mo.counters;
  if (!backend) backend = measuring_backend(mo, {});
  report.device = measure_device(*backend, opt);
  const double ceiling = copy_bandwidth(report.device->copy);
  for (std::size_t i = 0; i < report.rows.size(); ++i) {
    Row& row = report.rows[i];
    std::fprintf(stderr, "hbmscope: measuring %zu/%zu: %s\n", i + 1, report.rows.size(),
                 describe(row.shape).c_str());
    row.measurements =
        measure_row(*backend, row.shape, default_kernels && row.shape.decode ? decode_kinds : kinds, opt, ceiling)
            .measurements;
  }
  // Counters that cannot be read: one line, once; the timings stand.
  if (mo.counters)
    for (const Row& row : report.rows)
      for (const auto& m : row.measurements)
        if (!m.counters.empty() && m.counters != "ok") {
          std::fprintf(stderr, "hbmscope: note: %s\n", m.counters.c_str());
          return;
        }
}

int finish_report(Report& report, const OutputOptions& out, const DeviceOptions& dev,
                  const std::vector<std::string>& notes) {
  check_device_options(dev, out);
  const PrintOptions print = to_print_options(out);
  if (!dev.device && std::find(print.columns.begin(), print.columns.end(), "time") != print.columns.end() &&
      out.columns && out.columns->find("time") != std::string::npos)
    throw UsageError("--columns: 'time' needs --device (the roofline time of which GPU?)");
  if (dev.device) add_predictions(report, find_device(*dev.device), dev.bandwidth_fraction.value_or(1.0));
  std::string text = render(report, print);
  // The chart and both files' temporary files first: a plot or a target that
  // fails does so with nothing written.
  std::optional<Plot> plot;
  std::vector<std::string> all_notes = notes;
  if (dev.plot) {
    PlotOptions po;
    if (dev.x) po.x = *parse_plot_axis(*dev.x);
    // A simulation that ran on no shape leaves its variants out of the report:
    // the chart says so instead of drawing nothing silently.
    bool sim_left_out = false;
    for (const auto& n : notes) sim_left_out |= n.rfind("L2 simulation left out", 0) == 0;
    if (sim_left_out) {
      const auto ids = variant_ids(report);
      const auto has = [&](const char* id) { return std::find(ids.begin(), ids.end(), id) != ids.end(); };
      if (has("flash_no_l2")) po.expected.push_back("flash_l2_sim");
      if (has("standard")) po.expected.push_back("standard_l2_sim");
    }
    plot.emplace(report, *dev.plot, po);
    for (const auto& n : plot_notes(report, po)) all_notes.push_back("--plot: " + n);
  }
  std::optional<AtomicFile> file;
  if (!to_stdout(out.output)) file.emplace(*out.output);
  const bool chart_to_terminal = dev.plot && *dev.plot == "-";
  if (chart_to_terminal && to_stdout(out.output)) text += "\n" + plot->text();
  // Both files' bytes on disk before either is renamed: a full disk fails the
  // run with neither file replaced, as the README promises.
  if (file) file->write(text);
  if (plot && !chart_to_terminal) plot->write();
  if (file) {
    file->publish();
    std::fprintf(stderr, "hbmscope: wrote %s\n", json_check::printable(*out.output).c_str());
  } else {
    write_stdout(text);
  }
  if (chart_to_terminal && !to_stdout(out.output)) write_stdout(plot->text());
  if (plot && !chart_to_terminal) {
    plot->publish();
    std::fprintf(stderr, "hbmscope: wrote %s\n", json_check::printable(*dev.plot).c_str());
  }
  // Notes last, so that a run that fails prints its error alone.
  for (const auto& n : all_notes) std::fprintf(stderr, "hbmscope: note: %s\n", n.c_str());
  return 0;
}

SweepCommands::SweepCommands(CLI::App& app) {
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
                     "the whole), e.g. --shard 2/8 in a Slurm array job; join with `hbmscope merge`")
      ->type_name("I/N");
  sweep_->add_option("--progress", progress_,
                     "Progress bar on stderr: auto (when stderr is a terminal and the sweep has "
                     "100000 shapes or more), always, never [default: auto]")
      ->type_name("auto|always|never");
  sweep_->add_flag("--measure", measure_,
                   "Also run and time our kernels on each shape (a CUDA device needed; the "
                   "flash blocks become the kernel's instantiation), as `hbmscope measure`");
  add_measure_options(*sweep_, measure_opts_);
  sweep_->footer(sweep_help);
  add_device_options(*sweep_, dev_);

  devices_ = app.add_subcommand("devices", "List the GPU presets of the roofline, or show one with its sources");
  devices_->add_option("device", devices_which_, "A preset name or a device JSON file to show in full")
      ->type_name("NAME|FILE");
  devices_->add_option("--format", devices_format_, "table, json, csv or md [default: table]")
      ->type_name("table|json|csv|md");
  devices_->footer(R"(Columns: memory bandwidth (datasheet, bytes/s in decimal units), L2 size, SM count,
dense peak FLOP/s per dtype (no 2:4 sparsity; "-" where the GPU has no such path),
and the bf16 ridge point: FLOP per byte where memory time equals compute time.
Examples:
  hbmscope devices
  hbmscope devices h100            every figure with its source
  hbmscope devices my-gpu.json     check a file of your own (schema: docs/devices.md))");

  compare_ = app.add_subcommand("compare", "Compare two JSON reports row by row (matched by shape)");
  compare_->add_option("reports", compare_files_, "A.json B.json: reports from `--format json`")
      ->required()
      ->expected(2)
      ->type_name("A.json B.json");
  compare_->add_option("--threshold", threshold_,
                       "Percent within which the metric counts as SAME, e.g. 2 [default: 5]")
      ->type_name("PCT")
      ->check(finite_number());
  compare_->add_option("--metric", metric_,
                       "The number the verdict is on, e.g. bytes.standard or "
                       "prediction.flash_no_l2.seconds [default: a measured time, else "
                       "prediction.flash_no_l2.seconds, else bytes.flash_no_l2; decode reports: "
                       "prediction.decode_split.seconds, else bytes.decode_split]")
      ->type_name("PATH")
      ->check(not_empty());
  compare_->add_option("--match", match_,
                       "Match rows on these fields only, e.g. --match seq_q,seq_kv,head_dim when the "
                       "reports differ in dtype (fields: label, batch, heads, kv_heads, seq_q, seq_kv "
                       "(seq: both), head_dim, dtype, block_rows, block_cols, causal, pass) "
                       "[default: the label and every shape field]")
      ->type_name("LIST");
  compare_->add_option("--ignore", ignore_,
                       "Match rows on every field but these, e.g. --ignore dtype (bf16 vs fp8) or "
                       "--ignore block_rows")
      ->type_name("LIST")
      ->excludes(compare_->get_option("--match"));
  compare_->add_option("--metrics", metrics_,
                       "Also show these numbers in table, csv and md, e.g. bytes.standard,flops; all "
                       "shows every one [default: the verdict metric and the numbers that differ "
                       "beyond the threshold; JSON holds every number]")
      ->type_name("LIST|all");
  compare_->add_option("--fail-on", fail_on_,
                       "Exit 4 when a row's verdict is SLOWER (slower), FASTER (faster) or either (any), "
                       "after writing the output: a regression gate for CI")
      ->type_name("slower|faster|any");
  compare_->add_option("--format", compare_format_,
                       "table, json, csv or md [default: from the --output file's extension, else table]")
      ->type_name("table|json|csv|md");
  compare_->add_option("--output", compare_output_, "Write to FILE atomically instead of stdout (- is stdout)")
      ->type_name("FILE")
      ->check(not_empty());
  compare_->footer(R"(Rows are matched by their shape (and group label), or by the fields of --match /
--ignore; the header names what rows were matched on, the axes in which matched
rows differ, and the verdict metric. The table shows A, B and B/A of the metric,
then B/A ("inf" when only A is 0) of every number that differs by more than the
threshold in some row (--metrics adds more; --format json holds every number).
Verdict on the metric: FASTER when B is better by more than the threshold,
SLOWER when worse, SAME otherwise. Rows in only one report are listed after the
table.
Exit status: 0, or 4 with --fail-on when a verdict says so; 1 bad input, 2 usage.
Examples:
  hbmscope compare before.json after.json
  hbmscope compare bf16.json fp8.json --ignore dtype
  hbmscope compare h100.json h200.json --metric prediction.flash_no_l2.seconds --threshold 1
  hbmscope compare base.json new.json --fail-on slower     (CI: exit 4 on a regression))");

  merge_ = app.add_subcommand("merge", "Join JSON reports (e.g. the shards of a sweep) into one");
  merge_->add_option("reports", merge_files_, "Reports to join, in order (shards are put in shard order)")
      ->required()
      ->type_name("FILE...");
  merge_->add_option("--output", merge_output_, "Write to FILE atomically instead of stdout (- is stdout)")
      ->type_name("FILE")
      ->check(not_empty());
  merge_->add_option("--format", merge_format_,
                     "json, table, csv or md [default: from the --output file's extension, else json]")
      ->type_name("json|table|csv|md");
  merge_->footer(R"(Refuses reports of another schema, of different devices or bandwidth fractions, and
any row (label and shape) that two reports both hold. Shards of one sweep are put
back in shard order; missing shards are named on stderr; shards of different
splits (another N or sweep) are refused.
Example:
  for i in 1 2 3 4; do hbmscope sweep --config llm --shard $i/4 --format json --output p$i.json; done
  hbmscope merge p1.json p2.json p3.json p4.json --output all.json)");
}

bool SweepCommands::run(int& rc) {
  if (sweep_->parsed()) rc = run_sweep();
  else if (devices_->parsed()) rc = run_devices();
  else if (compare_->parsed()) rc = run_compare();
  else if (merge_->parsed()) rc = run_merge();
  else return false;
  return true;
}

int SweepCommands::run_sweep() {
  const ProgressMode mode = progress_ == "auto"     ? ProgressMode::auto_
                            : progress_ == "always" ? ProgressMode::always
                            : progress_ == "never"  ? ProgressMode::never
                                                    : throw UsageError("--progress: '" + progress_ +
                                                                  "' is not one of auto, always, never");
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
  const std::optional<Shard> shard = shard_ ? std::optional<Shard>(parse_shard(*shard_)) : std::nullopt;
  const std::vector<std::string> variant_list = variants_ ? split_list(*variants_, "--variants") : std::vector<std::string>{};
  SweepConfig cfg;
  if (config_) {
    cfg = find_sweep_config(*config_);
    const ShapeOptions& o = shape_;
    if (o.seq || o.head_dim || o.seq_kv || o.batch || o.heads || o.kv_heads || o.dtype || o.block_rows ||
        o.block_cols || o.causal || o.pass || o.decode || o.context_lengths || o.splits || o.page_size) {
      for (auto& g : cfg.groups) apply_shape_options(g.axes, shape_);
      cfg.expanded.reset();  // the loader's expansion was of the file's axes
    }
  } else {
    cfg.groups.push_back({"", to_axes(shape_)});
  }
  // Every option is checked before the sweep is computed (--sms alone serves decode rows' heuristic).
  const bool any_decode =
      std::any_of(cfg.groups.begin(), cfg.groups.end(), [](const SweepGroup& g) { return g.axes.decode; });
  const bool sims = check_l2_options(decode_l2_options(l2_, dev_, any_decode), dev_);
  LabelledShapes all;
  if (cfg.expanded) {  // the loader's expansion, taken rather than copied
    all = std::move(*cfg.expanded);
    cfg.expanded.reset();
  } else {
    all = expand(cfg);
  }
  check_variants(variants_opts_, all.shapes);
  if (variants_) check_variant_ids(variant_list, "--variants", all.shapes, variants_opts_, sims);
  else if (config_ && !cfg.variants.empty())
    check_variant_ids(cfg.variants, *config_ + ": variants", all.shapes, variants_opts_, sims);
  if (measure_) {
    const bool blocks_given = shape_.block_rows || shape_.block_cols;
    for (Shape& s : all.shapes) s = with_flash_blocks(s, blocks_given);
  }
  Report report;
  report.command = "sweep";
  if (shard) {
    const Shard s = *shard;
    const auto [b, e] = shard_range(all.shapes.size(), s);
    report.shard = ShardInfo{s.index, s.count, all.shapes.size()};
    all.shapes = std::vector<Shape>(all.shapes.begin() + static_cast<std::ptrdiff_t>(b),
                                    all.shapes.begin() + static_cast<std::ptrdiff_t>(e));
    all.labels = std::vector<std::string>(all.labels.begin() + static_cast<std::ptrdiff_t>(b),
                                          all.labels.begin() + static_cast<std::ptrdiff_t>(e));
  }
  check_run_size(all.shapes.size(), "sweep");
  const L2Options l2 = prepare_decode(variants_opts_, l2_, dev_, all.shapes);
  // A device to measure on is found before the sweep is modelled.
  std::unique_ptr<Backend> backend = measure_ ? measuring_backend(measure_opts_, all.shapes) : nullptr;
  {
    ProgressBar bar(stderr, mode, "hbmscope sweep");
    report.rows = model_rows(all.shapes, variants_opts_,
                             [&](std::size_t d, std::size_t t) { bar.update(d, t); });
  }
  const auto notes = add_l2_sims(report, l2, dev_, mode);
  if (measure_) add_measurements(report, measure_opts_, std::move(backend));
  for (std::size_t i = 0; i < report.rows.size(); ++i) report.rows[i].label = all.labels[i];
  if (variants_) {
    keep_variants(report.rows, variant_list, "--variants");
  } else if (config_ && !cfg.variants.empty()) {
    keep_variants(report.rows, cfg.variants, *config_ + ": variants");
  }
  return finish_report(report, out_, dev_, notes);
}

int SweepCommands::run_devices() {
  const Format f = format_or_throw(devices_format_);
  std::vector<DeviceSpec> list;
  if (devices_which_) list.push_back(find_device(*devices_which_, "devices"));
  else list = preset_devices();
  if (f == Format::json) {
    const bool detail = devices_which_.has_value();
    nlohmann::json j = nlohmann::json::array();
    for (const auto& d : list) j.push_back(device_spec_to_json(d));
    write_stdout((detail ? j[0] : j).dump(2) + "\n");
    return 0;
  }
  write_stdout(render_devices(list, devices_which_.has_value(), f));
  return 0;
}

int SweepCommands::run_compare() {
  const Format f = resolve_format(compare_format_, compare_output_, Format::table);
  CompareOptions opt;
  opt.threshold_pct = threshold_;
  if (metric_) opt.metric = *metric_;
  if (match_) opt.match = split_list(*match_, "--match");
  if (ignore_) opt.ignore = split_list(*ignore_, "--ignore");
  if (metrics_) opt.metrics = split_list(*metrics_, "--metrics");
  if (fail_on_ && *fail_on_ != "slower" && *fail_on_ != "faster" && *fail_on_ != "any")
    throw Error("--fail-on: '" + *fail_on_ + "' is not one of slower, faster, any");
  refuse_input_as_output(compare_output_, compare_files_, "--output");
  const Comparison c = compare_report_files(compare_files_.at(0), compare_files_.at(1), opt);
  emit(render_comparison(c, f), compare_output_);
  if (fail_on_) {
    const bool slower = c.slower > 0 && *fail_on_ != "faster";
    const bool faster = c.faster > 0 && *fail_on_ != "slower";
    if (slower || faster) {
      std::fprintf(stderr, "hbmscope: compare: %zu SLOWER, %zu FASTER (--fail-on %s): exit %d\n", c.slower,
                   c.faster, fail_on_->c_str(), compare_fail_exit);
      return compare_fail_exit;
    }
  }
  return 0;
}

int SweepCommands::run_merge() {
  const Format f = resolve_format(merge_format_, merge_output_, Format::json);
  refuse_input_as_output(merge_output_, merge_files_, "--output");
  // Each input is read row by row: every row is checked and kept as the text
  // the merged report will hold (or, for other formats, as a Row), never as a
  // JSON tree, so that memory stays near the size of the output.
  struct Input {
    std::string name;
    nlohmann::json j;   // everything but the rows
    Report r;
    std::string rows_text;   // json: the rows as they will be written, comma-separated
    std::vector<Row> rows;   // other formats
    std::size_t count = 0;
  };
  std::vector<Input> in;
  std::unordered_map<std::string, std::size_t> owner;  // row key -> input
  std::optional<std::string> overlap;  // the first overlap, refused after the header checks
  for (const auto& name : merge_files_) {
    Input x;
    x.name = name;
    const std::size_t me = in.size();
    x.j = json_check::read_json_rows(name, [&](std::size_t i, nlohmann::json&& row) {
      Row checked = row_from_json(row, name, i);
      const auto [it, fresh] = owner.try_emplace(row_key(row), me);
      if (!fresh && !overlap)
        overlap = "merge: rows overlap: " + (checked.label.empty() ? "" : checked.label + ": ") +
                  describe(checked.shape) + " is in both " + in[it->second].name + " and " + name;
      if (f == Format::json) {
        if (x.count) x.rows_text += ",\n";
        x.rows_text += "    ";
        // As dump(2) writes it inside the rows array (4 spaces deeper), straight
        // into the text: no copy of the row and no second pass to indent it.
        nlohmann::detail::serializer<nlohmann::json> out(nlohmann::detail::output_adapter<char>(x.rows_text), ' ');
        out.dump(row, true, false, 2, 4);
      } else {
        x.rows.push_back(std::move(checked));
      }
      ++x.count;
    });
    if (!in.empty() && x.j.is_object() && x.j.contains("schema") && in[0].j.contains("schema") &&
        x.j["schema"] != in[0].j["schema"] &&
        !(x.j["schema"].is_string() && in[0].j["schema"].is_string() &&
          readable_report_schema(x.j["schema"].get<std::string>()) &&
          readable_report_schema(in[0].j["schema"].get<std::string>())))
      throw Error("merge: " + name + " has schema " + json_check::brief(x.j["schema"]) + ", " +
                  in[0].name + " has " + json_check::brief(in[0].j["schema"]) + ": refusing to mix them");
    x.r = report_from_json(x.j, name);
    in.push_back(std::move(x));
  }
  const auto& first = in.front();
  for (const auto& x : in) {
    if (x.r.command != first.r.command)
      throw Error("merge: " + x.name + " comes from `" + x.r.command + "`, " + first.name + " from `" +
                  first.r.command + "`: refusing to mix them");
    const nlohmann::json da = x.j.value("roofline", nlohmann::json()), db = first.j.value("roofline", nlohmann::json());
    if (da != db) {
      // Name what differs: the device names when they do, else the first
      // differing figure or the fractions.
      const std::string na = x.r.roofline ? x.r.roofline->device.name : std::string("none");
      const std::string nb = first.r.roofline ? first.r.roofline->device.name : std::string("none");
      throw Error("merge: " + x.name + " and " + first.name +
                  " were predicted for different devices or bandwidth fractions (" +
                  (na != nb ? na + " vs " + nb : first_difference(da, db, "roofline")) + ")");
    }
  }
  // Shards of one sweep go back in shard order; shards of different splits
  // (or a shard with a whole report) would merge into a report that is
  // neither, so they are refused.
  const auto shard_name = [](const Input& x) {
    return x.r.shard ? "shard " + std::to_string(x.r.shard->index) + "/" + std::to_string(x.r.shard->count) +
                           " of " + std::to_string(x.r.shard->total_rows) + " rows"
                     : std::string("not a shard");
  };
  for (const auto& x : in) {
    const bool same = x.r.shard.has_value() == first.r.shard.has_value() &&
                      (!x.r.shard || (x.r.shard->count == first.r.shard->count &&
                                      x.r.shard->total_rows == first.r.shard->total_rows));
    if (!same)
      throw Error("merge: " + first.name + " is " + shard_name(first) + ", " + x.name + " is " + shard_name(x) +
                  ": refusing to mix shards of different splits (merge the N shards of one --shard I/N run)");
  }
  if (overlap) throw Error(*overlap);
  const bool shards = first.r.shard.has_value();
  if (shards)
    std::stable_sort(in.begin(), in.end(),
                     [](const Input& a, const Input& b) { return a.r.shard->index < b.r.shard->index; });
  std::size_t total = 0;
  for (const auto& x : in) total += x.count;
  if (shards) {
    const std::uint64_t count = in.front().r.shard->count;
    std::set<std::uint64_t> have;
    for (const auto& x : in) have.insert(x.r.shard->index);
    if (have.size() != count || total != in.front().r.shard->total_rows) {
      // The missing indices as ranges ("2-5, 7"), found from the gaps between
      // the shards present: a count of 10^18 costs no more than one of 2.
      std::vector<std::string> ranges;
      std::uint64_t next = 1;  // the first index not yet accounted for
      const auto gap = [&](std::uint64_t upto) {  // indices next..upto-1 are missing
        if (upto > next) ranges.push_back(std::to_string(next) + (upto - 1 > next ? "-" + std::to_string(upto - 1) : ""));
      };
      for (const std::uint64_t i : have) {
        gap(i);
        next = i + 1;
      }
      if (next <= count) gap(count + 1);
      std::string missing;
      for (std::size_t k = 0; k < ranges.size(); ++k) {
        if (k == 20) {
          missing += ", ... (" + std::to_string(ranges.size() - 20) + " more ranges)";
          break;
        }
        missing += (k ? ", " : "") + ranges[k];
      }
      std::fprintf(stderr, "hbmscope: note: merged %zu of %llu shards (%zu of %llu rows)%s\n", have.size(),
                   static_cast<unsigned long long>(count), total,
                   static_cast<unsigned long long>(in.front().r.shard->total_rows),
                   missing.empty() ? "" : ("; missing: " + missing).c_str());
    }
  }
  nlohmann::json head = in.front().j;
  head.erase("shard");
  head["schema"] = std::string(report_schema);  // a /1 input is read as /2
  head["rows"] = nlohmann::json::array();
  std::string text;
  if (f == Format::json) {
    // The header as dump(2) writes it, the rows spliced in: the same text as
    // dumping the whole merged report.
    const std::string h = head.dump(2);
    const std::string slot = "\"rows\": []";
    const std::size_t at = h.find(slot);
    std::size_t size = h.size() + 16;
    for (const auto& x : in) size += x.rows_text.size() + 2;
    text.reserve(size);
    text = h.substr(0, at + slot.size() - 1);
    if (total == 0) {
      text += "]";
    } else {
      text += "\n";
      bool any = false;
      for (auto& x : in) {
        if (x.count == 0) continue;
        if (any) text += ",\n";
        text += x.rows_text;
        std::string().swap(x.rows_text);
        any = true;
      }
      text += "\n  ]";
    }
    text += h.substr(at + slot.size());
    text += "\n";
  } else {
    Report merged = report_from_json(head, "merged report");
    merged.rows.reserve(total);
    for (auto& x : in)
      for (auto& row : x.rows) merged.rows.push_back(std::move(row));
    PrintOptions p;
    p.format = f;
    text = render(merged, p);
  }
  emit(text, merge_output_);
  return 0;
}

}  // namespace hbmscope::cli
