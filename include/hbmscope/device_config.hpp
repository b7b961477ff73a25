#pragma once
// Device specs from JSON (schema "hbmscope.device/1", docs/devices.md): the
// presets shipped in configs/devices/ (compiled in) and users' files.
#include <filesystem>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "hbmscope/device_spec.hpp"

namespace hbmscope {

// Checks every key; throws Error "ORIGIN: KEY: expected ..., got ..." on the
// first problem. `origin` names the file in messages.
DeviceSpec device_from_json(const nlohmann::json& j, std::string_view origin);

// Reads and checks a device file; never crashes on malformed JSON.
DeviceSpec load_device_file(const std::filesystem::path& path);

// The presets of configs/devices/, sorted by id.
const std::vector<DeviceSpec>& preset_devices();

// `--device` argument: a path when it names a .json file or contains '/',
// otherwise a preset's id, name or alias (case, spaces and dashes ignored).
// `option` names the argument in messages ("--device", or "devices").
DeviceSpec find_device(std::string_view name_or_path, std::string_view option = "--device");

}  // namespace hbmscope
