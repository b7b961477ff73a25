// A run's rows made one at a time and handed to the printers as they come.
#include "run_rows.hpp"

#include <algorithm>
#include <cstdio>
#include <set>

#include "hbmscope/device_config.hpp"
#include "hbmscope/error.hpp"
#include "hbmscope/l2_sim.hpp"
#include "hbmscope/measure.hpp"
#include "hbmscope/printers.hpp"
#include "hbmscope/roofline.hpp"
#include "hbmscope/whole_model.hpp"
#include "../report/json_check.hpp"
#include "command_io.hpp"

namespace hbmscope::cli {

RunShapes::RunShapes(SweepConfig config) : config_(std::move(config)) {
  total_ = shape_count(config_);  // refuses a product too large before any shape is made
  end_ = total_;
}

void RunShapes::shard(Shard s) {
  std::tie(begin_, end_) = shard_range(total_, s);
  facts_.reset();
}

void RunShapes::flash_blocks(bool blocks_given) {
  flash_blocks_ = true;
  blocks_given_ = blocks_given;
  facts_.reset();
}

void RunShapes::for_each(const ShapeVisit& visit) const {
  std::uint64_t i = 0;
  for_each_shape(config_, [&](const Shape& s, const std::string& label, const ModelConfigRef& m) {
    const std::uint64_t at = i++;
    if (at < begin_ || at >= end_) return;
    if (flash_blocks_) visit(with_flash_blocks(s, blocks_given_), label, m);
    else visit(s, label, m);
  });
}

std::uint64_t RunShapes::total_rows() const {
  const bool models = std::any_of(config_.groups.begin(), config_.groups.end(),
                                  [](const SweepGroup& g) { return !g.axes.model_config.empty(); });
  if (!models) return total_;
  std::uint64_t rows = 0;
  for_each_shape(config_, [&](const Shape&, const std::string&, const ModelConfigRef& m) { rows += point_row_count(m); });
  return rows;
}

const ShapeFacts& RunShapes::facts() const {
  if (facts_) return *facts_;
  ShapeFacts f;
  std::set<std::pair<Pass, bool>> kinds;  // (pass, decode): a decode row has its own variants
  for_each([&](const Shape& s, const std::string&, const ModelConfigRef& m) {
    ++f.count;
    f.rows += point_row_count(m);
    f.any_decode |= s.decode;
    f.all_decode &= s.decode;
    f.any_forward_prefill |= s.pass == Pass::fwd && !s.decode;
    if (s.pass != Pass::fwd && !f.not_forward) f.not_forward = s;
    if (kinds.insert({s.pass, s.decode}).second) f.kinds.push_back(s);
  });
  if (f.count == 0) f.all_decode = false;
  facts_ = std::move(f);
  return *facts_;
}

namespace {

// Text to stdout or to the --output file, in pieces of about a megabyte.
class Output {
 public:
  explicit Output(const std::optional<std::string>& path) : path_(path) {
    if (!to_stdout(path_)) file_.emplace(*path_);
  }
  void put(std::string_view text) {
    buffer_.append(text);
    if (buffer_.size() >= (std::size_t{1} << 20)) flush();
  }
  void flush() {
    if (file_) file_->append(buffer_);
    else write_stdout(buffer_);
    buffer_.clear();
  }
  // Every byte on disk, then the file renamed into place.
  void finish() {
    if (!file_) {
      flush();
      return;
    }
    file_->write(buffer_);
    buffer_.clear();
    file_->publish();
    std::fprintf(stderr, "hbmscope: wrote %s\n", json_check::printable(*path_).c_str());
  }

 private:
  std::optional<std::string> path_;
  std::optional<AtomicFile> file_;
  std::string buffer_;
};

// The steps every row goes through, in order.
struct RowSteps {
  RowSteps(const RunSpec& s, L2Plan plan) : spec(s), l2(std::move(plan)) {}
  const RunSpec& spec;
  L2Plan l2;
  std::optional<DeviceSpec> device;
  double fraction = 1.0;
  MeasureStep* measure = nullptr;
  std::uint64_t work = 0;  // simulated by the rows made so far (work units)
  L2SimMemo memo;          // shapes simulated again (groups sharing a shape) replay the last result

