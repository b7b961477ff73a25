#include <catch2/catch.hpp>
#include <cmath>
#include <random>
#include <set>

#include "hbmscope/device_config.hpp"
#include "hbmscope/json_report.hpp"
#include "hbmscope/plot.hpp"
#include "hbmscope/printers.hpp"
#include "hbmscope/roofline.hpp"
#include "hbmscope/shard.hpp"
#include "hbmscope/sweep.hpp"

using namespace hbmscope;

namespace {

DeviceSpec toy_device() {
  DeviceSpec d;
  d.id = "toy";
  d.name = "Toy GPU";
  d.bandwidth = 1e12;  // 1 TB/s
  d.l2_bytes = 1 << 20;
  d.sm_count = 10;
  d.peak.bf16 = 100e12;  // ridge 100 FLOP/B
  d.peak.fp32 = 10e12;
  return d;
}

Report note_report() {
  Report r;
  r.rows = model_rows(expand(note_axes()));
  return r;
}

}  // namespace

TEST_CASE("roofline by hand: the note's 4096 x 64 row on the H100 SXM preset", "[roofline]") {
  const DeviceSpec h100 = find_device("h100");
  Report r = note_report();
  add_predictions(r, h100, 1.0);
  const Row& row = r.rows[0];
  REQUIRE(row.shape.seq_q == 4096);
  REQUIRE(row.shape.head_dim == 64);
  // standard: 136314880 B / 3.35e12 B/s = 40.69 µs; 4294967296 FLOP / 989.4e12 = 4.341 µs.
  const auto& std_p = *row.variant("standard")->prediction;
  CHECK(std_p.memory_seconds == Approx(136314880.0 / 3.35e12));
  CHECK(std_p.memory_seconds == Approx(40.69e-6).epsilon(1e-3));
  CHECK(std_p.compute_seconds == Approx(4.341e-6).epsilon(1e-3));
  CHECK(std_p.seconds == std_p.memory_seconds);
  CHECK(std_p.bound == Bound::memory);
  // floor: 2097152 B -> 0.626 µs, below the 4.34 µs of compute: compute-bound.
  const auto& fl = *row.variant("floor")->prediction;
  CHECK(fl.memory_seconds == Approx(0.626e-6).epsilon(1e-3));
  CHECK(fl.bound == Bound::compute);
  CHECK(fl.seconds == fl.compute_seconds);
  // Ridge 989.4e12 / 3.35e12 = 295.3 FLOP/B: floor's 2048 FLOP/B is above it.
  CHECK(row.ridge_point == Approx(295.34).epsilon(1e-4));
  CHECK(r.roofline->device.name == "H100 SXM");
}

TEST_CASE("bandwidth fraction scales the memory term only", "[roofline]") {
  const DeviceSpec d = toy_device();
  const Prediction full = predict(1'000'000, 10'000'000, Dtype::bf16, d, 1.0);
  const Prediction half = predict(1'000'000, 10'000'000, Dtype::bf16, d, 0.5);
  CHECK(full.memory_seconds == Approx(1e-6));
  CHECK(half.memory_seconds == Approx(2e-6));
  CHECK(full.compute_seconds == Approx(1e-7));
  CHECK(half.compute_seconds == full.compute_seconds);
  CHECK(ridge_point(d, Dtype::bf16, 0.5) == Approx(200.0));
  // Exactly at the ridge the memory term is reported as binding.
  CHECK(predict(1'000'000, 100'000'000, Dtype::bf16, d, 1.0).bound == Bound::memory);
  CHECK(predict(1'000'000, 100'000'001, Dtype::bf16, d, 1.0).bound == Bound::compute);
}

