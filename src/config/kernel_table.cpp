#include "hbmscope/kernel_table.hpp"

#include "../report/json_check.hpp"

namespace hbmscope {

namespace jc = json_check;

// Generated from configs/kernels.json by CMake (kernels_json.cpp).
extern const char* const builtin_kernels_json;

KernelTable kernel_table_from_json(const nlohmann::json& j, std::string_view origin) {
  if (!j.is_object()) jc::fail(origin, "(top level)", "an object {\"kernels\": [...]}", j);
  jc::only_keys(j, origin, "", {"schema", "description", "kernels"});
  if (j.contains("schema") && j["schema"] != "hbmscope.kernels/1")
    jc::fail(origin, "schema", "\"hbmscope.kernels/1\"", j["schema"]);
  if (!j.contains("kernels") || !j["kernels"].is_array())
    jc::fail(origin, "kernels", "an array of {\"match\", \"role\", \"source\"}", j.value("kernels", nlohmann::json()));
  jc::require_printable_strings(j, origin);
  KernelTable t;
  t.origin = std::string(origin);
  const auto& ks = j["kernels"];
  for (std::size_t i = 0; i < ks.size(); ++i) {
    const std::string k = "kernels[" + std::to_string(i) + "]";
    const auto& e = ks[i];
    if (!e.is_object()) jc::fail(origin, k, "an object {\"match\", \"role\", \"source\"}", e);
    jc::only_keys(e, origin, k, {"match", "role", "source", "family", "grid", "paged", "per_query_head"});
    KernelPattern p;
    if (!e.contains("match")) jc::fail_text(origin, k + ".match", "missing");
    const auto& m = e["match"];
    if (m.is_string()) {
      p.all.push_back(m.get<std::string>());
    } else if (m.is_array() && !m.empty()) {
      for (const auto& s : m) {
        if (!s.is_string()) jc::fail(origin, k + ".match", "a string or a list of strings", m);
        p.all.push_back(s.get<std::string>());
      }
    } else {
      jc::fail(origin, k + ".match", "a string or a non-empty list of strings", m);
    }
    for (const auto& s : p.all)
      if (s.empty()) jc::fail(origin, k + ".match", "non-empty strings", m);
    const auto role = e.contains("role") && e["role"].is_string() ? parse_role(e["role"].get<std::string>())
                                                                  : std::nullopt;
    if (!role || *role == KernelRole::unknown)
      jc::fail(origin, k + ".role",
               "one of flash_fwd, flash_bwd, split_kv, split_kv_combine, gemm, gemm_reduce, softmax, elementwise, floor, "
               "other",
               e.value("role", nlohmann::json()));
    p.role = *role;
    if (e.contains("source")) {
      if (!e["source"].is_string()) jc::fail(origin, k + ".source", "a string", e["source"]);
      p.source = e["source"].get<std::string>();
    }
    if (e.contains("family")) {
      if (!e["family"].is_string()) jc::fail(origin, k + ".family", "a string", e["family"]);
      p.family = e["family"].get<std::string>();
    }
    if (e.contains("grid")) {
      const auto g = e["grid"].is_string() ? parse_grid_layout(e["grid"].get<std::string>()) : std::nullopt;
      if (!g) jc::fail(origin, k + ".grid", "one of fa2, fa2_splitkv, fa1, vllm (docs/reconcile.md)", e["grid"]);
      p.grid = *g;
    }
    for (const char* key : {"paged", "per_query_head"})
      if (e.contains(key)) {
        if (!e[key].is_boolean()) jc::fail(origin, k + "." + key, "true or false", e[key]);
        (std::string_view(key) == "paged" ? p.paged : p.per_query_head) = e[key].get<bool>();
      }
    t.patterns.push_back(std::move(p));
  }
  return t;
}

const KernelTable& builtin_kernel_table() {
  static const KernelTable t =
      kernel_table_from_json(jc::parse_json_text(builtin_kernels_json, "configs/kernels.json"),
                             "configs/kernels.json (built in)");
  return t;
}

KernelTable load_kernel_table(const std::string& path) {
  return kernel_table_from_json(jc::read_json_file(path), jc::printable(path));
}

}  // namespace hbmscope
