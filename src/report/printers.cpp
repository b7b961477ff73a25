#include "hbmscope/printers.hpp"
#include "hbmscope/csv.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include "hbmscope/error.hpp"
#include "hbmscope/json_report.hpp"

namespace hbmscope {

namespace {

// Display width of UTF-8 text: one column per code point ("×" is one).
std::size_t width(std::string_view s) {
  std::size_t w = 0;
  for (unsigned char c : s)
    if ((c & 0xC0) != 0x80) ++w;
  return w;
}

struct Column {
  std::string header;
  bool right = true;
  std::function<std::string(const Row&)> cell;
  std::string group{};         // "" for the shape columns, else one of column_groups()
  std::string short_header{};  // used when the group's table would be too wide; "" = header
};

std::string upper(std::string_view s) {
  std::string r(s);
  for (char& c : r) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return r;
}

std::string seq_label(const Shape& s) {
  if (s.decode)  // "1/≤131072 × 128": Nq new tokens against the (longest) context
    return std::to_string(s.seq_q) + "/" + (ragged(s) ? "≤" : "") + std::to_string(s.seq_kv) + " × " +
           std::to_string(s.head_dim);
  std::string r = std::to_string(s.seq_q);
  if (s.seq_kv != s.seq_q) {
    r += '/';
    r += std::to_string(s.seq_kv);
  }
  r += " × ";
  r += std::to_string(s.head_dim);
  return r;
}

std::string heads_label(const Shape& s) {
  if (s.kv_heads == s.heads) return std::to_string(s.heads);
  return std::to_string(s.heads) + "/" + std::to_string(s.kv_heads);
}

std::string blocks_label(const Shape& s) {
  return std::to_string(s.block_rows) + "×" + std::to_string(s.block_cols);
}

std::string pass_title(Pass p) {
  switch (p) {
    case Pass::fwd: return "forward pass";
    case Pass::bwd: return "backward pass";
    case Pass::fwdbwd: return "forward + backward pass";
  }
  return {};
}

std::string pass_label(Pass p) {
  switch (p) {
    case Pass::fwd: return "forward";
    case Pass::bwd: return "backward";
    case Pass::fwdbwd: return "fwd + bwd";
  }
  return {};
}

// Which shape fields differ between rows: those get a column, the rest go in
// the title line.
struct Varying {
  bool batch = false, heads = false, dtype = false, blocks = false, causal = false;
  bool pass = false;
};

Varying varying(const std::vector<Row>& rows) {
  Varying v;
  if (rows.empty()) return v;
  const Shape& a = rows.front().shape;
  for (const Row& r : rows) {
    const Shape& b = r.shape;
    v.batch |= b.batch != a.batch;
    v.heads |= b.heads != a.heads || b.kv_heads != a.kv_heads;
    v.dtype |= b.dtype != a.dtype;
    v.blocks |= b.block_rows != a.block_rows || b.block_cols != a.block_cols;
    v.causal |= b.causal != a.causal;
    v.pass |= b.pass != a.pass;
  }
  return v;
}

// A second title line for decode rows: what they count and where they sit on the roofline.
std::string decode_title(const Report& rep) {
  const Row* first = nullptr;
  bool mixed = false;
  for (const Row& r : rep.rows) {
    if (!r.shape.decode) continue;
    if (!first) first = &r;
    mixed |= r.decode_sm_count != first->decode_sm_count || r.shape.page_size != first->shape.page_size;
  }
  if (!first) return {};
  std::string t = "\nDecode rows: Nq new tokens per sequence against its KV cache (Nq/longest context × d); splits ";
  t += first->shape.splits != 0 ? std::string("as given (--splits)")
                                : "from FlashAttention's heuristic on " +
                                      (mixed ? std::string("each row's") : std::to_string(first->decode_sm_count)) +
                                      " SMs";
  if (!mixed) t += "; pages of " + std::to_string(first->shape.page_size) + " tokens";
  if (rep.roofline) {
    double worst = 0;  // the highest decode intensity against its ridge
    for (const Row& r : rep.rows)
      if (const auto* f = r.shape.decode ? r.variant("decode_floor") : nullptr; f && r.ridge_point > 0)
        worst = std::max(worst, f->intensity / r.ridge_point);
    if (worst > 0 && worst < 1) {
      char buf[96];
      std::snprintf(buf, sizeof buf, "; at most 1/%.0f of the ridge point: memory-bound", 1.0 / worst);
      t += buf;
    }
  }
  return t;
}

std::string title(const Report& rep, const Varying& v) {
  if (rep.rows.empty()) return "No shapes.";
  const Shape& s = rep.rows.front().shape;
  std::string who;
  if (!v.batch && !v.heads && s.batch == 1 && s.heads == 1) {
    who = "One head";
  } else {
    std::vector<std::string> parts;
    if (!v.batch) parts.push_back("batch " + std::to_string(s.batch));
    if (!v.heads) {
      std::string h = std::to_string(s.heads) + (s.heads == 1 ? " head" : " heads");
      if (s.kv_heads != s.heads) h += " (" + std::to_string(s.kv_heads) + " kv-heads)";
      parts.push_back(h);
    }
    if (parts.empty()) parts.push_back("Several shapes");
    for (std::size_t i = 0; i < parts.size(); ++i) who += (i ? ", " : "") + parts[i];
    who[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(who[0])));
  }
  const bool all_decode = std::all_of(rep.rows.begin(), rep.rows.end(), [](const Row& r) { return r.shape.decode; });
  std::string t = who + ", " + (all_decode ? std::string("one decode step") : v.pass ? std::string("by pass") : pass_title(s.pass)) + " (model";
  if (!v.dtype) t += ", " + upper(dtype_name(s.dtype));
  if (all_decode && !v.blocks) {
    t += ", key blocks of " + std::to_string(s.block_cols);
  } else if (!v.blocks) {
    t += ", blocks of " + std::to_string(s.block_rows);
    if (s.block_cols != s.block_rows) t += " × " + std::to_string(s.block_cols);
  }
  if (!v.causal && s.causal) t += ", causal";
  t += ")";
  if (const auto& l2 = rep.rows.front().l2_sim)
    t += "; simulated L2 of " + format_bytes(l2->l2_bytes, Units::binary) + ", " +
         std::to_string(l2->sm_count) + " SMs × " + std::to_string(l2->ctas_per_sm) + " CTAs, " +
         l2->order + (l2->q_o_allocate ? "" : ", Q and O bypass L2");
  if (rep.roofline) {
    const DeviceSpec& d = rep.roofline->device;
    const double fraction = rep.roofline->bandwidth_fraction;
    t += "\nRoofline on " + d.name + ": " + format_bandwidth(d.bandwidth);
    if (fraction != 1.0) {
      char f[32];
      std::snprintf(f, sizeof f, "%g", fraction);
      t += " × " + std::string(f) + " = " + format_bandwidth(d.bandwidth * fraction);
    }
    if (!v.dtype) {
      const double p = peak_flops(d, s.dtype);
      t += ", " + std::string(dtype_name(s.dtype)) + " " + format_flop_rate(p) + " dense, ridge " +
           format_intensity(rep.rows.front().ridge_point);
    }
    t += "; time = max(bytes / bandwidth, FLOPs / peak)";
  }
  return t + decode_title(rep);
}


bool any_l2_sim(const Report& rep) {
  for (const Row& r : rep.rows)
    if (r.l2_sim) return true;
  return false;
}

std::string format_percent(double fraction) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f %%", 100.0 * fraction);
  return buf;
}

