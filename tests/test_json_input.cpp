// JSON read from users' files: nesting depth, messages that never dump a whole
// value, strict types in reports read back, device files' ranges and round
// trip, and predictions that are always finite.
#include <catch2/catch.hpp>
#include <cmath>

#include "hbmscope/device_config.hpp"
#include "hbmscope/json_report.hpp"
#include "hbmscope/l2_sim.hpp"
#include "hbmscope/printers.hpp"
#include "hbmscope/roofline.hpp"
#include "hbmscope/sweep.hpp"
#include "../src/report/json_check.hpp"

using namespace hbmscope;

namespace {

std::string nested(std::size_t levels, const char* open = "[", const char* close = "]") {
  std::string s;
  for (std::size_t i = 0; i < levels; ++i) s += open;
  s += "1";
  for (std::size_t i = 0; i < levels; ++i) s += close;
  return s;
}

nlohmann::json device_report() {
  Report r;
  SweepAxes a;
  a.seq = {1024};
  a.head_dim = {64};
  r.rows = model_rows(expand(a));
  L2SimConfig c;
  c.l2_bytes = 1 << 20;
  add_l2_sim(r.rows[0], c);
  add_predictions(r, find_device("h100"), 0.8);
  return nlohmann::json::parse(render(r, {Format::json}));
}

}  // namespace