TEST_CASE("roofline refuses what it cannot compute", "[roofline]") {
  const DeviceSpec d = toy_device();
  CHECK_THROWS_WITH(predict(1, 1, Dtype::bf16, d, 0.0), Catch::Contains("not in (0, 1]"));
  CHECK_THROWS_WITH(predict(1, 1, Dtype::bf16, d, 1.5), Catch::Contains("not in (0, 1]"));
  CHECK_THROWS_WITH(predict(1, 1, Dtype::bf16, d, std::nan("")), Catch::Contains("not in (0, 1]"));
  CHECK_THROWS_WITH(predict(1, 1, Dtype::fp8, d, 1.0), Catch::Contains("no fp8 peak"));
  Report r = note_report();
  for (auto& row : r.rows) row.shape.dtype = Dtype::fp8;
  CHECK_THROWS_WITH(add_predictions(r, find_device("a100"), 1.0),
                    Catch::Contains("A100 80GB SXM") && Catch::Contains("fp8"));
  DeviceSpec bad = d;
  bad.bandwidth = 0;
  CHECK_THROWS_WITH(validate(bad), Catch::Contains("bandwidth"));
}

TEST_CASE("presets: six devices, every figure with a source", "[devices]") {
  const auto& p = preset_devices();
  std::set<std::string> names;
  for (const auto& d : p) names.insert(d.name);
  for (const char* n : {"H100 SXM", "H200 SXM", "A100 80GB SXM", "B200 (HGX)", "L40S", "RTX 4090"})
    CHECK(names.count(n) == 1);
  for (const auto& d : p) {
    INFO(d.id);
    CHECK(d.bandwidth > 1e11);
    CHECK(d.l2_bytes >= 40u << 20);
    CHECK(d.sm_count >= 100);
    CHECK(d.peak.bf16 > 1e14);
    CHECK(d.peak.fp16 == d.peak.bf16);
    for (const char* k : {"memory_bandwidth_bytes_per_s", "l2_bytes", "sm_count", "peak_flops_dense.fp32",
                          "peak_flops_dense.fp16", "peak_flops_dense.bf16", "peak_flops_dense.fp8"})
      CHECK(d.sources.count(k) == 1);
  }
  // The reference's H200 ridge: about 206 FLOP/B for dense bf16.
  CHECK(ridge_point(find_device("h200"), Dtype::bf16, 1.0) == Approx(206).epsilon(0.01));
  CHECK(find_device("a100").peak.fp8 == 0);
}

TEST_CASE("device presets are found by id, name or alias", "[devices]") {
  CHECK(find_device("h100").name == "H100 SXM");
  CHECK(find_device("H100 SXM").name == "H100 SXM");
  CHECK(find_device("h100-sxm").name == "H100 SXM");
  CHECK(find_device("RTX-4090").name == "RTX 4090");
  CHECK(find_device("4090").name == "RTX 4090");
  CHECK_THROWS_WITH(find_device("tpu"), Catch::Contains("'tpu' is not a preset") && Catch::Contains("h200"));
  CHECK_THROWS_WITH(find_device("/no/such/gpu.json"), Catch::Contains("cannot read '/no/such/gpu.json'"));
}

TEST_CASE("device JSON schema check names the key and the expectation", "[devices]") {
  const auto ok = nlohmann::json::parse(R"({"name": "X", "memory_bandwidth_bytes_per_s": 1e12,
      "l2_bytes": 1048576, "sm_count": 8, "peak_flops_dense": {"bf16": 1e14}})");
  CHECK(device_from_json(ok, "x.json").peak.bf16 == 1e14);
  auto with = [&](const char* key, nlohmann::json v) {
    auto j = ok;
    j[key] = v;
    return j;
  };
  auto without = [&](const char* key) {
    auto j = ok;
    j.erase(key);
    return j;
  };
  CHECK_THROWS_WITH(device_from_json(without("sm_count"), "g.json"),
                    Catch::StartsWith("g.json: sm_count: missing"));
  CHECK_THROWS_WITH(device_from_json(with("memory_bandwidth_bytes_per_s", "fast"), "g.json"),
                    "g.json: memory_bandwidth_bytes_per_s: expected a positive number, got \"fast\"");
  CHECK_THROWS_WITH(device_from_json(with("l2_bytes", -1), "g.json"),
                    Catch::StartsWith("g.json: l2_bytes: expected a positive integer"));
  CHECK_THROWS_WITH(device_from_json(with("colour", "green"), "g.json"),
                    Catch::StartsWith("g.json: colour: unknown key"));
  CHECK_THROWS_WITH(device_from_json(with("peak_flops_dense", nlohmann::json{{"int4", 1e15}}), "g.json"),
                    Catch::StartsWith("g.json: peak_flops_dense.int4: unknown key"));
  CHECK_THROWS_WITH(device_from_json(with("peak_flops_dense", nlohmann::json{{"fp8", nullptr}}), "g.json"),
                    Catch::StartsWith("g.json: peak_flops_dense: expected at least one positive peak"));
  CHECK_THROWS_WITH(device_from_json(with("schema", "other/1"), "g.json"),
                    Catch::StartsWith("g.json: schema: expected \"hbmscope.device/1\""));
  CHECK_THROWS_WITH(device_from_json(nlohmann::json::array(), "g.json"),
                    Catch::StartsWith("g.json: (top level): expected a JSON object"));
}

