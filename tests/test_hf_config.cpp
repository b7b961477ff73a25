// The config.json reader: which layers are local, head dims, MLA, dtypes, and
// one-line refusals naming the key (docs/models.md).
#include <catch2/catch.hpp>

#include <algorithm>

#include "hbmscope/error.hpp"
#include "hbmscope/hf_config.hpp"
#include "../src/report/json_check.hpp"

using namespace hbmscope;

namespace {

ModelConfig parse(const std::string& text) {
  return model_config_from_json(json_check::parse_json_text(text, "c.json"), "c.json", "c.json");
}

std::string error_of(const std::string& text) {
  try {
    parse(text);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// A Llama-like config with extra keys spliced in.
std::string cfg(const std::string& extra, std::uint64_t layers = 8) {
  return R"({"model_type": "llama", "num_hidden_layers": )" + std::to_string(layers) +
         R"(, "num_attention_heads": 32, "num_key_value_heads": 8, "hidden_size": 4096)" +
         (extra.empty() ? "" : ", " + extra) + "}";
}

std::string subst(std::string s, const std::string& from, const std::string& to) {
  const auto at = s.find(from);
  if (at != std::string::npos) s.replace(at, from.size(), to);
  return s;
}

std::size_t sliding(const ModelConfig& m) {
  return static_cast<std::size_t>(std::count(m.layers.begin(), m.layers.end(), LayerAttention::sliding));
}

}  // namespace

TEST_CASE("config.json: heads and head dim", "[hf_config]") {
  const ModelConfig m = parse(cfg(R"("torch_dtype": "bfloat16")"));
  CHECK((m.layers.size() == 8 && m.heads == 32 && m.kv_heads == 8 && m.head_dim == 128 && m.dtype == Dtype::bf16));
  CHECK(m.name == "llama");
  CHECK(parse(cfg(R"("head_dim": 64)")).head_dim == 64);
  CHECK(parse(cfg(R"("dtype": "float16")")).dtype == Dtype::fp16);
  CHECK(parse(cfg(R"("torch_dtype": "torch.float32")")).dtype == Dtype::fp32);
  CHECK_FALSE(parse(cfg("")).dtype);
  // Nested: the attention is the text_config's; the dtype its own or the top level's.
  const ModelConfig n = parse(R"({"model_type": "gemma3", "torch_dtype": "bfloat16", "text_config": {
      "model_type": "gemma3_text", "num_hidden_layers": 12, "num_attention_heads": 8, "num_key_value_heads": 4,
      "head_dim": 256, "sliding_window": 512}})");
  CHECK((n.layers.size() == 12 && sliding(n) == 10 && n.window == 512 && n.dtype == Dtype::bf16));
  CHECK(n.model_type == "gemma3_text");
}

TEST_CASE("config.json: which layers are local", "[hf_config]") {
  const auto full = LayerAttention::full, slide = LayerAttention::sliding, chunk = LayerAttention::chunked;
  // layer_types wins.
  ModelConfig m = parse(cfg(R"("sliding_window": 64, "layer_types": ["full_attention", "sliding_attention",
      "sliding_attention", "full_attention"])", 4));
  CHECK(m.layers == std::vector<LayerAttention>{full, slide, slide, full});
  m = parse(cfg(R"("attention_chunk_size": 16, "layer_types": ["chunked_attention", "full_attention"])", 2));
  CHECK((m.layers == std::vector<LayerAttention>{chunk, full} && m.chunk == 16));
  // sliding_window_pattern (or the underscored form newer configs write).
  m = parse(cfg(R"("sliding_window": 64, "sliding_window_pattern": 3)", 7));
  CHECK(m.layers == std::vector<LayerAttention>{slide, slide, full, slide, slide, full, slide});
  CHECK(parse(cfg(R"("sliding_window": 64, "_sliding_window_pattern": 3)", 7)).layers == m.layers);
  // Qwen: use_sliding_window + max_window_layers.
  m = parse(cfg(R"("sliding_window": 4096, "use_sliding_window": true, "max_window_layers": 5)", 8));
  CHECK(m.layers == std::vector<LayerAttention>{full, full, full, full, full, slide, slide, slide});
  m = parse(cfg(R"("sliding_window": 4096, "use_sliding_window": false, "max_window_layers": 5)", 8));
  CHECK((sliding(m) == 0 && m.window == 0));
  // Model types' rules when no key says.
  const auto typed = [](const char* type, std::uint64_t n) {
    return parse(std::string(R"({"model_type": ")") + type + R"(", "num_hidden_layers": )" + std::to_string(n) +
                 R"(, "num_attention_heads": 8, "num_key_value_heads": 8, "head_dim": 64, "sliding_window": 32})");
  };
  CHECK(sliding(typed("mistral", 6)) == 6);
  CHECK(typed("gemma2", 4).layers == std::vector<LayerAttention>{slide, full, slide, full});
  CHECK(typed("gpt_oss", 4).layers == std::vector<LayerAttention>{slide, full, slide, full});
  CHECK(sliding(typed("gemma3_text", 12)) == 10);
  CHECK(sliding(typed("qwen3", 6)) == 0);
  // Llama 4: no_rope_layers (1: chunked), else every 4th layer global.
  m = parse(subst(cfg(R"("attention_chunk_size": 8192, "no_rope_layers": [1, 0, 1])", 3), "llama", "x"));
  CHECK(m.layers == std::vector<LayerAttention>{chunk, full, chunk});
  m = parse(R"({"model_type": "llama4_text", "num_hidden_layers": 8, "num_attention_heads": 40,
      "num_key_value_heads": 8, "head_dim": 128, "attention_chunk_size": 8192, "no_rope_layers": []})");
  CHECK(m.layers == std::vector<LayerAttention>{chunk, chunk, chunk, full, chunk, chunk, chunk, full});
}

