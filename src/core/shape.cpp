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
    std::uint64_t longest = 0;
    for (auto l : s.context_lengths) {
      require_positive(l, "context length");
      longest = std::max(longest, l);
    }
    if (longest != s.seq_kv)
      throw Error("seq-kv (" + std::to_string(s.seq_kv) + ") must be the longest context length (" +
                  std::to_string(longest) + ")");
  }
  if (s.causal) {  // the shortest context (a dense batch has one length, whatever its size)
    std::uint64_t shortest = s.seq_kv;
    for (auto l : s.context_lengths) shortest = std::min(shortest, l);
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
    const auto [lo, hi] = std::minmax_element(s.context_lengths.begin(), s.context_lengths.end());
    std::uint64_t sum = 0;
    bool wrapped = false;
    for (auto l : s.context_lengths) wrapped = wrapped || __builtin_add_overflow(sum, l, &sum);
    r.append(" ragged ").append(std::to_string(*lo)).append("..").append(std::to_string(*hi));
    if (!wrapped) r.append(", ").append(std::to_string(sum)).append(" tokens");
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
  std::string r = std::to_string(s.seq_q);
  if (s.seq_kv != s.seq_q) r.append("/").append(std::to_string(s.seq_kv));
  r.append(" x ").append(std::to_string(s.head_dim));
  r.append(" (batch ").append(std::to_string(s.batch)).append(", ");
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
