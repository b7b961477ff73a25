// Whole models: the shipped configs' layer patterns, the rows of a step (kinds
// and total), the KV cache, and the sweep points (docs/models.md).
#include <catch2/catch.hpp>

#include <algorithm>

#include "hbmscope/device_config.hpp"
#include "hbmscope/error.hpp"
#include "hbmscope/hf_config.hpp"
#include "hbmscope/json_report.hpp"
#include "hbmscope/mask.hpp"
#include "hbmscope/model.hpp"
#include "hbmscope/printers.hpp"
#include "hbmscope/roofline.hpp"
#include "hbmscope/whole_model.hpp"

using namespace hbmscope;

namespace {

std::size_t count(const ModelConfig& m, LayerAttention a) {
  return static_cast<std::size_t>(std::count(m.layers.begin(), m.layers.end(), a));
}

std::vector<std::size_t> indices(const ModelConfig& m, LayerAttention a) {
  std::vector<std::size_t> v;
  for (std::size_t i = 0; i < m.layers.size(); ++i)
    if (m.layers[i] == a) v.push_back(i);
  return v;
}

Shape prefill(std::uint64_t n, std::uint64_t batch = 1) {
  Shape s;
  s.batch = batch;
  s.seq_q = s.seq_kv = n;
  return s;
}

Shape decode_step(std::uint64_t batch, std::uint64_t context) {
  Shape s;
  s.decode = true;
  s.batch = batch;
  s.seq_q = 1;
  s.seq_kv = context;
  s.head_dim = 128;
  return s;
}

}  // namespace

TEST_CASE("every shipped model parses, with its layer pattern", "[models]") {
  const auto& all = preset_model_configs();
  std::vector<std::string> ids;
  for (const auto& m : all) ids.push_back(m.id);
  CHECK(ids == std::vector<std::string>{"deepseek-v3", "gemma-2-9b", "gemma-3-27b", "gpt-oss-120b", "llama-3.1-70b",
                                        "llama-3.1-8b", "llama-4-scout", "mistral-7b-v0.1", "qwen3-8b"});
  for (const auto& m : all) {
    INFO(m.id);
    CHECK(m.source.rfind("https://huggingface.co/", 0) == 0);
    CHECK_FALSE(m.notes.empty());
    CHECK_NOTHROW(validate(m));
  }
  const auto full = LayerAttention::full, sliding = LayerAttention::sliding, chunked = LayerAttention::chunked;

  const ModelConfig l8 = find_model_config("llama-3.1-8b");
  CHECK((l8.layers.size() == 32 && count(l8, full) == 32 && l8.heads == 32 && l8.kv_heads == 8 && l8.head_dim == 128));
  CHECK(l8.dtype == Dtype::bf16);
  CHECK(layer_pattern(l8) == "32 full");
  const ModelConfig l70 = find_model_config("Llama-3.1 70B");  // by name, case and punctuation ignored
  CHECK((l70.layers.size() == 80 && l70.heads == 64 && l70.kv_heads == 8 && l70.head_dim == 128));

  const ModelConfig mi = find_model_config("mistral-7b-v0.1");
  CHECK((count(mi, sliding) == 32 && mi.window == 4096 && mi.heads == 32 && mi.kv_heads == 8 && mi.head_dim == 128));

  const ModelConfig g2 = find_model_config("gemma-2-9b");
  CHECK((g2.layers.size() == 42 && count(g2, sliding) == 21 && g2.window == 4096 && g2.head_dim == 256));
  CHECK((g2.layers[0] == sliding && g2.layers[1] == full && g2.heads == 16 && g2.kv_heads == 8));

  const ModelConfig g3 = find_model_config("gemma-3-27b");
  CHECK((g3.layers.size() == 62 && count(g3, sliding) == 52 && count(g3, full) == 10 && g3.window == 1024));
  CHECK(indices(g3, full) == std::vector<std::size_t>{5, 11, 17, 23, 29, 35, 41, 47, 53, 59});
  CHECK((g3.heads == 32 && g3.kv_heads == 16 && g3.head_dim == 128 && g3.model_type == "gemma3_text"));
  CHECK(layer_pattern(g3) == "(5 sliding, 1 full) × 10, 2 sliding");
  CHECK(layer_counts(g3) == "52 sliding (W 1024) + 10 full");

  const ModelConfig q3 = find_model_config("qwen3-8b");
  CHECK((q3.layers.size() == 36 && count(q3, full) == 36 && q3.window == 0 && q3.head_dim == 128 && q3.kv_heads == 8));

  const ModelConfig ds = find_model_config("deepseek-v3");
  REQUIRE(ds.mla);
  CHECK((ds.layers.size() == 61 && ds.heads == 128 && ds.mla->kv_lora_rank == 512 && ds.mla->qk_rope_head_dim == 64));
  CHECK((ds.mla->qk_nope_head_dim == 128 && ds.mla->v_head_dim == 128 && ds.mla->q_lora_rank == 1536));
  CHECK(layer_kinds(ds).size() == 1);
  CHECK(layer_kinds(ds)[0].name == "mla");

  const ModelConfig go = find_model_config("gpt-oss-120b");
  CHECK((go.layers.size() == 36 && count(go, sliding) == 18 && go.layers[0] == sliding && go.window == 128));
  CHECK((go.heads == 64 && go.kv_heads == 8 && go.head_dim == 64 && !go.dtype));

  const ModelConfig l4 = find_model_config("llama-4-scout");
  CHECK((l4.layers.size() == 48 && count(l4, chunked) == 36 && count(l4, full) == 12 && l4.chunk == 8192));
  CHECK(indices(l4, full).front() == 3);
  CHECK(indices(l4, full).back() == 47);
  CHECK((l4.heads == 40 && l4.kv_heads == 8 && l4.head_dim == 128));
  CHECK(layer_pattern(l4) == "(3 chunked, 1 full) × 12");
}

