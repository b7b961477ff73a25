#include "hbmscope/json_report.hpp"

#include "hbmscope/config.hpp"

namespace hbmscope {

nlohmann::json shape_to_json(const Shape& s) {
  return {
      {"batch", s.batch},
      {"heads", s.heads},
      {"kv_heads", s.kv_heads},
      {"seq_q", s.seq_q},
      {"seq_kv", s.seq_kv},
      {"head_dim", s.head_dim},
      {"dtype", std::string(dtype_name(s.dtype))},
      {"elem_bytes", elem_bytes(s.dtype)},
      {"block_rows", s.block_rows},
      {"block_cols", s.block_cols},
      {"causal", s.causal},
      {"pass", std::string(pass_name(s.pass))},
  };
}

nlohmann::json report_to_json(const Report& r) {
  nlohmann::json rows = nlohmann::json::array();
  for (const Row& row : r.rows) {
    nlohmann::json bytes = nlohmann::json::object();
    nlohmann::json inten = nlohmann::json::object();
    for (const auto& v : row.variants) {
      bytes[v.id] = v.bytes;
      inten[v.id] = v.intensity;
    }
    rows.push_back({{"shape", shape_to_json(row.shape)},
                    {"bytes", bytes},
                    {"flops", row.flops},
                    {"intensity", inten}});
  }
  return {
      {"schema", std::string(report_schema)},
      {"tool", {{"name", "hbmscope"}, {"version", config::version}}},
      {"command", r.command},
      {"rows", rows},
  };
}

}  // namespace hbmscope
