#pragma once
// Command-line options: parsing only. Strings from CLI11 become typed structs
// here; nothing is computed or printed.
#include <CLI/CLI.hpp>
#include <optional>
#include <string>

#include "hbmscope/l2_sim.hpp"
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

// The L2 simulation's parameters (flash_l2_sim, standard_l2_sim), as typed.
struct L2Options {
  std::optional<std::string> l2_bytes, sms, ctas_per_sm, order;
};

void add_shape_options(CLI::App& app, ShapeOptions& o);
void add_l2_options(CLI::App& app, L2Options& o);
void add_output_options(CLI::App& app, OutputOptions& o);

// The axes the options describe: the design note's table when neither --seq
// nor --head-dim is given. Throws Error on bad values.
SweepAxes to_axes(const ShapeOptions& o);
PrintOptions to_print_options(const OutputOptions& o);
// The simulation's parameters when --l2-bytes is given, none otherwise.
// Throws Error on bad values or on --sms and friends without --l2-bytes.
std::optional<L2SimConfig> to_l2_config(const L2Options& o);

// Help text shared by the commands that print model rows.
extern const char* const model_columns_help;

}  // namespace hbmscope::cli
