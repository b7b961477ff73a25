#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>

#include "hbmscope/compare.hpp"
#include "hbmscope/json_report.hpp"
#include "hbmscope/sweep.hpp"

using namespace hbmscope;

namespace {

nlohmann::json sweep_json(const char* seqs) {
  SweepAxes a;
  a.seq = parse_int_axis(seqs, "seq");
  a.head_dim = {128};
  Report r;
  r.rows = model_rows(expand(a));
  return report_to_json(r);
}

// Multiplies one number of every row.
nlohmann::json scaled(nlohmann::json j, const char* group, const char* key, double f) {
  for (auto& row : j["rows"]) {
    const double v = row[group][key].get<double>() * f;
    row[group][key] = static_cast<std::uint64_t>(v);
  }
  return j;
}

}  // namespace

TEST_CASE("ratio edge cases", "[compare]") {
  CHECK(ratio(2, 1) == 0.5);
  CHECK(ratio(0, 0) == 1.0);
  CHECK(std::isinf(ratio(0, 3)));
  CHECK(std::isnan(ratio(std::nan(""), 1)));
}

TEST_CASE("identical reports: every row SAME, ratio 1 for every shared number", "[compare]") {
  const auto a = sweep_json("1K:8K:x2");
  const auto c = compare_reports(a, "a.json", a, "b.json", {});
  CHECK(c.rows.size() == 4);
  CHECK(c.metric == "bytes.flash_no_l2");
  for (const char* col : {"bytes.standard", "bytes.flash_no_l2", "bytes.floor", "flops", "intensity.floor"})
    CHECK(std::find(c.columns.begin(), c.columns.end(), col) != c.columns.end());
  for (const auto& r : c.rows) {
    CHECK(r.verdict == "SAME");
    for (std::size_t i = 0; i < c.columns.size(); ++i) CHECK(ratio(r.a[i], r.b[i]) == 1.0);
  }
  CHECK(c.only_a.empty());
  CHECK(c.only_b.empty());
}

TEST_CASE("threshold decides FASTER / SLOWER / SAME", "[compare]") {
  const auto a = sweep_json("1K:4K:x2");
  const auto b4 = scaled(a, "bytes", "flash_no_l2", 1.04);  // 4% more bytes
  CompareOptions o;
  o.threshold_pct = 5;
  for (const auto& r : compare_reports(a, "a", b4, "b", o).rows) CHECK(r.verdict == "SAME");
  o.threshold_pct = 3;
  for (const auto& r : compare_reports(a, "a", b4, "b", o).rows) CHECK(r.verdict == "SLOWER");
  const auto b_half = scaled(a, "bytes", "flash_no_l2", 0.5);
  for (const auto& r : compare_reports(a, "a", b_half, "b", o).rows) CHECK(r.verdict == "FASTER");
  // Another metric: standard bytes did not change.
  o.metric = "bytes.standard";
  for (const auto& r : compare_reports(a, "a", b_half, "b", o).rows) CHECK(r.verdict == "SAME");
  o.metric = "bytes.nothing";
  CHECK_THROWS_WITH(compare_reports(a, "a", b_half, "b", o), Catch::StartsWith("--metric: 'bytes.nothing' is not a number"));
  o.metric.clear();
  o.threshold_pct = -1;
  CHECK_THROWS_WITH(compare_reports(a, "a", a, "b", o), Catch::StartsWith("--threshold"));
}

TEST_CASE("a higher-is-better metric flips the verdict, unknown fields are compared", "[compare]") {
  auto a = sweep_json("1K:2K:x2");
  auto b = a;
  for (auto& row : a["rows"]) row["measured"] = {{"tflops", 100.0}};
  for (auto& row : b["rows"]) row["measured"] = {{"tflops", 150.0}};
  CompareOptions o;
  o.metric = "measured.tflops";
  const auto c = compare_reports(a, "a", b, "b", o);
  CHECK(c.higher_is_better);
  for (const auto& r : c.rows) CHECK(r.verdict == "FASTER");
  const std::string t = render_comparison(c, Format::table);
  CHECK_THAT(t, Catch::Contains("Verdict on measured.tflops (higher is better)"));
  CHECK_THAT(t, Catch::Contains("100 TFLOP/s   150 TFLOP/s   1.50   FASTER"));
}

