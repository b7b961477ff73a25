// RowsLayout: what the printers must know of a report's rows before the
// first one is printed, as a fold over the rows.
#include <algorithm>

#include "printers_internal.hpp"

namespace hbmscope {

namespace {

void add_new(std::vector<std::string>& list, const std::string& id) {
  if (std::find(list.begin(), list.end(), id) == list.end()) list.push_back(id);
}

}  // namespace

void ShapeVaries::add(const Shape& f, const Shape& s) {
  batch |= s.batch != f.batch;
  heads |= s.heads != f.heads || s.kv_heads != f.kv_heads;
  dtype |= s.dtype != f.dtype;
  blocks |= s.block_rows != f.block_rows || s.block_cols != f.block_cols;
  causal |= s.causal != f.causal;
  pass |= s.pass != f.pass;
  mask |= s.window != f.window || s.chunk != f.chunk;
  head_dim_v |= s.head_dim_v != f.head_dim_v;  // set or not: DV = d is no column of its own
  kv_dtype |= s.kv_dtype != f.kv_dtype;
  latent_kv |= s.latent_kv != f.latent_kv;
}

void RowsLayout::add(const Row& r) {
  const Shape& s = r.shape;
  if (rows++ == 0) {
    first = r;
    first->measurements.clear();  // the title needs the shape, L2 and ridge only
    all_decode = s.decode;
  }
  varies.add(first->shape, s);
  any_pass |= s.pass != Pass::fwd;
  any_model |= r.model_layers.has_value();
  any_ragged_prefill |= ragged_prefill(s);
  any_served |= has_served_fields(s);
  any_l2_sim |= r.l2_sim.has_value();
  any_decode |= s.decode;
  all_decode &= s.decode;
  any_label |= !r.label.empty();
  any_measurements |= !r.measurements.empty();
  for (const auto& v : r.variants) {
    add_new(ids, v.id);
    if (!v.prediction) continue;
    any_no_fit |= !v.prediction->fits_in_memory;
    if (v.prediction->footprint_bytes > 0) add_new(footprint_seen_, v.id);
  }
  for (const auto& m : r.measurements) add_new(kernels, m.kernel);
  if (s.decode) {
    if (!first_decode) {
      first_decode = r;
      first_decode->measurements.clear();
    }
    pages_vary |= s.page_size != first_decode->shape.page_size;
    decode_mixed |= r.decode_sm_count != first_decode->decode_sm_count || s.page_size != first_decode->shape.page_size;
    if (const auto* fl = r.variant("decode_floor"); fl && r.ridge_point > 0)
      decode_to_ridge = std::max(decode_to_ridge, fl->intensity / r.ridge_point);
  }
}

std::vector<std::string> RowsLayout::footprint_ids() const {
  std::vector<std::string> out;
  for (const auto& id : ids)
    if (std::find(footprint_seen_.begin(), footprint_seen_.end(), id) != footprint_seen_.end()) out.push_back(id);
  return out;
}

RowsLayout layout_of(const std::vector<Row>& rows) {
  RowsLayout l;
  for (const Row& r : rows) l.add(r);
  return l;
}

}  // namespace hbmscope
