#pragma once
// Command-line options: parsing only. Strings from CLI11 become typed structs
// here; nothing is computed or printed.
#include <CLI/CLI.hpp>
#include <cstdint>
#include <optional>
#include <string>

#include "hbmscope/printers.hpp"
#include "hbmscope/sweep.hpp"

namespace hbmscope::cli {

// The shape options shared by model, sweep and measure, as typed.
struct ShapeOptions {
  std::optional<std::string> seq, seq_kv, head_dim, batch, heads, kv_heads, dtype, block_rows,
      block_cols;
  bool causal = false;
};

struct OutputOptions {
  std::string format = "table";
  std::string units = "decimal";
  bool wide = false;
  std::optional<std::string> output;
};

// `measure`'s own options.
struct MeasureCliOptions {
  std::string kernels = "standard,softmax,flash,floor";
  int repeats = 20;
  int warmup = 3;
  int device_index = 0;
  std::uint64_t seed = 1;
  bool no_validate = false;
};

void add_shape_options(CLI::App& app, ShapeOptions& o);
void add_measure_options(CLI::App& app, MeasureCliOptions& o);
void add_output_options(CLI::App& app, OutputOptions& o);

// The axes the options describe: the design note's table when neither --seq
// nor --head-dim is given. Throws Error on bad values.
SweepAxes to_axes(const ShapeOptions& o);
PrintOptions to_print_options(const OutputOptions& o);

// Help text shared by the commands that print model rows.
extern const char* const model_columns_help;
extern const char* const measure_help;

}  // namespace hbmscope::cli