std::string format_count(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

bool any_decode(const Report& rep) {
  for (const Row& r : rep.rows)
    if (r.shape.decode) return true;
  return false;
}

// The decode rows' columns: context, splits per variant, KV bytes beside each
// total, and how far below the ridge point decode sits.
void add_decode_columns(std::vector<Column>& cols, const Report& rep, const std::vector<std::string>& ids,
                        const PrintOptions& opt) {
  if (!any_decode(rep)) return;
  cols.push_back({"Context tokens", true, [](const Row& r) {
                    if (!r.shape.decode) return std::string("-");
                    std::string t = std::to_string(total_context(r.shape));
                    if (ragged(r.shape)) {
                      const SeqList& l = r.shape.context_lengths;
                      t += " (" + std::to_string(l.min_kv()) + ".." + std::to_string(l.max_kv()) + ")";
                    }
                    return t;
                  }});
  bool pages_vary = false;
  const Row* first = nullptr;
  for (const Row& r : rep.rows)
    if (r.shape.decode) {
      if (!first) first = &r;
      pages_vary |= r.shape.page_size != first->shape.page_size;
    }
  if (pages_vary)
    cols.push_back({"Page", true, [](const Row& r) {
                      return r.shape.decode ? std::to_string(r.shape.page_size) : std::string("-");
                    }});
  for (const auto& id : ids) {
    const auto v = parse_decode_variant(id);
    if (!v || *v == DecodeVariant::floor) continue;
    cols.push_back({"Splits: " + id, true, [id](const Row& r) {
                      const auto* var = r.variant(id);
                      return var && var->decode ? std::to_string(var->splits) : std::string("-");
                    }, "bytes"});
  }
  for (const auto& id : ids) {
    if (!parse_decode_variant(id)) continue;
    cols.push_back({"KV: " + id, true, [id, units = opt.units](const Row& r) {
                      const auto* var = r.variant(id);
                      return var && var->decode ? format_bytes(var->decode->kv, units) : std::string("-");
                    }, "bytes"});
  }
  for (const auto& id : ids) {
    if (id.rfind("decode_", 0) != 0 || id.size() < 7 || id.substr(id.size() - 7) != "_l2_sim") continue;
    const std::string base = id.substr(0, id.size() - 7);
    cols.push_back({"L2 hit: " + base, true, [base](const Row& r) {
                      if (r.l2_sim)
                        for (const auto& x : r.l2_sim->decode)
                          if (x.id == base) return format_percent(x.sim.hit_rate);
                      return std::string("-");
                    }, "l2"});
  }
  if (std::find(ids.begin(), ids.end(), "decode_floor") == ids.end()) return;
  // The floor's intensity is the best any decode kernel can reach.
  cols.push_back({"FLOP/B (floor)", true, [](const Row& r) {
                    const auto* var = r.shape.decode ? r.variant("decode_floor") : nullptr;
                    if (!var) return std::string("-");
                    std::string t = format_intensity(var->intensity);
                    if (r.ridge_point > 0 && var->intensity > 0) {
                      char buf[64];
                      std::snprintf(buf, sizeof buf, " = ridge/%.0f", r.ridge_point / var->intensity);
                      t += buf;
                    }
                    return t;
                  }, "bytes"});
}

// The footnote mark of a time whose variant does not fit in device memory.
constexpr const char* no_fit_mark = " †";

bool any_no_fit(const Report& rep) {
  for (const Row& r : rep.rows)
    for (const auto& v : r.variants)
      if (v.prediction && !v.prediction->fits_in_memory) return true;
  return false;
}

std::vector<Column> model_columns(const Report& rep, const PrintOptions& opt) {
  const Varying v = varying(rep.rows);
  std::vector<Column> cols;
  bool labels = false;
  for (const Row& r : rep.rows) labels |= !r.label.empty();
  if (labels) cols.push_back({"Group", false, [](const Row& r) { return r.label; }});
  cols.push_back({"Sequence × head dim", false, [](const Row& r) { return seq_label(r.shape); }});
  if (v.batch)
    cols.push_back({"Batch", true, [](const Row& r) { return std::to_string(r.shape.batch); }});
  if (v.heads) cols.push_back({"Heads/KV", true, [](const Row& r) { return heads_label(r.shape); }});
  if (v.dtype)
    cols.push_back({"Dtype", false, [](const Row& r) { return std::string(dtype_name(r.shape.dtype)); }});
  if (v.blocks) cols.push_back({"Br×Bc", true, [](const Row& r) { return blocks_label(r.shape); }});
  if (v.causal)
    cols.push_back({"Causal", false, [](const Row& r) { return std::string(r.shape.causal ? "yes" : "no"); }});
  if (v.pass) cols.push_back({"Pass", false, [](const Row& r) { return pass_label(r.shape.pass); }});
  const auto ids = variant_ids(rep);
  for (const auto& id : ids)
    cols.push_back({variant_label(id), true,
                    [id, units = opt.units](const Row& r) {
                      const auto* var = r.variant(id);
                      return var ? format_bytes(var->bytes, units) : std::string("-");
                    },
                    "bytes", id});
  // The simulation's detail columns go with its variants (a --variants filter may drop one).
  const auto shown = [&](const char* id) { return std::find(ids.begin(), ids.end(), id) != ids.end(); };
  if (any_l2_sim(rep) && shown("flash_l2_sim")) {
    cols.push_back({"L2 hit (flash)", true, [](const Row& r) {
                      return r.l2_sim ? format_percent(r.l2_sim->flash.hit_rate) : std::string("-");
                    }, "l2"});
    cols.push_back({"Heads/wave", true, [](const Row& r) {
                      return r.l2_sim ? format_count(r.l2_sim->heads_per_wave) : std::string("-");
                    }, "l2"});
    cols.push_back({"L2 for floor", true, [units = opt.units](const Row& r) {
                      return r.l2_sim ? format_bytes(r.l2_sim->flash.l2_bytes_to_min, units)
                                      : std::string("-");
                    }, "l2"});
  }
  if (any_l2_sim(rep) && shown("standard_l2_sim"))
    cols.push_back({"L2 hit (standard)", true, [](const Row& r) {
                      return r.l2_sim ? format_percent(r.l2_sim->standard.hit_rate) : std::string("-");
                    }, "l2"});
  add_decode_columns(cols, rep, ids, opt);
  if (rep.roofline)
    for (const auto& id : ids)
      cols.push_back({"Time: " + id, true,
                      [id](const Row& r) {
                        const auto* var = r.variant(id);
                        if (!var || !var->prediction) return std::string("-");
                        return format_seconds(var->prediction->seconds) + " (" +
                               std::string(bound_name(var->prediction->bound)) + ")" +
                               (var->prediction->fits_in_memory ? "" : no_fit_mark);
                      },
                      "time", id});
  cols.push_back({"FLOPs", true, [](const Row& r) { return format_flops(r.flops); }, "flops"});
  for (const auto& id : ids)
    cols.push_back({"Intensity: " + id, true,
                    [id](const Row& r) {
                      const auto* var = r.variant(id);
                      return var ? format_intensity(var->intensity) : std::string("-");
                    },
                    "flops", id});
  if (rep.roofline)
    cols.push_back({"Ridge", true, [](const Row& r) { return format_intensity(r.ridge_point); }, "flops"});
  // The groups asked for: --columns, else every group with --wide, else all but flops.
  std::vector<std::string> want = opt.columns;
  if (want.empty()) want = opt.wide ? column_groups() : std::vector<std::string>{"bytes", "l2", "time"};
  std::vector<Column> kept;
  for (auto& c : cols)
    if (c.group.empty() || std::find(want.begin(), want.end(), c.group) != want.end()) kept.push_back(std::move(c));
  return kept;
}

std::string pad(const std::string& s, std::size_t w, bool right) {
  const std::size_t n = width(s);
  const std::string fill(w > n ? w - n : 0, ' ');
  return right ? fill + s : s + fill;
}

// --- measurements (`measure`) -------------------------------------------------

bool has_measurements(const Report& rep) {
  for (const Row& r : rep.rows)
    if (!r.measurements.empty()) return true;
  return false;
}

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
                    if (r.m->block_rows) t += " " + std::to_string(r.m->block_rows) + "×" + std::to_string(r.m->block_cols);
                    if (r.m->warps) t += " " + std::to_string(r.m->warps) + "w";
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
                    return timed(r) && r.m->flops > 0 ? g3(r.m->tflops) : std::string("-");
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
  if (format == Format::md) return "\n**" + device_line(rep) + "**\n\n" + grid;
  return "\n" + device_line(rep) + "\n\n" + grid + "\n" + measure_legend;
}

