// The steps of a run after its shapes are modelled: the L2 simulation, the
// measurement, and finish_report (predictions, rendering, files, chart, notes).
#include <algorithm>
#include <cstdio>

#include <fmt/format.h>

#include "hbmscope/device_config.hpp"
#include "hbmscope/error.hpp"
#include "hbmscope/measure.hpp"
#include "hbmscope/plot.hpp"
#include "hbmscope/roofline.hpp"
#include "../report/json_check.hpp"
#include "command_io.hpp"
#include "plot_run.hpp"
#include "sweep_commands.hpp"

namespace hbmscope::cli {

std::vector<std::string> add_l2_sims(Report& report, const L2Options& l2, const DeviceOptions& dev,
                                     ProgressMode mode) {
  std::optional<DeviceSpec> spec;
  if (dev.device) spec = find_device(*dev.device);
  const auto config = to_l2_config(l2, spec ? &*spec : nullptr);
  if (!config) return {};
  const bool automatic = !l2.l2_bytes;
  // Each shape's configuration: without --ctas-per-sm, as many CTAs as the
  // flash kernel this shape would run fits on one SM of the device
  // (launch_plan's ptxas figures); decode rows two split-KV CTAs an SM, as
  // FlashAttention's split heuristic assumes.
  auto config_for = [&](const Shape& s) {
    L2SimConfig c = *config;
    if (!l2.ctas_per_sm)
      c.ctas_per_sm = s.decode ? 2 : shape_ctas_per_sm(s, sm_limits_for_device(spec ? spec->name : ""));
    return c;
  };
  // Work is counted by the one budget the core keeps (l2_sim_work), in O(1)
  // per shape for closed forms (a few passes over the CTAs where they do not
  // run in lockstep) before any simulation runs, so a run too long is refused
  // at once.
  std::vector<std::uint64_t> cost(report.rows.size(), 0);
  std::vector<std::size_t> over_cap;
  std::size_t over_budget = 0, shapes = 0;
  std::uint64_t total = 0;
  for (std::size_t i = 0; i < report.rows.size(); ++i) {
    const Shape& s = report.rows[i].shape;
    if (report.rows[i].model_layers) continue;  // one kernel's traffic, not a whole model's (docs/models.md)
    const std::uint64_t w = std::max<std::uint64_t>(1, l2_sim_work(s, config_for(s)));
    if (w > max_l2_sim_work) {  // left out and named; with --l2-bytes, refused when nothing is left
      over_cap.push_back(i);
      continue;
    }
    if (total + w > max_l2_sim_run_work) {
      if (!automatic)
        throw Error("L2 simulation: the first " + std::to_string(shapes + 1) + " of " +
                    std::to_string(report.rows.size()) + " shapes take " + std::to_string(total + w) +
                    " work units, more than " + std::to_string(max_l2_sim_run_work) +
                    " (about a minute) per run; simulate fewer or shorter shapes (--shard I/N splits a sweep)");
      ++over_budget;
      continue;
    }
    cost[i] = w;
    total += w;  // no overflow: each w is at most max_l2_sim_work
    ++shapes;
  }
  if (!over_cap.empty() && shapes == 0 && !automatic) {  // --l2-bytes asked for a simulation that cannot run
    const Shape& s = report.rows[over_cap.front()].shape;
    check_l2_sim_size(s, config_for(s));  // throws
  }
  {
    // About 2^30 work units take a second: shorter runs show no bar.
    ProgressBar bar(stderr, mode, "hbmscope L2 simulation", std::size_t{1} << 30, 1);
    std::uint64_t done = 0;
    for (std::size_t i = 0; i < report.rows.size(); ++i) {
      if (cost[i] == 0) continue;
      bar.update(done, total);
      add_l2_sim(report.rows[i], config_for(report.rows[i].shape));
      done += cost[i];
    }
    bar.update(total, total);
  }
  std::vector<std::string> notes;
  if (!over_cap.empty()) {
    std::string named;
    for (std::size_t k = 0; k < over_cap.size() && k < 5; ++k)
      named += (k ? "; " : "") + describe(report.rows[over_cap[k]].shape);
    if (over_cap.size() > 5) named += "; and " + std::to_string(over_cap.size() - 5) + " more";
    notes.push_back(fmt::format("L2 simulation left out for {} shape(s) of more than {} work units (about 10 s "
                                "each): {} (bigger --block-rows/--block-cols, fewer heads or shorter sequences "
                                "simulate them)",
                                over_cap.size(), max_l2_sim_work, named));
  }
  if (over_budget)
    notes.push_back(fmt::format("L2 simulation left out for {} shape(s) past the run's budget of {} work "
                                "units; --shard I/N splits the sweep",
                                over_budget, max_l2_sim_run_work));
  return notes;
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
  return write_report(report, render(report, print), out, dev, notes);
}

int write_report(const Report& report, std::string text, const OutputOptions& out, const DeviceOptions& dev,
                 const std::vector<std::string>& notes) {
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

}  // namespace hbmscope::cli
