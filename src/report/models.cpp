// `hbmscope models`: the shipped model configs with their layer pattern, or
// one in full with the source of its figures.
#include <algorithm>

#include <nlohmann/json.hpp>

#include "hbmscope/csv.hpp"
#include "hbmscope/printers.hpp"
#include "printers_internal.hpp"

namespace hbmscope {

namespace {

std::string dtype_text(const ModelConfig& m) { return m.dtype ? std::string(dtype_name(*m.dtype)) : "-"; }

// K and V bytes one token takes over all the layers, in the model's dtype (bf16 when none).
std::uint64_t token_bytes(const ModelConfig& m) {
  std::uint64_t b = 0;
  for (const LayerKind& k : layer_kinds(m)) b += kv_bytes_per_token(m, k, m.dtype.value_or(Dtype::bf16)) * k.layers;
  return b;
}

std::string head_dims(const ModelConfig& m) {
  if (m.mla)
    return std::to_string(m.mla->qk_nope_head_dim + m.mla->qk_rope_head_dim) + "/" + std::to_string(m.mla->v_head_dim) +
           ", latent " + std::to_string(m.mla->kv_lora_rank) + "+" + std::to_string(m.mla->qk_rope_head_dim);
  return std::to_string(m.head_dim) + (m.head_dim_v && m.head_dim_v != m.head_dim ? "/" + std::to_string(m.head_dim_v) : "");
}

nlohmann::json model_json(const ModelConfig& m) {
  nlohmann::json kinds = nlohmann::json::array();
  for (const LayerKind& k : layer_kinds(m)) kinds.push_back({{"kind", k.name}, {"layers", k.layers}, {"first", k.first}});
  nlohmann::json layers = nlohmann::json::array();
  for (LayerAttention a : m.layers) layers.push_back(std::string(layer_attention_name(a)));
  nlohmann::json j = {{"id", m.id},
                      {"name", m.name},
                      {"model_type", m.model_type},
                      {"layers", m.layers.size()},
                      {"heads", m.heads},
                      {"kv_heads", m.kv_heads},
                      {"head_dim", m.head_dim},
                      {"head_dim_v", m.head_dim_v ? m.head_dim_v : m.head_dim},
                      {"window", m.window},
                      {"chunk", m.chunk},
                      {"dtype", m.dtype ? nlohmann::json(std::string(dtype_name(*m.dtype))) : nlohmann::json()},
                      {"layer_pattern", layer_pattern(m)},
                      {"layer_kinds", kinds},
                      {"layer_attention", layers},
                      {"kv_bytes_per_token", token_bytes(m)},
                      {"source", m.source},
                      {"notes", m.notes}};
  if (m.mla)
    j["mla"] = {{"kv_lora_rank", m.mla->kv_lora_rank},
                {"qk_rope_head_dim", m.mla->qk_rope_head_dim},
                {"qk_nope_head_dim", m.mla->qk_nope_head_dim},
                {"v_head_dim", m.mla->v_head_dim},
                {"q_lora_rank", m.mla->q_lora_rank}};
  return j;
}

}  // namespace

std::string render_models(const std::vector<ModelConfig>& models, bool detail, Format format) {
  if (format == Format::json) {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& m : models) j.push_back(model_json(m));
    return (detail && j.size() == 1 ? j[0] : j).dump(2) + "\n";
  }
  if (format == Format::csv) {
    std::string out = "model,name,model_type,layers,heads,kv_heads,head_dim,head_dim_v,window,chunk,mla,dtype,"
                      "layer_pattern,layer_counts,kv_bytes_per_token,source\n";
    for (const auto& m : models)
      out += csv_line({m.id, m.name, m.model_type, std::to_string(m.layers.size()), std::to_string(m.heads),
                       std::to_string(m.kv_heads), std::to_string(m.head_dim),
                       std::to_string(m.head_dim_v ? m.head_dim_v : m.head_dim), std::to_string(m.window),
                       std::to_string(m.chunk), m.mla ? "true" : "false", dtype_text(m), layer_pattern(m),
                       layer_counts(m), std::to_string(token_bytes(m)), m.source});
    return out;
  }
  const std::vector<std::string> head{"Model", "Layers", "Heads/KV", "Head dim", "KV/token", "Dtype",
                                      "Name", "Layer pattern"};
  std::vector<std::vector<std::string>> rows;
  for (const auto& m : models)
    rows.push_back({m.id, layer_counts(m), std::to_string(m.heads) + "/" + std::to_string(m.kv_heads), head_dims(m),
                    format_bytes(token_bytes(m), Units::decimal), dtype_text(m), m.name, layer_pattern(m)});
  const std::vector<bool> right{false, false, true, false, true, false, false, false};
  std::string out;
  if (format != Format::md)
    out = "Models for --model-config (KV/token: one token's K and V in all layers; `hbmscope models NAME`: "
          "sources)\n\n";
  // Wider than a 120-column terminal: the figures, then the names and patterns.
  out += printing::render_grid_parts(head, rows, right, format, 120, {{0, 1, 2, 3, 4, 5}, {0, 6, 7}});
  if (detail && !models.empty()) {
    const ModelConfig& m = models.front();
    out += "\nmodel_type: " + (m.model_type.empty() ? std::string("-") : m.model_type) + "\n";
    if (m.mla)
      out += "MLA: kv_lora_rank " + std::to_string(m.mla->kv_lora_rank) + ", qk_rope_head_dim " +
             std::to_string(m.mla->qk_rope_head_dim) + ", qk_nope_head_dim " + std::to_string(m.mla->qk_nope_head_dim) +
             ", v_head_dim " + std::to_string(m.mla->v_head_dim) + ", q_lora_rank " +
             std::to_string(m.mla->q_lora_rank) + "\n";
    out += "Source: " + (m.source.empty() ? std::string("(none given)") : m.source) + "\n";
    for (const auto& n : m.notes) out += "  - " + n + "\n";
  }
  return out;
}

}  // namespace hbmscope