std::size_t grid_width(const std::vector<std::string>& head, const std::vector<std::vector<std::string>>& rows) {
  std::size_t total = 0;
  for (std::size_t c = 0; c < head.size(); ++c) {
    std::size_t w = width(head[c]);
    for (const auto& r : rows) w = std::max(w, width(r[c]));
    total += w + (c ? 3 : 0);
  }
  return total;
}

// The caption of a group's table when a wide table is split.
std::string group_caption(const Report& rep, const std::string& group) {
  if (group == "bytes") return "HBM bytes by variant";
  if (group == "l2") return "L2 simulation";
  if (group == "time") return "Predicted time" + (rep.roofline ? " on " + rep.roofline->device.name : std::string());
  return "FLOPs and arithmetic intensity";
}

// The table(s) of a report: one grid when it fits opt.max_width (or with
// --wide, or in Markdown); otherwise one grid per column group, each with the
// shape columns, using short headers (variant ids) when a group's long ones do
// not fit, and a group still too wide spread over several grids.
std::string render_model_grids(const Report& rep, const PrintOptions& opt) {
  const auto cols = model_columns(rep, opt);
  std::vector<std::vector<std::string>> cells;
  for (const Row& r : rep.rows) {
    auto& line = cells.emplace_back();
    for (const auto& c : cols) line.push_back(c.cell(r));
  }
  const auto grid = [&](const std::vector<std::size_t>& idx, bool short_headers) {
    std::vector<std::string> head;
    std::vector<bool> right;
    std::vector<std::vector<std::string>> rows(cells.size());
    for (std::size_t i : idx) {
      head.push_back(short_headers && !cols[i].short_header.empty() ? cols[i].short_header : cols[i].header);
      right.push_back(cols[i].right);
      for (std::size_t r = 0; r < cells.size(); ++r) rows[r].push_back(cells[r][i]);
    }
    return std::tuple(head, right, rows);
  };
  const auto width_of = [&](const std::vector<std::size_t>& idx, bool short_headers) {
    const auto [h, rt, rows] = grid(idx, short_headers);
    return grid_width(h, rows);
  };
  const auto render_idx = [&](const std::vector<std::size_t>& idx, bool short_headers) {
    const auto [h, rt, rows] = grid(idx, short_headers);
    return render_grid(h, rows, rt, opt.format);
  };
  std::vector<std::size_t> all, keys;
  for (std::size_t i = 0; i < cols.size(); ++i) {
    all.push_back(i);
    if (cols[i].group.empty()) keys.push_back(i);
  }
  const bool split = opt.format == Format::table && !opt.wide && opt.max_width > 0 &&
                     width_of(all, false) > opt.max_width;
  if (!split) return render_idx(all, false);
  std::string out;
  for (const auto& g : column_groups()) {
    std::vector<std::size_t> members;
    for (std::size_t i = 0; i < cols.size(); ++i)
      if (cols[i].group == g) members.push_back(i);
    if (members.empty()) continue;
    std::vector<std::size_t> idx = keys;
    idx.insert(idx.end(), members.begin(), members.end());
    const bool short_headers = width_of(idx, false) > opt.max_width;
    // Greedy: as many of the group's columns per grid as fit beside the shape columns.
    std::vector<std::vector<std::size_t>> parts{keys};
    for (std::size_t m : members) {
      auto trial = parts.back();
      trial.push_back(m);
      if (parts.back().size() > keys.size() && width_of(trial, short_headers) > opt.max_width)
        parts.push_back(keys), trial = keys, trial.push_back(m);
      parts.back() = trial;
    }
    for (std::size_t p = 0; p < parts.size(); ++p) {
      out += (out.empty() ? "" : "\n") + group_caption(rep, g);
      if (parts.size() > 1) out += " (" + std::to_string(p + 1) + " of " + std::to_string(parts.size()) + ")";
      if (short_headers && g == "bytes") out += "; ids as in `hbmscope model --help`";
      out += ":\n" + render_idx(parts[p], short_headers);
    }
  }
  return out;
}

