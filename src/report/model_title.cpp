// The model (sweep) table's title lines and the shape labels its cells, and
// the measurement table's, are made of.
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <string>
#include <vector>

#include "printers_internal.hpp"

namespace hbmscope::printing {

namespace {

std::string upper(std::string_view s) {
  std::string r(s);
  for (char& c : r) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return r;
}

std::string pass_title(Pass p) {
  switch (p) {
    case Pass::fwd: return "forward pass";
    case Pass::bwd: return "backward pass";
    case Pass::fwdbwd: return "forward + backward pass";
  }
  return {};
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

// A line for whole-model rows: what a kind row and the total hold.
std::string models_title(const Report& rep) {
  if (std::none_of(rep.rows.begin(), rep.rows.end(), [](const Row& r) { return r.model_layers.has_value(); }))
    return {};
  return "\nWhole models: a row per kind of layer (bytes, FLOPs and time of all its layers) and their total; "
         "KV cache = the keys the step's queries see (a window layer at most W + Nq - 1 per sequence) for the whole "
         "batch, KV/token = one token's K and V in those layers";
}

}  // namespace

std::string model_layers_label(const Row& r) {
  if (!r.model_layers) return "-";
  const ModelLayers& m = *r.model_layers;
  std::string t = std::to_string(m.layers) + " " + m.kind;
  if (r.shape.window != 0 && m.kind != total_kind) t += " (W " + std::to_string(r.shape.window) + ")";
  if (r.shape.chunk != 0 && m.kind != total_kind) t += " (C " + std::to_string(r.shape.chunk) + ")";
  return t;
}

std::string seq_label(const Shape& s) {
  if (s.decode)  // "1/≤131072 × 128": Nq new tokens against the (longest) context
    return std::to_string(s.seq_q) + "/" + (ragged(s) ? "≤" : "") + std::to_string(s.seq_kv) + " × " +
           std::to_string(s.head_dim);
  // A ragged prefill batch: its longest sequence's queries and keys, "≤4096/≤8192 × 128".
  const std::string up_to = ragged_prefill(s) ? "≤" : "";
  std::string r = up_to + std::to_string(s.seq_q);
  const bool cross = ragged_prefill(s) ? std::any_of(s.seq_lens.begin(), s.seq_lens.end(),
                                                     [](const SeqLen& x) { return x.q != x.kv; })
                                       : s.seq_kv != s.seq_q;
  if (cross) {
    r += '/';
    r += up_to + std::to_string(s.seq_kv);
  }
  r += " × ";
  r += std::to_string(s.head_dim);
  return r;
}

std::string mask_label(const Shape& s) {
  if (s.window != 0) return "window " + std::to_string(s.window);
  if (s.chunk != 0) return "chunk " + std::to_string(s.chunk);
  return "-";
}

std::string mask_label(const Row& r) {
  if (r.model_layers && r.model_layers->mixed_masks) return "mixed";
  return mask_label(r.shape);
}

std::string sequences_label(const Shape& s) {
  if (!ragged_prefill(s)) return "-";
  const SeqList& l = s.seq_lens;
  const auto range = [](std::uint64_t lo, std::uint64_t hi) {
    return lo == hi ? std::to_string(lo) : std::to_string(lo) + ".." + std::to_string(hi);
  };
  std::string t = std::to_string(l.size()) + " seqs";
  const bool self = std::all_of(l.begin(), l.end(), [](const SeqLen& x) { return x.q == x.kv; });
  if (self) t += " of " + range(l.min_q(), l.max_q());
  else t += ", q " + range(l.min_q(), l.max_q()) + " of kv " + range(l.min_kv(), l.max_kv());
  if (const auto q = l.total_q()) t += std::string(self ? " (Σ " : " (Σq ") + std::to_string(*q) + ")";
  return t;
}

std::string heads_label(const Shape& s) {
  if (s.kv_heads == s.heads) return std::to_string(s.heads);
  return std::to_string(s.heads) + "/" + std::to_string(s.kv_heads);
}

std::string blocks_label(const Shape& s) {
  return std::to_string(s.block_rows) + "×" + std::to_string(s.block_cols);
}

std::string pass_label(Pass p) {
  switch (p) {
    case Pass::fwd: return "forward";
    case Pass::bwd: return "backward";
    case Pass::fwdbwd: return "fwd + bwd";
  }
  return {};
}

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
    v.mask |= b.window != a.window || b.chunk != a.chunk;
    v.head_dim_v |= b.head_dim_v != a.head_dim_v;  // set or not: DV = d is no column of its own
    v.kv_dtype |= b.kv_dtype != a.kv_dtype;
    v.latent_kv |= b.latent_kv != a.latent_kv;
  }
  return v;
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
  if (!v.mask && s.window != 0) t += ", window " + std::to_string(s.window);
  if (!v.mask && s.chunk != 0) t += ", chunk " + std::to_string(s.chunk);
  if (!v.head_dim_v && s.head_dim_v != 0) t += ", V and O of head dim " + std::to_string(s.head_dim_v);
  if (!v.kv_dtype && s.kv_dtype) t += ", K and V in " + upper(dtype_name(*s.kv_dtype));
  if (!v.latent_kv && s.latent_kv) t += ", latent KV (MLA, absorbed)";
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
  return t + decode_title(rep) + models_title(rep);
}

}  // namespace hbmscope::printing