TEST_CASE("config.json: MLA", "[hf_config]") {
  const ModelConfig m = parse(R"({"model_type": "deepseek_v2", "num_hidden_layers": 27, "num_attention_heads": 16,
      "num_key_value_heads": 16, "kv_lora_rank": 512, "q_lora_rank": null, "qk_nope_head_dim": 128,
      "qk_rope_head_dim": 64, "v_head_dim": 128})");
  REQUIRE(m.mla);
  CHECK((m.mla->q_lora_rank == 0 && m.head_dim == 192 && m.head_dim_v == 128 && layer_kinds(m)[0].name == "mla"));
}

TEST_CASE("config.json: refusals are one line naming the key", "[hf_config]") {
  const auto refused = [](const std::string& text, const std::string& part) {
    const std::string e = error_of(text);
    INFO(e);
    CHECK(e.find(part) != std::string::npos);
    CHECK(e.find('\n') == std::string::npos);
    CHECK(e.rfind("c.json: ", 0) == 0);
  };
  refused(cfg(R"("sliding_window": 8, "layer_types": ["full_attention", "linear_attention"])", 2),
          "layer_types[1]: 'linear_attention' is not a layer type hbmscope models");
  refused(cfg(R"("layer_types": ["full_attention"])", 2), "layer_types: expected an array of 2 layer types");
  refused(R"({"num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128})", "num_hidden_layers: missing");
  refused(R"({"num_hidden_layers": 2, "num_attention_heads": 32, "head_dim": 128})", "num_key_value_heads: missing");
  refused(subst(cfg(""), "\"num_key_value_heads\": 8", "\"num_key_value_heads\": 12"),
          "num_key_value_heads: 12 does not divide num_attention_heads (32)");
  refused(subst(cfg(""), "\"hidden_size\": 4096", "\"hidden_size\": 4100"), "hidden_size: 4100 is not a multiple");
  refused(cfg(R"("sliding_window": 4096)"), "sliding_window: set, but nothing says which layers use it");
  refused(cfg(R"("attention_chunk_size": 8192)"), "attention_chunk_size: set, but nothing says which layers");
  refused(cfg(R"("layer_types": ["sliding_attention", "full_attention"])", 2), "sliding_window: missing");
  refused(cfg(R"("index_topk": 2048)"), "index_topk: DeepSeek sparse attention");
  refused(cfg(R"("use_bidirectional_attention": true)"), "use_bidirectional_attention: true");
  refused(cfg(R"("num_kv_shared_layers": 20)"), "num_kv_shared_layers:");
  refused(cfg(R"("torch_dtype": "float64")"), "torch_dtype: 'float64' is not a dtype");
  refused(cfg(R"("torch_dtype": "bfloat16", "dtype": "float16")"), "dtype: differs from torch_dtype");
  refused(subst(cfg(""), "\"num_hidden_layers\": 8", "\"num_hidden_layers\": 5000"), "num_hidden_layers: expected");
  refused(cfg(R"("kv_lora_rank": 512, "qk_rope_head_dim": 64)"), "qk_nope_head_dim: missing");
  refused(cfg(R"("v_head_dim": 64)"), "v_head_dim: a V head dim without MLA");
  refused(R"({"model_type": "gemma2", "num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 4,
      "hidden_size": 2048})", "head_dim: missing: for model_type 'gemma2'");
  refused(R"({"text_config": {"num_hidden_layers": 2}})", "text_config.num_attention_heads: missing");
  refused(cfg(R"("_hbmscope": {"name": "x", "url": "y"})"), "_hbmscope.url: unknown key");
  refused("[1, 2]", "(top level): expected a JSON object");
  // Duplicate keys and depth go through the checked JSON input.
  CHECK(error_of(R"({"num_hidden_layers": 2, "num_hidden_layers": 3})").find("num_hidden_layers") != std::string::npos);
}

TEST_CASE("model config names: shipped, files, unknown", "[hf_config]") {
  CHECK(find_model_config("GEMMA-3-27B").id == "gemma-3-27b");
  try {
    find_model_config("llama-9");
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("--model-config: 'llama-9' is not a shipped model (deepseek-v3, ") == 0);
  }
  CHECK_THROWS_WITH(find_model_config("/no/such/config.json"), Catch::Contains("/no/such/config.json"));
}
