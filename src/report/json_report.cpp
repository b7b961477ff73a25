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

nlohmann::json l2_sim_to_json(const L2SimDetail& d) {
  auto variant = [](const L2SimDetail::Variant& v, const char* min_name) {
    return nlohmann::json{{"read_bytes", v.read_bytes},
                          {"write_bytes", v.write_bytes},
                          {"hit_rate", v.hit_rate},
                          {min_name, v.l2_bytes_to_min}};
  };
  nlohmann::json flash = variant(d.flash, "l2_bytes_to_floor");
  flash["heads_per_wave"] = d.heads_per_wave;
  flash["kv_heads_per_wave"] = d.kv_heads_per_wave;
  flash["waves"] = d.waves;
  return {{"l2_bytes", d.l2_bytes},
          {"sm_count", d.sm_count},
          {"ctas_per_sm", d.ctas_per_sm},
          {"order", d.order},
          {"q_o_allocate", d.q_o_allocate},
          {"flash", flash},
          {"standard", variant(d.standard, "l2_bytes_to_min")}};
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
    nlohmann::json j = {{"shape", shape_to_json(row.shape)},
                        {"bytes", bytes},
                        {"flops", row.flops},
                        {"intensity", inten}};
    if (row.l2_sim) j["l2_sim"] = l2_sim_to_json(*row.l2_sim);
    rows.push_back(j);
  }
  return {
      {"schema", std::string(report_schema)},
      {"tool", {{"name", "hbmscope"}, {"version", config::version}}},
      {"command", r.command},
      {"rows", rows},
  };
}

}  // namespace hbmscope
