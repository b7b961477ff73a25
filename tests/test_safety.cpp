// Issue 15: inputs whose cost is out of proportion to their size, and output
// that stays safe (UTF-8 messages, control characters in keys, one CSV
// writer, file modes, signals); issue 14's compare (--match, --ignore,
// --metrics, the header).
#include <catch2/catch.hpp>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "hbmscope/compare.hpp"
#include "hbmscope/csv.hpp"
#include "hbmscope/json_report.hpp"
#include "hbmscope/printers.hpp"
#include "hbmscope/sweep.hpp"
#include "hbmscope/sweep_config.hpp"
#include "../src/report/json_check.hpp"

using namespace hbmscope;

namespace {

nlohmann::json report_json(const char* seqs, Dtype dtype = Dtype::bf16, const char* label = "") {
  SweepAxes a;
  a.seq = parse_int_axis(seqs, "seq");
  a.head_dim = {128};
  a.dtype = {dtype};
  Report r;
  r.rows = model_rows(expand(a));
  for (Row& row : r.rows) row.label = label;
  return report_to_json(r);
}

bool valid_utf8_json(const std::string& s) {
  try {
    (void)nlohmann::json(s).dump();  // throws on a cut character
    return true;
  } catch (const nlohmann::json::exception&) {
    return false;
  }
}

std::string temp_path(const char* name) {
  return (std::filesystem::temp_directory_path() / (std::string("hbmscope-safety-") +
                                                    std::to_string(::getpid()) + "-" + name))
      .string();
}

}  // namespace

TEST_CASE("messages cut long strings on UTF-8 character boundaries", "[safety]") {
  for (const char* ch : {"é", "€", "𝄞"}) {  // 2, 3 and 4 bytes
    for (std::size_t pad = 0; pad < 4; ++pad) {
      std::string value(pad, 'x');
      while (value.size() < 200) value += ch;
      const auto j = json_check::parse_json_text("{\"name\": " + nlohmann::json(value).dump() + "}", "d.json");
      const std::string b = json_check::brief(j["name"]);
      CHECK(valid_utf8_json(b));
      CHECK(b.size() <= 64);
      try {
        json_check::fail("d.json", "name", "a number", j["name"]);
      } catch (const Error& e) {
        CHECK(valid_utf8_json(e.what()));
      }
      // A key as long: the object's rendering is cut safely too.
      const auto k = json_check::parse_json_text("[{" + nlohmann::json(value).dump() + ": 1}]", "d.json");
      CHECK(valid_utf8_json(json_check::brief(k)));
    }
  }
}

