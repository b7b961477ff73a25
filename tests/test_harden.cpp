// Issue 22: cost bounded by the input, no figure printed as "inf", the
// length-list parser, compare's readable table, streamed rows.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "hbmscope/compare.hpp"
#include "hbmscope/error.hpp"
#include "hbmscope/json_report.hpp"
#include "hbmscope/length_list.hpp"
#include "hbmscope/printers.hpp"
#include "hbmscope/sweep.hpp"

using namespace hbmscope;

TEST_CASE("no figure prints as inf or nan", "[harden][units]") {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (double v : {inf, -inf, nan}) {
    CHECK(format_bandwidth(v) == "-");
    CHECK(format_flop_rate(v) == "-");
    CHECK(format_seconds(v) == "-");
    CHECK(format_intensity(v) == "-");
  }
  // A subnormal rate is a tiny number, not a crash or an "inf".
  CHECK(format_bandwidth(5e-324).find("inf") == std::string::npos);
  CHECK(format_seconds(5e-324).find("inf") == std::string::npos);
}

TEST_CASE("compare: a ratio is infinite only when A is 0", "[harden][compare]") {
  CHECK(std::isinf(ratio(0, 1)));
  CHECK(std::isfinite(ratio(1e-300, 1e300)));
  CHECK(ratio(1e-300, 1e300) == std::numeric_limits<double>::max());
  CHECK(ratio(1e-300, -1e300) == -std::numeric_limits<double>::max());
}

TEST_CASE("compare: a subnormal number in a report is refused, naming it", "[harden][compare]") {
  SweepAxes a;
  a.seq = {4096};
  Report r;
  r.rows = model_rows(expand(a));
  const nlohmann::json ja = report_to_json(r);
  nlohmann::json jb = ja;
  jb["rows"][0]["intensity"]["floor"] = 5e-324;
  try {
    (void)compare_reports(ja, "a.json", jb, "b.json", {});
    FAIL("accepted");
  } catch (const Error& e) {
    CHECK(std::string(e.what()) == "b.json: rows[0].intensity.floor: 5e-324 is subnormal, not a figure a report holds");
  }
}

TEST_CASE("length lists: items, comments, ranges, and bytes escaped in errors", "[harden][length_list]") {
  CHECK(parse_length_list("512, 4K\n# comment 9\n1:3:+1\t7\r\n", "f", "context-lengths") ==
        std::vector<std::uint64_t>{512, 4096, 1, 2, 3, 7});
  const auto message = [](std::string_view text) {
    try {
      (void)parse_length_list(text, "f.txt", "context-lengths");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  CHECK(message(std::string_view("1\n12\0003\n", 7)) == "--context-lengths: '12\\x003' is not a length (f.txt, line 2)");
  CHECK(message("1\n\n0\n") == "--context-lengths: '0' must be positive (f.txt, line 3)");
  CHECK(message("# nothing\n") == "--context-lengths: 'f.txt' holds no lengths");
  CHECK(message("1:2000000:+1") == "--context-lengths: 'f.txt' holds more than 1000000 lengths");
  CHECK(read_length_list("5,6", "context-lengths") == std::vector<std::uint64_t>{5, 6});
  CHECK_THROWS_AS(read_length_list("5,,6", "context-lengths"), UsageError);
}