TEST_CASE("MLA layers: un-absorbed prefill, absorbed decode, the latent cache", "[models]") {
  const ModelConfig ds = find_model_config("deepseek-v3");
  const LayerKind k = layer_kinds(ds)[0];
  const Shape p = layer_shape(ds, k, prefill(4096));
  CHECK((p.heads == 128 && p.kv_heads == 128 && p.head_dim == 192 && p.head_dim_v == 128 && !p.latent_kv && p.causal));
  const Shape d = layer_shape(ds, k, decode_step(32, 32768));
  CHECK((d.heads == 128 && d.kv_heads == 1 && d.head_dim == 576 && d.head_dim_v == 512 && d.latent_kv));
  CHECK_NOTHROW(validate(d));
  CHECK(kv_bytes_per_token(ds, k, Dtype::bf16) == 576 * 2);
  CHECK(kv_bytes_per_token(ds, k, Dtype::fp8) == 576);
  const ModelConfig l8 = find_model_config("llama-3.1-8b");
  CHECK(kv_bytes_per_token(l8, layer_kinds(l8)[0], Dtype::bf16) == 8 * 256 * 2);
}

TEST_CASE("KV cache tokens: the keys the step's queries see together", "[models]") {
  Shape s = decode_step(1, 32768);
  s.causal = true;
  CHECK(kv_cache_tokens(s) == 32768);
  s.window = 1024;
  CHECK(kv_cache_tokens(s) == 1024);
  s.seq_q = 4;  // four new tokens: the first sees 1024 keys ending three before the last
  CHECK(kv_cache_tokens(s) == 1027);
  s.seq_kv = 700;
  CHECK(kv_cache_tokens(s) == 700);
  s = decode_step(3, 10000);
  s.causal = true;
  s.chunk = 8192;
  CHECK(kv_cache_tokens(s) == 3 * (10000 - 8192));
  s.seq_kv = 8193;  // the query at 8192 starts a chunk
  CHECK(kv_cache_tokens(s) == 3);
  s.seq_q = 2;  // ... and the one at 8191 ends the previous one
  CHECK(kv_cache_tokens(s) == 3 * 8193);
  // A ragged batch: each sequence's own, summed.
  Shape r = decode_step(3, 9000);
  r.causal = true;
  r.window = 4096;
  r.context_lengths = SeqList(std::vector<std::uint64_t>{100, 5000, 9000});
  CHECK(kv_cache_tokens(r) == 100 + 4096 + 4096);
  // A prefill reads every key of each sequence, window or not.
  Shape p = prefill(8192, 2);
  p.causal = true;
  p.window = 1024;
  CHECK(kv_cache_tokens(p) == 2 * 8192);
  // Against the visible ranges, query by query.
  for (std::uint64_t nq : {1, 3, 8})
    for (std::uint64_t l : {5, 1023, 1024, 1025, 5000}) {
      Shape x = decode_step(1, l);
      x.causal = true;
      x.seq_q = nq;
      x.window = 1024;
      std::uint64_t lo = l, hi = 0;
      for (std::uint64_t row = 0; row < nq; ++row) {
        const KeyRange k = visible_keys(x, row);
        if (k.empty()) continue;
        lo = std::min(lo, k.begin);
        hi = std::max(hi, k.end);
      }
      CHECK(kv_cache_tokens(x) == hi - lo);
    }
}

