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
#include "hbmscope/whole_model.hpp"
#include "../report/json_check.hpp"
#include "command_io.hpp"
#include "plot_run.hpp"
#include "sweep_commands.hpp"

namespace hbmscope::cli {

L2SimPlan plan_l2_sims(const std::vector<const Shape*>& shapes, bool automatic,
                       const std::function<L2SimConfig(const Shape&)>& config_for) {
  // Work is counted by the one budget the core keeps (l2_sim_work), in O(1)
  // per shape for closed forms (a few passes over the CTAs where they do not
  // run in lockstep) before any simulation runs, so a run too long is refused
  // at once. `automatic` (a device alone turned it on): shapes past the
  // budgets are left out with a note; --l2-bytes: a run over the run's budget
  // is refused, and so is one with nothing left to simulate.
  L2SimPlan plan;
  plan.cost.assign(shapes.size(), 0);
  std::vector<std::size_t> over_cap;
  std::size_t over_budget = 0, simulated = 0;
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    if (!shapes[i]) continue;  // a row the caller leaves out (a whole model's)
    const Shape& s = *shapes[i];
    const std::uint64_t w = std::max<std::uint64_t>(1, l2_sim_work(s, config_for(s)));
    if (w > max_l2_sim_work) {  // left out and named
      over_cap.push_back(i);
      continue;
    }
    if (plan.total + w > max_l2_sim_run_work) {
      if (!automatic) {
        std::size_t n = 0;
        for (const Shape* x : shapes) n += x != nullptr;
        throw Error("L2 simulation: the first " + std::to_string(simulated + 1) + " of " + std::to_string(n) +
                    " shapes take " + std::to_string(plan.total + w) + " work units, more than " +
                    std::to_string(max_l2_sim_run_work) +
                    " (about a minute) per run; simulate fewer or shorter shapes (--shard I/N splits a sweep)");
      }
      ++over_budget;
      continue;
    }
    plan.cost[i] = w;
    plan.total += w;  // no overflow: each w is at most max_l2_sim_work
    ++simulated;
  }
  if (!over_cap.empty() && simulated == 0 && !automatic) {  // --l2-bytes asked for a simulation that cannot run
    const Shape& s = *shapes[over_cap.front()];
    check_l2_sim_size(s, config_for(s));  // throws
  }
  if (!over_cap.empty()) {
    std::string named;
    for (std::size_t k = 0; k < over_cap.size() && k < 5; ++k)
      named += (k ? "; " : "") + describe(*shapes[over_cap[k]]);
    if (over_cap.size() > 5) named += "; and " + std::to_string(over_cap.size() - 5) + " more";
    plan.notes.push_back(fmt::format("L2 simulation left out for {} shape(s) of more than {} work units (about 10 s "
                                     "each): {} (bigger --block-rows/--block-cols, fewer heads or shorter sequences "
                                     "simulate them)",
                                     over_cap.size(), max_l2_sim_work, named));
  }
  if (over_budget)
    plan.notes.push_back(fmt::format("L2 simulation left out for {} shape(s) past the run's budget of {} work "
                                     "units; --shard I/N splits the sweep",
                                     over_budget, max_l2_sim_run_work));
  return plan;
}

std::vector<std::string> add_l2_sims(Report& report, const L2Options& l2, const DeviceOptions& dev,
                                     ProgressMode mode) {
  std::optional<DeviceSpec> spec;
  if (dev.device) spec = find_device(*dev.device);
  const auto config = to_l2_config(l2, spec ? &*spec : nullptr);
  if (!config) return {};
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
  std::vector<const Shape*> shapes;
  shapes.reserve(report.rows.size());
  // A whole model's kind row is one layer's kernel (its shape), its total the
  // sum of its kinds' (docs/models.md): totals are not simulated.
  for (const Row& r : report.rows)
    shapes.push_back(r.model_layers && r.model_layers->kind == total_kind ? nullptr : &r.shape);
  L2SimPlan plan = plan_l2_sims(shapes, !l2.l2_bytes, config_for);
  {
    // About 2^30 work units take a second: shorter runs show no bar.
    ProgressBar bar(stderr, mode, "hbmscope L2 simulation", std::size_t{1} << 30, 1);
    std::uint64_t done = 0;
    for (std::size_t i = 0; i < report.rows.size(); ++i) {
      if (plan.cost[i] == 0) continue;
      bar.update(done, plan.total);
      add_layers_l2_sim(report.rows[i], config_for(report.rows[i].shape));
      done += plan.cost[i];
    }
    bar.update(plan.total, plan.total);
  }
  for (auto& n : sum_whole_model_l2_sims(report.rows)) plan.notes.push_back(std::move(n));
  return plan.notes;
}

namespace {

void require_forward(const Shape& s) {
  if (s.pass != Pass::fwd)
    throw Error("--pass: measure runs forward kernels only (got '" + std::string(pass_name(s.pass)) + "')");
}

// The kernels a row runs: --kernels, or without it the decode kernels on a
// decode row (the prefill ones do not take one).
std::vector<KernelKind> row_kernels(const MeasureCliOptions& mo, const Shape& s) {
  const bool default_kernels = mo.kernels == MeasureCliOptions{}.kernels;
  return parse_kernels(default_kernels && s.decode ? "decode,decode_paged" : mo.kernels);
}

}  // namespace

std::unique_ptr<Backend> measuring_backend(const MeasureCliOptions& mo, const std::vector<Shape>& shapes) {
  (void)parse_kernels(mo.kernels);
  for (const Shape& s : shapes) require_forward(s);
  // A shape no kernel of ours runs (DV != d, MLA, a KV dtype, ragged prefill,
  // chunks for flash) is refused before the device is opened.
  for (const Shape& s : shapes) check_measurable(s, row_kernels(mo, s));
  MeasureOptions sizes;
  apply_measure_sizes(mo, sizes);  // --copy-bytes, --flush-bytes refused before the device is opened
  auto backend = make_backend(mo.device_index);
  if (!backend->available()) throw Error(backend->unavailable_reason());
  return backend;
}

void add_measurements(Report& report, const MeasureCliOptions& mo, std::unique_ptr<Backend> backend) {
  for (const Row& row : report.rows) {
    require_forward(row.shape);
    check_measurable(row.shape, row_kernels(mo, row.shape));
  }
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
    row.measurements = measure_row(*backend, row.shape, row_kernels(mo, row.shape), opt, ceiling).measurements;
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