// The model's grid, under its title (bold lines in Markdown).
std::string render_model(const Report& rep, const PrintOptions& opt) {
  const std::string t = title(rep, varying(rep.rows));
  std::string out;
  if (opt.format == Format::md) {
    for (std::size_t pos = 0; pos <= t.size();) {
      const std::size_t nl = std::min(t.find('\n', pos), t.size());
      out += "**" + t.substr(pos, nl - pos) + "**\n";
      pos = nl + 1;
    }
    out += "\n";
  } else {
    out = t + "\n\n";
  }
  out += render_model_grids(rep, opt);
  if (any_no_fit(rep)) {
    const DeviceSpec& d = rep.roofline->device;
    out += "\n" + std::string(no_fit_mark).substr(1) + " needs more than the " +
           format_bytes(d.memory_bytes, Units::decimal) + " of " + d.name +
           " memory at once (S and P with Q, K, V, O): cannot run this shape as modelled\n";
  }
  if (has_measurements(rep)) out += render_measure_grid(rep, opt.format);
  return out;
}

std::vector<std::string> measured_kernels(const Report& rep) {
  std::vector<std::string> ks;
  for (const Row& r : rep.rows)
    for (const auto& m : r.measurements)
      if (std::find(ks.begin(), ks.end(), m.kernel) == ks.end()) ks.push_back(m.kernel);
  return ks;
}