TEST_CASE("a whole model's total is the sum of its kinds' rows", "[models]") {
  const DeviceSpec h200 = find_device("h200");
  for (const char* id : {"llama-3.1-8b", "gemma-3-27b", "deepseek-v3", "gpt-oss-120b", "llama-4-scout"})
    for (const Shape& base : {prefill(8192, 2), decode_step(32, 32768)}) {
      INFO(id << (base.decode ? " decode" : " prefill"));
      const ModelConfig m = find_model_config(id);
      Report rep;
      rep.rows = whole_model_rows(m, base, ModelOptions{});
      const auto kinds = layer_kinds(m);
      REQUIRE(rep.rows.size() == kinds.size() + 1);
      add_predictions(rep, h200, 1.0);
      const Row& total = rep.rows.back();
      REQUIRE(total.model_layers);
      CHECK(total.model_layers->kind == "total");
      CHECK(total.model_layers->layers == m.layers.size());
      std::uint64_t flops = 0, kv = 0, per_token = 0, layers = 0;
      for (std::size_t i = 0; i < kinds.size(); ++i) {
        const Row& r = rep.rows[i];
        CHECK(r.model_layers->kind == kinds[i].name);
        // A kind's row is one layer's row times its layers.
        const Row one = model_row(layer_shape(m, kinds[i], base), ModelOptions{});
        CHECK(r.flops == one.flops * kinds[i].layers);
        for (const auto& v : one.variants) CHECK(r.variant(v.id)->bytes == v.bytes * kinds[i].layers);
        flops += r.flops;
        kv += r.model_layers->kv_cache_bytes;
        per_token += r.model_layers->kv_bytes_per_token;
        layers += r.model_layers->layers;
      }
      CHECK(layers == m.layers.size());
      CHECK(total.flops == flops);
      CHECK(total.model_layers->kv_cache_bytes == kv);
      CHECK(total.model_layers->kv_bytes_per_token == per_token);
      for (const auto& v : total.variants) {
        std::uint64_t bytes = 0;
        double seconds = 0;
        for (std::size_t i = 0; i < kinds.size(); ++i) {
          bytes += rep.rows[i].variant(v.id)->bytes;
          seconds += rep.rows[i].variant(v.id)->prediction->seconds;
        }
        CHECK(v.bytes == bytes);
        REQUIRE(v.prediction);
        CHECK(v.prediction->seconds == Approx(seconds).epsilon(1e-12));
        if (v.decode) CHECK(v.decode->total == v.bytes);
      }
    }
}

