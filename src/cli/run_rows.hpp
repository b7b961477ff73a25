#pragma once
// A run's rows, made one at a time: sweep of shapes -> model -> L2 simulation
// -> measurement -> roofline -> variants kept -> the printers, each row as it
// comes (docs/architecture.md). No memory grows with the number of shapes,
// but where everything is needed first: the terminal table (its column
// widths) and a chart hold their rows, at most max_held_rows.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "hbmscope/backend.hpp"
#include "run_shapes.hpp"
#include "hbmscope/shard.hpp"
#include "hbmscope/sweep_config.hpp"
#include "options.hpp"
#include "progress.hpp"
#include "sweep_commands.hpp"

namespace hbmscope::cli {

// The most rows a run holds, for the terminal table or a chart: about 2-4 kB
// a row (measured: 180 MB for 100000 rows, 370 MB with a device).
inline constexpr std::uint64_t max_held_rows = 100'000;

// Everything a run needs but its shapes.
struct RunSpec {
  std::string command = "model";  // model, sweep, measure
  ModelOptions model;
  L2Options l2;  // as decode_l2_options leaves them
  DeviceOptions dev;
  OutputOptions out;
  std::vector<std::string> variants;  // --variants (or a config's): keep these only
  std::string variants_where;         // "--variants" or "CONFIG: variants", for messages
  const MeasureCliOptions* measure = nullptr;  // set: measure every row
  std::unique_ptr<Backend> backend;            // the measuring backend, made before any modelling
  ProgressMode progress = ProgressMode::auto_;
  std::optional<ShardInfo> shard;
};

// Makes and prints the run's rows; returns the exit code. Everything a row
// can be refused for (overflow, no peak for its dtype, --variants, the L2
// budget) is found by a first pass that models each row and keeps none,
// before anything is printed.
int run_rows(const RunShapes& shapes, RunSpec spec);

}  // namespace hbmscope::cli
