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

L2SimPlan plan_l2_sims(const std::vector<const Shape*>& shapes, bool automatic) {
  // Work is counted in simulated accesses (both simulations), all counted in
  // O(1) per shape before any runs, so that a run too long is refused at once.
  L2SimPlan plan;
  plan.cost.assign(shapes.size(), 0);
  std::size_t too_large = 0, over_budget = 0, simulated = 0;
  std::vector<std::size_t> over_cap;
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    if (!shapes[i]) continue;  // a row the caller leaves out (a whole model's)
    const Shape& s = *shapes[i];
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
    if (automatic && plan.total + c > max_l2_sim_run_accesses) {
      ++over_budget;
      continue;
    }
    plan.cost[i] = c;
    plan.total += c;  // no overflow: each c is at most 2 x max_l2_sim_accesses
    ++simulated;
    if (!automatic && plan.total > max_l2_sim_run_accesses) {
      std::size_t fwd = 0;
      for (const Shape* x : shapes) fwd += x && x->pass == Pass::fwd;
      throw Error("L2 simulation: the first " + std::to_string(simulated) + " of " + std::to_string(fwd) +
                  " shapes already make " + std::to_string(plan.total) + " simulated accesses, more than " +
                  std::to_string(max_l2_sim_run_accesses) +
                  " per run; simulate fewer or shorter shapes (--shard I/N splits a sweep) or use "
                  "bigger --block-rows/--block-cols");
    }
  }
  if (!over_cap.empty() && simulated == 0) check_l2_sim_size(*shapes[over_cap.front()]);  // throws
  if (too_large)
    plan.notes.push_back(fmt::format("L2 simulation left out for {} shape(s) of more than {} tile accesses; "
                                     "--l2-bytes runs it on every shape up to {}",
                                     too_large, auto_l2_sim_accesses, max_l2_sim_accesses));
  if (!over_cap.empty()) {
    std::string named;
    for (std::size_t k = 0; k < over_cap.size() && k < 5; ++k)
      named += (k ? "; " : "") + describe(*shapes[over_cap[k]]);
    if (over_cap.size() > 5) named += "; and " + std::to_string(over_cap.size() - 5) + " more";
    plan.notes.push_back(fmt::format("L2 simulation left out for {} shape(s) of more than {} tile accesses: {} "
                                     "(bigger --block-rows/--block-cols or shorter sequences simulate them)",
                                     over_cap.size(), max_l2_sim_accesses, named));
  }
  if (over_budget)
    plan.notes.push_back(fmt::format("L2 simulation left out for {} shape(s) past the run's budget of {} "
                                     "simulated accesses; --shard I/N splits the sweep",
                                     over_budget, max_l2_sim_run_accesses));
  return plan;
}

std::vector<std::string> add_l2_sims(Report& report, const L2Options& l2, const DeviceOptions& dev,
                                     ProgressMode mode) {
  std::optional<DeviceSpec> spec;
  if (dev.device) spec = find_device(*dev.device);
  const auto config = to_l2_config(l2, spec ? &*spec : nullptr);
  if (!config) return {};
  std::vector<const Shape*> shapes;
  shapes.reserve(report.rows.size());
  // One kernel's traffic, not a whole model's (docs/models.md): model rows are left out.
  for (const Row& r : report.rows) shapes.push_back(r.model_layers ? nullptr : &r.shape);
  const L2SimPlan plan = plan_l2_sims(shapes, !l2.l2_bytes);
  {
    // About 2^26 accesses take a second: shorter runs show no bar.
    ProgressBar bar(stderr, mode, "hbmscope L2 simulation", std::size_t{1} << 26, 1);
    std::uint64_t done = 0;
    for (std::size_t i = 0; i < report.rows.size(); ++i) {
      if (plan.cost[i] == 0) continue;
      bar.update(done, plan.total);
      // Without --ctas-per-sm: as many CTAs as the flash kernel this shape
      // would run fits on one SM of the device (launch_plan's ptxas figures).
      L2SimConfig c = *config;
      // Decode rows: two split-KV CTAs an SM, as FlashAttention's split heuristic assumes.
      if (!l2.ctas_per_sm)
        c.ctas_per_sm = report.rows[i].shape.decode
                            ? 2
                            : shape_ctas_per_sm(report.rows[i].shape, sm_limits_for_device(spec ? spec->name : ""));
      add_l2_sim(report.rows[i], c);
      done += plan.cost[i];
    }
    bar.update(plan.total, plan.total);
  }
  return plan.notes;
}

namespace {

// The one check of what our kernels run, made before any device is opened:
// the forward pass of the shapes they implement. Attention as served beyond a
// window (docs/model.md, "Operand shapes", "Ragged prefill") is counted by the
// model but run by no kernel of ours.
void require_measurable(const Shape& s) {
  if (s.pass != Pass::fwd)
    throw Error("--pass: measure runs forward kernels only (got '" + std::string(pass_name(s.pass)) + "')");
  const char* what = s.latent_kv                  ? "a latent KV (MLA)"
                     : s.head_dim_v != 0          ? "a V head dim other than --head-dim (--head-dim-v)"
                     : s.kv_dtype.has_value()     ? "K and V in a dtype of their own (--kv-dtype)"
                     : s.chunk != 0               ? "chunked attention (--chunk)"
                     : ragged_prefill(s)          ? "ragged prefill batches (--seq-lens)"
                                                  : nullptr;
  if (what)
    throw Error(std::string("measure: our kernels do not run ") + what + " (shape " + describe(s) +
                "); `hbmscope model` counts it");
}

}  // namespace

std::unique_ptr<Backend> measuring_backend(const MeasureCliOptions& mo, const std::vector<Shape>& shapes) {
  (void)parse_kernels(mo.kernels);
  for (const Shape& s : shapes) require_measurable(s);
  MeasureOptions sizes;
  apply_measure_sizes(mo, sizes);  // --copy-bytes, --flush-bytes refused before the device is opened
  auto backend = make_backend(mo.device_index);
  if (!backend->available()) throw Error(backend->unavailable_reason());
  return backend;
}

void add_measurements(Report& report, const MeasureCliOptions& mo, std::unique_ptr<Backend> backend) {
  const auto kinds = parse_kernels(mo.kernels);
  for (const Row& row : report.rows) require_measurable(row.shape);
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
