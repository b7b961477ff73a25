// A report as CSV: one line per row, the columns a report has (decode,
// L2 simulation, measurements, roofline) added only where some row has them.
#include <algorithm>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hbmscope/csv.hpp"
#include "printers_internal.hpp"

namespace hbmscope::printing {

namespace {

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

// The columns come from the rows' layout (a report's columns are those some
// row has): the header at begin, then a line per row as it comes.
class CsvPrinter : public RowPrinter {
 public:
  explicit CsvPrinter(TextSink out) : out_(std::move(out)) {}
  void begin(const Report& head, const RowsLayout& layout) override;
  void row(const Row& r) override;
  void end() override {}

 private:
  TextSink out_;
  std::optional<RooflineInfo> roofline_;
  std::vector<std::string> ids_, kernels_, decode_ids_, fit_ids_;
  bool any_pass_ = false, l2_ = false, labels_ = false, decode_ = false, models_ = false, served_ = false;
  std::string line_;
};

void CsvPrinter::begin(const Report& rep, const RowsLayout& layout) {
  roofline_ = rep.roofline;
  ids_ = layout.ids;
  const auto& ids = ids_;
  // The pass column appears only when some row is not the forward pass, so
  // forward-only CSV keeps its columns.
  any_pass_ = layout.any_pass;
  std::string out =
      "batch,heads,kv_heads,seq_q,seq_kv,head_dim,dtype,elem_bytes,block_rows,block_cols,causal,";
  if (any_pass_) out += "pass,";
  out += "flops";
  for (const auto& id : ids) out.append(",").append(csv_field("bytes_" + id));
  for (const auto& id : ids) out.append(",").append(csv_field("intensity_" + id));
  l2_ = layout.any_l2_sim;
  if (l2_)
    out += ",l2_bytes,sm_count,ctas_per_sm,l2_order,l2_hit_rate_flash,heads_per_wave,"
           "kv_heads_per_wave,l2_bytes_to_floor,l2_hit_rate_standard,l2_bytes_to_min_standard";
  kernels_ = layout.kernels;
  for (const auto& k : kernels_)
    for (const char* f : measure_csv_fields) out.append(",").append(csv_field(k + "_" + f));
  labels_ = layout.any_label;
  if (labels_) out += ",label";
  if (roofline_) {
    out += ",device,bandwidth_fraction,ridge_point";
    for (const auto& id : ids) out.append(",").append(csv_field("seconds_" + id));
    for (const auto& id : ids) out.append(",").append(csv_field("bound_" + id));
  }
  // Decode rows: their own fields, last, so that other reports keep their columns.
  decode_ = layout.any_decode;
  for (const auto& id : ids)
    if (parse_decode_variant(id)) decode_ids_.push_back(id);
  if (decode_) {
    out += ",decode,context_tokens,context_lengths,splits_requested,page_size,decode_sm_count";
    for (const auto& id : decode_ids_)
      for (const char* f : {"splits_", "kv_bytes_", "q_bytes_", "o_bytes_", "partial_bytes_", "block_table_bytes_"})
        out.append(",").append(f).append(id);
    if (l2_)
      for (const auto& id : decode_ids_)
        if (id != "decode_floor") out.append(",l2_hit_rate_").append(id);
  }
  // Whether a variant's matrices fit the device's memory, for the variants
  // where that is modelled (the † of the table).
  fit_ids_ = layout.footprint_ids();
  for (const auto& id : fit_ids_) out += ",fits_in_memory_" + id;
  // Whole-model rows: the model, the kind of layer and its KV cache, last.
  models_ = layout.any_model;
  if (models_) out += ",model_config,layer_kind,layers,kv_bytes_per_token,kv_cache_tokens,kv_cache_bytes,mask";
  // Attention as served (schema /3): only when some row sets one, after every
  // other column, so that other reports keep theirs.
  served_ = layout.any_served;
  if (served_) out += ",window,chunk,head_dim_v,kv_dtype,kv_elem_bytes,latent_kv,query_tokens,seq_lens";
  out += "\n";
  out_(out);
}

void CsvPrinter::row(const Row& r) {
  const auto& ids = ids_;
  const bool any_pass = any_pass_, l2 = l2_, labels = labels_, decode = decode_;
  const auto& kernels = kernels_;
  const auto& decode_ids = decode_ids_;
  const auto& fit_ids = fit_ids_;
  std::string& out = line_;
  out.clear();
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
    out += ',';  // not "," + ...: GCC 12 warns wrongly on that here (-Wrestrict)
    out += std::to_string(d.l2_bytes) + "," + std::to_string(d.sm_count) + "," +
           std::to_string(d.ctas_per_sm) + "," + csv_field(d.order) + "," + csv_number(d.flash.hit_rate) + "," +
           csv_number(d.heads_per_wave) + "," + csv_number(d.kv_heads_per_wave) + "," +
           std::to_string(d.flash.l2_bytes_to_min) + ",";
    if (d.has_standard) out += csv_number(d.standard.hit_rate) + "," + std::to_string(d.standard.l2_bytes_to_min);
    else out += ',';
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
  if (roofline_) {
    out.append(",").append(csv_field(roofline_->device.name) + "," + csv_number(roofline_->bandwidth_fraction) +
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
  if (models_ && r.model_layers) {
    const ModelLayers& m = *r.model_layers;
    // Field by field: GCC 12 warns wrongly on "," + ... here (-Wrestrict).
    for (const std::string& f : {csv_field(m.config), csv_field(m.kind), std::to_string(m.layers),
                                 std::to_string(m.kv_bytes_per_token),
                                 m.kind == total_kind ? std::string() : std::to_string(m.kv_cache_tokens),
                                 std::to_string(m.kv_cache_bytes), std::string(m.mixed_masks ? "mixed" : "")}) {
      out += ',';
      out += f;
    }
  } else if (models_) {
    out += ",,,,,,,";
  }
  if (served_) {
    const Dtype kv = key_value_dtype(s);
    const auto q = s.seq_lens.total_q();
    // Appends, not one "," + ... chain: GCC 12 warns wrongly on that (-Wrestrict).
    for (const std::string& f : {std::to_string(s.window), std::to_string(s.chunk), std::to_string(value_head_dim(s)),
                                 std::string(dtype_name(kv)), std::to_string(elem_bytes(kv)),
                                 std::string(s.latent_kv ? "true" : "false"),
                                 ragged_prefill(s) && q ? std::to_string(*q) : std::string(), s.seq_lens.text(';')})
      out.append(",").append(f);
  }
  out += "\n";
  out_(out);
}

}  // namespace

std::unique_ptr<RowPrinter> csv_printer(TextSink out) { return std::make_unique<CsvPrinter>(std::move(out)); }

}  // namespace hbmscope::printing