TEST_CASE("shards of any sweep are disjoint and their union is the sweep", "[shard]") {
  CHECK(parse_shard("2/8").index == 2);
  CHECK(parse_shard("8/8").count == 8);
  for (const char* bad : {"0/4", "5/4", "1/0", "x/4", "2", "2/", "/3", "-1/3", "1/2/3"})
    CHECK_THROWS_WITH(parse_shard(bad), Catch::StartsWith("--shard: '" + std::string(bad) + "'"));
  for (std::uint64_t n : {0ull, 1ull, 2ull, 3ull, 7ull, 10ull, 99ull, 1000ull, 12345ull})
    for (std::uint64_t count = 1; count <= 17; ++count) {
      std::uint64_t next = 0, smallest = ~0ull, largest = 0;
      for (std::uint64_t i = 1; i <= count; ++i) {
        const auto [b, e] = shard_range(n, {i, count});
        CHECK(b == next);  // contiguous, so disjoint and in order
        CHECK(e >= b);
        smallest = std::min(smallest, e - b);
        largest = std::max(largest, e - b);
        next = e;
      }
      CHECK(next == n);  // the union is everything
      CHECK(largest - smallest <= 1);
    }
  // On real sweeps: the concatenated shards are exactly the expanded shapes.
  std::mt19937 rng(3);
  for (int t = 0; t < 25; ++t) {
    SweepAxes a;
    a.seq = parse_int_axis("1K:" + std::to_string(1 << (11 + rng() % 6)) + ":x2", "seq");
    a.head_dim = {64, 128};
    a.causal = rng() % 2 ? std::vector<bool>{false, true} : std::vector<bool>{true};
    a.heads = {8};
    a.kv_heads = rng() % 2 ? std::vector<std::uint64_t>{1, 8} : std::vector<std::uint64_t>{};
    const auto all = expand(a);
    const std::uint64_t count = 1 + rng() % 9;
    std::vector<Shape> joined;
    for (std::uint64_t i = 1; i <= count; ++i) {
      const auto [b, e] = shard_range(all.size(), {i, count});
      joined.insert(joined.end(), all.begin() + static_cast<long>(b), all.begin() + static_cast<long>(e));
    }
    CHECK(joined == all);
  }
}

