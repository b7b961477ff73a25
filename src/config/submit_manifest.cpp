// DIR/manifest.json of `hbmscope submit`, read back by `merge --from DIR` and
// by a later submit over the same folder (the writer: src/report/slurm_script.cpp).
#include "hbmscope/slurm.hpp"
#include "../report/json_check.hpp"

namespace hbmscope {

namespace jc = json_check;

SubmitManifest read_submit_manifest(const std::string& path) {
  const nlohmann::json j = jc::read_json_file(path);
  if (!j.is_object()) jc::fail(path, "", "an object (a manifest written by `hbmscope submit`)", j);
  jc::only_keys(j, path, "", {"schema", "identity", "tasks", "total_rows", "sweep", "workdir", "program"});
  const auto string_at = [&](const char* key) -> std::string {
    if (!j.contains(key) || !j[key].is_string()) jc::fail(path, key, "a string", j.value(key, nlohmann::json()));
    return j[key].get<std::string>();
  };
  const auto count_at = [&](const char* key, std::uint64_t lo, std::uint64_t hi) -> std::uint64_t {
    const nlohmann::json v = j.value(key, nlohmann::json());
    if (!v.is_number_unsigned() || v.get<std::uint64_t>() < lo || v.get<std::uint64_t>() > hi)
      jc::fail(path, key, "an integer from " + std::to_string(lo) + " to " + std::to_string(hi), v);
    return v.get<std::uint64_t>();
  };
  if (string_at("schema") != submit_manifest_schema)
    jc::fail(path, "schema", "\"" + std::string(submit_manifest_schema) + "\"", j["schema"]);
  SubmitManifest m;
  m.identity = string_at("identity");
  m.tasks = count_at("tasks", 1, max_slurm_tasks);
  m.total_rows = count_at("total_rows", m.tasks, UINT64_MAX);
  m.workdir = string_at("workdir");
  m.program = string_at("program");
  const nlohmann::json sweep = j.value("sweep", nlohmann::json());
  if (!sweep.is_array()) jc::fail(path, "sweep", "an array of strings (the sweep's options)", sweep);
  for (std::size_t i = 0; i < sweep.size(); ++i) {
    if (!sweep[i].is_string()) jc::fail(path, "sweep[" + std::to_string(i) + "]", "a string", sweep[i]);
    m.sweep_args.push_back(sweep[i].get<std::string>());
  }
  return m;
}

}  // namespace hbmscope