TEST_CASE("KV cache of a decode step: windows, chunks, MLA, kv dtype", "[models]") {
  const Shape step = decode_step(32, 32768);
  const auto kv_of = [&](const char* id, const Shape& base) {
    return whole_model_rows(find_model_config(id), base, ModelOptions{}).back().model_layers->kv_cache_bytes;
  };
  // Llama-3.1 8B: 32 layers x 8 kv heads x (128 + 128) x 2 B per token, 32 x 32K tokens.
  CHECK(kv_of("llama-3.1-8b", step) == 32ull * 8 * 256 * 2 * 32 * 32768);
  // Gemma 3 27B: 52 sliding layers hold 1024 tokens a sequence, 10 full ones all.
  CHECK(kv_of("gemma-3-27b", step) == (52ull * 1024 + 10ull * 32768) * 32 * 16 * 256 * 2);
  // DeepSeek-V3: the 576-value latent per token and layer.
  CHECK(kv_of("deepseek-v3", step) == 61ull * 576 * 2 * 32 * 32768);
  // Llama 4 Scout at 32K: a chunk boundary, so 8192 a sequence in chunked layers.
  CHECK(kv_of("llama-4-scout", step) == (36ull * 8192 + 12ull * 32768) * 32 * 8 * 256 * 2);
  Shape fp8 = step;
  fp8.kv_dtype = Dtype::fp8;
  CHECK(kv_of("llama-3.1-8b", fp8) * 2 == kv_of("llama-3.1-8b", step));
}

TEST_CASE("sweep points: models outermost, the model's dtype unless given", "[models]") {
  SweepAxes a;
  a.seq = {1024, 2048};
  a.model_config = {std::make_shared<const ModelConfig>(find_model_config("gpt-oss-120b")),
                    std::make_shared<const ModelConfig>(find_model_config("qwen3-8b"))};
  a.dtype = {Dtype::fp16};
  ModelSteps p = expand_model_steps(a);
  REQUIRE(p.shapes.size() == 4);
  CHECK(p.models[0]->id == "gpt-oss-120b");
  CHECK(p.models[2]->id == "qwen3-8b");
  CHECK(p.shapes[0].dtype == Dtype::fp16);  // GPT-OSS gives no torch_dtype
  CHECK(p.shapes[2].dtype == Dtype::bf16);  // Qwen3's torch_dtype
  a.dtype_given = true;
  p = expand_model_steps(a);
  CHECK(p.shapes[2].dtype == Dtype::fp16);
  CHECK(point_row_count(p.models[0]) == 3);
  CHECK(point_row_count(nullptr) == 1);
  const auto rows = point_rows(p.shapes, p.models, {"a", "a", "b", "b"}, ModelOptions{});
  CHECK(rows.size() == 3 * 2 + 2 * 2);
  CHECK(rows.front().label == "a");
  CHECK(rows.back().label == "b");
}

TEST_CASE("whole-model rows in JSON and CSV", "[models]") {
  Report rep;
  rep.rows = whole_model_rows(find_model_config("gemma-3-27b"), decode_step(4, 4096), ModelOptions{});
  add_predictions(rep, find_device("h100"), 1.0);
  const Report back = report_from_json(report_to_json(rep), "r.json");
  REQUIRE(back.rows.size() == rep.rows.size());
  for (std::size_t i = 0; i < rep.rows.size(); ++i) CHECK(back.rows[i].model_layers == rep.rows[i].model_layers);
  const std::string csv = render(rep, PrintOptions{Format::csv});
  CHECK(csv.find("model_config,layer_kind,layers,kv_bytes_per_token,kv_cache_tokens,kv_cache_bytes") != std::string::npos);
  CHECK(csv.find(",gemma-3-27b,total,62,") != std::string::npos);
  const std::string table = render(rep, PrintOptions{});
  CHECK(table.find("52 sliding (W 1024)") != std::string::npos);
  CHECK(table.find("62 total") != std::string::npos);
  // A malformed model object is one line naming the key.
  auto j = report_to_json(rep);
  j["rows"][0]["model"]["kv_cache"].erase("bytes");
  CHECK_THROWS_WITH(report_from_json(j, "r.json"), Catch::Contains("rows[0].model.kv_cache.bytes: missing"));
}