TEST_CASE("JSON report carries the device and predictions, and reads back", "[json][roofline]") {
  Report r = note_report();
  r.rows[1].label = "group A";
  add_predictions(r, find_device("h200"), 0.8);
  r.shard = ShardInfo{2, 3, 9};
  const auto j = nlohmann::json::parse(render(r, {Format::json}));
  CHECK(j["roofline"]["device"]["name"] == "H200 SXM");
  CHECK(j["roofline"]["bandwidth_fraction"] == 0.8);
  CHECK(j["roofline"]["effective_bandwidth_bytes_per_s"].get<double>() == Approx(3.84e12));
  CHECK(j["roofline"]["device"]["peak_flops_dense"]["bf16"].get<double>() == Approx(989.4e12));
  CHECK(j["roofline"]["device"]["sources"].size() == 8);
  CHECK_FALSE(j.contains("device"));  // `measure` (CUDA backend) uses that key
  CHECK(j["shard"]["index"] == 2);
  const auto& p = j["rows"][0]["prediction"]["standard"];
  CHECK(p["bound"] == "memory");
  CHECK(p["seconds"].get<double>() == Approx(136314880.0 / 3.84e12));
  CHECK(j["rows"][0]["ridge_point"].get<double>() == Approx(989.4e12 / 3.84e12));
  CHECK(j["rows"][1]["label"] == "group A");
  CHECK_FALSE(j["rows"][0].contains("label"));
  // The foundation's fields are unchanged.
  CHECK(j["rows"][0]["bytes"]["standard"] == 136314880);

  const Report back = report_from_json(j, "r.json");
  REQUIRE(back.rows.size() == 3);
  CHECK(back.rows[1].label == "group A");
  CHECK(back.rows[0].shape == r.rows[0].shape);
  CHECK(back.rows[0].variants[0].id == "standard");
  CHECK(back.rows[0].variants[1].id == "flash_no_l2");
  CHECK(back.roofline->device.name == "H200 SXM");
  CHECK(back.roofline->bandwidth_fraction == 0.8);
  CHECK(back.shard->total_rows == 9);
  CHECK(render(back, {Format::json}) == render(r, {Format::json}));
  // The row-by-row text is exactly the DOM's.
  CHECK(report_json_text(r) == report_to_json(r).dump(2) + "\n");
  CHECK(report_json_text(Report{}) == report_to_json(Report{}).dump(2) + "\n");
}

TEST_CASE("report_from_json names the file and key of a malformed report", "[json]") {
  const auto good = nlohmann::json::parse(render(note_report(), {Format::json}));
  auto j = good;
  j["schema"] = "hbmscope.report/9";
  CHECK_THROWS_WITH(report_from_json(j, "a.json"),
                    Catch::StartsWith("a.json: schema: expected \"hbmscope.report/3\", \"hbmscope.report/2\" or \"hbmscope.report/1\""));
  j["schema"] = "hbmscope.report/1";  // reports written before `reconcile` still read
  CHECK_NOTHROW(report_from_json(j, "a.json"));
  j = good;
  j["rows"][1]["shape"]["head_dim"] = "wide";
  CHECK_THROWS_WITH(report_from_json(j, "a.json"),
                    Catch::StartsWith("a.json: rows[1].shape.head_dim: expected a non-negative integer"));
  j = good;
  j["rows"][0]["bytes"]["floor"] = -3;
  CHECK_THROWS_WITH(report_from_json(j, "a.json"), Catch::StartsWith("a.json: rows[0].bytes.floor"));
  j = good;
  j.erase("rows");
  CHECK_THROWS_WITH(report_from_json(j, "a.json"), Catch::StartsWith("a.json: rows: expected an array"));
  CHECK_THROWS_WITH(report_from_json(nlohmann::json(3), "a.json"), Catch::StartsWith("a.json: (top level)"));
}

TEST_CASE("tables and CSV show predictions with units", "[report][roofline]") {
  Report r = note_report();
  add_predictions(r, find_device("h100"), 1.0);
  const std::string t = render(r, {Format::table, Units::decimal, true});
  CHECK_THAT(t, Catch::Contains("Roofline on H100 SXM: 3.35 TB/s, bf16 989 TFLOP/s dense, ridge 295 FLOP/B"));
  CHECK_THAT(t, Catch::Contains("Time: standard"));
  CHECK_THAT(t, Catch::Contains("40.7 µs (memory)"));
  CHECK_THAT(t, Catch::Contains("(compute)"));
  CHECK_THAT(t, Catch::Contains("Ridge"));
  const std::string md = render(r, {Format::md});
  CHECK_THAT(md, Catch::StartsWith("**One head") && Catch::Contains("**Roofline on H100 SXM"));
  const std::string csv = render(r, {Format::csv});
  const std::string header = csv.substr(0, csv.find('\n'));
  CHECK_THAT(header, Catch::EndsWith(",device,bandwidth_fraction,ridge_point,seconds_standard,seconds_flash_no_l2,"
                                     "seconds_floor,bound_standard,bound_flash_no_l2,bound_floor,"
                                     "fits_in_memory_standard"));
  CHECK_THAT(csv, Catch::Contains(",H100 SXM,1,"));
  CHECK(format_seconds(4.069e-5) == "40.7 µs");
  CHECK(format_seconds(2.5e-3) == "2.5 ms");
  CHECK(format_seconds(3.0) == "3 s");
  CHECK(format_seconds(1.2e-8) == "12 ns");
  CHECK(format_bandwidth(3.35e12) == "3.35 TB/s");
  CHECK(format_flop_rate(989.4e12) == "989 TFLOP/s");
}