TEST_CASE("keys with control characters are refused in every JSON input", "[safety]") {
  CHECK_THROWS_WITH(json_check::parse_json_text(R"({"rows": [{"bytes": {"a\u001b[31m": 1}}]})", "r.json"),
                    "r.json: rows[0].bytes.a\\x1b[31m: a control character is not allowed in a key");
  CHECK_THROWS_WITH(json_check::parse_json_text(R"({"a\nb": 1})", "r.json"),
                    "r.json: a\\nb: a control character is not allowed in a key");
  CHECK_NOTHROW(json_check::parse_json_text(R"({"a b,\"c\"": 1})", "r.json"));
}

TEST_CASE("a streamed read hands over each row and keeps the rest", "[safety]") {
  const std::string text = R"({"a": 1, "rows": [{"x": [1, {"y": 2}]}, 3, {"x": 4}], "z": {"rows": [5]}})";
  std::vector<nlohmann::json> rows;
  const auto head = json_check::parse_json_rows(text, "r.json", [&](std::size_t i, nlohmann::json&& row) {
    CHECK(i == rows.size());
    rows.push_back(std::move(row));
  });
  REQUIRE(rows.size() == 3);
  CHECK(rows[0] == nlohmann::json::parse(R"({"x": [1, {"y": 2}]})"));
  CHECK(rows[1] == 3);
  CHECK(head == nlohmann::json::parse(R"({"a": 1, "rows": [], "z": {"rows": [5]}})"));
  // The same checks inside streamed rows, with the row's index in the path.
  const auto none = [](std::size_t, nlohmann::json&&) {};
  CHECK_THROWS_WITH(json_check::parse_json_rows(R"({"rows": [{}, {"k": 1, "k": 2}]})", "r.json", none),
                    "r.json: rows[1].k appears twice");
  std::string deep = "{\"rows\": [";
  for (int i = 0; i < 70; ++i) deep += "[";
  CHECK_THROWS_WITH(json_check::parse_json_rows(deep, "r.json", none), Catch::StartsWith("r.json: nested deeper"));
}

TEST_CASE("one CSV writer: quotes doubled, numbers as JSON prints them", "[safety]") {
  CHECK(csv_field("plain") == "plain");
  CHECK(csv_field("a,b") == "\"a,b\"");
  CHECK(csv_field("say \"hi\"") == "\"say \"\"hi\"\"\"");
  CHECK(csv_field("two\nlines") == "\"two\nlines\"");
  CHECK(csv_number(819.2) == "819.2");
  CHECK(csv_number(0.1 + 0.2) == "0.30000000000000004");  // shortest that reads back the same
  CHECK(csv_number(3.35e12) == "3.35e+12");
  CHECK(csv_number(2.5e-9) == "2.5e-09");
  CHECK(csv_number(std::nan("")).empty());
  CHECK(csv_line({"x", "a\"b", "1"}) == "x,\"a\"\"b\",1\n");

  // compare's CSV goes through it: a quote in a label is doubled.
  const auto a = report_json("1K", Dtype::bf16, "say \"hi\"");
  const std::string csv = render_comparison(compare_reports(a, "a", a, "b", {}), Format::csv);
  CHECK_THAT(csv, Catch::Contains("\"say \"\"hi\"\"\""));
  // And the report's CSV prints shortest round-trip numbers.
  Report r;
  SweepAxes ax;
  ax.seq = {1000};
  ax.head_dim = {64};
  r.rows = model_rows(expand(ax));
  const std::string rc = render(r, {Format::csv});
  CHECK(rc.find("0000000") == std::string::npos);  // no %.17g tails
}

TEST_CASE("compare: --ignore matches reports that differ in one axis, the header names it", "[safety][compare]") {
  const auto a = report_json("1K:4K:x2", Dtype::bf16);
  const auto b = report_json("1K:4K:x2", Dtype::fp8);
  const auto none = compare_reports(a, "bf16.json", b, "fp8.json", {});
  CHECK(none.rows.empty());
  CHECK_THAT(none.hint, Catch::Contains("try --ignore dtype"));
  CHECK_FALSE(none.metric.empty());  // named even with nothing matched
  CompareOptions o;
  o.ignore = {"dtype"};
  const auto c = compare_reports(a, "bf16.json", b, "fp8.json", o);
  REQUIRE(c.rows.size() == 3);
  for (const auto& r : c.rows) CHECK(r.verdict == "FASTER");  // fp8 moves half the bytes
  REQUIRE(c.differences.size() == 1);
  CHECK(c.differences[0] == "dtype: bf16 vs fp8");
  const std::string t = render_comparison(c, Format::table);
  CHECK_THAT(t, Catch::Contains("Rows matched on every field but dtype"));
  CHECK_THAT(t, Catch::Contains("A and B differ in dtype: bf16 vs fp8"));
  CHECK_THAT(t, Catch::Contains("Verdict on bytes.flash_no_l2 (lower is better)"));
  // --match names the fields instead; seq is seq_q and seq_kv.
  CompareOptions m;
  m.match = {"seq", "head_dim"};
  CHECK(compare_reports(a, "a", b, "b", m).rows.size() == 3);
  m.match = {"head_dim"};  // three rows of each report share it
  CHECK_THROWS_WITH(compare_reports(a, "a", b, "b", m), Catch::Contains("both match on head_dim"));
  m.match = {"speed"};
  CHECK_THROWS_WITH(compare_reports(a, "a", b, "b", m), Catch::StartsWith("--match: 'speed' is not a field"));
  m.ignore = {"dtype"};
  m.match = {"seq"};
  CHECK_THROWS_WITH(compare_reports(a, "a", b, "b", m), Catch::StartsWith("--match and --ignore"));
}

TEST_CASE("compare shows the verdict metric and what differs; --metrics picks more; JSON keeps all", "[safety][compare]") {
  const auto a = report_json("1K:2K:x2");
  auto b = a;
  for (auto& row : b["rows"]) row["bytes"]["standard"] = row["bytes"]["standard"].get<std::uint64_t>() * 2;
  const auto c = compare_reports(a, "a", b, "b", {});
  std::vector<std::string> shown;
  for (auto i : c.shown) shown.push_back(c.columns[i]);
  CHECK(shown.front() == c.metric);
  CHECK(std::find(shown.begin(), shown.end(), "bytes.standard") != shown.end());
  CHECK(std::find(shown.begin(), shown.end(), "bytes.floor") == shown.end());
  const std::string t = render_comparison(c, Format::table);
  CHECK_THAT(t, Catch::Contains("[1] bytes.standard"));
  CHECK_THAT(t, !Catch::Contains("bytes.floor"));
  const auto j = nlohmann::json::parse(render_comparison(c, Format::json));
  CHECK(j["rows"][0]["ratios"].contains("bytes.floor"));
  CHECK(j["rows"][0]["ratios"]["bytes.standard"] == 2.0);
  CompareOptions o;
  o.metrics = {"bytes.floor"};
  CHECK_THAT(render_comparison(compare_reports(a, "a", b, "b", o), Format::table), Catch::Contains("[2] bytes.floor"));
  o.metrics = {"all"};
  CHECK(compare_reports(a, "a", b, "b", o).shown.size() == c.columns.size());
  o.metrics = {"bytes.nothing"};
  CHECK_THROWS_WITH(compare_reports(a, "a", b, "b", o), Catch::StartsWith("--metrics: 'bytes.nothing'"));
}

TEST_CASE("compare handles a row of many fields (one lookup per number)", "[safety][compare]") {
  auto a = report_json("1K");
  nlohmann::json extra = nlohmann::json::object();
  for (int i = 0; i < 20000; ++i) {
    std::string key = "f";
    key += std::to_string(i);
    extra[key] = i;
  }
  a["rows"][0]["extra"] = extra;
  const auto c = compare_reports(a, "a", a, "b", {});
  CHECK(c.columns.size() > 20000);
  CHECK(c.rows.at(0).verdict == "SAME");
}

TEST_CASE("a report row's variant count is bounded before printers look them up", "[safety]") {
  auto a = report_json("1K");
  for (int i = 0; i < 300; ++i) {
    std::string id = "v";
    id += std::to_string(1000 + i);
    a["rows"][0]["bytes"][id] = 1u;
  }
  CHECK_THROWS_WITH(report_from_json(a, "r.json"), "r.json: rows[0].bytes: more than 256 variants: not an hbmscope report");
}

TEST_CASE("sweep configs are sized from counts before anything is built", "[safety]") {
  // 40 range strings of 1M values each: refused as the axis grows, not after.
  nlohmann::json cfg = {{"axes", {{"seq", nlohmann::json::array()}, {"head_dim", 64u}}}};
  for (int i = 0; i < 40; ++i) cfg["axes"]["seq"].push_back("1:1000000:+1");
  CHECK_THROWS_WITH(sweep_config_from_json(cfg, "c.json"), Catch::Contains("has too many values"));
  // Five groups of one label, each 1M shapes: the sum is refused before expansion.
  nlohmann::json groups = nlohmann::json::array();
  for (int i = 0; i < 5; ++i) groups.push_back({{"label", "x"}, {"seq", "1:1000000:+1"}, {"head_dim", 64u}});
  const SweepConfig c = sweep_config_from_json({{"groups", groups}}, "c.json");
  CHECK_THROWS_WITH(expand(c), Catch::Contains("5 group(s) make 5000000 shapes") && Catch::Contains("counted before"));
  SweepAxes ax;
  ax.seq = {1, 2, 2, 3};
  ax.head_dim = {64, 128};
  CHECK(shape_count(ax) == 6);
  // A loaded file is checked by making its shapes, none of them kept.
  const std::string path = temp_path("cfg.json");
  std::ofstream(path) << R"({"groups": [{"label": "a", "seq": "1K,2K", "head_dim": 64}]})";
  const SweepConfig loaded = find_sweep_config(path);
  CHECK(shape_count(loaded) == 2);
  CHECK(expand(loaded).shapes.size() == 2);
  std::remove(path.c_str());
}

TEST_CASE("an output file keeps the mode of the file it replaces, else the umask's", "[safety]") {
  const std::string path = temp_path("mode.txt");
  std::remove(path.c_str());
  const mode_t old_mask = ::umask(027);
  write_file_atomic(path, "one\n");
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0640);
  ::umask(old_mask);
  REQUIRE(::chmod(path.c_str(), 0600) == 0);
  write_file_atomic(path, "two\n");
  REQUIRE(::stat(path.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  std::remove(path.c_str());
}

TEST_CASE("a signal the process ignores stays ignored while a file is pending", "[safety]") {
  struct sigaction ign {}, before {}, during {}, after {};
  ign.sa_handler = SIG_IGN;
  sigemptyset(&ign.sa_mask);
  REQUIRE(::sigaction(SIGHUP, &ign, &before) == 0);
  const std::string path = temp_path("hup.txt");
  AtomicFile::unnamed_temporaries = false;  // a named temporary file: the handlers are installed
  {
    AtomicFile f(path);
    ::sigaction(SIGHUP, nullptr, &during);
    CHECK(during.sa_handler == SIG_IGN);  // nohup's choice kept
    struct sigaction term {};
    ::sigaction(SIGTERM, nullptr, &term);
    CHECK(term.sa_handler != SIG_DFL);  // the others clean up
    f.write("x");
    f.publish();
  }
  AtomicFile::unnamed_temporaries = true;
  ::sigaction(SIGHUP, nullptr, &after);
  CHECK(after.sa_handler == SIG_IGN);
  ::sigaction(SIGHUP, &before, nullptr);
  std::remove(path.c_str());
}
