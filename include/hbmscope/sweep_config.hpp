#pragma once
// Sweep configuration files (schema "hbmscope.sweep/1", docs/sweep-config.md):
// named groups of axes whose shapes are swept one group after another.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "hbmscope/sweep.hpp"

namespace hbmscope {

struct SweepGroup {
  std::string label;  // e.g. "Llama-3 8B"; empty for an unnamed group
  SweepAxes axes;
};

struct SweepConfig {
  std::string description;
  std::vector<SweepGroup> groups;
  std::vector<std::string> variants;  // report only these variant ids; empty: all
};

// Keeps only the listed variants in every row (all when `ids` is empty).
// Throws Error when an id is in no row, naming the ids the rows have.
void keep_variants(std::vector<Row>& rows, const std::vector<std::string>& ids, std::string_view where);
// The same for one row, without the check (a run that streams its rows makes
// it over all of them first).
void keep_listed_variants(Row& row, const std::vector<std::string>& ids);
// keep_variants' check: Error (UsageError when `where` is an option) for an
// id not among those the rows have (`present`).
void check_listed_variants(const std::vector<std::string>& present, const std::vector<std::string>& ids,
                           std::string_view where);

// Throws Error "ORIGIN: KEY: expected ..., got ..." on unknown keys, wrong
// types and empty axes.
SweepConfig sweep_config_from_json(const nlohmann::json& j, std::string_view origin);
SweepConfig load_sweep_config_file(const std::filesystem::path& path);

// Names of the configs shipped in configs/sweeps/ ("seed", "llm", ...).
std::vector<std::string> preset_sweep_names();

// `--config` argument: a path when it names a .json file or contains '/',
// otherwise a shipped config's name.
SweepConfig find_sweep_config(std::string_view name_or_path);

// One labelled shape per row of the sweep, groups in order. A row is its
// (label, shape): a shape an earlier group of the same label produced is
// skipped, so that shards never overlap. The groups' sizes are counted first
// (before repeats are dropped): a sum over max_sweep_shapes is refused before
// anything is built.
struct LabelledShapes {
  std::vector<Shape> shapes;
  std::vector<std::string> labels;  // parallel to shapes
  // Parallel to shapes: the model of a whole-model point (whole_model.hpp), null for a plain row.
  std::vector<ModelConfigRef> models;
};
LabelledShapes expand(const SweepConfig& config);
// The same shapes, labels and models in the same order, each handed to visit
// as it is made: one group's are never held; several groups' are held in a
// set only, to drop the repeats.
using ShapeVisit = std::function<void(const Shape&, const std::string& label, const ModelConfigRef& model)>;
void for_each_shape(const SweepConfig& config, const ShapeVisit& visit);
// How many rows the config makes (repeats dropped).
std::uint64_t shape_count(const SweepConfig& config);

}  // namespace hbmscope
