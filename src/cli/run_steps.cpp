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
#include "../report/json_check.hpp"
#include "command_io.hpp"
#include "plot_run.hpp"
#include "run_rows.hpp"
#include "sweep_commands.hpp"

namespace hbmscope::cli {

L2Plan::L2Plan(const L2Options& l2, const DeviceOptions& dev) : automatic_(!l2.l2_bytes), ctas_given_(l2.ctas_per_sm) {
  if (dev.device) spec_ = find_device(*dev.device);
  config_ = to_l2_config(l2, spec_ ? &*spec_ : nullptr);
}

bool L2Plan::take(const Shape& s) {
  if (!config_ || s.pass != Pass::fwd) return false;  // the simulation models the forward pass
  if (!finished_) ++forward_;
  if (refused_) return false;
  const std::uint64_t largest = l2_sim_accesses(s);
  if (automatic_ && largest > auto_l2_sim_accesses) {
    ++too_large_;
    return false;
  }
  // With --l2-bytes a shape over the per-shape cap is left out and named;
  // the run is refused only when no shape is left to simulate.
  if (!automatic_ && largest > max_l2_sim_accesses) {
    if (over_cap_named_.size() < 5) over_cap_named_.push_back(s);
    ++over_cap_;
    return false;
  }
  const std::uint64_t c = flash_l2_sim_accesses(s) + standard_l2_sim_accesses(s);
  if (automatic_ && total_ + c > max_l2_sim_run_accesses) {
    ++over_budget_;
    return false;
  }
  total_ += c;  // no overflow: each c is at most 2 x max_l2_sim_accesses
  ++shapes_;
  if (!automatic_ && total_ > max_l2_sim_run_accesses) {
    refused_ = std::pair(shapes_, total_);
    return false;
  }
  return true;
}

void L2Plan::finish() {
  if (finished_) return;
  finished_ = true;
  if (refused_)
    throw Error("L2 simulation: the first " + std::to_string(refused_->first) + " of " + std::to_string(forward_) +
                " shapes already make " + std::to_string(refused_->second) + " simulated accesses, more than " +
                std::to_string(max_l2_sim_run_accesses) +
                " per run; simulate fewer or shorter shapes (--shard I/N splits a sweep) or use "
                "bigger --block-rows/--block-cols");
  if (over_cap_ > 0 && shapes_ == 0) check_l2_sim_size(over_cap_named_.front());  // throws
  if (too_large_)
    notes_.push_back(fmt::format("L2 simulation left out for {} shape(s) of more than {} tile accesses; "
                                 "--l2-bytes runs it on every shape up to {}",
                                 too_large_, auto_l2_sim_accesses, max_l2_sim_accesses));
  if (over_cap_ > 0) {
    std::string named;
    for (std::size_t k = 0; k < over_cap_named_.size(); ++k) named += (k ? "; " : "") + describe(over_cap_named_[k]);
    if (over_cap_ > over_cap_named_.size()) named += "; and " + std::to_string(over_cap_ - over_cap_named_.size()) + " more";
    notes_.push_back(fmt::format("L2 simulation left out for {} shape(s) of more than {} tile accesses: {} "
                                 "(bigger --block-rows/--block-cols or shorter sequences simulate them)",
                                 over_cap_, max_l2_sim_accesses, named));
  }
  if (over_budget_)
    notes_.push_back(fmt::format("L2 simulation left out for {} shape(s) past the run's budget of {} "
                                 "simulated accesses; --shard I/N splits the sweep",
                                 over_budget_, max_l2_sim_run_accesses));
  accesses_ = total_;
  restart();
}

void L2Plan::restart() {
  total_ = 0;
  shapes_ = too_large_ = over_budget_ = over_cap_ = 0;
  over_cap_named_.clear();
}

L2SimConfig L2Plan::config_for(const Shape& s) const {
  L2SimConfig c = *config_;
  // Without --ctas-per-sm: as many CTAs as the flash kernel this shape would
  // run fits on one SM of the device (launch_plan's ptxas figures); decode
  // rows two split-KV CTAs an SM, as FlashAttention's split heuristic assumes.
  if (!ctas_given_) c.ctas_per_sm = s.decode ? 2 : shape_ctas_per_sm(s, sm_limits_for_device(spec_ ? spec_->name : ""));
  return c;
}

std::uint64_t L2Plan::cost(const Shape& s) { return flash_l2_sim_accesses(s) + standard_l2_sim_accesses(s); }

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
    d.order = std::string(rasterization_name(c.order));
    row.variants.push_back({"flash_l2_sim", 0, 0.0});
    row.variants.push_back({"standard_l2_sim", 0, 0.0});
  }
  row.l2_sim = d;
}

namespace {

void require_forward(const Shape& s) {
  if (s.pass != Pass::fwd)
    throw UsageError("--pass: measure runs forward kernels only (got '" + std::string(pass_name(s.pass)) + "')");
}

}  // namespace

std::unique_ptr<Backend> measuring_backend(const MeasureCliOptions& mo, const ShapeFacts& shapes) {
  (void)parse_kernels(mo.kernels);
  if (shapes.not_forward) require_forward(*shapes.not_forward);
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

}  // namespace hbmscope::cli