TEST_CASE("a ragged prefill batch through a whole model: each kind's shape, the window per sequence", "[models]") {
  // 512, 4096, and 2048 new tokens against a cached prefix (8192 keys), as --seq-lens 512,4K,2K:8K.
  Shape base;
  base.seq_lens = SeqList(std::vector<SeqLen>{{512, 512}, {4096, 4096}, {2048, 8192}});
  base.batch = 3;
  base.seq_q = 4096;
  base.seq_kv = 8192;
  const ModelConfig g3 = find_model_config("gemma-3-27b");
  const std::vector<Row> rows = whole_model_rows(g3, base, ModelOptions{});
  REQUIRE(rows.size() == 3);
  const Row &sliding = rows[0], &full = rows[1], &total = rows[2];
  REQUIRE(sliding.model_layers->kind == "sliding");
  CHECK(sliding.shape.seq_lens == base.seq_lens);
  CHECK(sliding.shape.window == 1024);
  // Visible pairs a head, by hand: sliding, 512·513/2 + (1024·1025/2 + 3072·1024) + 2048·1024
  // (every query of the chunked prefill sees 1024 keys); full, 512·513/2 + 4096·4097/2 + Σ 6145..8192.
  const std::uint64_t pairs_sliding = 131328 + (524800 + 3145728) + 2097152;
  const std::uint64_t pairs_full = 131328 + 8390656 + (6145 + 8192) * 2048 / 2;
  CHECK(pairs_sliding == 5899008);
  CHECK(sliding.flops == pairs_sliding * (2 * 128 + 2 * 128) * 32 * 52);
  CHECK(full.flops == pairs_full * 512 * 32 * 10);
  // The floor: Q and O of 6656 queries (32 heads, d 128), and K, V of the keys some query sees
  // (16 kv heads): sliding 512 + 4096 + 3071 (keys 5121..8191 for the 2048 queries at 6144..8191).
  const std::uint64_t qo = 2ull * 32 * (512 + 4096 + 2048) * 256;
  CHECK(sliding.variant("floor")->bytes == (qo + 2ull * 16 * 256 * (512 + 4096 + 3071)) * 52);
  CHECK(full.variant("floor")->bytes == (qo + 2ull * 16 * 256 * (512 + 4096 + 8192)) * 10);
  // The KV cache: the same keys, one token 16 x 256 x 2 B a layer.
  CHECK(sliding.model_layers->kv_cache_tokens == 512 + 4096 + 3071);
  CHECK(full.model_layers->kv_cache_tokens == 512 + 4096 + 8192);
  CHECK(sliding.model_layers->kv_cache_bytes == 7679ull * 8192 * 52);
  // Each kind is one layer's row times its layers, the total their sum.
  for (const Row* k : {&sliding, &full}) {
    const auto kinds = layer_kinds(g3);
    const LayerKind& kind = kinds[k == &sliding ? 0 : 1];
    const Row one = model_row(layer_shape(g3, kind, base), ModelOptions{});
    for (const auto& v : one.variants) CHECK(k->variant(v.id)->bytes == v.bytes * kind.layers);
  }
  for (const auto& v : total.variants)
    CHECK(v.bytes == sliding.variant(v.id)->bytes + full.variant(v.id)->bytes);
  CHECK(total.flops == sliding.flops + full.flops);
  CHECK(total.model_layers->kv_cache_bytes == sliding.model_layers->kv_cache_bytes + full.model_layers->kv_cache_bytes);
  // Every shipped model takes the ragged batch, its total the sum of its kinds.
  for (const auto& m : preset_model_configs()) {
    INFO(m.id);
    const auto r = whole_model_rows(m, base, ModelOptions{});
    std::uint64_t flops = 0;
    for (std::size_t i = 0; i + 1 < r.size(); ++i) flops += r[i].flops;
    CHECK(r.back().flops == flops);
  }
}