TEST_CASE("measurement lists are matched by kernel name, samples are not compared", "[compare]") {
  auto a = sweep_json("1K:2K:x2");
  auto b = a;
  auto meas = [](double flash_s, double std_s) {
    return nlohmann::json::array(
        {{{"kernel", "standard"}, {"time_s", {{"median", std_s}, {"samples", {std_s, std_s}}}}},
         {{"kernel", "flash"}, {"time_s", {{"median", flash_s}, {"samples", {flash_s}}}}, {"tflops", 1.0 / flash_s}}});
  };
  for (auto& row : a["rows"]) row["measurements"] = meas(2e-3, 8e-3);
  for (auto& row : b["rows"]) {
    auto m = meas(1e-3, 8e-3);
    std::swap(m[0], m[1]);  // another order: still matched by kernel
    row["measurements"] = m;
  }
  const auto c = compare_reports(a, "a", b, "b", {});
  CHECK(c.metric == "measurements[flash].time_s.median");
  CHECK_FALSE(c.higher_is_better);
  for (const auto& r : c.rows) CHECK(r.verdict == "FASTER");
  for (const auto& col : c.columns) CHECK(col.find("samples") == std::string::npos);
  const auto i = std::find(c.columns.begin(), c.columns.end(), "measurements[standard].time_s.median") - c.columns.begin();
  REQUIRE(i < static_cast<long>(c.columns.size()));
  CHECK(ratio(c.rows[0].a[static_cast<std::size_t>(i)], c.rows[0].b[static_cast<std::size_t>(i)]) == 1.0);
}

TEST_CASE("unmatched rows are listed, schemas and malformed files are refused", "[compare]") {
  const auto a = sweep_json("1K:4K:x2");
  const auto b = sweep_json("2K:8K:x2");
  const auto c = compare_reports(a, "a.json", b, "b.json", {});
  CHECK(c.rows.size() == 2);
  REQUIRE(c.only_a.size() == 1);
  CHECK(c.only_a[0].second.seq_q == 1024);
  REQUIRE(c.only_b.size() == 1);
  CHECK(c.only_b[0].second.seq_q == 8192);
  const std::string t = render_comparison(c, Format::table);
  CHECK_THAT(t, Catch::Contains("Only in A (a.json), 1 rows:\n  1024 x 128"));
  CHECK_THAT(t, Catch::Contains("Only in B (b.json), 1 rows:\n  8192 x 128"));
  CHECK_THAT(t, Catch::Contains("2 rows matched: 0 FASTER, 0 SLOWER, 2 SAME"));
  const auto j = nlohmann::json::parse(render_comparison(c, Format::json));
  CHECK(j["only_in_a"].size() == 1);
  CHECK(j["rows"][0]["ratios"]["bytes.standard"] == 1.0);
  CHECK_THAT(render_comparison(c, Format::csv), Catch::StartsWith("label,shape,a:"));

  auto other = b;
  other["schema"] = "hbmscope.report/9";
  CHECK_THROWS_WITH(compare_reports(a, "a.json", other, "b.json", {}),
                    "a.json and b.json have different schemas (\"hbmscope.report/3\" vs \"hbmscope.report/9\")");
  other["schema"] = "hbmscope.report/1";  // an old report compares with a new one
  CHECK_NOTHROW(compare_reports(a, "a.json", other, "b.json", {}));
  auto broken = b;
  broken["rows"][0].erase("flops");
  CHECK_THROWS_WITH(compare_reports(a, "a.json", broken, "b.json", {}), Catch::StartsWith("b.json: rows[0].flops: missing"));
  auto twice = a;
  twice["rows"].push_back(twice["rows"][0]);
  CHECK_THROWS_WITH(compare_reports(twice, "a.json", b, "b.json", {}), Catch::Contains("repeats the shape"));
}
