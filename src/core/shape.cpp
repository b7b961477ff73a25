#include "hbmscope/shape.hpp"

#include <algorithm>
#include <string>

#include "hbmscope/checked.hpp"
#include "hbmscope/decode.hpp"
#include "hbmscope/error.hpp"

namespace hbmscope {

void throw_overflow(std::string_view what) {
  throw Error("size too large: " + std::string(what) + " overflows a 64-bit count");
}

std::string_view dtype_name(Dtype d) {
  switch (d) {
    case Dtype::fp32: return "fp32";
    case Dtype::fp16: return "fp16";
    case Dtype::bf16: return "bf16";
    case Dtype::fp8: return "fp8";
  }
  return "?";
}

std::optional<Dtype> parse_dtype(std::string_view s) {
  for (Dtype d : {Dtype::fp32, Dtype::fp16, Dtype::bf16, Dtype::fp8})
    if (s == dtype_name(d)) return d;
  return std::nullopt;
}

std::uint64_t elem_bytes(Dtype d) {
  switch (d) {
    case Dtype::fp32: return 4;
    case Dtype::fp16: return 2;
    case Dtype::bf16: return 2;
    case Dtype::fp8: return 1;
  }
  return 0;
}

std::string_view pass_name(Pass p) {
  switch (p) {
    case Pass::fwd: return "fwd";
    case Pass::bwd: return "bwd";
    case Pass::fwdbwd: return "fwdbwd";
  }
  return "?";
}

std::optional<Pass> parse_pass(std::string_view s) {
  for (Pass p : {Pass::fwd, Pass::bwd, Pass::fwdbwd})
    if (s == pass_name(p)) return p;
  return std::nullopt;
}

namespace {
// Keeps signed offsets (Nkv - Nq) and tile arithmetic far from the 64-bit edge;
// byte counts past it are refused by checked arithmetic anyway.
constexpr std::uint64_t max_dimension = std::uint64_t{1} << 48;

void require_positive(std::uint64_t v, const char* name) {
  if (v == 0) throw Error(std::string(name) + " must be positive, got 0");
  if (v > max_dimension)
    throw Error("size too large: " + std::string(name) + " = " + std::to_string(v) +
                " exceeds 2^48");
}
}  // namespace

namespace {
void validate_seq_lens(const Shape& s) {
  const SeqList& l = s.seq_lens;
  if (s.decode) throw Error("seq-lens are prefill sequences; a decode row takes context lengths");
  if (l.size() != s.batch)
    throw Error("seq-lens: " + std::to_string(l.size()) + " sequences for batch " + std::to_string(s.batch));
  for (const SeqGroup& g : l.groups()) {
    require_positive(g.item.q, "seq-lens: a sequence's queries");
    require_positive(g.item.kv, "seq-lens: a sequence's keys");
    if (g.item.q > g.item.kv)
      throw Error("seq-lens: " + std::to_string(g.item.q) + ":" + std::to_string(g.item.kv) +
                  " has more new tokens than keys (Q:KV counts the Q new tokens in KV)");
  }
  if (l.max_q() != s.seq_q || l.max_kv() != s.seq_kv)
    throw Error("seq-lens: seq (" + std::to_string(s.seq_q) + ") and seq-kv (" + std::to_string(s.seq_kv) +
                ") must be the longest sequence's (" + std::to_string(l.max_q()) + ", " +
                std::to_string(l.max_kv()) + ")");
}
}  // namespace

Shape sequence_shape(const Shape& s, const SeqGroup& g) {
  Shape one = s;
  one.seq_lens = {};
  one.batch = g.count;
  one.seq_q = g.item.q;
  one.seq_kv = g.item.kv;
  return one;
}

void validate(const Shape& s) {
  require_positive(s.batch, "batch");
  require_positive(s.heads, "heads");
  require_positive(s.kv_heads, "kv-heads");
  require_positive(s.seq_q, "seq");
  require_positive(s.seq_kv, "seq-kv");
  require_positive(s.head_dim, "head-dim");
  require_positive(s.block_rows, "block-rows");
  require_positive(s.block_cols, "block-cols");
  if (s.kv_heads > s.heads || s.heads % s.kv_heads != 0)
    throw Error("heads (" + std::to_string(s.heads) + ") must be a multiple of kv-heads (" +
                std::to_string(s.kv_heads) + ")");
  if (s.window != 0 || s.chunk != 0) {
    const char* what = s.window != 0 ? "window" : "chunk";
    require_positive(s.window != 0 ? s.window : s.chunk, what);
    if (!s.causal) throw Error(std::string(what) + " applies to a causal mask only (add --causal)");
    if (s.window != 0 && s.chunk != 0) throw Error("window and chunk cannot be combined on one shape");
  }
  if (s.head_dim_v != 0) require_positive(s.head_dim_v, "head-dim-v");
  if (s.latent_kv) {
    if (s.kv_heads != 1) throw Error("latent KV (MLA) has one KV head, got kv-heads " + std::to_string(s.kv_heads));
    if (value_head_dim(s) > s.head_dim)
      throw Error("latent KV (MLA): V is the first head-dim-v (" + std::to_string(value_head_dim(s)) +
                  ") of the head-dim (" + std::to_string(s.head_dim) + ") latent values");
  }
  if (s.latent_kv && s.pass != Pass::fwd)
    throw Error("latent KV (MLA, absorbed) is an inference form: pass fwd only");
  if (!s.seq_lens.empty()) validate_seq_lens(s);
  if (!s.decode) {
    if (!s.context_lengths.empty()) throw Error("context lengths apply to decode rows only");
    if (s.splits != 0) throw Error("splits apply to decode rows only");
    if (s.page_size != default_page_size) throw Error("page-size applies to decode rows only");
    return;
  }
  const auto n = std::to_string(max_decode_seq_q);
  if (s.seq_q > max_decode_seq_q)
    throw Error("seq: a decode row has 1 to " + n + " new tokens per sequence, got " + std::to_string(s.seq_q));
  if (s.pass != Pass::fwd) throw Error("a decode row is a forward pass (pass fwd)");
  require_positive(s.page_size, "page-size");
  if (s.splits > max_decode_splits)
    throw Error("splits: at most " + std::to_string(max_decode_splits) + ", got " + std::to_string(s.splits));
  if (!s.context_lengths.empty()) {
    if (s.context_lengths.size() != s.batch)
      throw Error("context lengths: " + std::to_string(s.context_lengths.size()) + " lengths for batch " +
                  std::to_string(s.batch));
    for (const SeqGroup& l : s.context_lengths.groups()) {
      require_positive(l.item.kv, "context length");
      if (l.item.q != 0) throw Error("context lengths: a decode sequence's new tokens are seq, not Q:KV items");
    }
    const std::uint64_t longest = s.context_lengths.max_kv();
    if (longest != s.seq_kv)
      throw Error("seq-kv (" + std::to_string(s.seq_kv) + ") must be the longest context length (" +
                  std::to_string(longest) + ")");
  }
  if (s.causal) {  // the shortest context (a dense batch has one length, whatever its size)
    const std::uint64_t shortest = s.context_lengths.empty() ? s.seq_kv : s.context_lengths.min_kv();
    if (shortest < s.seq_q)
      throw Error("causal decode: a context length (" + std::to_string(shortest) + ") is shorter than the " +
                  std::to_string(s.seq_q) + " new tokens it includes");
  }
}

std::uint64_t query_blocks(const Shape& s) { return ceil_div(s.seq_q, s.block_rows); }
std::uint64_t key_blocks(const Shape& s) { return ceil_div(s.seq_kv, s.block_cols); }
std::uint64_t group_size(const Shape& s) { return s.heads / s.kv_heads; }

namespace {
// ", causal, window 4096, dv 128, kv fp8, latent kv": what describe() adds for
// the mask and the operand shapes.
void append_served(std::string& r, const Shape& s) {
  if (s.causal) r.append(", causal");
  if (s.window != 0) r.append(", window ").append(std::to_string(s.window));
  if (s.chunk != 0) r.append(", chunk ").append(std::to_string(s.chunk));
  if (s.head_dim_v != 0) r.append(", dv ").append(std::to_string(s.head_dim_v));
  if (s.kv_dtype) r.append(", kv ").append(dtype_name(*s.kv_dtype));
  if (s.latent_kv) r.append(", latent kv");
}

// "decode 1/131072 x 128 (batch 3 ragged 512..131072 summing to 135680, ...)".
std::string describe_decode(const Shape& s) {
  std::string r = "decode " + std::to_string(s.seq_q) + "/" + std::to_string(s.seq_kv) + " x " +
                  std::to_string(s.head_dim) + " (batch " + std::to_string(s.batch);
  if (ragged(s)) {
    const SeqList& l = s.context_lengths;
    r.append(" ragged ").append(std::to_string(l.min_kv())).append("..").append(std::to_string(l.max_kv()));
    if (const auto sum = l.total_kv()) r.append(", ").append(std::to_string(*sum)).append(" tokens");
  }
  r.append(", ").append(std::to_string(s.heads)).append(s.heads == 1 ? " head" : " heads");
  if (s.kv_heads != s.heads) r.append(", ").append(std::to_string(s.kv_heads)).append(" kv-heads");
  r.append(", ").append(dtype_name(s.dtype));
  r.append(", key block ").append(std::to_string(s.block_cols));
  r.append(", page ").append(std::to_string(s.page_size));
  if (s.splits != 0) r.append(", ").append(std::to_string(s.splits)).append(" splits");
  append_served(r, s);
  return r.append(")");
}
}  // namespace

std::string describe(const Shape& s) {
  if (s.decode) return describe_decode(s);
  std::string r;
  if (ragged_prefill(s)) {
    // "ragged 512..4096/4096 x 64 (batch 3, 4608 queries, ..."
    const SeqList& l = s.seq_lens;
    r = "ragged " + std::to_string(l.min_q()) + ".." + std::to_string(l.max_q());
    if (l.min_kv() != l.min_q() || l.max_kv() != l.max_q())
      r.append("/").append(std::to_string(l.min_kv())).append("..").append(std::to_string(l.max_kv()));
    r.append(" x ").append(std::to_string(s.head_dim));
    r.append(" (batch ").append(std::to_string(s.batch));
    if (const auto q = l.total_q()) r.append(", ").append(std::to_string(*q)).append(" queries");
    r.append(", ");
  } else {
    r = std::to_string(s.seq_q);
    if (s.seq_kv != s.seq_q) r.append("/").append(std::to_string(s.seq_kv));
    r.append(" x ").append(std::to_string(s.head_dim));
    r.append(" (batch ").append(std::to_string(s.batch)).append(", ");
  }
  r.append(std::to_string(s.heads)).append(s.heads == 1 ? " head" : " heads");
  if (s.kv_heads != s.heads) r.append(", ").append(std::to_string(s.kv_heads)).append(" kv-heads");
  r.append(", ").append(dtype_name(s.dtype));
  r.append(", blocks ").append(std::to_string(s.block_rows)).append(" x ");
  r.append(std::to_string(s.block_cols));
  append_served(r, s);
  if (s.pass == Pass::bwd) r.append(", backward");
  if (s.pass == Pass::fwdbwd) r.append(", forward + backward");
  return r.append(")");
}

std::int64_t causal_offset(const Shape& s) {
  return static_cast<std::int64_t>(s.seq_kv) - static_cast<std::int64_t>(s.seq_q);
}

}  // namespace hbmscope