TEST_CASE("the total of kinds with different masks is 'mixed', in every format", "[models]") {
  Report rep;
  rep.rows = whole_model_rows(find_model_config("gemma-3-27b"), prefill(4096), ModelOptions{});
  for (Row& r : whole_model_rows(find_model_config("mistral-7b-v0.1"), prefill(4096), ModelOptions{}))
    rep.rows.push_back(std::move(r));
  REQUIRE(rep.rows.size() == 5);
  const Row& g_total = rep.rows[2];
  CHECK(g_total.model_layers->mixed_masks);
  CHECK((g_total.shape.window == 0 && g_total.shape.chunk == 0));
  const Row& m_total = rep.rows[4];  // every layer slides: the total keeps the window
  CHECK_FALSE(m_total.model_layers->mixed_masks);
  CHECK(m_total.shape.window == 4096);
  CHECK(whole_model_rows(find_model_config("llama-4-scout"), prefill(4096), ModelOptions{})  // chunked and full
            .back().model_layers->mixed_masks);

  // The line of a table that holds `key`.
  const auto line_of = [](const std::string& text, const std::string& key) {
    const auto at = text.find(key);
    if (at == std::string::npos) return std::string();
    const auto begin = text.rfind('\n', at) + 1;
    return text.substr(begin, text.find('\n', at) - begin);
  };
  const std::string table = render(rep, PrintOptions{});
  CHECK(line_of(table, "62 total").find("   mixed   ") != std::string::npos);
  CHECK(line_of(table, "32 total").find("   window 4096   ") != std::string::npos);
  PrintOptions md;
  md.format = Format::md;
  CHECK(line_of(render(rep, md), "| 62 total |").find("| mixed |") != std::string::npos);
  const std::string csv = render(rep, PrintOptions{Format::csv});
  CHECK(csv.find("kv_cache_tokens,kv_cache_bytes,mask") != std::string::npos);
  CHECK(csv.find(",gemma-3-27b,total,62,507904,,2080374784,mixed,") != std::string::npos);
  CHECK(csv.find(",mistral-7b-v0.1,total,32,131072,,536870912,,") != std::string::npos);
  auto j = report_to_json(rep);
  CHECK(j["rows"][2]["model"]["mask"] == "mixed");
  CHECK_FALSE(j["rows"][2]["shape"].contains("window"));
  CHECK_FALSE(j["rows"][4]["model"].contains("mask"));
  const Report back = report_from_json(j, "r.json");
  for (std::size_t i = 0; i < rep.rows.size(); ++i) CHECK(back.rows[i].model_layers == rep.rows[i].model_layers);
  j["rows"][2]["model"]["mask"] = "window";
  CHECK_THROWS_WITH(report_from_json(j, "r.json"), Catch::Contains("rows[2].model.mask: 'window' is not \"mixed\""));
}

