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
