#include "hbmscope/whole_model.hpp"

#include <algorithm>

#include "hbmscope/checked.hpp"
#include "hbmscope/decode.hpp"
#include "hbmscope/error.hpp"
#include "hbmscope/l2_sim.hpp"
#include "hbmscope/mask.hpp"
#include "hbmscope/model.hpp"

namespace hbmscope {

namespace {

// Keys the queries of one sequence (nq queries against nkv keys) see together:
// their visible ranges touch (mask.hpp), so the union runs from the first
// query that sees a key to the last query's end.
std::uint64_t sequence_tokens(const Shape& s, std::uint64_t nq, std::uint64_t nkv) {
  if (nq == 0 || nkv == 0) return 0;
  const std::uint64_t first = nq > nkv ? nq - nkv : 0;  // rows before it see nothing
  const KeyRange lo = visible_keys(s, nq, nkv, first);
  const KeyRange hi = visible_keys(s, nq, nkv, nq - 1);
  return hi.end > lo.begin ? hi.end - lo.begin : 0;
}

void scale(DecodeBytes& b, std::uint64_t n) {
  for (std::uint64_t* x : {&b.total, &b.kv, &b.q, &b.o, &b.partials, &b.block_table})
    *x = checked_mul(*x, n, "bytes of all the layers");
}

void add(DecodeBytes& a, const DecodeBytes& b) {
  a.total = checked_add(a.total, b.total, "bytes of all the layers");
  a.kv = checked_add(a.kv, b.kv, "bytes of all the layers");
  a.q = checked_add(a.q, b.q, "bytes of all the layers");
  a.o = checked_add(a.o, b.o, "bytes of all the layers");
  a.partials = checked_add(a.partials, b.partials, "bytes of all the layers");
  a.block_table = checked_add(a.block_table, b.block_table, "bytes of all the layers");
}

// A kind's row: one layer's row, its bytes and FLOPs times the layer count
// (intensity, a ratio, is unchanged), with its KV cache.
Row kind_row(const ModelConfig& m, const LayerKind& k, const Shape& base, const ModelOptions& options) {
  const Shape s = layer_shape(m, k, base);
  Row r = model_row(s, options);
  r.flops = checked_mul(r.flops, k.layers, "FLOPs of all the layers");
  for (auto& v : r.variants) {
    v.bytes = checked_mul(v.bytes, k.layers, "bytes of all the layers");
    if (v.decode) scale(*v.decode, k.layers);
  }
  ModelLayers ml;
  ml.config = m.id;
  ml.kind = k.name;
  ml.layers = k.layers;
  const std::uint64_t per_layer = kv_bytes_per_token(m, k, key_value_dtype(s));
  ml.kv_bytes_per_token = checked_mul(per_layer, k.layers, "KV cache bytes per token");
  ml.kv_cache_tokens = kv_cache_tokens(s);
  ml.kv_cache_bytes = checked_product("KV cache bytes", ml.kv_cache_tokens, per_layer, k.layers);
  r.model_layers = ml;
  return r;
}

Row total_row(const ModelConfig& m, const std::vector<Row>& kinds) {
  Row t = kinds.front();
  ModelLayers ml;
  ml.config = m.id;
  ml.kind = std::string(total_kind);
  ml.layers = m.layers.size();
  t.flops = 0;
  for (auto& v : t.variants) {
    v.bytes = 0;
    v.splits = 0;  // each kind has its own
    if (v.decode) v.decode = DecodeBytes{};
  }
  for (const Row& k : kinds) {
    t.flops = checked_add(t.flops, k.flops, "FLOPs of all the layers");
    ml.kv_bytes_per_token = checked_add(ml.kv_bytes_per_token, k.model_layers->kv_bytes_per_token, "KV cache bytes");
    ml.kv_cache_bytes = checked_add(ml.kv_cache_bytes, k.model_layers->kv_cache_bytes, "KV cache bytes");
    for (auto& v : t.variants) {
      const VariantResult* x = k.variant(v.id);
      if (!x) throw Error("model config '" + m.id + "': layer kinds with different variants");
      v.bytes = checked_add(v.bytes, x->bytes, "bytes of all the layers");
      if (v.decode && x->decode) add(*v.decode, *x->decode);
    }
  }
  for (auto& v : t.variants) v.intensity = intensity(t.flops, v.bytes);
  // The total's shape is its first kind's; a window or chunk that not every
  // kind has is no mask of the total's.
  for (const Row& k : kinds)
    ml.mixed_masks |= k.shape.window != t.shape.window || k.shape.chunk != t.shape.chunk;
  if (ml.mixed_masks) t.shape.window = t.shape.chunk = 0;
  t.model_layers = ml;
  return t;
}

}  // namespace

std::uint64_t kv_cache_tokens(const Shape& s) {
  std::uint64_t total = 0;
  const auto add_seq = [&](std::uint64_t count, std::uint64_t nq, std::uint64_t nkv) {
    total = checked_add(total, checked_mul(count, sequence_tokens(s, nq, nkv), "KV cache tokens"), "KV cache tokens");
  };
  if (s.decode && !s.context_lengths.empty()) {
    for (const SeqGroup& g : s.context_lengths.groups()) add_seq(g.count, s.seq_q, g.item.kv);
  } else if (!s.decode && !s.seq_lens.empty()) {
    for (const SeqGroup& g : s.seq_lens.groups()) add_seq(g.count, g.item.q, g.item.kv);
  } else {
    add_seq(s.batch, s.seq_q, s.seq_kv);
  }
  return total;
}

std::vector<Row> whole_model_rows(const ModelConfig& m, const Shape& base, const ModelOptions& options) {
  std::vector<Row> rows;
  try {
    validate(m);
    for (const LayerKind& k : layer_kinds(m)) rows.push_back(kind_row(m, k, base, options));
    rows.push_back(total_row(m, rows));
  } catch (const Error& e) {
    const std::string what = e.what();
    // model_row names the shape already; add the model.
    throw Error("model config '" + m.id + "'" + (what.rfind("model config", 0) == 0 ? "" : ": " + what));
  }
  return rows;
}

std::size_t whole_model_row_count(const ModelConfig& m) { return layer_kinds(m).size() + 1; }

std::size_t point_row_count(const ModelConfigRef& model) { return model ? whole_model_row_count(*model) : 1; }

void for_each_model_step(const SweepAxes& axes, const std::function<void(const Shape&, const ModelConfigRef&)>& visit) {
  if (axes.model_config.empty()) {
    for_each_shape(axes, [&](const Shape& s) { visit(s, nullptr); });
    return;
  }
  std::uint64_t total = shape_count(axes);
  if (__builtin_mul_overflow(total, static_cast<std::uint64_t>(axes.model_config.size()), &total) ||
      total > max_sweep_shapes)
    throw Error("sweep too large: " + std::to_string(total) + " (shape, model) points (at most " +
                std::to_string(max_sweep_shapes) + "); sweep fewer values or models");
  for (const ModelConfigRef& m : axes.model_config)
    for_each_shape(axes, [&](const Shape& s) {
      if (axes.dtype_given || !m->dtype) return visit(s, m);
      Shape x = s;
      x.dtype = *m->dtype;
      visit(x, m);
    });
}

ModelSteps expand_model_steps(const SweepAxes& axes) {
  ModelSteps out;
  for_each_model_step(axes, [&out](const Shape& s, const ModelConfigRef& m) {
    out.shapes.push_back(s);
    out.models.push_back(m);
  });
  return out;
}

std::vector<Row> point_rows(const std::vector<Shape>& shapes, const std::vector<ModelConfigRef>& models,
                            const std::vector<std::string>& labels, const ModelOptions& options,
                            const Progress& progress) {
  std::vector<Row> rows;
  rows.reserve(shapes.size());
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    const std::size_t first = rows.size();
    if (i < models.size() && models[i]) {
      for (Row& r : whole_model_rows(*models[i], shapes[i], options)) rows.push_back(std::move(r));
    } else {
      rows.push_back(model_row(shapes[i], options));
    }
    if (i < labels.size())
      for (std::size_t r = first; r < rows.size(); ++r) rows[r].label = labels[i];
    if (progress) progress(i + 1, shapes.size());
  }
  return rows;
}