  std::vector<std::string> notes;  // whole-model totals left without simulated bytes (the first few)
  std::uint64_t notes_left_out = 0;

  // The L2 simulation of a row: taken (within the run's budget) and run, or
  // previewed. A whole model's kind row is one layer's kernel (its shape), its
  // total the sum of its kinds' (docs/models.md): totals are not simulated.
  void simulate(Row& row, bool preview) {
    if (row.model_layers && row.model_layers->kind == total_kind) return;
    const std::uint64_t w = l2.take(row.shape);
    if (w == 0) return;
    if (preview) {
      preview_l2_sim(row, l2.config_for(row.shape));
    } else {
      add_layers_l2_sim(row, l2.config_for(row.shape), &memo);
      work += w;
    }
  }

  // The first pass of a run that holds its rows: the L2 simulation planned only.
  void plan(const Shape& s, const ModelConfigRef& model) {
    if (!l2.on()) return;
    if (!model) {
      (void)l2.take(s);
      return;
    }
    for (const Row& r : whole_model_rows(*model, s, spec.model))
      if (r.model_layers->kind != total_kind) (void)l2.take(r.shape);
  }

  // The rows of point s: one, or a whole model's (a row per kind of layer and
  // the total; not measured). preview: simulated and measured variants named,
  // not computed (for the printers' layout and the checks of a first pass).
  std::vector<Row> make(const Shape& s, const std::string& label, const ModelConfigRef& model, bool preview,
                        std::uint64_t i, std::uint64_t n) {
    std::vector<Row> rows;
    if (model) {
      rows = whole_model_rows(*model, s, spec.model);
      if (l2.on()) {
        for (Row& r : rows) simulate(r, preview);
        for (auto& note : sum_whole_model_l2_sims(rows)) {
          if (preview) continue;
          if (notes.size() < 5) notes.push_back(std::move(note));
          else ++notes_left_out;
        }
      }
    } else {
      rows.push_back(model_row(s, spec.model));
      Row& row = rows.back();
      if (l2.on()) simulate(row, preview);
      if (measure) {
        if (preview) measure->preview(row);
        else measure->measure(row, i, n);
      }
    }
    for (Row& r : rows) r.label = label;
    if (device) {
      for (Row& r : rows) add_predictions(r, *device, fraction);
      if (model) {  // a total's times are the sums of its kinds'
        Report step;
        step.rows = std::move(rows);
        sum_whole_model_predictions(step);
        rows = std::move(step.rows);
      }
    }
    return rows;
  }

