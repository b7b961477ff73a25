#pragma once
// The kernel classification table of `reconcile` (schema "hbmscope.kernels/1",
// docs/reconcile.md): the one shipped in configs/kernels.json (compiled in)
// or a user's file of the same form.
#include <string_view>

#include <nlohmann/json.hpp>

#include "hbmscope/reconcile.hpp"

namespace hbmscope {

// Checks every entry; Error "ORIGIN: KEY: expected ..., got ..." otherwise.
KernelTable kernel_table_from_json(const nlohmann::json& j, std::string_view origin);
// configs/kernels.json as built into the program.
const KernelTable& builtin_kernel_table();
// A user's table file.
KernelTable load_kernel_table(const std::string& path);

}  // namespace hbmscope
