#include "hbmscope/sweep.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "hbmscope/error.hpp"
#include "hbmscope/model.hpp"

namespace hbmscope {

SweepAxes note_axes() {
  SweepAxes a;
  a.seq_head_dim = {{4096, 64}, {4096, 128}, {8192, 128}};
  return a;
}

namespace {

template <class T>
void require_nonempty(const std::vector<T>& v, const char* name) {
  if (v.empty()) throw Error(std::string("sweep axis '") + name + "' is empty");
}

// Drops repeated values, keeping the first of each in order: "--seq 64,64"
// must not give two rows of one shape, which compare and merge refuse.
// Sorting indices rather than hashing values keeps a 10 M-value axis cheap.
template <class T>
void drop_repeats(std::vector<T>& v) {
  if (v.size() < 2) return;
  std::vector<std::size_t> idx(v.size());
  std::iota(idx.begin(), idx.end(), std::size_t{0});
  std::stable_sort(idx.begin(), idx.end(),
                   [&](std::size_t x, std::size_t y) { return v[x] < v[y]; });
  std::vector<bool> keep(v.size(), true);
  bool any = false;
  for (std::size_t k = 1; k < idx.size(); ++k)
    if (!(v[idx[k - 1]] < v[idx[k]])) keep[idx[k]] = false, any = true;
  if (!any) return;
  std::vector<T> out;
  for (std::size_t i = 0; i < v.size(); ++i)
    if (keep[i]) out.push_back(v[i]);
  v = std::move(out);
}

// Ragged batches: the repeats dropped (by content; a sweep has few batches).
void drop_repeats(std::vector<SeqList>& v) {
  std::vector<SeqList> out;
  for (const SeqList& l : v)
    if (std::find(out.begin(), out.end(), l) == out.end()) out.push_back(l);
  v = std::move(out);
}

void check_batches(const std::vector<SeqList>& lists, const char* what) {
  for (const SeqList& c : lists) {
    if (c.empty()) throw Error(std::string(what) + ": a ragged batch has no sequences");
    if (c.size() > max_context_lengths)
      throw Error(std::string(what) + ": " + std::to_string(c.size()) + " sequences in one batch (at most " +
                  std::to_string(max_context_lengths) + ")");
  }
}

// Refuses a product whose shapes would hold more than max_sweep_sequences
// sequences in all (each ragged batch counted once per shape that shares it),
// before anything is built; `per_batch` shapes share each batch.
void check_sequences(const std::vector<SeqList>& lists, std::uint64_t per_batch) {
  std::uint64_t n = 0;
  bool wrapped = false;
  for (const SeqList& l : lists) wrapped = wrapped || __builtin_add_overflow(n, l.size(), &n);
  wrapped = wrapped || __builtin_mul_overflow(n, per_batch, &n);
  if (wrapped || n > max_sweep_sequences)
    throw Error("sweep too large: its shapes hold " + (wrapped ? std::string("more than 2^64") : std::to_string(n)) +
                " ragged sequences in all (at most " + std::to_string(max_sweep_sequences) +
                "); sweep fewer values or shorter batches");
}

// The served axes (window, chunk, DV, kv dtype) of a sweep, repeats dropped.
struct Served {
  std::vector<std::uint64_t> window, chunk, head_dim_v;
  std::vector<std::optional<Dtype>> kv_dtype;
  bool latent_kv = false;
  bool causal_too = false;  // the causal axis holds true: window/chunk rows skip its false
  std::size_t combos() const { return window.size() * chunk.size() * head_dim_v.size() * kv_dtype.size(); }
};

template <class T>
bool holds(const std::vector<T>& v, const T& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

Served served_axes(const SweepAxes& a) {
  Served v{a.window, a.chunk, a.head_dim_v, a.kv_dtype, a.latent_kv, holds(a.causal, true)};
  drop_repeats(v.window);
  drop_repeats(v.chunk);
  drop_repeats(v.head_dim_v);
  drop_repeats(v.kv_dtype);
  require_nonempty(v.window, "window");
  require_nonempty(v.chunk, "chunk");
  require_nonempty(v.head_dim_v, "head_dim_v");
  require_nonempty(v.kv_dtype, "kv_dtype");
  if (!holds(v.window, std::uint64_t{0}) && !holds(v.chunk, std::uint64_t{0}))
    throw Error("window and chunk cannot be combined on one shape (give one of them, or 0 among the values)");
  return v;
}

// Calls f(shape) for base with each served combination, in order (window,
// chunk, head_dim_v, kv_dtype), leaving out the combinations the axes'
// other values already give or that cannot be (SweepAxes).
template <class F>
void for_each_served(const Shape& base, const Served& v, F&& f) {
  for (auto w : v.window)
    for (auto c : v.chunk) {
      if (w != 0 && c != 0) continue;
      if ((w != 0 || c != 0) && !base.causal && v.causal_too) continue;
      for (auto dv : v.head_dim_v) {
        if (dv == base.head_dim && holds(v.head_dim_v, std::uint64_t{0})) continue;
        for (auto kvd : v.kv_dtype) {
          if (kvd == base.dtype && holds(v.kv_dtype, std::optional<Dtype>{})) continue;
          Shape s = base;
          s.window = w;
          s.chunk = c;
          s.head_dim_v = dv == base.head_dim ? 0 : dv;
          s.kv_dtype = kvd == base.dtype ? std::nullopt : kvd;
          s.latent_kv = v.latent_kv;
          validate(s);
          f(std::move(s));
        }
      }
    }
}

// Decode rows: every combination, outermost first: batch (or ragged batch),
// heads, kv_heads, dtype, causal, block_cols, (seq, head_dim), seq_kv, splits,
// page_size. block_rows and pass do not apply to decode.
void visit_decode(SweepAxes a, const std::function<void(const Shape&)>& visit) {
  drop_repeats(a.context_lengths);
  drop_repeats(a.splits);
  drop_repeats(a.page_size);
  require_nonempty(a.splits, "splits");
  require_nonempty(a.page_size, "page_size");
  if (a.seq_kv.empty() && a.context_lengths.empty())
    throw Error("decode: give the context length (--seq-kv, or --context-lengths for a ragged batch)");
  if (!a.seq_lens.empty()) throw Error("decode: seq-lens are prefill sequences (decode takes context lengths)");
  check_batches(a.context_lengths, "decode");
  for (Pass p : a.pass)
    if (p != Pass::fwd) throw Error("decode: rows are a forward pass (--pass fwd)");
  std::vector<std::pair<std::uint64_t, std::uint64_t>> points = a.seq_head_dim;
  if (points.empty())
    for (auto n : a.seq)
      for (auto d : a.head_dim) points.emplace_back(n, d);
  // Each ragged batch stands for one (batch, seq_kv) pair.
  const std::vector<SeqList>& batches = a.context_lengths;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> dense;  // (batch, seq_kv)
  if (batches.empty())
    for (auto b : a.batch)
      for (auto l : a.seq_kv) dense.emplace_back(b, l);
  const std::size_t n_batches = batches.empty() ? dense.size() : batches.size();
  const std::vector<std::uint64_t> same{0};
  const auto& kv_heads = a.kv_heads.empty() ? same : a.kv_heads;
  const Served served = served_axes(a);
  std::uint64_t total = 1;
  bool wrapped = false;
  for (std::size_t n : {n_batches, a.heads.size(), kv_heads.size(), a.dtype.size(), a.causal.size(),
                        a.block_cols.size(), points.size(), a.splits.size(), a.page_size.size(), served.combos()})
    wrapped = wrapped || __builtin_mul_overflow(total, static_cast<std::uint64_t>(n), &total);
  if (wrapped || total > max_sweep_shapes)
    throw Error("sweep too large: " + (wrapped ? std::string("more than 2^64") : std::to_string(total)) +
                " decode shapes (at most " + std::to_string(max_sweep_shapes) + "); sweep fewer values");
  if (!batches.empty()) check_sequences(batches, total / batches.size());
  for (std::size_t bi = 0; bi < n_batches; ++bi)
    for (auto h : a.heads)
      for (auto hkv : kv_heads)
        for (auto dt : a.dtype)
          for (bool causal : a.causal)
            for (auto bc : a.block_cols)
              for (auto [n, d] : points)
                for (auto sp : a.splits)
                  for (auto ps : a.page_size) {
                    Shape s;
                    s.decode = true;
                    if (batches.empty()) {
                      s.batch = dense[bi].first;
                      s.seq_kv = dense[bi].second;
                    } else {
                      const SeqList& l = batches[bi];
                      s.batch = l.size();
                      s.seq_kv = l.max_kv();
                      // A batch of equal lengths is not ragged: keep it dense, one form per shape.
                      if (!l.uniform()) s.context_lengths = l;
                    }
                    s.heads = h;
                    s.kv_heads = hkv == 0 ? (a.latent_kv ? 1 : h) : hkv;
                    s.dtype = dt;
                    s.causal = causal;
                    s.block_rows = a.block_rows.empty() ? 128 : a.block_rows.front();
                    s.block_cols = bc;
                    s.seq_q = n;
                    s.head_dim = d;
                    s.splits = sp;
                    s.page_size = ps;
                    for_each_served(s, served, [&](const Shape& x) { visit(x); });
                  }
}

SweepAxes without_repeats(const SweepAxes& axes) {
  SweepAxes a = axes;
  drop_repeats(a.batch);
  drop_repeats(a.heads);
  drop_repeats(a.kv_heads);
  drop_repeats(a.seq);
  drop_repeats(a.seq_kv);
  drop_repeats(a.head_dim);
  drop_repeats(a.seq_head_dim);
  drop_repeats(a.dtype);
  drop_repeats(a.block_rows);
  drop_repeats(a.block_cols);
  drop_repeats(a.causal);
  drop_repeats(a.pass);
  drop_repeats(a.window);
  drop_repeats(a.chunk);
  drop_repeats(a.head_dim_v);
  drop_repeats(a.kv_dtype);
  return a;
}

}  // namespace

std::uint64_t shape_count(const SweepAxes& axes) {
  SweepAxes a = without_repeats(axes);
  // The served axes multiply every product (an upper bound: some combinations are left out).
  std::uint64_t total = 1;
  for (std::size_t n : {a.window.size(), a.chunk.size(), a.head_dim_v.size(), a.kv_dtype.size()})
    if (__builtin_mul_overflow(total, static_cast<std::uint64_t>(n), &total)) return UINT64_MAX;
  const std::size_t points = a.seq_head_dim.empty() ? 0 : a.seq_head_dim.size();
  if (a.decode) {  // expand_decode's product: (batch, seq_kv) or ragged batches; no block_rows, pass
    drop_repeats(a.context_lengths);
    drop_repeats(a.splits);
    drop_repeats(a.page_size);
    const std::size_t batches = a.context_lengths.empty() ? 0 : a.context_lengths.size();
    for (std::size_t n : {batches ? batches : a.batch.size(), batches ? std::size_t{1} : a.seq_kv.size(),
                          a.heads.size(), std::max<std::size_t>(a.kv_heads.size(), 1), a.dtype.size(),
                          a.causal.size(), a.block_cols.size(), points ? points : a.seq.size(),
                          points ? std::size_t{1} : a.head_dim.size(), a.splits.size(), a.page_size.size()})
      if (__builtin_mul_overflow(total, static_cast<std::uint64_t>(n), &total)) return UINT64_MAX;
    return total;
  }
  if (!a.seq_lens.empty()) {  // the batches stand for batch, seq and seq_kv; the head dims remain
    drop_repeats(a.seq_lens);
    std::vector<std::uint64_t> dims = a.head_dim;
    if (points) {
      dims.clear();
      for (auto [n, d] : a.seq_head_dim) dims.push_back(d);
    }
    drop_repeats(dims);
    for (std::size_t n : {a.seq_lens.size(), a.heads.size(), std::max<std::size_t>(a.kv_heads.size(), 1),
                          a.dtype.size(), a.causal.size(), a.block_rows.size(), a.block_cols.size(), dims.size(),
                          a.pass.size()})
      if (__builtin_mul_overflow(total, static_cast<std::uint64_t>(n), &total)) return UINT64_MAX;
    return total;
  }
  for (std::size_t n : {a.batch.size(), a.heads.size(), std::max<std::size_t>(a.kv_heads.size(), 1), a.dtype.size(),
                        a.causal.size(), a.block_rows.size(), a.block_cols.size(),
                        points ? points : a.seq.size(), points ? std::size_t{1} : a.head_dim.size(),
                        std::max<std::size_t>(a.seq_kv.size(), 1), a.pass.size()})
    if (__builtin_mul_overflow(total, static_cast<std::uint64_t>(n), &total)) return UINT64_MAX;
  return total;
}

std::vector<Shape> expand(const SweepAxes& axes) {
  std::vector<Shape> out;
  const std::uint64_t n = shape_count(axes);
  if (n <= max_sweep_shapes) out.reserve(static_cast<std::size_t>(n));
  for_each_shape(axes, [&out](const Shape& s) { out.push_back(s); });
  return out;
}

void for_each_shape(const SweepAxes& axes, const std::function<void(const Shape&)>& visit) {
  if (axes.decode) {
    SweepAxes a = axes;
    drop_repeats(a.batch);
    drop_repeats(a.heads);
    drop_repeats(a.kv_heads);
    drop_repeats(a.seq);
    drop_repeats(a.seq_kv);
    drop_repeats(a.head_dim);
    drop_repeats(a.seq_head_dim);
    drop_repeats(a.dtype);
    drop_repeats(a.block_cols);
    drop_repeats(a.causal);
    require_nonempty(a.batch, "batch");
    require_nonempty(a.heads, "heads");
    require_nonempty(a.dtype, "dtype");
    require_nonempty(a.block_cols, "block_cols");
    require_nonempty(a.causal, "causal");
    if (a.seq_head_dim.empty()) {
      require_nonempty(a.seq, "seq");
      require_nonempty(a.head_dim, "head_dim");
    }
    visit_decode(std::move(a), visit);
    return;
  }
  if (!axes.context_lengths.empty() || axes.splits != std::vector<std::uint64_t>{0} ||
      axes.page_size != std::vector<std::uint64_t>{default_page_size})
    throw Error("context lengths, splits and page size apply to decode rows only (add --decode)");
  // With every axis free of repeats the product has no repeated shape ("same
  // as the paired axis" is one value, so it cannot collide with another).
  SweepAxes a = without_repeats(axes);
  drop_repeats(a.seq_lens);
  check_batches(a.seq_lens, "seq-lens");
  const bool ragged_batches = !a.seq_lens.empty();
  require_nonempty(a.heads, "heads");
  require_nonempty(a.dtype, "dtype");
  require_nonempty(a.block_rows, "block_rows");
  require_nonempty(a.block_cols, "block_cols");
  require_nonempty(a.causal, "causal");
  require_nonempty(a.pass, "pass");
  std::vector<std::pair<std::uint64_t, std::uint64_t>> points = a.seq_head_dim;
  if (ragged_batches) {  // the batches give batch, seq and seq_kv: only the head dims remain
    std::vector<std::uint64_t> dims;
    if (points.empty()) dims = a.head_dim;
    else
      for (auto [n, d] : points) dims.push_back(d);
    drop_repeats(dims);
    require_nonempty(dims, "head_dim");
    points.clear();
    for (auto d : dims) points.emplace_back(0, d);
  } else {
    require_nonempty(a.batch, "batch");
    if (points.empty()) {
      require_nonempty(a.seq, "seq");
      require_nonempty(a.head_dim, "head_dim");
    }
  }
  const std::vector<std::uint64_t> same{0};  // 0 stands for "as the paired axis"
  const auto& kv_heads = a.kv_heads.empty() ? same : a.kv_heads;
  const auto& seq_kv = a.seq_kv.empty() || ragged_batches ? same : a.seq_kv;
  const std::size_t n_batches = ragged_batches ? a.seq_lens.size() : a.batch.size();
  const std::size_t n_points = !points.empty() ? points.size() : a.seq.size() * a.head_dim.size();
  const Served served = served_axes(a);

  // Size first, so that an enormous product is refused before it is built.
  // The exact count while it fits in 64 bits; past that a power of two, as
  // casting a huge floating count to an integer is undefined.
  std::uint64_t total = 1;
  long double approx = 1;
  bool wrapped = false;
  for (std::size_t n : {n_batches, a.heads.size(), kv_heads.size(), a.dtype.size(), a.causal.size(),
                        a.block_rows.size(), a.block_cols.size(), n_points, seq_kv.size(), a.pass.size(),
                        served.combos()}) {
    wrapped = wrapped || __builtin_mul_overflow(total, static_cast<std::uint64_t>(n), &total);
    approx *= static_cast<long double>(n);
  }
  if (wrapped || total > max_sweep_shapes)
    throw Error("sweep too large: " +
                (wrapped ? "about 2^" + std::to_string(std::lround(std::log2(approx))) : std::to_string(total)) +
                " shapes (at most " + std::to_string(max_sweep_shapes) + "); sweep fewer values");
  if (ragged_batches) check_sequences(a.seq_lens, total / n_batches);

  if (points.empty())
    for (auto n : a.seq)
      for (auto d : a.head_dim) points.emplace_back(n, d);

  for (std::size_t bi = 0; bi < n_batches; ++bi)
    for (auto h : a.heads)
      for (auto hkv : kv_heads)
        for (auto dt : a.dtype)
          for (bool causal : a.causal)
            for (auto br : a.block_rows)
              for (auto bc : a.block_cols)
                for (auto [n, d] : points)
                  for (auto nkv : seq_kv)
                    for (Pass pass : a.pass) {
                      Shape s;
                      s.pass = pass;
                      if (ragged_batches) {
                        const SeqList& l = a.seq_lens[bi];
                        s.batch = l.size();
                        s.seq_q = l.max_q();
                        s.seq_kv = l.max_kv();
                        // Equal sequences are a dense batch: one form per shape.
                        if (!l.uniform()) s.seq_lens = l;
                      } else {
                        s.batch = a.batch[bi];
                        s.seq_q = n;
                        s.seq_kv = nkv == 0 ? n : nkv;
                      }
                      s.heads = h;
                      s.kv_heads = hkv == 0 ? (a.latent_kv ? 1 : h) : hkv;
                      s.dtype = dt;
                      s.causal = causal;
                      s.block_rows = br;
                      s.block_cols = bc;
                      s.head_dim = d;
                      for_each_served(s, served, [&](const Shape& x) { visit(x); });
                    }
}

Row model_row(const Shape& s) { return model_row(s, ModelOptions{}); }

Row decode_row(const Shape& s, std::uint64_t sm_count) {
  Row r;
  r.shape = s;
  r.decode_sm_count = sm_count;
  try {
    validate(s);
    r.flops = decode_flops(s);
    for (DecodeVariant v : all_decode_variants) {
      VariantResult res;
      res.id = std::string(decode_variant_id(v));
      res.splits = decode_splits(s, v, sm_count);
      res.decode = decode_bytes(s, v, res.splits);
      res.bytes = res.decode->total;
      res.intensity = intensity(r.flops, res.bytes);
      r.variants.push_back(std::move(res));
    }
  } catch (const Error& e) {
    throw Error("shape " + describe(s) + ": " + e.what());
  }
  return r;
}

Row model_row(const Shape& s, const ModelOptions& options) {
  if (s.decode) return decode_row(s, options.sm_count);
  ModelBytes m;
  std::uint64_t flash1 = 0;
  const bool with_flash1 = options.flash1 && s.pass == Pass::fwd;
  try {
    m = evaluate(s);
    if (with_flash1) flash1 = flash1_no_l2_bytes(s);
  } catch (const Error& e) {
    throw Error("shape " + describe(s) + ": " + e.what());
  }
  Row r;
  r.shape = s;
  r.flops = m.flops;
  r.variants = {
      {"standard", m.standard, intensity(m.flops, m.standard)},
      {"flash_no_l2", m.flash_no_l2, intensity(m.flops, m.flash_no_l2)},
      {"floor", m.floor, intensity(m.flops, m.floor)},
  };
  if (with_flash1)
    r.variants.insert(r.variants.begin() + 1, {"flash1_no_l2", flash1, intensity(m.flops, flash1)});
  return r;
}

std::vector<Row> model_rows(const std::vector<Shape>& shapes, const Progress& progress) {
  return model_rows(shapes, ModelOptions{}, progress);
}

std::vector<Row> model_rows(const std::vector<Shape>& shapes, const ModelOptions& options,
                            const Progress& progress) {
  std::vector<Row> rows;
  rows.reserve(shapes.size());
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    rows.push_back(model_row(shapes[i], options));
    if (progress) progress(i + 1, shapes.size());
  }
  return rows;
}

}  // namespace hbmscope
