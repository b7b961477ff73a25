#include "hbmscope/shape.hpp"

#include <string>

#include "hbmscope/checked.hpp"
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
}

std::uint64_t query_blocks(const Shape& s) { return ceil_div(s.seq_q, s.block_rows); }
std::uint64_t key_blocks(const Shape& s) { return ceil_div(s.seq_kv, s.block_cols); }
std::uint64_t group_size(const Shape& s) { return s.heads / s.kv_heads; }

std::string describe(const Shape& s) {
  std::string r = std::to_string(s.seq_q);
  if (s.seq_kv != s.seq_q) {  // appended in two steps: GCC 12 warns (-Wrestrict) on "/" + string
    r += '/';
    r += std::to_string(s.seq_kv);
  }
  r += " x " + std::to_string(s.head_dim) + " (batch " + std::to_string(s.batch) + ", " +
       std::to_string(s.heads) + (s.heads == 1 ? " head" : " heads");
  if (s.kv_heads != s.heads) r += ", " + std::to_string(s.kv_heads) + " kv-heads";
  r += ", " + std::string(dtype_name(s.dtype)) + ", blocks " + std::to_string(s.block_rows) +
       " x " + std::to_string(s.block_cols);
  if (s.causal) r += ", causal";
  return r + ")";
}

std::int64_t causal_offset(const Shape& s) {
  return static_cast<std::int64_t>(s.seq_kv) - static_cast<std::int64_t>(s.seq_q);
}

}  // namespace hbmscope
