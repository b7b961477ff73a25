#pragma once
// Command-line options: parsing only. Strings from CLI11 become typed structs
// here; nothing is computed or printed.
#include <CLI/CLI.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "hbmscope/animations.hpp"
#include "hbmscope/backend.hpp"
#include "hbmscope/l2_sim.hpp"
#include "hbmscope/printers.hpp"
#include "hbmscope/sweep.hpp"
#include "hbmscope/tile_walk.hpp"

namespace hbmscope::cli {

// The shape options shared by model, sweep and measure, as typed.
struct ShapeOptions {
  std::optional<std::string> seq, seq_kv, head_dim, batch, heads, kv_heads, dtype, block_rows,
      block_cols;
  bool causal = false;
  std::optional<std::string> pass;  // fwd, bwd, fwdbwd (a list)
  // Decode rows (decode.hpp): --decode, or implied by --context-lengths.
  bool decode = false;
  std::optional<std::string> context_lengths;  // "512,4096,131072" or "@FILE"
  std::optional<std::string> splits, page_size;
  // Attention as served (docs/model.md "Masks", "Operand shapes", "Ragged prefill").
  std::optional<std::string> window, chunk, head_dim_v, kv_dtype;
  std::optional<std::string> mla;       // "R,P": latent KV of kv_lora_rank R + qk_rope_head_dim P
  std::optional<std::string> seq_lens;  // "512,4096,1K:8K" or "@FILE"
  // Whether any shape option was given (a sweep config's axes are then replaced).
  bool any() const;
};

// The lengths of --context-lengths: a list ("512,4K,128K") or @FILE, a file of
// positive integers separated by commas, spaces or newlines ('#' starts a
// comment). Throws Error naming the option (and the file and line).
std::vector<std::uint64_t> parse_context_lengths(const std::string& text);
// The sequences of --seq-lens: items L or Q:KV (and ranges of L), a list or
// @FILE as for --context-lengths. Throws Error naming the option (and the file and line).
std::vector<SeqLen> parse_seq_lens(const std::string& text);


struct OutputOptions {
  std::string format;  // empty: from the --output file's extension, else table
  std::optional<std::string> units;  // unset: decimal
  bool wide = false;
  std::optional<std::string> output;
  std::optional<std::string> columns{};  // --columns: groups of table columns
};

// The L2 simulation's parameters (flash_l2_sim, standard_l2_sim), as typed.
struct L2Options {
  std::optional<std::string> l2_bytes, sms, ctas_per_sm, order;
  std::optional<std::string> qo{};  // --l2-qo allocate|bypass
  std::optional<std::string> method{};  // --l2-method runs|enumeration
};

void add_l2_options(CLI::App& app, L2Options& o);

// The SM count of the decode split heuristic: --sms, else the --device's, else
// default_decode_sm_count.
std::uint64_t decode_sm_count(const L2Options& o, const DeviceSpec* device);
// `measure`'s own options.
struct MeasureCliOptions {
  std::string kernels = "standard,softmax,flash,floor";
  int repeats = 20;
  int warmup = 3;
  int device_index = 0;
  std::uint64_t seed = 1;
  bool no_validate = false;
  // Sizes of the copy probe's buffers and of the L2 flush buffer, as given
  // ("64M"); unset: 1 GiB and twice the device's L2. Small values keep
  // compute-sanitizer runs short (a probe under 4x the L2 is skipped).
  std::optional<std::string> copy_bytes, flush_bytes;
  bool counters = false;  // --counters: DRAM bytes through CUPTI
};
// --copy-bytes and --flush-bytes into `opt`; throws Error on a bad value.
void apply_measure_sizes(const MeasureCliOptions& o, MeasureOptions& opt);

// Validators whose messages name the value as given (CLI11's own print
// "Value abc not in range" or a 310-digit bound). Each checks the raw text.
CLI::Validator integer_in(std::int64_t lo, std::int64_t hi);  // lo <= n <= hi
CLI::Validator unsigned64();       // 0 to 2^64 - 1, no sign
CLI::Validator finite_number();    // a finite decimal number
CLI::Validator not_empty();

void add_shape_options(CLI::App& app, ShapeOptions& o);
void add_measure_options(CLI::App& app, MeasureCliOptions& o);
void add_output_options(CLI::App& app, OutputOptions& o);

// The axes the options describe: the design note's table when neither --seq
// nor --head-dim is given. Throws Error on bad values.
SweepAxes to_axes(const ShapeOptions& o);
// Replaces the axes the options name; --seq or --head-dim turn (seq, head_dim)
// points into the two axes first.
void apply_shape_options(SweepAxes& a, const ShapeOptions& o);
PrintOptions to_print_options(const OutputOptions& o);

// The format of a report: --format when given, else the --output file's
// extension (.json, .csv, .md; anything else a table), else fallback.
// UsageError for an unknown --format or one that contradicts the extension.
Format resolve_format(const std::string& given, const std::optional<std::string>& output,
                      Format fallback = Format::table);
// The simulation's parameters when --l2-bytes is given, or else when a device
// is (its L2 size and SM count; --sms, --ctas-per-sm, --l2-order still apply);
// none otherwise. Throws Error on bad values or on --sms and friends with
// neither.
std::optional<L2SimConfig> to_l2_config(const L2Options& o, const DeviceSpec* device = nullptr);

// Help text shared by the commands that print model rows.
extern const char* const model_columns_help;
extern const char* const measure_help;

}  // namespace hbmscope::cli

