// The model (sweep) table: its columns by group (bytes, l2, time, flops),
// split into one grid per group when too wide, under its title.
#include <algorithm>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "printers_internal.hpp"

namespace hbmscope::printing {

namespace {

struct Column {
  std::string header;
  bool right = true;
  std::function<std::string(const Row&)> cell;
  std::string group{};         // "" for the shape columns, else one of column_groups()
  std::string short_header{};  // used when the group's table would be too wide; "" = header
};

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

// The decode rows' columns: context, splits per variant, KV bytes beside each
// total, and how far below the ridge point decode sits.
void add_decode_columns(std::vector<Column>& cols, const RowsLayout& layout, const std::vector<std::string>& ids,
                        const PrintOptions& opt) {
  if (!layout.any_decode) return;
  cols.push_back({"Context tokens", true, [](const Row& r) {
                    if (!r.shape.decode) return std::string("-");
                    std::string t = std::to_string(total_context(r.shape));
                    if (ragged(r.shape)) {
                      const SeqList& l = r.shape.context_lengths;
                      t += " (" + std::to_string(l.min_kv()) + ".." + std::to_string(l.max_kv()) + ")";
                    }
                    return t;
                  }});
  if (layout.pages_vary)
    cols.push_back({"Page", true, [](const Row& r) {
                      return r.shape.decode ? std::to_string(r.shape.page_size) : std::string("-");
                    }});
  for (const auto& id : ids) {
    const auto v = parse_decode_variant(id);
    if (!v || *v == DecodeVariant::floor) continue;
    cols.push_back({"Splits: " + id, true, [id](const Row& r) {
                      const auto* var = r.variant(id);
                      return var && var->decode && var->splits ? std::to_string(var->splits) : std::string("-");
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
                      // Far below the ridge as a divisor; at or above it (MLA's many heads per
                      // latent) as a multiple, never "ridge/0".
                      char buf[64];
                      const double below = r.ridge_point / var->intensity;
                      if (below >= 1.5) std::snprintf(buf, sizeof buf, " = ridge/%.0f", below);
                      else std::snprintf(buf, sizeof buf, " = %.2g × ridge", 1 / below);
                      t += buf;
                    }
                    return t;
                  }, "bytes"});
}

// The footnote mark of a time whose variant does not fit in device memory.
constexpr const char* no_fit_mark = " †";

std::vector<Column> model_columns(const Report& rep, const RowsLayout& layout, const PrintOptions& opt) {
  const ShapeVaries& v = layout.varies;
  std::vector<Column> cols;
  if (layout.any_label) cols.push_back({"Group", false, [](const Row& r) { return r.label; }});
  const bool models = layout.any_model;
  if (models) {
    cols.push_back({"Model", false, [](const Row& r) { return r.model_layers ? r.model_layers->config : std::string("-"); }});
    cols.push_back({"Layers", false, [](const Row& r) { return model_layers_label(r); }});
  }
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
  if (v.mask) cols.push_back({"Mask", false, [](const Row& r) { return mask_label(r); }});
  if (v.head_dim_v)
    cols.push_back({"DV", true, [](const Row& r) { return std::to_string(value_head_dim(r.shape)); }});
  if (v.kv_dtype)
    cols.push_back({"KV dtype", false,
                    [](const Row& r) { return std::string(dtype_name(key_value_dtype(r.shape))); }});
  if (v.latent_kv)
    cols.push_back({"Latent KV", false, [](const Row& r) { return std::string(r.shape.latent_kv ? "yes" : "no"); }});
  if (layout.any_ragged_prefill)
    cols.push_back({"Sequences", false, [](const Row& r) { return sequences_label(r.shape); }});
  const auto& ids = layout.ids;
  for (const auto& id : ids)
    cols.push_back({variant_label(id), true,
                    [id, units = opt.units](const Row& r) {
                      const auto* var = r.variant(id);
                      return var ? format_bytes(var->bytes, units) : std::string("-");
                    },
                    "bytes", id});
  // The simulation's detail columns go with its variants (a --variants filter may drop one).
  const auto shown = [&](const char* id) { return std::find(ids.begin(), ids.end(), id) != ids.end(); };
  if (layout.any_l2_sim && shown("flash_l2_sim")) {
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
  if (layout.any_l2_sim && shown("standard_l2_sim"))
    cols.push_back({"L2 hit (standard)", true, [](const Row& r) {
                      return r.l2_sim && r.l2_sim->has_standard ? format_percent(r.l2_sim->standard.hit_rate)
                                                                 : std::string("-");
                    }, "l2"});
  if (models) {
    cols.push_back({"KV cache", true, [units = opt.units](const Row& r) {
                      return r.model_layers ? format_bytes(r.model_layers->kv_cache_bytes, units) : std::string("-");
                    }, "bytes"});
    cols.push_back({"KV/token", true, [units = opt.units](const Row& r) {
                      return r.model_layers ? format_bytes(r.model_layers->kv_bytes_per_token, units) : std::string("-");
                    }, "bytes"});
  }
  add_decode_columns(cols, layout, ids, opt);
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
std::string render_model_grids(const Report& rep, const RowsLayout& layout, const PrintOptions& opt) {
  const auto cols = model_columns(rep, layout, opt);
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
      out += out.empty() ? "" : "\n";  // not "\n" + ...: GCC 12 warns wrongly on that here (-Wrestrict)
      out += group_caption(rep, g);
      if (parts.size() > 1) out += " (" + std::to_string(p + 1) + " of " + std::to_string(parts.size()) + ")";
      if (short_headers && g == "bytes") out += "; ids as in `hbmscope model --help`";
      out += ":\n" + render_idx(parts[p], short_headers);
    }
  }
  return out;
}

// The title lines (bold in Markdown) and the blank line under them.
std::string title_block(const Report& rep, const RowsLayout& layout, Format format) {
  const std::string t = title(rep, layout);
  if (format != Format::md) return t + "\n\n";
  std::string out;
  for (std::size_t pos = 0; pos <= t.size();) {
    const std::size_t nl = std::min(t.find('\n', pos), t.size());
    out += "**" + t.substr(pos, nl - pos) + "**\n";
    pos = nl + 1;
  }
  return out + "\n";
}

// The footnote of the † mark.
std::string no_fit_note(const Report& rep) {
  const DeviceSpec& d = rep.roofline->device;
  std::string out = "\n";
  out += std::string(no_fit_mark).substr(1) + " needs more than the " + format_bytes(d.memory_bytes, Units::decimal) +
         " of " + d.name + " memory at once (S and P with Q, K, V, O): cannot run this shape as modelled\n";
  return out;
}

// Markdown, a line per row as it comes; the measured rows (few: each took a
// device's time) are held for their table at the end.
class MarkdownPrinter : public RowPrinter {
 public:
  MarkdownPrinter(const PrintOptions& opt, TextSink out) : opt_(opt), out_(std::move(out)) {}
  void begin(const Report& head, const RowsLayout& layout) override {
    head_ = head;
    layout_ = layout;
    cols_ = model_columns(head_, layout_, opt_);
    std::vector<std::string> names;
    std::vector<bool> right;
    for (const auto& c : cols_) names.push_back(c.header), right.push_back(c.right);
    out_(title_block(head_, layout_, Format::md) + md_head(names, right));
  }
  void row(const Row& r) override {
    std::vector<std::string> cells;
    cells.reserve(cols_.size());
    for (const auto& c : cols_) cells.push_back(c.cell(r));
    out_(md_line(cells));
    if (!r.measurements.empty()) head_.rows.push_back(r);
  }
  void end() override {
    std::string tail;
    if (layout_.any_no_fit) tail += no_fit_note(head_);
    if (has_measurements(head_)) tail += render_measure_grid(head_, Format::md);
    out_(tail);
  }

 private:
  PrintOptions opt_;
  TextSink out_;
  Report head_;
  RowsLayout layout_;
  std::vector<Column> cols_;
};

}  // namespace

// The model's grid(s), under its title.
std::string render_model(const Report& rep, const PrintOptions& opt) {
  const RowsLayout layout = layout_of(rep.rows);
  std::string out = title_block(rep, layout, opt.format) + render_model_grids(rep, layout, opt);
  if (layout.any_no_fit) out += no_fit_note(rep);
  if (has_measurements(rep)) out += render_measure_grid(rep, opt.format);
  return out;
}

std::unique_ptr<RowPrinter> markdown_printer(const PrintOptions& opt, TextSink out) {
  return std::make_unique<MarkdownPrinter>(opt, std::move(out));
}

}  // namespace hbmscope::printing