TEST_CASE("JSON nested deeper than 64 levels is refused while parsing", "[json][input]") {
  using json_check::parse_json_text;
  CHECK_NOTHROW(parse_json_text(nested(64), "ok.json"));
  CHECK_NOTHROW(parse_json_text(nested(64, "{\"a\":", "}"), "ok.json"));
  CHECK_THROWS_WITH(parse_json_text(nested(65), "d.json"),
                    "d.json: nested deeper than 64 levels: not an hbmscope file");
  for (std::size_t n : {100'000u, 1'000'000u}) {
    CHECK_THROWS_WITH(parse_json_text(nested(n), "d.json"), Catch::StartsWith("d.json: nested deeper"));
    CHECK_THROWS_WITH(parse_json_text(std::string(n, '['), "d.json"),  // unterminated too
                      Catch::StartsWith("d.json: nested deeper"));
    CHECK_THROWS_WITH(parse_json_text(nested(n, "{\"a\":", "}"), "d.json"),
                      Catch::StartsWith("d.json: nested deeper"));
  }
}

TEST_CASE("numbers out of range and repeated keys are one-line errors naming the file", "[json][input]") {
  using json_check::parse_json_text;
  CHECK_THROWS_WITH(parse_json_text(R"({"a": 1e400})", "d.json"),
                    "d.json: not valid JSON: number overflow parsing '1e400'");
  CHECK_THROWS_WITH(parse_json_text(R"({"a": [-1e400]})", "d.json"),
                    Catch::StartsWith("d.json: not valid JSON: number overflow"));
  CHECK_THROWS_WITH(parse_json_text(R"({"a": 1, "a": 2})", "d.json"), "d.json: a appears twice");
  CHECK_THROWS_WITH(parse_json_text(R"({"r": [{"x": 1}, {"s": {"b": 1, "b": 1}}]})", "d.json"),
                    "d.json: r[1].s.b appears twice");
  CHECK_THROWS_WITH(parse_json_text(R"({"a": [1, [2, 3], {"k": 1, "k": 1}]})", "d.json"),
                    "d.json: a[2].k appears twice");
  // The same key in sibling objects is fine.
  CHECK_NOTHROW(parse_json_text(R"({"a": {"k": 1}, "b": {"k": 1}, "c": [{"k": 1}, {"k": 2}]})", "ok.json"));
}

TEST_CASE("printable() escapes control characters and bytes that are not UTF-8", "[json][input]") {
  using json_check::printable;
  CHECK(printable("plain µs.json") == "plain µs.json");
  CHECK(printable("a\nb\tc\r") == "a\\nb\\tc\\r");
  CHECK(printable("\x1b[31m\x7f") == "\\x1b[31m\\x7f");
  CHECK(printable("bad\xff\xc3") == "bad\\xff\\xc3");
  CHECK(printable("\xed\xa0\x80") == "\\xed\\xa0\\x80");  // a surrogate is not UTF-8
  CHECK_THROWS_WITH(json_check::parse_json_text("{", "x\ny.json"), Catch::StartsWith("x\\ny.json: not valid JSON"));
}

TEST_CASE("brief() renders a bounded prefix, never the whole value", "[json][input]") {
  using json_check::brief;
  CHECK(brief(nlohmann::json::parse("[1,2]")) == "an array [1,2]");
  CHECK(brief(nlohmann::json::parse(nested(60))) == "an array [[...]]");
  CHECK(brief(nlohmann::json::array()) == "an empty array");
  CHECK(brief(nlohmann::json::parse(R"({"a":1})")) == "an object");
  CHECK(brief("fast") == "\"fast\"");
  CHECK(brief(nullptr) == "null");
  const nlohmann::json big(std::vector<int>(1'000'000, 7));
  CHECK(brief(big).size() == 60);
  CHECK(brief(std::string(1'000'000, 'x')).size() == 60);
}

TEST_CASE("reports read back: every field read or copied is type-checked", "[json][input]") {
  const auto good = device_report();
  REQUIRE_NOTHROW(report_from_json(good, "a.json"));
  const auto refused = [&](const nlohmann::json::json_pointer& at, const nlohmann::json& v) {
    auto j = good;
    j[at] = v;
    try {
      (void)report_from_json(j, "a.json");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  using P = nlohmann::json::json_pointer;
  for (const auto& v : {nlohmann::json(1), nlohmann::json(true), nlohmann::json(nullptr),
                        nlohmann::json::array(), nlohmann::json::object()})
    CHECK_THAT(refused(P("/roofline/device/id"), v),
               Catch::StartsWith("a.json: roofline.device.id: expected a string, got "));
  CHECK_THAT(refused(P("/roofline/device/memory"), 80), Catch::StartsWith("a.json: roofline.device.memory: expected a string"));
  CHECK_THAT(refused(P("/roofline/device/sources"), nlohmann::json::array()),
             Catch::StartsWith("a.json: roofline.device.sources: expected an object"));
  CHECK_THAT(refused(P("/roofline/device/sources/l2_bytes"), 1),
             Catch::StartsWith("a.json: roofline.device.sources.l2_bytes: expected a string"));
  CHECK_THAT(refused(P("/roofline/device/peak_flops_dense/fp8"), "lots"),
             Catch::StartsWith("a.json: roofline.device.peak_flops_dense.fp8: expected a positive number"));
  CHECK_THAT(refused(P("/roofline/bandwidth_fraction"), "0.8"),
             Catch::StartsWith("a.json: roofline.bandwidth_fraction: expected a positive number"));
  CHECK_THAT(refused(P("/roofline/bandwidth_fraction"), 2),
             Catch::StartsWith("a.json: roofline.bandwidth_fraction: expected a number in (0, 1]"));
  CHECK_THAT(refused(P("/roofline/effective_bandwidth_bytes_per_s"), nullptr),
             Catch::StartsWith("a.json: roofline.effective_bandwidth_bytes_per_s: expected a number"));
  CHECK_THAT(refused(P("/rows/0/prediction"), ""), Catch::StartsWith("a.json: rows[0].prediction: expected an object, got \"\""));
  CHECK_THAT(refused(P("/rows/0/prediction/other"), 3), Catch::StartsWith("a.json: rows[0].prediction.other: expected an object"));
  CHECK_THAT(refused(P("/rows/0/prediction/floor/seconds"), nullptr),
             Catch::StartsWith("a.json: rows[0].prediction.floor.seconds: expected a number, got null"));
  CHECK_THAT(refused(P("/rows/0/prediction/floor/memory_seconds"), "1"),
             Catch::StartsWith("a.json: rows[0].prediction.floor.memory_seconds: expected a number"));
  CHECK_THAT(refused(P("/rows/0/intensity"), 5), Catch::StartsWith("a.json: rows[0].intensity: expected an object"));
  CHECK_THAT(refused(P("/rows/0/intensity/other"), "x"), Catch::StartsWith("a.json: rows[0].intensity.other: expected a number"));
  CHECK_THAT(refused(P("/rows/0/l2_sim"), "yes"), Catch::StartsWith("a.json: rows[0].l2_sim: expected an object"));
  CHECK_THAT(refused(P("/rows/0/l2_sim/sm_count"), -1), Catch::StartsWith("a.json: rows[0].l2_sim.sm_count: expected a non-negative integer"));
  CHECK_THAT(refused(P("/rows/0/l2_sim/order"), "diagonal"), Catch::StartsWith("a.json: rows[0].l2_sim.order: expected"));
  CHECK_THAT(refused(P("/rows/0/l2_sim/q_o_allocate"), 1), Catch::StartsWith("a.json: rows[0].l2_sim.q_o_allocate: expected true or false"));
  CHECK_THAT(refused(P("/rows/0/l2_sim/flash/hit_rate"), "90%"), Catch::StartsWith("a.json: rows[0].l2_sim.flash.hit_rate: expected a number"));
  CHECK_THAT(refused(P("/rows/0/measurements"), nlohmann::json::object()),
             Catch::StartsWith("a.json: rows[0].measurements: expected an array"));
  nlohmann::json m = nlohmann::json::object();
  m["time_s"]["median"] = "1";
  CHECK_THAT(refused(P("/rows/0/measurements"), nlohmann::json::array({m})),
             Catch::StartsWith("a.json: rows[0].measurements[0].time_s.median: expected a number or null"));
  CHECK_THAT(refused(P("/rows/0/shape/elem_bytes"), "2"), Catch::StartsWith("a.json: rows[0].shape.elem_bytes: expected"));
  CHECK_THAT(refused(P("/tool"), "hbmscope"), Catch::StartsWith("a.json: tool: expected an object"));
  CHECK_THAT(refused(P("/device"), 1), Catch::StartsWith("a.json: device: expected an object"));
  CHECK_THAT(refused(P("/device/sm_count"), "132"), Catch::StartsWith("a.json: device.sm_count: expected"));
  CHECK_THAT(refused(P("/shard"), nlohmann::json{{"index", 3u}, {"count", 2u}, {"total_rows", 4u}}),
             Catch::StartsWith("a.json: shard.index: expected 1 <= index <= count"));
  // Fields this version does not know stay free.
  CHECK(refused(P("/rows/0/future_field"), "anything") == "accepted");
}

TEST_CASE("device files: numbers within the command line's ranges, nothing narrowed", "[devices][input]") {
  const auto ok = nlohmann::json::parse(R"({"name": "X", "memory_bandwidth_bytes_per_s": 1e12,
      "l2_bytes": 1048576, "sm_count": 8, "peak_flops_dense": {"bf16": 1e14}})");
  auto with = [&](const char* key, nlohmann::json v) {
    auto j = ok;
    j[key] = v;
    return j;
  };
  CHECK(device_from_json(with("sm_count", 1'000'000u), "g.json").sm_count == 1'000'000);
  for (std::uint64_t n : {1'000'001ull, 4294967296ull, 4294967297ull})
    CHECK_THROWS_WITH(device_from_json(with("sm_count", n), "g.json"),
                      "g.json: sm_count: expected a positive integer at most 1000000, got " + std::to_string(n));
  for (double bw : {5e-324, 1.0, 999999.0, 1.1e18})
    CHECK_THROWS_WITH(device_from_json(with("memory_bandwidth_bytes_per_s", bw), "g.json"),
                      Catch::StartsWith("g.json: memory_bandwidth_bytes_per_s: expected a rate in bytes/s from 1e6 to 1e18"));
  CHECK_THROWS_WITH(device_from_json(with("peak_flops_dense", nlohmann::json{{"bf16", 5e-324}}), "g.json"),
                    Catch::StartsWith("g.json: peak_flops_dense.bf16: expected a rate in FLOP/s from 1e6 to 1e18"));
  CHECK(device_from_json(with("memory_bandwidth_bytes_per_s", 1e6), "g.json").bandwidth == 1e6);
}

TEST_CASE("predictions are finite or refused", "[roofline][input]") {
  const DeviceSpec h100 = find_device("h100");
  CHECK_THROWS_WITH(predict(1, 1, Dtype::bf16, h100, 4.9e-324),
                    "--bandwidth-fraction: 5e-324 is below 1e-06: no prediction could be finite");
  CHECK_THROWS_WITH(ridge_point(h100, Dtype::bf16, 1e-7), Catch::Contains("is below 1e-06"));
  const Prediction p = predict(~std::uint64_t{0}, ~std::uint64_t{0}, Dtype::bf16, h100, 1e-6);
  CHECK(std::isfinite(p.seconds));
  DeviceSpec tiny = h100;
  tiny.bandwidth = 5e-324;
  CHECK_THROWS_WITH(predict(1, 1, Dtype::bf16, tiny, 1.0), Catch::Contains("memory bandwidth"));
  tiny = h100;
  tiny.peak.bf16 = 5e-324;
  CHECK_THROWS_WITH(predict(1, 1, Dtype::bf16, tiny, 1.0), Catch::Contains("peak"));
}

TEST_CASE("a device exported by `devices NAME --format json` loads back", "[devices][input]") {
  for (const DeviceSpec& p : preset_devices()) {
    const DeviceSpec back = device_from_json(device_spec_to_json(p), "exported.json");
    CHECK(back.id == "exported.json");
    CHECK(back.name == p.name);
    CHECK(back.memory == p.memory);
    CHECK(back.bandwidth == p.bandwidth);
    CHECK(back.l2_bytes == p.l2_bytes);
    CHECK(back.sm_count == p.sm_count);
    CHECK(back.sources == p.sources);
    CHECK(device_spec_to_json(back).dump() ==
          [&] { auto j = device_spec_to_json(p); j["id"] = "exported.json"; return j.dump(); }());
  }
  // The list of all presets is an array: the message says how to get one.
  nlohmann::json all = nlohmann::json::array();
  for (const DeviceSpec& p : preset_devices()) all.push_back(device_spec_to_json(p));
  CHECK_THROWS_WITH(device_from_json(all, "all.json"),
                    Catch::StartsWith("all.json: (top level): expected a JSON object, one device "
                                      "(`hbmscope devices NAME --format json` writes one"));
  CHECK_THROWS_WITH(device_from_json(nlohmann::json{{"id", 3}}, "x.json"), "x.json: id: expected a string, got 3");
}