namespace hbmscope::cli {

// `walk`: one shape (the shape options, defaulting to 1024 x 64) and playback.
struct WalkOptions {
  std::optional<std::string> order;  // unset: fa2
  bool animate = true;
  std::optional<unsigned> delay_ms;  // unset: 100
  // --decode: the variant walked and the SM count of the split heuristic.
  std::optional<std::string> variant;  // unset: decode_split
  std::optional<std::string> sms;
};

// `softmax`: the values, or --random N --seed S, in blocks of --block.
struct SoftmaxOptions {
  std::vector<std::string> values;
  std::string block = "3";
  std::optional<std::string> random;
  std::optional<std::string> seed;  // unset: 1 (only with --random)
  bool animate = true;
  std::optional<unsigned> delay_ms;  // unset: 500
};

void add_walk_options(CLI::App& app, WalkOptions& o);
void add_softmax_options(CLI::App& app, SoftmaxOptions& o);

// The one shape `walk` draws: --seq defaults to 1024 and --head-dim to 64 (not
// the note's rows); lists are refused.
Shape walk_shape(ShapeOptions o);
LoopOrder parse_order(const std::string& s);
// Refuses options that would do nothing in the walk of s: --delay with
// --no-animate; --variant, --sms without --decode; --order, and --page-size
// but for decode_paged, with it (UsageError).
void check_walk_options(const Shape& s, const ShapeOptions& shape, const WalkOptions& o);
// `walk --decode`: the variant (decode_split, decode_split_unpacked or
// decode_paged) and its split count for shape s.
DecodeVariant walk_decode_variant(const WalkOptions& o);
std::uint64_t walk_decode_splits(const Shape& s, const WalkOptions& o);
// One frame in how many a decode walk draws to stay within the budget.
std::uint64_t decode_walk_stride(const Shape& s, std::uint64_t splits, unsigned delay_ms);
// The values `softmax` traces: parsed numbers (a comma list is split), or the
// random ones. Throws Error on bad or missing input.
std::vector<double> softmax_values(const SoftmaxOptions& o);
std::size_t softmax_block(const SoftmaxOptions& o);

// How to play an animation on this stdout: steps and colour only on a
// terminal (not TERM=dumb), colour never when NO_COLOR is set and not empty.
Playback playback(bool animate, unsigned delay_ms);

// The longest an animated walk may take, and the most frames it draws.
inline constexpr unsigned walk_budget_ms = 60'000;
inline constexpr std::uint64_t walk_max_frames = 2000;
// One tile in how many to draw so that the walk of s at delay_ms a frame stays
// within walk_budget_ms and walk_max_frames; when it is more than 1, a note on
// `note` says so.
std::uint64_t walk_stride(const Shape& s, unsigned delay_ms, std::FILE* note);

extern const char* const walk_help;
extern const char* const softmax_help;

}  // namespace hbmscope::cli