  // The run's notes: the L2 simulation's, then the whole models'.
  std::vector<std::string> all_notes() const {
    std::vector<std::string> out = l2.notes();
    out.insert(out.end(), notes.begin(), notes.end());
    if (notes_left_out) out.push_back("and " + std::to_string(notes_left_out) + " more such total(s)");
    return out;
  }
};

}  // namespace

int run_rows(const RunShapes& shapes, RunSpec spec) {
  check_device_options(spec.dev, spec.out);
  const PrintOptions print = checked_print_options(spec.out, spec.dev);
  const std::uint64_t n = shapes.size(), rows = shapes.facts().rows;
  // The terminal table (column widths) and a chart need every row first.
  const bool held = !streams_rows(print.format) || spec.dev.plot;
  if (held && rows > max_held_rows)
    throw Error(std::string(spec.dev.plot ? "--plot: a chart" : "the table") + " needs every row before it is drawn: " +
                std::to_string(rows) + " rows, more than " + std::to_string(max_held_rows) +
                (spec.dev.plot ? "; plot fewer shapes, or split the run with --shard I/N"
                               : "; use --format csv, json or md (printed as the rows come), or --shard I/N"));

  RowSteps steps(spec, L2Plan(spec.l2, spec.dev));
  Report head;
  head.command = spec.command;
  head.shard = spec.shard;
  if (spec.dev.device) {
    steps.device = find_device(*spec.dev.device);
    validate(*steps.device);
    steps.fraction = spec.dev.bandwidth_fraction.value_or(1.0);
    head.roofline = RooflineInfo{*steps.device, steps.fraction};
  }
  std::optional<MeasureStep> measure;
  if (spec.measure) measure.emplace(*spec.measure, std::move(spec.backend));

  // First pass, nothing kept: the L2 simulation planned, and (for the rows
  // printed as they come) every row modelled, so that a row the model refuses
  // stops the run before anything is printed, and the printers' layout.
  RowsLayout layout;
  std::vector<std::string> present;  // variant ids before --variants keeps some
  if (held) {
    shapes.for_each([&](const Shape& s, const std::string&, const ModelConfigRef& m) { steps.plan(s, m); });
  } else {
    steps.measure = measure ? &*measure : nullptr;
    shapes.for_each([&](const Shape& s, const std::string& label, const ModelConfigRef& m) {
      for (Row& row : steps.make(s, label, m, true, 0, n)) {
        for (const auto& v : row.variants)
          if (std::find(present.begin(), present.end(), v.id) == present.end()) present.push_back(v.id);
        keep_listed_variants(row, spec.variants);
        layout.add(row);
      }
    });
    if (!spec.variants.empty() && n > 0) check_listed_variants(present, spec.variants, spec.variants_where);
  }
  steps.l2.finish();

  if (measure) {
    head.device = measure->device();
    steps.measure = &*measure;
  }
  // The progress of the long passes: simulated work where the L2 simulation
  // is most of it (about 2^30 work units take a second: shorter runs show no
  // bar), else points for a sweep.
  const std::uint64_t sim_work = steps.l2.work();
  const bool sim_heavy =
      sim_work >= (std::uint64_t{1} << 30) || (spec.progress == ProgressMode::always && sim_work > 0);
  std::optional<ProgressBar> bar;
  if (sim_heavy) bar.emplace(stderr, spec.progress, "hbmscope L2 simulation", std::size_t{1} << 30, 1);
  else if (spec.command == "sweep") bar.emplace(stderr, spec.progress, "hbmscope sweep");
  std::uint64_t done = 0;
  const auto progress = [&] {
    ++done;
    if (!bar) return;
    if (sim_heavy) bar->update(steps.work, sim_work);
    else bar->update(done, n);
  };

  if (held) {
    head.rows.reserve(rows);
    shapes.for_each([&](const Shape& s, const std::string& label, const ModelConfigRef& m) {
      for (Row& row : steps.make(s, label, m, false, done + 1, n)) head.rows.push_back(std::move(row));
      progress();
    });
    if (bar) bar->finish();
    if (!spec.variants.empty()) keep_variants(head.rows, spec.variants, spec.variants_where);
    if (measure) measure->finish();
    return finish_report(head, spec.out, spec.dev, steps.all_notes());
  }

  Output out(spec.out.output);
  auto printer = make_row_printer(print, [&out](std::string_view t) { out.put(t); });
  printer->begin(head, layout);
  shapes.for_each([&](const Shape& s, const std::string& label, const ModelConfigRef& m) {
    std::vector<Row> made = steps.make(s, label, m, false, done + 1, n);
    progress();
    for (Row& row : made) {
      keep_listed_variants(row, spec.variants);
      printer->row(row);
    }
  });
  printer->end();
  if (bar) bar->finish();
  out.finish();
  if (measure) measure->finish();
  // Notes last, so that a run that fails prints its error alone.
  for (const auto& note : steps.all_notes()) std::fprintf(stderr, "hbmscope: note: %s\n", note.c_str());
  return 0;
}

}  // namespace hbmscope::cli
