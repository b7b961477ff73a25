#include "hbmscope/device_config.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>

#include "embedded.hpp"
#include "../report/json_check.hpp"

namespace hbmscope {

namespace jc = json_check;

namespace {

constexpr std::string_view device_schema = "hbmscope.device/1";

double positive_number(const nlohmann::json& j, std::string_view origin, const std::string& key) {
  if (!j.is_number() || !std::isfinite(j.get<double>()) || j.get<double>() <= 0)
    jc::fail(origin, key, "a positive number", j);
  return j.get<double>();
}

// Bandwidth and peaks: outside this range no GPU exists and predictions could
// overflow to inf or round to 0.
double rate(const nlohmann::json& j, std::string_view origin, const std::string& key,
            const char* unit) {
  const double v = positive_number(j, origin, key);
  if (v < min_device_rate || v > max_device_rate)
    jc::fail(origin, key, std::string("a rate in ") + unit + " from 1e6 to 1e18", j);
  return v;
}

std::uint64_t positive_integer(const nlohmann::json& j, std::string_view origin,
                               const std::string& key) {
  if (j.is_number_unsigned() && j.get<std::uint64_t>() > 0) return j.get<std::uint64_t>();
  // 5.24288e7 written as a float is fine when it is a whole number.
  if (j.is_number_float()) {
    const double v = j.get<double>();
    if (v > 0 && v < 1.8e19 && std::floor(v) == v) return static_cast<std::uint64_t>(v);
  }
  jc::fail(origin, key, "a positive integer", j);
}

std::string normalise(std::string_view s) {
  std::string r;
  for (unsigned char c : s)
    if (std::isalnum(c)) r += static_cast<char>(std::tolower(c));
  return r;
}

bool looks_like_path(std::string_view s) {
  return s.find('/') != std::string_view::npos ||
         (s.size() > 5 && s.substr(s.size() - 5) == ".json");
}

}  // namespace

DeviceSpec device_from_json(const nlohmann::json& j, std::string_view origin) {
  if (j.is_array())  // what `hbmscope devices --format json` prints for all presets
    jc::fail(origin, "(top level)",
             "a JSON object, one device (`hbmscope devices NAME --format json` writes one; an "
             "array is the list of all presets)",
             j);
  if (!j.is_object()) jc::fail(origin, "(top level)", "a JSON object", j);
  // Every string reaches a table, a report or a message: name, memory,
  // aliases, sources and their keys.
  jc::require_printable_strings(j, origin);
  // `id` is what `hbmscope devices NAME --format json` and reports write: a
  // file loaded back is named by its path, so it is checked and not used.
  jc::only_keys(j, origin, "",
                {"schema", "id", "name", "aliases", "memory", "memory_bandwidth_bytes_per_s",
                 "l2_bytes", "sm_count", "peak_flops_dense", "sources", "memory_bytes"});
  if (j.contains("id") && !j["id"].is_string()) jc::fail(origin, "id", "a string", j["id"]);
  DeviceSpec d;
  if (j.contains("schema") && j["schema"] != device_schema)
    jc::fail(origin, "schema", "\"hbmscope.device/1\"", j["schema"]);
  for (const char* k : {"name", "memory_bandwidth_bytes_per_s", "l2_bytes", "sm_count",
                        "peak_flops_dense"})
    if (!j.contains(k)) jc::fail_text(origin, k, "missing (required)");
  if (!j["name"].is_string() || j["name"].get<std::string>().empty())
    jc::fail(origin, "name", "a non-empty string", j["name"]);
  d.name = j["name"].get<std::string>();
  if (j.contains("aliases")) {
    const auto& a = j["aliases"];
    if (!a.is_array()) jc::fail(origin, "aliases", "an array of strings", a);
    for (std::size_t i = 0; i < a.size(); ++i) {
      if (!a[i].is_string())
        jc::fail(origin, "aliases[" + std::to_string(i) + "]", "a string", a[i]);
      d.aliases.push_back(a[i].get<std::string>());
    }
  }
  if (j.contains("memory")) {
    if (!j["memory"].is_string()) jc::fail(origin, "memory", "a string such as \"80 GB HBM3\"", j["memory"]);
    d.memory = j["memory"].get<std::string>();
  }
  d.bandwidth = rate(j["memory_bandwidth_bytes_per_s"], origin, "memory_bandwidth_bytes_per_s",
                     "bytes/s");
  d.l2_bytes = positive_integer(j["l2_bytes"], origin, "l2_bytes");
  d.sm_count = positive_integer(j["sm_count"], origin, "sm_count");
  // 0 (what `devices NAME --format json` writes when a file gave none) = not given.
  if (j.contains("memory_bytes") && !(j["memory_bytes"].is_number_unsigned() && j["memory_bytes"] == 0))
    d.memory_bytes = positive_integer(j["memory_bytes"], origin, "memory_bytes");
  if (d.sm_count > max_sm_count)  // as --sms; the L2 simulation counts SMs in 32 bits
    jc::fail(origin, "sm_count", "a positive integer at most " + std::to_string(max_sm_count), j["sm_count"]);

  const auto& pk = j["peak_flops_dense"];
  if (!pk.is_object() || pk.empty())
    jc::fail(origin, "peak_flops_dense",
             "an object of dense FLOP/s per dtype, e.g. {\"bf16\": 989.4e12}", pk);
  jc::only_keys(pk, origin, "peak_flops_dense", {"fp32", "fp16", "bf16", "fp8"});
  for (const auto& [k, v] : pk.items()) {
    const std::string key = "peak_flops_dense." + k;
    const double val = v.is_null() ? 0.0 : rate(v, origin, key, "FLOP/s");
    if (k == "fp32") d.peak.fp32 = val;
    if (k == "fp16") d.peak.fp16 = val;
    if (k == "bf16") d.peak.bf16 = val;
    if (k == "fp8") d.peak.fp8 = val;
  }
  if (d.peak.fp32 == 0 && d.peak.fp16 == 0 && d.peak.bf16 == 0 && d.peak.fp8 == 0)
    jc::fail(origin, "peak_flops_dense", "at least one positive peak", pk);

  if (j.contains("sources")) {
    const auto& s = j["sources"];
    if (!s.is_object()) jc::fail(origin, "sources", "an object of strings", s);
    for (const auto& [k, v] : s.items()) {
      if (!v.is_string()) jc::fail(origin, "sources." + k, "a string", v);
      d.sources[k] = v.get<std::string>();
    }
  }
  d.id = std::string(origin);
  validate(d);
  return d;
}

DeviceSpec load_device_file(const std::filesystem::path& path) {
  // The path becomes the device's id in tables and reports.
  const std::string name = path.string();
  if (jc::printable(name) != name)
    throw Error("device file '" + jc::printable(name) +
                "': a control character or a byte that is not UTF-8 is not allowed in its name "
                "(it becomes the device id)");
  return device_from_json(jc::read_json_file(path), name);
}

const std::vector<DeviceSpec>& preset_devices() {
  static const std::vector<DeviceSpec> presets = [] {
    std::vector<DeviceSpec> v;
    for (std::size_t i = 0; i < embedded::device_count; ++i) {
      const auto& f = embedded::devices[i];
      const std::string origin = "configs/devices/" + std::string(f.name) + ".json";
      DeviceSpec d = device_from_json(jc::parse_json_text(f.text, origin), origin);
      d.id = f.name;
      v.push_back(std::move(d));
    }
    std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
    return v;
  }();
  return presets;
}

namespace {

std::vector<std::string> aliases_of(std::string_view id) {
  std::vector<std::string> r;
  for (std::size_t i = 0; i < embedded::device_count; ++i) {
    if (embedded::devices[i].name != id) continue;
    const auto j = jc::parse_json_text(embedded::devices[i].text, embedded::devices[i].name);
    if (j.is_object() && j.contains("aliases") && j["aliases"].is_array())
      for (const auto& a : j["aliases"])
        if (a.is_string()) r.push_back(a.get<std::string>());
  }
  return r;
}

}  // namespace

DeviceSpec find_device(std::string_view arg, std::string_view option) {
  if (looks_like_path(arg)) return load_device_file(std::filesystem::path(std::string(arg)));
  const std::string want = normalise(arg);
  std::string known;
  for (const auto& d : preset_devices()) {
    bool match = normalise(d.id) == want || normalise(d.name) == want;
    for (const auto& a : aliases_of(d.id)) match |= normalise(a) == want;
    if (match && !want.empty()) return d;
    known += (known.empty() ? "" : ", ") + d.id;
  }
  // A name that names nothing is a malformed command line (exit 2), as an unknown option value.
  throw UsageError(std::string(option) + ": '" + jc::printable(arg) + "' is not a preset (" + known +
              ") nor a .json file; `hbmscope devices` lists them");
}

}  // namespace hbmscope
