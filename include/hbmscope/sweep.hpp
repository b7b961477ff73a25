#pragma once
// Axes of a sweep, their text forms, and the cartesian product of shapes.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hbmscope/decode.hpp"
#include "hbmscope/report.hpp"
#include "hbmscope/shape.hpp"

namespace hbmscope {

// Parses an integer axis: a comma list whose items are numbers ("4096", "4K" =
// 4096, "1M" = 1048576) or inclusive ranges "START:STOP:xF" (geometric) and
// "START:STOP:+S" (arithmetic). Throws Error naming `option` and the bad text.
std::vector<std::uint64_t> parse_int_axis(std::string_view text, std::string_view option);
std::vector<Dtype> parse_dtype_axis(std::string_view text, std::string_view option);
std::vector<Pass> parse_pass_axis(std::string_view text, std::string_view option);

// The most shapes one sweep may expand to (a shard of it may then run):
// expanding 10 M took 2.5 GB, so 4 M keeps it near 1 GB.
inline constexpr std::size_t max_sweep_shapes = 4'000'000;

struct SweepAxes {
  std::vector<std::uint64_t> batch{1};
  std::vector<std::uint64_t> heads{1};
  std::vector<std::uint64_t> kv_heads;  // empty: equal to heads
  std::vector<std::uint64_t> seq{4096};
  std::vector<std::uint64_t> seq_kv;    // empty: equal to seq
  std::vector<std::uint64_t> head_dim{64};
  // When non-empty, replaces seq x head_dim by these (seq, head_dim) points.
  std::vector<std::pair<std::uint64_t, std::uint64_t>> seq_head_dim;
  std::vector<Dtype> dtype{Dtype::bf16};
  std::vector<std::uint64_t> block_rows{128};
  std::vector<std::uint64_t> block_cols{128};
  std::vector<bool> causal{false};
  std::vector<Pass> pass{Pass::fwd};
  // Decode (decode.hpp): every shape is a decode row, seq its new tokens.
  bool decode = false;
  // Ragged batches, each one shape's context lengths (its batch and seq_kv);
  // when non-empty they replace the batch and seq_kv axes. Each list is shared
  // by every shape made from it.
  std::vector<SeqList> context_lengths;
  std::vector<std::uint64_t> splits{0};  // 0: FlashAttention's heuristic
  std::vector<std::uint64_t> page_size{default_page_size};
  // Ragged prefill batches (prefill rows only), each one shape's sequences
  // (its batch, seq and seq_kv); when non-empty they replace the batch, seq and
  // seq_kv axes. Shared like context_lengths.
  std::vector<SeqList> seq_lens;
  // Attention as served (shape.hpp; docs/model.md "Masks", "Operand shapes"),
  // innermost in the product. A combination that sets both a window and a
  // chunk, or either without the causal mask while the causal axis also holds
  // true, is left out; DV equal to d and a kv dtype equal to dtype are the
  // shape's defaults (and left out where the axis also holds the default).
  std::vector<std::uint64_t> window{0};      // sliding windows W; 0: none
  std::vector<std::uint64_t> chunk{0};       // attention chunks C; 0: none
  std::vector<std::uint64_t> head_dim_v{0};  // DV; 0: = head_dim
  std::vector<std::optional<Dtype>> kv_dtype{std::nullopt};  // unset: = dtype
  // MLA in its absorbed form (latent_kv): kv_heads defaults to 1, head_dim is
  // r + p and head_dim_v r (--mla R,P sets all four).
  bool latent_kv = false;
  // Whole models (whole_model.hpp): every shape is a step of each model; the
  // models give heads, head dims, windows, chunks and MLA. A model's
  // torch_dtype replaces the dtype axis unless dtype_given.
  std::vector<ModelConfigRef> model_config;
  bool dtype_given = false;
};

// An integer axis whose items may be 0 or "none" (no window, no chunk, DV = d).
std::vector<std::uint64_t> parse_int_axis_or_none(std::string_view text, std::string_view option);
// Dtype names, or "same" (the kv dtype of --dtype).
std::vector<std::optional<Dtype>> parse_kv_dtype_axis(std::string_view text, std::string_view option);
// A ragged prefill batch: items "L" (L queries against themselves), "Q:KV"
// (Q new tokens against KV keys) or ranges of L, comma-separated.
std::vector<SeqLen> parse_seq_len_items(std::string_view text, std::string_view option);

// The most context lengths (or prefill sequences) one ragged batch may hold.
inline constexpr std::size_t max_context_lengths = 1'000'000;
// The most sequences a sweep's shapes may hold together (a ragged batch counts
// once for every shape that shares it): the model's work and the report's
// size (JSON and CSV write each row's lengths: 2^24 of them are about 200 MB),
// bounded before any shape is built.
inline constexpr std::uint64_t max_sweep_sequences = std::uint64_t{1} << 24;

// The design note's table: 4096 x 64, 4096 x 128, 8192 x 128, BF16, blocks of 128.
SweepAxes note_axes();

// How many shapes expand(axes) makes, from the axes' sizes alone (repeated
// values dropped); UINT64_MAX when the count does not fit in 64 bits.
std::uint64_t shape_count(const SweepAxes& axes);

// Every combination, outermost first: batch, heads, kv_heads, dtype, causal,
// block_rows, block_cols, (seq, seq_kv, head_dim), pass, then window, chunk,
// head_dim_v, kv_dtype. Each shape is validated.
std::vector<Shape> expand(const SweepAxes& axes);
// The same shapes in the same order, each handed to visit as it is made and
// none held: a run's memory does not grow with its number of shapes. The
// product is counted and refused (too many shapes or sequences) before the
// first is made.
void for_each_shape(const SweepAxes& axes, const std::function<void(const Shape&)>& visit);

using Progress = std::function<void(std::size_t done, std::size_t total)>;

// The model's row for each shape, in order. Throws Error on the first shape
// that cannot be counted (overflow), naming it.
std::vector<Row> model_rows(const std::vector<Shape>& shapes, const Progress& progress = {});
Row model_row(const Shape& s);

// Variants beyond the three of every row.
struct ModelOptions {
  bool flash1 = false;  // add flash1_no_l2 (FlashAttention-1 order) to forward-pass rows
  // Decode rows (shape.decode): the SM count of FlashAttention's split heuristic
  // (--device or --sms).
  std::uint64_t sm_count = default_decode_sm_count;
};

// A decode row (shape.decode): decode_floor, decode_split,
// decode_split_unpacked, decode_paged, each with its bytes by operand and split
// count; model_row calls it for decode shapes.
Row decode_row(const Shape& s, std::uint64_t sm_count);
Row model_row(const Shape& s, const ModelOptions& options);
std::vector<Row> model_rows(const std::vector<Shape>& shapes, const ModelOptions& options,
                            const Progress& progress);

}  // namespace hbmscope