constexpr const char* measure_csv_fields[] = {
    "status", "block_rows", "block_cols", "rel_error", "median_s", "min_s", "max_s", "warm_s",
    "model_bytes", "bandwidth_Bps", "copy_fraction", "tflops", "predicted_copy_s", "predicted_peak_s",
    "measured_over_predicted", "output_fits_l2"};

std::string measure_csv_cells(const KernelMeasurement& m) {
  auto num = [](double x) { return csv_number(x); };
  std::string out;
  auto field = [&](const std::string& f) { out.append(1, ',').append(f); };
  field(std::string(status_name(m.status)));
  field(std::to_string(m.block_rows));
  field(std::to_string(m.block_cols));
  field(num(m.rel_error));
  for (double x : {m.timing.median, m.timing.min, m.timing.max, m.timing.warm_median}) field(num(x));
  field(std::to_string(m.model_bytes));
  for (double x : {m.bandwidth, m.copy_fraction, m.tflops, m.predicted_copy, m.predicted_peak,
                   m.measured_over_predicted})
    field(num(x));
  field(m.output_fits_l2 ? "1" : "0");
  return out;
}

std::string render_csv(const Report& rep) {
  const auto ids = variant_ids(rep);
  // The pass column appears only when some row is not the forward pass, so
  // forward-only CSV keeps its columns.
  bool any_pass = false;
  for (const Row& r : rep.rows) any_pass |= r.shape.pass != Pass::fwd;
  std::string out =
      "batch,heads,kv_heads,seq_q,seq_kv,head_dim,dtype,elem_bytes,block_rows,block_cols,causal,";
  if (any_pass) out += "pass,";
  out += "flops";
  for (const auto& id : ids) out.append(",").append(csv_field("bytes_" + id));
  for (const auto& id : ids) out.append(",").append(csv_field("intensity_" + id));
  const bool l2 = any_l2_sim(rep);
  if (l2)
    out += ",l2_bytes,sm_count,ctas_per_sm,l2_order,l2_hit_rate_flash,heads_per_wave,"
           "kv_heads_per_wave,l2_bytes_to_floor,l2_hit_rate_standard,l2_bytes_to_min_standard";
  const auto kernels = measured_kernels(rep);
  for (const auto& k : kernels)
    for (const char* f : measure_csv_fields) out.append(",").append(csv_field(k + "_" + f));
  bool labels = false;
  for (const Row& r : rep.rows) labels |= !r.label.empty();
  if (labels) out += ",label";
  if (rep.roofline) {
    out += ",device,bandwidth_fraction,ridge_point";
    for (const auto& id : ids) out.append(",").append(csv_field("seconds_" + id));
    for (const auto& id : ids) out.append(",").append(csv_field("bound_" + id));
  }
  // Decode rows: their own fields, last, so that other reports keep their columns.
  const bool decode = any_decode(rep);
  std::vector<std::string> decode_ids;
  for (const auto& id : ids)
    if (parse_decode_variant(id)) decode_ids.push_back(id);
  if (decode) {
    out += ",decode,context_tokens,context_lengths,splits_requested,page_size,decode_sm_count";
    for (const auto& id : decode_ids)
      for (const char* f : {"splits_", "kv_bytes_", "q_bytes_", "o_bytes_", "partial_bytes_", "block_table_bytes_"})
        out.append(",").append(f).append(id);
    if (l2)
      for (const auto& id : decode_ids)
        if (id != "decode_floor") out.append(",l2_hit_rate_").append(id);
  }
  // Whether a variant's matrices fit the device's memory, for the variants
  // where that is modelled (the † of the table).
  std::vector<std::string> fit_ids;
  for (const auto& id : ids)
    for (const Row& r : rep.rows)
      if (const auto* v = r.variant(id); v && v->prediction && v->prediction->footprint_bytes > 0) {
        fit_ids.push_back(id);
        break;
      }
  for (const auto& id : fit_ids) out += ",fits_in_memory_" + id;
  out += "\n";
  for (const Row& r : rep.rows) {
    const Shape& s = r.shape;
    out += std::to_string(s.batch) + "," + std::to_string(s.heads) + "," +
           std::to_string(s.kv_heads) + "," + std::to_string(s.seq_q) + "," +
           std::to_string(s.seq_kv) + "," + std::to_string(s.head_dim) + "," +
           std::string(dtype_name(s.dtype)) + "," + std::to_string(elem_bytes(s.dtype)) + "," +
           std::to_string(s.block_rows) + "," + std::to_string(s.block_cols) + "," +
           (s.causal ? "true" : "false") + "," +
           (any_pass ? std::string(pass_name(s.pass)) + "," : std::string()) +
           std::to_string(r.flops);
    for (const auto& id : ids) {
      const auto* v = r.variant(id);
      out += ',';
      if (v) out += std::to_string(v->bytes);
    }
    for (const auto& id : ids) {
      const auto* v = r.variant(id);
      out.append(",").append(v ? csv_number(v->intensity) : std::string());
    }
    if (l2 && r.l2_sim && r.l2_sim->decode.empty()) {
      const L2SimDetail& d = *r.l2_sim;
      out += "," + std::to_string(d.l2_bytes) + "," + std::to_string(d.sm_count) + "," +
             std::to_string(d.ctas_per_sm) + "," + csv_field(d.order) + "," + csv_number(d.flash.hit_rate) + "," +
             csv_number(d.heads_per_wave) + "," + csv_number(d.kv_heads_per_wave) + "," +
             std::to_string(d.flash.l2_bytes_to_min) + "," + csv_number(d.standard.hit_rate) + "," +
             std::to_string(d.standard.l2_bytes_to_min);
    } else if (l2) {
      out += ",,,,,,,,,,";
    }
    for (const auto& k : kernels) {
      const KernelMeasurement* m = nullptr;
      for (const auto& x : r.measurements)
        if (x.kernel == k) m = &x;
      out += m ? measure_csv_cells(*m) : std::string(std::size(measure_csv_fields), ',');
    }
    if (labels) out.append(",").append(csv_field(r.label));
    if (rep.roofline) {
      out.append(",").append(csv_field(rep.roofline->device.name) + "," + csv_number(rep.roofline->bandwidth_fraction) +
             "," + csv_number(r.ridge_point));
      for (const auto& id : ids) {
        const auto* v = r.variant(id);
        out.append(",").append(v && v->prediction ? csv_number(v->prediction->seconds) : std::string());
      }
      for (const auto& id : ids) {
        const auto* v = r.variant(id);
        out += ",";
        if (v && v->prediction) out += bound_name(v->prediction->bound);
      }
    }
    if (decode) {
      if (s.decode) {
        const std::string lengths = s.context_lengths.text(';');  // one field
        out += ",true," + std::to_string(total_context(s)) + "," + lengths + "," + std::to_string(s.splits) + "," +
               std::to_string(s.page_size) + "," + std::to_string(r.decode_sm_count);
      } else {
        out += ",false,,,,,";
      }
      for (const auto& id : decode_ids) {
        const auto* v = r.variant(id);
        if (!v || !v->decode) {
          out += ",,,,,,";
          continue;
        }
        for (auto x : {v->splits, v->decode->kv, v->decode->q, v->decode->o, v->decode->partials,
                       v->decode->block_table}) {
          out += ',';
          out += std::to_string(x);
        }
      }
      if (l2)
        for (const auto& id : decode_ids) {
          if (id == "decode_floor") continue;
          out += ',';
          if (r.l2_sim)
            for (const auto& x : r.l2_sim->decode)
              if (x.id == id) {
                out += csv_number(x.sim.hit_rate);
              }
        }
    }
    for (const auto& id : fit_ids) {
      const auto* v = r.variant(id);
      out += ",";
      if (v && v->prediction && v->prediction->footprint_bytes > 0)
        out += v->prediction->fits_in_memory ? "true" : "false";
    }
    out += "\n";
  }
  return out;
}

}  // namespace