void add_layers_l2_sim(Row& row, const L2SimConfig& c, L2SimMemo* memo) {
  if (row.model_layers && row.model_layers->kind == total_kind)
    throw Error("model config '" + row.model_layers->config + "': a total row is not simulated; its kinds are");
  const std::size_t before = row.variants.size();
  if (memo) memo->add_l2_sim(row, c);
  else add_l2_sim(row, c);
  if (!row.model_layers || !row.l2_sim) return;
  const std::uint64_t n = row.model_layers->layers;
  const auto all = [&](std::uint64_t& b) { b = checked_mul(b, n, "simulated bytes of all the layers"); };
  // add_l2_sim took the row's FLOPs (all its layers') over one layer's bytes.
  for (std::size_t i = before; i < row.variants.size(); ++i) {
    all(row.variants[i].bytes);
    row.variants[i].intensity = intensity(row.flops, row.variants[i].bytes);
  }
  L2SimDetail& d = *row.l2_sim;
  for (L2SimDetail::Variant* v : {&d.flash, &d.standard}) all(v->read_bytes), all(v->write_bytes);
  for (auto& x : d.decode) all(x.sim.read_bytes), all(x.sim.write_bytes);
}

std::vector<std::string> sum_whole_model_l2_sims(std::vector<Row>& rows) {
  std::vector<std::string> notes;
  std::size_t from = 0;  // the first kind row of the step (rows of a step are its kinds, then its total)
  for (std::size_t i = 0; i < rows.size(); ++i) {
    Row& t = rows[i];
    if (!t.model_layers) {
      from = i + 1;
      continue;
    }
    if (t.model_layers->kind != total_kind) continue;
    std::string left_out;
    bool any = false;
    for (std::size_t k = from; k < i; ++k) {
      const bool sim = rows[k].l2_sim.has_value();
      any |= sim;
      if (!sim) left_out += (left_out.empty() ? "" : ", ") + rows[k].model_layers->kind;
    }
    if (!left_out.empty()) {
      if (any)
        notes.push_back("L2 simulation: " + t.model_layers->config + "'s total (" + describe(t.shape) +
                        ") has no simulated bytes: its " + left_out + " layers were left out");
      from = i + 1;
      continue;
    }
    // The simulated variants every kind has, in the first kind's order.
    for (const VariantResult& v : rows[from].variants) {
      if (v.id.size() < 7 || v.id.compare(v.id.size() - 7, 7, "_l2_sim") != 0 || t.variant(v.id)) continue;
      std::uint64_t sum = 0;
      bool every = true;
      for (std::size_t k = from; k < i && every; ++k) {
        const VariantResult* x = rows[k].variant(v.id);
        every = x != nullptr;
        if (x) sum = checked_add(sum, x->bytes, "simulated bytes of all the layers");
      }
      if (every) t.variants.push_back({v.id, sum, intensity(t.flops, sum)});
    }
    from = i + 1;
  }
  return notes;
}

