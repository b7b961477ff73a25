// The steps of a run applied to each row after it is modelled: the L2
// simulation (planned for the whole run first, from counts alone), the
// measurement, and finish_report for a run that holds its rows (the terminal
// table, a chart): rendering, files, chart, notes.
#include <algorithm>
#include <cstdio>

#include <fmt/format.h>

#include "hbmscope/device_config.hpp"
#include "hbmscope/error.hpp"
#include "hbmscope/launch_plan.hpp"
#include "hbmscope/measure.hpp"
#include "hbmscope/plot.hpp"
#include "hbmscope/roofline.hpp"
#include "hbmscope/whole_model.hpp"
#include "../report/json_check.hpp"
#include "command_io.hpp"
#include "plot_run.hpp"
#include "run_rows.hpp"
#include "sweep_commands.hpp"

namespace hbmscope::cli {

std::uint64_t L2Budget::take(const Shape& s, const L2SimConfig& c) {
  // Work is counted by the one budget the core keeps (l2_sim_work), in O(1)
  // per shape for closed forms (a few passes over the CTAs where they do not
  // run in lockstep) before any simulation runs, so a run too long is refused
  // at once. `automatic` (a device alone turned it on): shapes past the
  // budgets are left out with a note; --l2-bytes: a run over the run's budget
  // is refused, and so is one with nothing left to simulate.
  ++shapes_;
  if (refused_) return 0;
  const std::uint64_t w = std::max<std::uint64_t>(1, l2_sim_work(s, c));
  if (w > max_l2_sim_work) {  // left out and named
    if (over_cap_named_.empty()) first_over_cap_ = c;
    if (over_cap_named_.size() < 5) over_cap_named_.push_back(s);
    over_cap_masked_backward_ |= l2_sim_backward_not_in_closed_form(s);
    over_cap_fit_by_order_ |= l2_sim_fits_query_block_major(s, c);
    ++over_cap_;
    return 0;
  }
  if (total_ + w > max_l2_sim_run_work) {
    if (!automatic_) {
      refused_ = std::pair(simulated_ + 1, total_ + w);
      return 0;
    }
    ++over_budget_;
    return 0;
  }
  total_ += w;  // no overflow: each w is at most max_l2_sim_work
  ++simulated_;
  return w;
}

void L2Budget::finish() {
  if (refused_)
    throw Error("L2 simulation: the first " + std::to_string(refused_->first) + " of " + std::to_string(shapes_) +
                " shapes take " + std::to_string(refused_->second) + " work units, more than " +
                std::to_string(max_l2_sim_run_work) +
                " (about a minute) per run; simulate fewer or shorter shapes (--shard I/N splits a sweep)");
  if (over_cap_ > 0 && simulated_ == 0 && !automatic_) {  // --l2-bytes asked for a simulation that cannot run
    check_l2_sim_size(over_cap_named_.front(), *first_over_cap_);  // throws
  }
  if (over_cap_ > 0) {
    std::string named;
    for (std::size_t k = 0; k < over_cap_named_.size(); ++k) named += (k ? "; " : "") + describe(over_cap_named_[k]);
    if (over_cap_ > over_cap_named_.size()) named += "; and " + std::to_string(over_cap_ - over_cap_named_.size()) + " more";
    notes_.push_back(fmt::format("L2 simulation left out for {} shape(s) of more than {} work units (about 10 s "
                                 "each): {} ({}bigger --block-rows/--block-cols, fewer heads or shorter sequences "
                                 "simulate them{})",
                                 over_cap_, max_l2_sim_work, named,
                                 over_cap_fit_by_order_ ? "--l2-order query-block-major, " : "",
                                 over_cap_masked_backward_
                                     ? "; backward rows with a mask or a ragged batch have no closed form: their "
                                       "cost grows with the CTAs (times the slots where the L2 is too small for "
                                       "bounds to settle re-reads, or in head-major order), and past 6.3 M CTAs "
                                       "(1.5 M where the segment engine takes them) they are not simulated, "
                                       "docs/l2-backward.md, \"The backward's main loop by rows\""
                                     : ""));
  }
  if (over_budget_)
    notes_.push_back(fmt::format("L2 simulation left out for {} shape(s) past the run's budget of {} work "
                                 "units; --shard I/N splits the sweep",
                                 over_budget_, max_l2_sim_run_work));
}

L2SimPlan plan_l2_sims(const std::vector<const Shape*>& shapes, bool automatic,
                       const std::function<L2SimConfig(const Shape&)>& config_for) {
  L2Budget budget(automatic);
  L2SimPlan plan;
  plan.cost.assign(shapes.size(), 0);
  for (std::size_t i = 0; i < shapes.size(); ++i)
    if (shapes[i]) plan.cost[i] = budget.take(*shapes[i], config_for(*shapes[i]));  // a null shape: a row the caller leaves out
  budget.finish();
  plan.total = budget.total();
  plan.notes = budget.notes();
  return plan;
}

L2Plan::L2Plan(const L2Options& l2, const DeviceOptions& dev) : automatic_(!l2.l2_bytes), ctas_given_(l2.ctas_per_sm) {
  if (dev.device) spec_ = find_device(*dev.device);
  config_ = to_l2_config(l2, spec_ ? &*spec_ : nullptr);
  budget_.emplace(automatic_);
}

std::uint64_t L2Plan::take(const Shape& s) { return config_ ? budget_->take(s, config_for(s)) : 0; }

void L2Plan::finish() {
  if (finished_) return;
  budget_->finish();
  finished_ = true;
  work_ = budget_->total();
  notes_ = budget_->notes();
  budget_.emplace(automatic_);  // the next pass's, from zero
}

L2SimConfig L2Plan::config_for(const Shape& s) const {
  L2SimConfig c = *config_;
  // Without --ctas-per-sm: as many CTAs as the flash kernel this shape would
  // run fits on one SM of the device (launch_plan's ptxas figures); decode
  // rows two split-KV CTAs an SM, as FlashAttention's split heuristic assumes.
  if (!ctas_given_) c.ctas_per_sm = s.decode ? 2 : shape_ctas_per_sm(s, sm_limits_for_device(spec_ ? spec_->name : ""));
  return c;
}

void preview_l2_sim(Row& row, const L2SimConfig& c) {
  L2SimDetail d;
  d.l2_bytes = c.l2_bytes;
  d.sm_count = c.sm_count;
  d.ctas_per_sm = c.ctas_per_sm;
  d.q_o_allocate = c.q_o_allocate;
  if (row.shape.decode) {
    d.order = "split-major";
    std::vector<VariantResult> added;
    for (const auto& v : row.variants) {
      const auto dv = parse_decode_variant(v.id);
      if (!dv || *dv == DecodeVariant::floor) continue;
      added.push_back({v.id + "_l2_sim", 0, 0.0});
      d.decode.push_back({v.id, v.splits, {}, 0});
    }
    for (auto& a : added) row.variants.push_back(std::move(a));
  } else {
    // A backward row's simulation is flash's alone (add_l2_sim).
    const bool forward = row.shape.pass == Pass::fwd;
    d.order = std::string(rasterization_name(c.order));
    row.variants.push_back({"flash_l2_sim", 0, 0.0});
    if (forward) row.variants.push_back({"standard_l2_sim", 0, 0.0});
    d.has_standard = forward;
  }
  row.l2_sim = d;
}

namespace {

void require_forward(const Shape& s) {
  if (s.pass != Pass::fwd)
    throw UsageError("--pass: measure runs forward kernels only (got '" + std::string(pass_name(s.pass)) + "')");
}

// The kernels a row runs: --kernels, or without it the decode kernels on a
// decode row (the prefill ones do not take one).
std::vector<KernelKind> row_kernels(const MeasureCliOptions& mo, const Shape& s) {
  const bool default_kernels = mo.kernels == MeasureCliOptions{}.kernels;
  return parse_kernels(default_kernels && s.decode ? "decode,decode_paged" : mo.kernels);
}

}  // namespace

std::unique_ptr<Backend> measuring_backend(const MeasureCliOptions& mo, const RunShapes& shapes) {
  (void)parse_kernels(mo.kernels);
  shapes.for_each([&](const Shape& s, const std::string&, const ModelConfigRef&) {
    require_forward(s);
    // A shape no kernel of ours runs (DV != d, MLA, a KV dtype, ragged
    // prefill, chunks for flash) is refused before the device is opened.
    check_measurable(s, row_kernels(mo, s));
  });
  MeasureOptions sizes;
  apply_measure_sizes(mo, sizes);  // --copy-bytes, --flush-bytes refused before the device is opened
  auto backend = make_backend(mo.device_index);
  if (!backend->available()) throw Error(backend->unavailable_reason());
  return backend;
}

MeasureStep::MeasureStep(const MeasureCliOptions& mo, std::unique_ptr<Backend> backend)
    : kinds_(parse_kernels(mo.kernels)),
      decode_kinds_(parse_kernels("decode,decode_paged")),
      // Without --kernels, decode rows run the decode kernels (the prefill
      // ones do not take a decode row).
      default_kernels_(mo.kernels == MeasureCliOptions{}.kernels),
      counters_(mo.counters),
      backend_(std::move(backend)) {
  opt_.repeats = mo.repeats;
  opt_.warmup = mo.warmup;
  opt_.seed = mo.seed;
  opt_.validate = !mo.no_validate;
  apply_measure_sizes(mo, opt_);
  opt_.counters = mo.counters;
}

const std::vector<KernelKind>& MeasureStep::kinds_for(const Shape& s) const {
  return default_kernels_ && s.decode ? decode_kinds_ : kinds_;
}

DeviceReport MeasureStep::device() {
  DeviceReport d = measure_device(*backend_, opt_);
  ceiling_ = copy_bandwidth(d.copy);
  return d;
}

void MeasureStep::preview(Row& row) const {
  for (const KernelKind k : kinds_for(row.shape)) {
    KernelMeasurement m;
    m.kernel = std::string(kernel_name(k));
    m.variant = std::string(kernel_variant(k));
    row.measurements.push_back(std::move(m));
  }
}

void MeasureStep::measure(Row& row, std::uint64_t i, std::uint64_t n) {
  require_forward(row.shape);
  std::fprintf(stderr, "hbmscope: measuring %llu/%llu: %s\n", static_cast<unsigned long long>(i),
               static_cast<unsigned long long>(n), describe(row.shape).c_str());
  row.measurements = measure_row(*backend_, row.shape, kinds_for(row.shape), opt_, ceiling_).measurements;
  if (counters_ && counter_note_.empty())
    for (const auto& m : row.measurements)
      if (!m.counters.empty() && m.counters != "ok") counter_note_ = m.counters;
}

void MeasureStep::finish() const {
  // Counters that cannot be read: one line, once; the timings stand.
  if (!counter_note_.empty()) std::fprintf(stderr, "hbmscope: note: %s\n", counter_note_.c_str());
}

int finish_report(Report& report, const OutputOptions& out, const DeviceOptions& dev,
                  const std::vector<std::string>& notes) {
  check_device_options(dev, out);
  const PrintOptions print = to_print_options(out);
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
