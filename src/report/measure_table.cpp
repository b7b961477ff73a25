// The measurement table (`measure`, `sweep --measure`): one line per kernel
// run, under the measured device's line, with its legend.
#include <cstdio>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "printers_internal.hpp"

namespace hbmscope::printing {

bool has_measurements(const Report& rep) {
  for (const Row& r : rep.rows)
    if (!r.measurements.empty()) return true;
  return false;
}

namespace {

std::string g3(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

std::string device_line(const Report& rep) {
  if (!rep.device) return "Measured";
  const DeviceInfo& i = rep.device->info;
  std::string t = "Measured on " + i.name + " (sm_" + std::to_string(i.cc_major) + std::to_string(i.cc_minor) +
                  ", " + std::to_string(i.sm_count) + " SMs, L2 " + format_bytes(i.l2_bytes, Units::decimal) +
                  ", peak " + format_bandwidth(i.peak_bandwidth) + " from memory clock x bus width";
  const auto& c = rep.device->copy;
  if (c.status == MeasureStatus::ok)
    t += ", device-to-device copy " + format_bandwidth(c.bandwidth) + " counting reads + writes";
  else
    t += ", copy probe " + status_name(c.status) + ": " + c.reason;
  return t + "; BF16, L2 flushed before each of the timed runs)";
}

struct MeasureRow {
  const Row* row;
  const KernelMeasurement* m;
};

std::vector<std::pair<std::string, std::function<std::string(const MeasureRow&)>>> measure_columns() {
  using C = std::pair<std::string, std::function<std::string(const MeasureRow&)>>;
  auto ok = [](const MeasureRow& r) { return r.m->status == MeasureStatus::ok; };
  auto timed = [ok](const MeasureRow& r) { return ok(r) && r.m->timing.median > 0; };
  std::vector<C> cols;
  cols.push_back({"Shape", [](const MeasureRow& r) {
                    std::string t = seq_label(r.row->shape);
                    const Shape& s = r.row->shape;
                    if (s.batch != 1 || s.heads != 1) t += " b" + std::to_string(s.batch) + " h" + heads_label(s);
                    if (s.causal) t += " causal";
                    return t;
                  }});
  cols.push_back({"Kernel", [](const MeasureRow& r) {
                    std::string t = r.m->kernel;
                    // Appended, not " " + ...: GCC 12 warns wrongly on that here (-Wrestrict).
                    if (r.m->block_rows) t.append(" ").append(std::to_string(r.m->block_rows) + "×" + std::to_string(r.m->block_cols));
                    if (r.m->warps) t.append(" ").append(std::to_string(r.m->warps) + "w");
                    if (r.m->splits) t += ", " + std::to_string(r.m->splits) + (r.m->splits == 1 ? " split" : " splits");
                    if (r.m->page_size) t += ", page " + std::to_string(r.m->page_size);
                    return t;
                  }});
  cols.push_back({"Status", [](const MeasureRow& r) { return status_name(r.m->status); }});
  cols.push_back({"Time (median)", [timed](const MeasureRow& r) { return timed(r) ? format_seconds(r.m->timing.median) : "-"; }});
  cols.push_back({"Spread", [timed](const MeasureRow& r) {
                    return timed(r) ? g3(100.0 * r.m->timing.rel_spread) + " %" : std::string("-");
                  }});
  cols.push_back({"Warm", [timed](const MeasureRow& r) { return timed(r) ? format_seconds(r.m->timing.warm_median) : "-"; }});
  cols.push_back({"Model bytes", [](const MeasureRow& r) { return format_bytes(r.m->model_bytes, Units::decimal); }});
  // "(L2)": the output fits in the L2, so the figure is not an HBM bandwidth.
  cols.push_back({"Bandwidth", [timed](const MeasureRow& r) {
                    return timed(r) ? format_bandwidth(r.m->bandwidth) + (r.m->output_fits_l2 ? " (L2)" : "") : "-";
                  }});
  cols.push_back({"% of copy", [timed](const MeasureRow& r) {
                    return timed(r) && r.m->copy_fraction > 0 ? g3(100.0 * r.m->copy_fraction) + " %" : std::string("-");
                  }});
  cols.push_back({"TFLOP/s", [timed](const MeasureRow& r) {
                    // tflops, not flops, which a report read back does not hold: 0 for the same kernels.
                    return timed(r) && r.m->tflops > 0 ? g3(r.m->tflops) : std::string("-");
                  }});
  cols.push_back({"Predicted", [timed](const MeasureRow& r) {
                    return timed(r) ? format_seconds(r.m->predicted_copy) : std::string("-");
                  }});
  cols.push_back({"Measured/predicted", [timed](const MeasureRow& r) {
                    return timed(r) && r.m->measured_over_predicted > 0 ? g3(r.m->measured_over_predicted) + "×"
                                                                        : std::string("-");
                  }});
  cols.push_back({"Error", [ok](const MeasureRow& r) {
                    if (!ok(r)) return r.m->reason;
                    return r.m->validated_on.empty() ? std::string("not validated") : g3(r.m->rel_error);
                  }});
  return cols;
}

std::vector<MeasureRow> measure_rows(const Report& rep) {
  std::vector<MeasureRow> out;
  for (const Row& r : rep.rows)
    for (const auto& m : r.measurements) out.push_back({&r, &m});
  return out;
}

const char* const measure_legend =
    "Time: median of the L2-flushed runs; Spread: (max - min) / median; Warm: back-to-back launches, no flush.\n"
    "Bandwidth: the model's bytes for the kernel's variant / median time. Predicted: model bytes / measured\n"
    "copy bandwidth. Error: ||out - ref|| / ||ref|| against the CPU reference (pass < 1e-2).\n";

}  // namespace

// The measurement grid: shape columns left, figures right, the reason (last) left.
std::string render_measure_grid(const Report& rep, Format format) {
  auto cols = measure_columns();
  // `measure --counters`: the DRAM bytes the GPU counted, before the last (Error) column.
  bool counted = false;
  for (const auto& r : measure_rows(rep)) counted = counted || r.m->dram_read_bytes.has_value();
  if (counted) {
    const auto at = cols.end() - 1;
    cols.insert(at, {{"DRAM read (counted)", [](const MeasureRow& r) {
                        return r.m->dram_read_bytes ? format_bytes(*r.m->dram_read_bytes, Units::decimal) : "-";
                      }},
                     {"DRAM write (counted)", [](const MeasureRow& r) {
                        return r.m->dram_write_bytes ? format_bytes(*r.m->dram_write_bytes, Units::decimal) : "-";
                      }}});
  }
  std::vector<std::string> head;
  std::vector<bool> right;
  for (std::size_t c = 0; c < cols.size(); ++c) {
    head.push_back(cols[c].first);
    right.push_back(c >= 3 && c + 1 < cols.size());
  }
  std::vector<std::vector<std::string>> cells;
  for (const auto& r : measure_rows(rep)) {
    auto& line = cells.emplace_back();
    for (const auto& c : cols) line.push_back(c.second(r));
  }
  const std::string grid = render_grid(head, cells, right, format);
  // Appended, not "\n" + ...: GCC 12 warns wrongly on that here (-Wrestrict).
  std::string out = format == Format::md ? "\n**" : "\n";
  out += device_line(rep);
  if (format == Format::md) return out + "**\n\n" + grid;
  return out + "\n\n" + grid + "\n" + measure_legend;
}

}  // namespace hbmscope::printing