std::string render_grid(const std::vector<std::string>& head,
                        const std::vector<std::vector<std::string>>& rows,
                        const std::vector<bool>& right, Format format) {
  auto is_right = [&](std::size_t c) { return c < right.size() && right[c]; };
  std::string out;
  if (format == Format::md) {
    // A '|' inside a cell would end it.
    auto cell = [](const std::string& x) {
      std::string r;
      for (char ch : x) {
        if (ch == '|') r += '\\';
        r += ch;
      }
      return r;
    };
    out += "|";
    for (const auto& h : head) out.append(" ").append(cell(h)).append(" |");
    out += "\n|";
    for (std::size_t c = 0; c < head.size(); ++c) out += is_right(c) ? " ---: |" : " :--- |";
    out += "\n";
    for (const auto& r : rows) {
      out += "|";
      for (const auto& x : r) out.append(" ").append(cell(x)).append(" |");
      out += "\n";
    }
    return out;
  }
  std::vector<std::size_t> w(head.size());
  for (std::size_t c = 0; c < head.size(); ++c) w[c] = width(head[c]);
  for (const auto& r : rows)
    for (std::size_t c = 0; c < r.size() && c < w.size(); ++c) w[c] = std::max(w[c], width(r[c]));
  auto line = [&](const std::vector<std::string>& r) {
    std::string l;
    for (std::size_t c = 0; c < r.size() && c < w.size(); ++c) {
      if (c) l += "   ";
      l += pad(r[c], w[c], is_right(c));
    }
    while (!l.empty() && l.back() == ' ') l.pop_back();
    out += l + "\n";
  };
  line(head);
  for (const auto& r : rows) line(r);
  return out;
}

std::string render(const Report& report, const PrintOptions& options) {
  switch (options.format) {
    case Format::table:
    case Format::md: return render_model(report, options);
    case Format::csv: return render_csv(report);
    case Format::json: return report_json_text(report);
  }
  return {};
}

void write_stdout(std::string_view content) {
  if (std::fwrite(content.data(), 1, content.size(), stdout) != content.size() || std::fflush(stdout) != 0)
    throw Error(std::string("writing standard output: ") + std::strerror(errno));
}

}  // namespace hbmscope
