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
std::string decode_title(const Report& head, const RowsLayout& l) {
  if (!l.first_decode) return {};
  const Row& first = *l.first_decode;
  std::string t = "\nDecode rows: Nq new tokens per sequence against its KV cache (Nq/longest context × d); splits ";
  t += first.shape.splits != 0 ? std::string("as given (--splits)")
                               : "from FlashAttention's heuristic on " +
                                     (l.decode_mixed ? std::string("each row's") : std::to_string(first.decode_sm_count)) +
                                     " SMs";
  if (!l.decode_mixed) t += "; pages of " + std::to_string(first.shape.page_size) + " tokens";
  if (head.roofline && l.decode_to_ridge > 0 && l.decode_to_ridge < 1) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "; at most 1/%.0f of the ridge point: memory-bound", 1.0 / l.decode_to_ridge);
    t += buf;
  }
  return t;
}

// A line for whole-model rows: what a kind row and the total hold.
std::string models_title(const RowsLayout& layout) {
  if (!layout.any_model) return {};
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

std::string title(const Report& rep, const RowsLayout& layout) {
  if (!layout.first) return "No shapes.";
  const ShapeVaries& v = layout.varies;
  const Shape& s = layout.first->shape;
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
  std::string t = who + ", " + (layout.all_decode ? std::string("one decode step") : v.pass ? std::string("by pass") : pass_title(s.pass)) + " (model";
  if (!v.dtype) t += ", " + upper(dtype_name(s.dtype));
  if (layout.all_decode && !v.blocks) {
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
  if (const auto& l2 = layout.first->l2_sim)
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
           format_intensity(layout.first->ridge_point);
    }
    t += "; time = max(bytes / bandwidth, FLOPs / peak)";
  }
  return t + decode_title(rep, layout) + models_title(layout);
}

}  // namespace hbmscope::printing
