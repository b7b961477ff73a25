#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "hbmscope/error.hpp"
#include "hbmscope/json_report.hpp"
#include "hbmscope/printers.hpp"
#include "hbmscope/sweep_config.hpp"

using namespace hbmscope;

namespace {

SweepConfig parse(const char* text) {
  return sweep_config_from_json(nlohmann::json::parse(text), "s.json");
}

std::string error_of(const char* text) {
  try {
    parse(text);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

Report report_of(const SweepConfig& c) {
  const auto ls = expand(c);
  Report r;
  r.rows = model_rows(ls.shapes);
  for (std::size_t i = 0; i < r.rows.size(); ++i) r.rows[i].label = ls.labels[i];
  return r;
}

}  // namespace

TEST_CASE("seed.json is the note's table", "[config]") {
  const auto c = find_sweep_config("seed");
  Report r = report_of(c);
  Report note;
  note.rows = model_rows(expand(note_axes()));
  CHECK(render(r, {}) == render(note, {}));
  CHECK_THAT(render(r, {}), Catch::Contains("4096 × 64                         136 MB                       34.6 MB                     2.1 MB"));
}

TEST_CASE("llm.json: real models' heads, causal, 4K..128K", "[config]") {
  const auto c = find_sweep_config("llm");
  REQUIRE(c.groups.size() == 3);
  CHECK(c.groups[0].label == "Llama-3 8B");
  CHECK(c.groups[1].label == "Llama-3 70B");
  CHECK(c.groups[2].label == "Mistral 7B");
  const auto ls = expand(c);
  CHECK(ls.shapes.size() == 18);  // 6 lengths x 3 models; Mistral's equal shapes are kept under its label
  for (const Shape& s : ls.shapes) {
    CHECK(s.causal);
    CHECK(s.head_dim == 128);
    CHECK(s.kv_heads == 8);
    CHECK(s.seq_q >= 4096);
    CHECK(s.seq_q <= 131072);
  }
  CHECK(ls.shapes[6].heads == 64);
  const auto lc = expand(find_sweep_config("long-context"));
  CHECK(lc.shapes.back().seq_q == 1048576);
  CHECK(preset_sweep_names() == std::vector<std::string>{"decode", "llm", "long-context", "seed"});
}

TEST_CASE("groups inherit axes, a shape repeated under one label is dropped", "[config]") {
  const auto c = parse(R"({"axes": {"seq": [1024, "2K"], "head_dim": 64, "causal": [false, true]},
      "groups": [{"label": "a", "heads": 4}, {"label": "a", "heads": [4, 8]},
                 {"label": "b", "points": [[4096, 128]], "dtype": ["fp8", "bf16"]}]})");
  const auto ls = expand(c);
  // a: 2 seq x 2 causal with 4 heads, then only the 8-head ones are new (4); b: 2 dtypes x 2 causal.
  CHECK(ls.shapes.size() == 4 + 4 + 4);
  CHECK(ls.labels.front() == "a");
  CHECK(ls.labels.back() == "b");
  CHECK(ls.shapes.back().seq_q == 4096);
  CHECK(ls.shapes.back().head_dim == 128);
  CHECK(ls.shapes[8].dtype == Dtype::fp8);
}

TEST_CASE("config errors name the file, the key and the expected form", "[config]") {
  CHECK(error_of(R"({"axes": {"seq": 1024, "head_dim": 64}, "colour": 1})") ==
        "s.json: colour: unknown key (known: schema, description, variants, axes, groups)");
  CHECK_THAT(error_of(R"({"axes": {"seq": 1024, "head_dim": 64, "sq": 3}})"),
             Catch::StartsWith("s.json: axes.sq: unknown key"));
  CHECK_THAT(error_of(R"({"groups": [{"seq": 1024, "head_dim": 64, "heds": 3}]})"),
             Catch::StartsWith("s.json: groups[0].heds: unknown key"));
  CHECK_THAT(error_of(R"({"axes": {"seq": [], "head_dim": 64}})"),
             Catch::StartsWith("s.json: axes.seq: expected a positive integer, a string such as") &&
                 Catch::EndsWith("got an empty array"));
  CHECK_THAT(error_of(R"({"axes": {"seq": true, "head_dim": 64}})"), Catch::StartsWith("s.json: axes.seq: expected") && Catch::EndsWith("got true"));
  CHECK(error_of(R"({"axes": {"seq": "4K:1K:x2", "head_dim": 64}})") ==
        "s.json: axes.seq: '4K:1K:x2' has START greater than STOP");
  CHECK(error_of(R"({"axes": {"seq": [1024, 0], "head_dim": 64}})") ==
        "s.json: axes.seq[1]: expected positive values, got 0");
  CHECK(error_of(R"({"axes": {"seq": 1024, "head_dim": 64, "dtype": "int4"}})") ==
        "s.json: axes.dtype: 'int4' is not a dtype (fp32, fp16, bf16, fp8)");
  CHECK_THAT(error_of(R"({"axes": {"seq": 1024, "head_dim": 64, "causal": "yes"}})"),
             Catch::StartsWith("s.json: axes.causal: expected true, false or a non-empty array"));
  CHECK_THAT(error_of(R"({"axes": {"seq": 1024, "head_dim": 64, "causal": []}})"),
             Catch::StartsWith("s.json: axes.causal: expected"));
  CHECK_THAT(error_of(R"({"axes": {"points": [[4096]]}})"),
             Catch::StartsWith("s.json: axes.points[0]: expected a pair [seq, head_dim]"));
  CHECK_THAT(error_of(R"({"axes": {"points": [[4096, 64]], "seq": 1}})"),
             Catch::StartsWith("s.json: axes: give 'points' or 'seq' and 'head_dim', not both"));
  CHECK(error_of(R"({"axes": {"seq": 1024}})") == "s.json: axes: needs both 'seq' (or 'seq_lens') and 'head_dim', or 'points'");
  CHECK(error_of(R"({"description": "x"})") == "s.json: (top level): needs 'axes', 'groups' or both");
  CHECK(error_of(R"({"groups": []})") == "s.json: groups: expected a non-empty array of objects, got an empty array");
  CHECK_THAT(error_of(R"({"groups": [{"label": 3, "seq": 1, "head_dim": 1}]})"),
             Catch::StartsWith("s.json: groups[0].label: expected a string"));
  CHECK_THAT(error_of(R"({"schema": "hbmscope.sweep/9", "axes": {"seq": 1, "head_dim": 1}})"),
             Catch::StartsWith("s.json: schema: expected \"hbmscope.sweep/1\""));
  CHECK_THAT(error_of(R"([1, 2])"), Catch::StartsWith("s.json: (top level): expected a JSON object"));
}

TEST_CASE("a config's variants limit the reported variants", "[config]") {
  const auto lc = find_sweep_config("long-context");
  CHECK(lc.variants == std::vector<std::string>{"flash_no_l2", "floor"});
  Report r = report_of(lc);
  keep_variants(r.rows, lc.variants, "long-context");
  for (const Row& row : r.rows) {
    REQUIRE(row.variants.size() == 2);
    CHECK(row.variants[0].id == "flash_no_l2");
    CHECK(row.variants[1].id == "floor");
  }
  CHECK_THROWS_WITH(keep_variants(r.rows, {"flash"}, "x.json: variants"),
                    "x.json: variants: 'flash' is not a variant of these rows (flash_no_l2, floor)");
  CHECK_THAT(error_of(R"({"variants": [], "axes": {"seq": 1, "head_dim": 1}})"),
             Catch::StartsWith("s.json: variants: expected a non-empty array of variant ids"));
  CHECK_THAT(error_of(R"({"variants": ["floor", 3], "axes": {"seq": 1, "head_dim": 1}})"),
             Catch::StartsWith("s.json: variants[1]: expected a variant id"));
}

TEST_CASE("config files: malformed JSON and invalid shapes are errors, never crashes", "[config]") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / "hbmscope-config-test";
  fs::create_directories(dir);
  auto write = [&](const char* name, const char* text) {
    std::ofstream(dir / name) << text;
    return (dir / name).string();
  };
  const auto broken = write("broken.json", "{\"axes\": {\"seq\": 1024,,}}");
  CHECK_THROWS_WITH(find_sweep_config(broken), Catch::StartsWith(broken + ": not valid JSON: parse error"));
  const auto empty = write("empty.json", "");
  CHECK_THROWS_WITH(find_sweep_config(empty), Catch::StartsWith(empty + ": not valid JSON"));
  const auto gqa = write("gqa.json", R"({"axes": {"seq": 1024, "head_dim": 64, "heads": 6, "kv_heads": 4}})");
  CHECK_THROWS_WITH(find_sweep_config(gqa), Catch::StartsWith(gqa + ": ") && Catch::Contains("multiple of kv-heads"));
  CHECK_THROWS_WITH(find_sweep_config(dir.string() + "/"), Catch::Contains("is a directory"));
  CHECK_THROWS_WITH(find_sweep_config("nope"), Catch::Contains("'nope' is not a shipped config (decode, llm, long-context, seed)"));
  const auto good = write("good.json", R"({"axes": {"seq": "1K:4K:x2", "head_dim": 64}})");
  CHECK(expand(find_sweep_config(good)).shapes.size() == 3);
  fs::remove_all(dir);
}

TEST_CASE("a config's pass axis, reports keep the pass when read back", "[config]") {
  const auto c = parse(R"({"axes": {"seq": 4096, "head_dim": 64, "pass": ["fwd", "bwd"]}})");
  const Report r = report_of(c);
  REQUIRE(r.rows.size() == 2);
  CHECK(r.rows[0].shape.pass == Pass::fwd);
  CHECK(r.rows[1].shape.pass == Pass::bwd);
  CHECK(r.rows[1].variant("standard")->bytes == 239075328);
  const Report back = report_from_json(report_to_json(r), "r.json");
  CHECK(back.rows[1].shape.pass == Pass::bwd);
  CHECK_THAT(error_of(R"({"axes": {"seq": 4096, "head_dim": 64, "pass": "sideways"}})"),
             Catch::Contains("s.json: axes.pass"));
}
