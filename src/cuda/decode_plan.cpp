#include "hbmscope/decode_plan.hpp"

#include <algorithm>
#include <climits>
#include <numeric>
#include <random>

#include "hbmscope/checked.hpp"
#include "hbmscope/decode.hpp"
#include "hbmscope/error.hpp"
#include "hbmscope/mask.hpp"

namespace hbmscope {

namespace {
constexpr std::uint64_t max_grid_yz = 65535;
constexpr auto int_max = static_cast<std::uint64_t>(INT_MAX);
}  // namespace

bool decode_supports(std::uint64_t head_dim) { return head_dim == 64 || head_dim == 128; }

std::size_t decode_smem_bytes(std::uint64_t head_dim, std::uint64_t m_tiles) {
  // Q rows, then K and V stages: 3 stages of 64 keys at d = 128, 4 at d = 64
  // (decode_attention.cuh's DecodeShape).
  const std::uint64_t stages = head_dim >= 128 ? 3 : 4;
  return static_cast<std::size_t>((16 * m_tiles * head_dim + 2 * stages * decode_tile_keys * head_dim) * 2);
}

std::optional<std::string> decode_unsupported_reason(const Shape& s) {
  if (!s.decode) return "the decode kernels run decode rows only (seq 1-8 against a KV cache)";
  if (s.dtype != Dtype::bf16)
    return "the kernels are BF16 only (shape is " + std::string(dtype_name(s.dtype)) + ")";
  if (!decode_supports(s.head_dim))
    return "decode kernels compiled for head dim 64 and 128 only (shape has " + std::to_string(s.head_dim) + ")";
  if (s.seq_kv > int_max) return "context length " + std::to_string(s.seq_kv) + " exceeds 32-bit token indices";
  return std::nullopt;
}

KeyRange decode_read_keys(const Shape& s, std::uint64_t len) {
  if (len == 0) return {0, 0};
  const KeyRange first = visible_keys(s, s.seq_q, len, 0);  // spans only move right: token 0's is the first
  return {first.empty() ? 0 : first.begin, len};
}

std::uint64_t decode_split_tokens(const Shape& s, std::uint64_t splits) {
  if (splits == 0) throw Error("decode kernel: the split count must be positive");
  std::uint64_t longest = 0;
  if (s.context_lengths.empty()) {
    longest = decode_read_keys(s, s.seq_kv).size();
  } else {
    for (const SeqGroup& g : s.context_lengths.groups())
      longest = std::max(longest, decode_read_keys(s, g.item.kv).size());
  }
  const std::uint64_t blocks = std::max<std::uint64_t>(ceil_div(ceil_div(longest, s.block_cols), splits), 1);
  return checked_mul(blocks, s.block_cols, "decode split tokens");
}

DecodePlan decode_plan(const Shape& s, bool paged, std::uint64_t splits) {
  if (auto why = decode_unsupported_reason(s)) throw Error("decode kernel: " + *why);
  if (splits == 0 || splits > int_max) throw Error("decode kernel: split count must be 1 to 2^31 - 1");
  DecodePlan p;
  p.head_dim = s.head_dim;
  p.paged = paged;
  p.splits = splits;
  p.split_tokens = decode_split_tokens(s, splits);
  const std::uint64_t group_rows = checked_mul(group_size(s), s.seq_q, "decode rows");
  // Fewest m-tiles that hold the group's rows (1, 2 or 4); past 64 rows, more
  // CTAs per kv head, each reading the KV again.
  const std::uint64_t tiles = ceil_div(group_rows, 16);
  p.m_tiles = tiles <= 1 ? 1 : tiles <= 2 ? 2 : 4;
  p.row_blocks = ceil_div(group_rows, 16 * p.m_tiles);
  p.rows = checked_product("decode rows", s.batch, s.heads, s.seq_q);
  p.kv_stride = s.seq_kv;
  if (paged) {
    p.page_size = s.page_size;
    if (p.page_size > int_max) throw Error("decode kernel: page size exceeds 32-bit indices");
    p.max_pages = ceil_div(s.seq_kv, p.page_size);
    for (std::uint64_t b = 0; b < s.batch; ++b)
      p.pages = checked_add(p.pages, context_pages(s, b), "decode pages");
    if (p.pages > int_max) throw Error("decode kernel: " + std::to_string(p.pages) + " pages exceed int32 page indices");
  }
  const std::uint64_t grid_y = checked_mul(s.kv_heads, p.row_blocks, "decode grid");
  if (grid_y > max_grid_yz) throw Error("decode kernel: kv heads x row blocks exceed the grid's 65535");
  if (s.batch > max_grid_yz) throw Error("decode kernel: batch " + std::to_string(s.batch) + " exceeds the grid's 65535");
  p.split.grid_x = static_cast<std::uint32_t>(splits);
  p.split.grid_y = static_cast<std::uint32_t>(grid_y);
  p.split.grid_z = static_cast<std::uint32_t>(s.batch);
  p.split.threads = decode_threads;
  p.split.smem_bytes = decode_smem_bytes(s.head_dim, p.m_tiles);
  const std::uint64_t combine_ctas = ceil_div(p.rows, decode_threads / 32);
  if (combine_ctas > int_max) throw Error("decode kernel: too many output rows for the combine grid");
  p.combine.grid_x = static_cast<std::uint32_t>(combine_ctas);
  p.combine.threads = decode_threads;
  return p;
}

std::vector<std::int32_t> decode_block_table(const Shape& s, const DecodePlan& plan, std::uint64_t seed) {
  std::vector<std::int32_t> pool(static_cast<std::size_t>(plan.pages));
  std::iota(pool.begin(), pool.end(), 0);
  std::mt19937_64 rng(seed);
  std::shuffle(pool.begin(), pool.end(), rng);
  std::vector<std::int32_t> table(static_cast<std::size_t>(checked_mul(s.batch, plan.max_pages, "block table")), -1);
  std::size_t next = 0;
  for (std::uint64_t b = 0; b < s.batch; ++b)
    for (std::uint64_t j = 0; j < context_pages(s, b); ++j)
      table[static_cast<std::size_t>(b * plan.max_pages + j)] = pool[next++];
  return table;
}

std::uint64_t decode_footprint(const Shape& s, const DecodePlan& plan) {
  const char* what = "decode footprint";
  const std::uint64_t e = elem_bytes(s.dtype);
  const std::uint64_t qo = checked_product(what, 2, plan.rows, s.head_dim, e);
  const std::uint64_t kv_rows = plan.paged ? checked_mul(plan.pages, plan.page_size, what)
                                           : checked_mul(s.batch, plan.kv_stride, what);
  const std::uint64_t kv = checked_product(what, 2, kv_rows, s.kv_heads, s.head_dim, e);
  std::uint64_t r = checked_add(qo, kv, what);
  r = checked_add(r, checked_mul(plan.rows, 4, what), what);  // LSE
  r = checked_add(r, checked_mul(s.batch, 4, what), what);    // lengths
  if (plan.paged) r = checked_add(r, checked_product(what, s.batch, plan.max_pages, 4), what);
  if (plan.splits > 1)
    r = checked_add(r, checked_product(what, plan.rows, plan.splits, checked_add(s.head_dim, 1, what), 4), what);
  return r;
}

Shape decode_validation_shape(const Shape& s) {
  const auto cost = [](const Shape& x) {
    return static_cast<double>(total_context(x)) * static_cast<double>(x.heads) * static_cast<double>(x.seq_q) *
           static_cast<double>(x.head_dim);
  };
  if (cost(s) <= static_cast<double>(decode_validation_budget)) return s;
  Shape v = s;
  v.batch = std::min<std::uint64_t>(s.batch, 2);
  v.kv_heads = std::min<std::uint64_t>(s.kv_heads, 2);
  v.heads = v.kv_heads * group_size(s);
  if (!s.context_lengths.empty()) {
    // The longest and the shortest sequence: both ends of a ragged batch.
    const std::uint64_t lo = s.context_lengths.min_kv(), hi = s.context_lengths.max_kv();
    v.context_lengths = v.batch == 1 ? std::vector<std::uint64_t>{hi} : std::vector<std::uint64_t>{hi, lo};
  }
  if (cost(v) > static_cast<double>(decode_validation_budget)) {
    const auto cut = [](std::uint64_t l) { return l <= 2000 ? l : 1000 + l % 1000; };
    if (v.context_lengths.empty()) {
      v.seq_kv = cut(v.seq_kv);
    } else {
      std::vector<std::uint64_t> lengths = v.context_lengths.kv_lengths();
      for (auto& l : lengths) l = cut(l);
      v.context_lengths = lengths;
    }
  }
  if (!v.context_lengths.empty()) {
    v.seq_kv = v.context_lengths.max_kv();
    if (v.batch == 1 || v.context_lengths.uniform()) v.context_lengths.clear();
  }
  v.window = cut_band(s.window, s.seq_kv, v.seq_kv);
  v.chunk = cut_band(s.chunk, s.seq_kv, v.seq_kv);
  return v;
}

}  // namespace hbmscope