TEST_CASE("gnuplot script: one line per variant, time chart with a device", "[plot]") {
  CHECK(plot_terminal_for("a.svg") == PlotTerminal::svg);
  CHECK(plot_terminal_for("dir/a.png") == PlotTerminal::png);
  CHECK(plot_terminal_for("-") == PlotTerminal::dumb);
  CHECK_THROWS_WITH(plot_terminal_for("a.pdf"), Catch::Contains("must end in .svg or .png"));
  SweepAxes a;
  a.seq = parse_int_axis("1K:8K:x2", "seq");
  a.head_dim = {64, 128};
  Report r;
  r.rows = model_rows(expand(a));
  std::string s = gnuplot_script(r, PlotTerminal::svg);
  CHECK_THAT(s, Catch::Contains("set terminal svg"));
  CHECK_THAT(s, !Catch::Contains("set output"));  // the image is gnuplot's stdout
  CHECK_THAT(s, Catch::Contains("set logscale y"));
  CHECK_THAT(s, Catch::Contains("$s0 << EOD\n1024 "));
  CHECK_THAT(s, Catch::Contains("title 'flash_no_l2 (d=128)'"));
  CHECK_THAT(s, !Catch::Contains("multiplot"));
  add_predictions(r, find_device("h100"), 1.0);
  CHECK_THAT(gnuplot_script(r, PlotTerminal::svg), Catch::Contains("compute-bound"));
  s = gnuplot_script(r, PlotTerminal::dumb);
  CHECK_THAT(s, Catch::Contains("set terminal dumb"));
  CHECK_THAT(s, Catch::Contains("set multiplot layout 2,1"));
  CHECK_THAT(s, !Catch::Contains("set output"));
  CHECK_THROWS(gnuplot_script(Report{}, PlotTerminal::svg));
}

TEST_CASE("gnuplot script: user text is single-quoted, never substituted", "[plot]") {
  CHECK(gnuplot_quoted("plain") == "'plain'");
  CHECK(gnuplot_quoted("it's") == "'it''s'");
  // Backticks, $, @ macros, backslashes and double quotes pass through as text;
  // a line break, which would start a new gnuplot command, becomes a space.
  CHECK(gnuplot_quoted("a`touch x`$HOME@m\\n\"q\"\nsystem('id')\r") ==
        "'a`touch x`$HOME@m\\n\"q\" system(''id'') '");
  SweepAxes a;
  a.seq = parse_int_axis("1K:4K:x2", "seq");
  Report r;
  r.rows = model_rows(expand(a));
  r.rows[0].label = "g`touch PWNED`\nsystem('touch PWNED2')";
  for (std::size_t i = 1; i < r.rows.size(); ++i) r.rows[i].label = "other";
  DeviceSpec d = find_device("h100");
  d.name = "gpu'\n!touch PWNED3";
  add_predictions(r, d, 1.0);
  const std::string s = gnuplot_script(r, PlotTerminal::svg);
  CHECK_THAT(s, Catch::Contains("(g`touch PWNED` system(''touch PWNED2''))'"));
  CHECK_THAT(s, Catch::Contains("'Roofline time on gpu'' !touch PWNED3 at "));
  CHECK_THAT(s, !Catch::Contains("set output"));
  CHECK_THAT(s, !Catch::Contains("\""));  // no double-quoted strings at all
}