void sum_whole_model_predictions(Report& report) {
  // The kind rows of a step come right before its total.
  std::size_t from = 0;
  for (std::size_t i = 0; i < report.rows.size(); ++i) {
    Row& t = report.rows[i];
    if (!t.model_layers) {
      from = i + 1;
      continue;
    }
    if (t.model_layers->kind != total_kind) continue;
    for (auto& v : t.variants) {
      if (!v.prediction) continue;
      Prediction sum = *v.prediction;
      sum.seconds = sum.memory_seconds = sum.compute_seconds = 0;
      sum.footprint_bytes = 0;
      sum.fits_in_memory = true;
      double memory_bound = 0, compute_bound = 0;  // seconds of the kinds bound by each
      for (std::size_t k = from; k < i; ++k) {
        const VariantResult* x = report.rows[k].variant(v.id);
        if (!x || !x->prediction) continue;
        const Prediction& p = *x->prediction;
        sum.seconds += p.seconds;
        sum.memory_seconds += p.memory_seconds;
        sum.compute_seconds += p.compute_seconds;
        (p.bound == Bound::compute ? compute_bound : memory_bound) += p.seconds;
        sum.footprint_bytes = std::max(sum.footprint_bytes, p.footprint_bytes);
        sum.fits_in_memory = sum.fits_in_memory && p.fits_in_memory;
      }
      sum.bound = compute_bound > memory_bound ? Bound::compute : Bound::memory;
      v.prediction = sum;
    }
    from = i + 1;
  }
}

}  // namespace hbmscope
