#pragma once
// Sweep configuration files (schema "hbmscope.sweep/1", docs/sweep-config.md):
// named groups of axes whose shapes are swept one group after another.
#include <filesystem>
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

struct LabelledShapes;

struct SweepConfig {
  std::string description;
  std::vector<SweepGroup> groups;
  std::vector<std::string> variants;  // report only these variant ids; empty: all
  // The expansion of `groups`, made once by a loader that validated it;
  // expand(config) returns it. Whoever changes the groups' axes resets it.
  std::shared_ptr<LabelledShapes> expanded;
};

// Keeps only the listed variants in every row (all when `ids` is empty).
// Throws Error when an id is in no row, naming the ids the rows have.
void keep_variants(std::vector<Row>& rows, const std::vector<std::string>& ids, std::string_view where);

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

}  // namespace hbmscope
