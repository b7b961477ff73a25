#pragma once
// Hugging Face config.json files as ModelConfigs (model_config.hpp): the
// shipped ones of configs/models/ (compiled in) and users' files. What is read
// and how each model's layer pattern and window are decided: docs/models.md.
#include <filesystem>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "hbmscope/model_config.hpp"

namespace hbmscope {

// The most decoder layers a config may have (the largest public models have
// about 130): bounds what a file can make hbmscope build.
inline constexpr std::uint64_t max_model_layers = 4096;

// Reads the attention of a config.json (the text_config of a multimodal one):
// layers, heads, kv heads, head dim, which layers are sliding or chunked and
// their window or chunk, MLA, torch_dtype. Refuses what it cannot count
// exactly (unknown layer types, sparse or linear attention, missing fields,
// inconsistent heads) with one line "ORIGIN: KEY: ...". `id` names the rows.
ModelConfig model_config_from_json(const nlohmann::json& j, std::string_view origin, std::string_view id);

// Reads and checks a file (through json_check: size, depth, repeated keys);
// its id is the path as given.
ModelConfig load_model_config_file(const std::filesystem::path& path);

// The configs of configs/models/, sorted by id.
const std::vector<ModelConfig>& preset_model_configs();

// `--model-config` argument: a path when it names a .json file or contains '/',
// otherwise a shipped config's id or name (case and punctuation ignored).
ModelConfig find_model_config(std::string_view name_or_path, std::string_view option = "--model-config");

}  // namespace hbmscope