TEST_CASE("the L2 simulation of whole-model rows: each kind one layer's kernel, times its layers", "[models]") {
  L2SimConfig c;
  c.l2_bytes = 50ull << 20;
  c.sm_count = 132;
  for (const char* id : {"gemma-3-27b", "deepseek-v3", "llama-4-scout"})
    for (const Shape& base : {prefill(2048, 2), decode_step(8, 4096)}) {
      INFO(id << (base.decode ? " decode" : " prefill"));
      const ModelConfig m = find_model_config(id);
      std::vector<Row> rows = whole_model_rows(m, base, ModelOptions{});
      const auto kinds = layer_kinds(m);
      for (std::size_t i = 0; i < kinds.size(); ++i) add_layers_l2_sim(rows[i], c);
      CHECK_THROWS_WITH(add_layers_l2_sim(rows.back(), c), Catch::Contains("a total row is not simulated"));
      CHECK(sum_whole_model_l2_sims(rows).empty());
      const Row& total = rows.back();
      CHECK_FALSE(total.l2_sim);
      std::size_t sims = 0;
      for (std::size_t i = 0; i < kinds.size(); ++i) {
        Row one = model_row(layer_shape(m, kinds[i], base), ModelOptions{});
        add_l2_sim(one, c);
        const Row& k = rows[i];
        REQUIRE(k.l2_sim);
        for (const auto& v : one.variants) {
          CHECK(k.variant(v.id)->bytes == v.bytes * kinds[i].layers);
          CHECK(k.variant(v.id)->intensity == Approx(v.intensity));
        }
        CHECK(k.l2_sim->flash.read_bytes == one.l2_sim->flash.read_bytes * kinds[i].layers);
        CHECK(k.l2_sim->flash.hit_rate == one.l2_sim->flash.hit_rate);
        for (std::size_t d = 0; d < one.l2_sim->decode.size(); ++d)
          CHECK(k.l2_sim->decode[d].sim.write_bytes == one.l2_sim->decode[d].sim.write_bytes * kinds[i].layers);
      }
      for (const auto& v : total.variants) {
        if (v.id.find("_l2_sim") == std::string::npos) continue;
        ++sims;
        std::uint64_t sum = 0;
        for (std::size_t i = 0; i < kinds.size(); ++i) sum += rows[i].variant(v.id)->bytes;
        CHECK(v.bytes == sum);
        CHECK(v.bytes >= total.variant(base.decode ? "decode_floor" : "floor")->bytes);
      }
      CHECK(sims == (base.decode ? 3 : 2));
      // A report of these rows reads back, the total's simulated bytes without an l2_sim.
      Report rep;
      rep.rows = rows;
      add_predictions(rep, find_device("h200"), 1.0);
      const double kinds_seconds = rep.rows[0].variant(base.decode ? "decode_split_l2_sim" : "flash_l2_sim")
                                       ->prediction->seconds +
                                   (kinds.size() > 1 ? rep.rows[1].variant(base.decode ? "decode_split_l2_sim"
                                                                                        : "flash_l2_sim")
                                                           ->prediction->seconds
                                                     : 0.0);
      CHECK(rep.rows.back().variant(base.decode ? "decode_split_l2_sim" : "flash_l2_sim")->prediction->seconds ==
            Approx(kinds_seconds));
      const Report back = report_from_json(report_to_json(rep), "r.json");
      CHECK(back.rows.back().variant(base.decode ? "decode_split_l2_sim" : "flash_l2_sim")->bytes ==
            rows.back().variant(base.decode ? "decode_split_l2_sim" : "flash_l2_sim")->bytes);
    }
  // A kind left out (over the budget): its total gets no simulated bytes, and a note says why.
  std::vector<Row> rows = whole_model_rows(find_model_config("gemma-3-27b"), prefill(2048), ModelOptions{});
  add_layers_l2_sim(rows[0], c);
  const auto notes = sum_whole_model_l2_sims(rows);
  REQUIRE(notes.size() == 1);
  CHECK(notes[0].find("gemma-3-27b's total") != std::string::npos);
  CHECK(notes[0].find("its full layers were left out") != std::string::npos);
  CHECK_FALSE(rows.back().variant("flash_l2_sim"));
  // A plain row: add_l2_sim unchanged.
  Row plain = model_row(prefill(2048), ModelOptions{});
  Row same = plain;
  add_layers_l2_sim(plain, c);
  add_l2_sim(same, c);
  CHECK(plain.variant("flash_l2_sim")->bytes == same.variant("flash_l2_sim")->bytes);
}
