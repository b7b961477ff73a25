// The shape options shared by model, sweep, walk, measure and reconcile: their
// definitions and help, the list files of --context-lengths and --seq-lens, and
// the sweep axes they describe. Parsing only (options.hpp).
#include <algorithm>
#include <set>
#include <tuple>

#include "hbmscope/error.hpp"
#include "hbmscope/length_list.hpp"
#include "hbmscope/decode.hpp"
#include "options.hpp"

namespace hbmscope::cli {

void add_shape_options(CLI::App& app, ShapeOptions& o) {
  app.add_option("--seq", o.seq,
                 "Query sequence length(s) Nq, e.g. 4096 or 1K:64K:x2 [default: the note's rows, "
                 "4096 when --head-dim is given]")
      ->type_name("LIST");
  app.add_option("--seq-kv", o.seq_kv, "Key/value sequence length(s) Nkv, e.g. 8192 [default: = --seq]")
      ->type_name("LIST");
  app.add_option("--head-dim", o.head_dim,
                 "Head dimension(s) d, e.g. 64,128 [default: the note's rows, 64 when --seq is "
                 "given]")
      ->type_name("LIST");
  app.add_option("--batch", o.batch, "Batch size(s), e.g. 8 [default: 1]")->type_name("LIST");
  app.add_option("--heads", o.heads, "Query heads H, e.g. 32 [default: 1]")->type_name("LIST");
  app.add_option("--kv-heads", o.kv_heads,
                 "Key/value heads Hkv (GQA; H a multiple of it), e.g. 8 [default: = --heads]")
      ->type_name("LIST");
  app.add_option("--dtype", o.dtype, "Element type(s): fp32 (4 B), fp16, bf16 (2 B), fp8 (1 B) [default: bf16]")
      ->type_name("LIST");
  app.add_option("--block-rows", o.block_rows, "FlashAttention query block Br, e.g. 64,128 [default: 128]")
      ->type_name("LIST");
  app.add_option("--block-cols", o.block_cols, "FlashAttention key block Bc, e.g. 64 [default: 128]")
      ->type_name("LIST");
  app.add_flag("--causal", o.causal,
               "Causal mask: query row r sees key c iff c <= r + (Nkv - Nq); FLOPs count the "
               "visible pairs");
  app.add_option("--pass", o.pass,
                 "Pass(es) counted: fwd (forward), bwd (backward, from dO), fwdbwd (both, one "
                 "training step), e.g. fwd,bwd [default: fwd]")
      ->type_name("LIST");
  app.add_flag("--decode", o.decode,
               "Decode rows: --seq new tokens (1-8, default 1) per sequence against a KV cache of "
               "--seq-kv tokens; variants decode_floor, decode_split, decode_split_unpacked, "
               "decode_paged (docs/model.md)");
  app.add_option("--context-lengths", o.context_lengths,
                 "Decode: one ragged batch, a context length per sequence (summed exactly), e.g. "
                 "512,4096,128K or @lengths.txt; implies --decode, sets the batch and --seq-kv")
      ->type_name("LIST|@FILE")
      ->check(not_empty());
  app.add_option("--splits", o.splits,
                 "Decode: KV splits, e.g. 8 or 1,4,16 [default: FlashAttention's heuristic on the "
                 "SM count of --sms or --device, else 132]")
      ->type_name("LIST");
  app.add_option("--page-size", o.page_size,
                 "Decode: tokens per KV cache page for decode_paged, e.g. 16,256 [default: 16]")
      ->type_name("LIST");
  app.add_option("--window", o.window,
                 "Sliding window W (with --causal): the query at position p sees keys p - W < c <= p, "
                 "itself and the W - 1 before it (flash-attn's window_size=(W-1, 0); the sliding_window "
                 "of Mistral, Gemma 2/3, GPT-OSS); cuts the key blocks each query block visits, the keys "
                 "the floor reads and a decode step's cache to the last min(L, W) keys; a list sweeps "
                 "them, 0 = none, e.g. 4096 or 0,4096 [default: none]")
      ->type_name("LIST");
  app.add_option("--chunk", o.chunk,
                 "Chunked attention C (with --causal; Llama 4's attention_chunk_size): p sees keys "
                 "c <= p of its own chunk, floor(c/C) = floor(p/C); a decode step reads the current "
                 "chunk; 0 = none, e.g. 8192 [default: none]")
      ->type_name("LIST");
  app.add_option("--head-dim-v", o.head_dim_v,
                 "Head dim DV of V and O when it differs from --head-dim d (Q and K); FLOPs are "
                 "2d + 2DV per (query, key) pair; e.g. --head-dim 192 --head-dim-v 128 (MLA prefill) "
                 "[default: = --head-dim]")
      ->type_name("LIST");
  app.add_option("--kv-dtype", o.kv_dtype,
                 "Element type of K and V (the KV cache) when it differs from --dtype, which Q, O, S "
                 "and P keep: fp32, fp16, bf16, fp8 or same, e.g. fp8 (an fp8 cache under bf16) "
                 "[default: same]")
      ->type_name("LIST");
  app.add_option("--mla", o.mla,
                 "MLA in its absorbed form (FlashMLA's decode): one latent KV head of R + P values per "
                 "token (kv_lora_rank R, qk_rope_head_dim P), read once for all query heads, serving as K "
                 "(all R + P) and V (its first R); Q of R + P and O of R per query head. Sets "
                 "--head-dim R+P, --head-dim-v R, --kv-heads 1 (shape field latent_kv), e.g. 512,64 "
                 "(DeepSeek-V3, Kimi K2)")
      ->type_name("R,P");
  app.add_option("--seq-lens", o.seq_lens,
                 "Ragged prefill: one batch of sequences, each attending only to itself (add --causal "
                 "for a decoder), summed exactly: L (L queries against themselves) or Q:KV (chunked "
                 "prefill: Q new tokens against a cached prefix of KV - Q plus themselves), e.g. "
                 "512,4096,1K:8K or @lens.txt; sets the batch, --seq and --seq-kv")
      ->type_name("LIST|@FILE")
      ->check(not_empty());
}

bool ShapeOptions::any() const {
  return seq || head_dim || seq_kv || batch || heads || kv_heads || dtype || block_rows || block_cols || causal ||
         pass || decode || context_lengths || splits || page_size || window || chunk || head_dim_v || kv_dtype ||
         mla || seq_lens;
}

std::vector<std::uint64_t> parse_context_lengths(const std::string& text) {
  return read_length_list(text, "context-lengths");
}

std::vector<SeqLen> parse_seq_lens(const std::string& text) { return read_seq_len_list(text, "seq-lens"); }

namespace {

// --window, --chunk, --head-dim-v, --kv-dtype, --mla, --seq-lens.
void apply_served_options(SweepAxes& a, const ShapeOptions& o) {
  if (o.window) a.window = parse_int_axis_or_none(*o.window, "window");
  if (o.chunk) a.chunk = parse_int_axis_or_none(*o.chunk, "chunk");
  for (const auto& [given, axis, name] : {std::tuple{o.window.has_value(), &a.window, "--window"},
                                          std::tuple{o.chunk.has_value(), &a.chunk, "--chunk"}}) {
    const bool any = std::any_of(axis->begin(), axis->end(), [](std::uint64_t v) { return v != 0; });
    if (given && any && std::find(a.causal.begin(), a.causal.end(), true) == a.causal.end())
      throw UsageError(std::string(name) + ": narrows the causal mask; add --causal");
  }
  if (o.head_dim_v) a.head_dim_v = parse_int_axis_or_none(*o.head_dim_v, "head-dim-v");
  if (o.kv_dtype) a.kv_dtype = parse_kv_dtype_axis(*o.kv_dtype, "kv-dtype");
  if (o.mla) {
    if (o.head_dim || o.head_dim_v || o.kv_heads)
      throw UsageError("--mla: sets --head-dim (R + P), --head-dim-v (R) and --kv-heads (1); drop those");
    const auto rp = parse_int_axis(*o.mla, "mla");
    if (rp.size() != 2)
      throw UsageError("--mla: '" + *o.mla + "' must be two values R,P (kv_lora_rank, qk_rope_head_dim), e.g. 512,64");
    if (rp[0] > (std::uint64_t{1} << 48) || rp[1] > (std::uint64_t{1} << 48))
      throw Error("--mla: '" + *o.mla + "' exceeds 2^48");
    if (!a.seq_head_dim.empty()) {  // (seq, head_dim) points: their sequence lengths stay
      std::set<std::uint64_t> seqs;
      for (auto [n, d] : a.seq_head_dim) seqs.insert(n);
      a.seq.assign(seqs.begin(), seqs.end());
      a.seq_head_dim.clear();
    }
    a.head_dim = {rp[0] + rp[1]};
    a.head_dim_v = {rp[0]};
    a.kv_heads = {1};
    a.latent_kv = true;
  }
  if (o.seq_lens) {
    if (a.decode)
      throw UsageError("--seq-lens: prefill sequences; a decode batch is --context-lengths");
    if (o.batch || o.seq || o.seq_kv)
      throw UsageError("--seq-lens: gives the batch, --seq and --seq-kv; drop those");
    a.seq_lens = {SeqList(parse_seq_lens(*o.seq_lens))};
  }
}

}  // namespace

void apply_shape_options(SweepAxes& a, const ShapeOptions& o) {
  if (o.seq || o.head_dim) {
    if (!a.seq_head_dim.empty()) {
      std::set<std::uint64_t> seqs, dims;
      for (auto [n, d] : a.seq_head_dim) seqs.insert(n), dims.insert(d);
      a.seq.assign(seqs.begin(), seqs.end());
      a.head_dim.assign(dims.begin(), dims.end());
      a.seq_head_dim.clear();
    }
    if (o.seq) a.seq = parse_int_axis(*o.seq, "seq");
    if (o.head_dim) a.head_dim = parse_int_axis(*o.head_dim, "head-dim");
  }
  if (o.seq_kv) a.seq_kv = parse_int_axis(*o.seq_kv, "seq-kv");
  if (o.batch) a.batch = parse_int_axis(*o.batch, "batch");
  if (o.heads) a.heads = parse_int_axis(*o.heads, "heads");
  if (o.kv_heads) a.kv_heads = parse_int_axis(*o.kv_heads, "kv-heads");
  if (o.dtype) a.dtype = parse_dtype_axis(*o.dtype, "dtype"), a.dtype_given = true;
  if (o.block_rows) a.block_rows = parse_int_axis(*o.block_rows, "block-rows");
  if (o.block_cols) a.block_cols = parse_int_axis(*o.block_cols, "block-cols");
  if (o.causal) a.causal = {true};
  if (o.pass) a.pass = parse_pass_axis(*o.pass, "pass");
  if (o.decode || o.context_lengths) a.decode = true;
  if (o.context_lengths) {
    const auto lengths = parse_context_lengths(*o.context_lengths);
    if (lengths.size() > max_context_lengths)
      throw Error("--context-lengths: more than " + std::to_string(max_context_lengths) + " lengths");
    if (o.batch || o.seq_kv)
      throw UsageError("--context-lengths: gives the batch and the context lengths; drop --batch and --seq-kv");
    a.context_lengths = {SeqList(lengths)};
  }
  if ((o.splits || o.page_size) && !a.decode)
    throw UsageError(std::string(o.splits ? "--splits" : "--page-size") + ": applies to decode rows (add --decode)");
  // Decode rows take key blocks only and are one forward pass: these would do nothing.
  if (a.decode && o.block_rows)
    throw UsageError("--block-rows: decode rows have no query blocks (their key blocks are --block-cols); drop --block-rows");
  if (a.decode && o.pass)
    for (Pass p : a.pass)
      if (p != Pass::fwd) throw UsageError("--pass: decode rows are a forward pass (--pass fwd)");
  if (a.decode && o.seq)
    for (auto n : a.seq)
      if (n > max_decode_seq_q)
        throw UsageError("--seq: a decode row has 1 to " + std::to_string(max_decode_seq_q) +
                         " new tokens per sequence, got " + std::to_string(n));
  if (o.splits) {
    a.splits = parse_int_axis(*o.splits, "splits");
    for (auto s : a.splits)
      if (s > max_decode_splits)
        throw UsageError("--splits: " + std::to_string(s) + " is more than " + std::to_string(max_decode_splits));
  }
  if (o.page_size) a.page_size = parse_int_axis(*o.page_size, "page-size");
  apply_served_options(a, o);
}

SweepAxes to_axes(const ShapeOptions& o) {
  if (o.decode || o.context_lengths) {  // decode defaults: one new token, d = 128 (Llama, Mistral)
    SweepAxes a;
    a.seq = {1};
    a.head_dim = {128};
    apply_shape_options(a, o);
    return a;
  }
  SweepAxes a = o.seq || o.head_dim || o.mla || o.seq_lens ? SweepAxes{} : note_axes();
  apply_shape_options(a, o);
  return a;
}

}  // namespace hbmscope::cli
