// Issue 22: cost bounded by the input, no figure printed as "inf", the
// length-list parser, compare's readable table, streamed rows.
#include <catch2/catch.hpp>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>

#include "hbmscope/compare.hpp"
#include "hbmscope/device_config.hpp"
#include "hbmscope/roofline.hpp"
#include "hbmscope/error.hpp"
#include "hbmscope/json_report.hpp"
#include "hbmscope/length_list.hpp"
#include "hbmscope/plot.hpp"
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

TEST_CASE("seq-lens lists: the same parser, items L or Q:KV", "[harden][length_list]") {
  CHECK(parse_seq_len_list("512, 1K:4K\n# comment\n300\n", "f", "seq-lens") ==
        std::vector<SeqLen>{{512, 512}, {1024, 4096}, {300, 300}});
  const auto message = [](std::string_view text) {
    try {
      (void)parse_seq_len_list(text, "f.txt", "seq-lens");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  CHECK(message(std::string_view("1\n12\0003\n", 7)) == "--seq-lens: '12\\x003' is not a length (f.txt, line 2)");
  CHECK(message("# nothing\n") == "--seq-lens: 'f.txt' holds no sequences");
  CHECK(message("512\n8K:1K\n").find("(f.txt, line 2)") != std::string::npos);
  CHECK(read_seq_len_list("5,6:8", "seq-lens") == std::vector<SeqLen>{{5, 5}, {6, 8}});
  CHECK_THROWS_AS(read_seq_len_list("5,,6", "seq-lens"), UsageError);
}

namespace {

std::size_t entries(const std::filesystem::path& dir) {
  return static_cast<std::size_t>(std::distance(std::filesystem::directory_iterator(dir), {}));
}

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p);
  return {std::istreambuf_iterator<char>(in), {}};
}

}  // namespace

TEST_CASE("an atomic file has no name until it is published, where the file system allows", "[harden][io]") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / "hbmscope-test-unnamed";
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const bool unnamed : {true, false}) {
    AtomicFile::unnamed_temporaries = unnamed;
    const std::size_t before = entries(dir);
    {
      AtomicFile f(dir / "r.json");
      f.append("one, ");
      f.append("two");
      f.write(", three");
      // Unnamed: nothing in the folder until publish (a kill now leaves nothing);
      // named: the temporary file beside the target.
      CHECK(entries(dir) == before + (unnamed ? 0u : 1u));
      f.publish();
    }
    CHECK(entries(dir) == 1);
    CHECK(slurp(dir / "r.json") == "one, two, three");
    {
      AtomicFile never(dir / "r.json");
      never.append("half");
    }
    CHECK(entries(dir) == 1);  // not published: the old file stays, nothing else
    CHECK(slurp(dir / "r.json") == "one, two, three");
  }
  AtomicFile::unnamed_temporaries = true;
  // A file replaced keeps its mode; a link stays a link; published twice is once.
  ::chmod((dir / "r.json").c_str(), 0600);
  fs::create_symlink("r.json", dir / "link.json");
  {
    AtomicFile f(dir / "link.json");
    f.write("through the link");
    f.publish();
    f.publish();
  }
  CHECK(fs::is_symlink(dir / "link.json"));
  CHECK(slurp(dir / "r.json") == "through the link");
  struct stat st {};
  REQUIRE(::stat((dir / "r.json").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  CHECK(entries(dir) == 2);
  fs::remove_all(dir);
}

TEST_CASE("SIGQUIT removes a named temporary file as SIGTERM does", "[harden][io]") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / "hbmscope-test-sigquit";
  fs::remove_all(dir);
  fs::create_directories(dir);
  write_file_atomic(dir / "r.json", "old");
  std::fflush(nullptr);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::signal(SIGQUIT, SIG_DFL);
    struct rlimit no_core {0, 0};
    ::setrlimit(RLIMIT_CORE, &no_core);
    AtomicFile::unnamed_temporaries = false;
    write_file_atomic(dir / "r.json", std::string(1 << 16, 'x'), [] { std::raise(SIGQUIT); });
    ::_exit(0);  // not reached
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  CHECK(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGQUIT);
  CHECK(slurp(dir / "r.json") == "old");
  CHECK(entries(dir) == 1);
  fs::remove_all(dir);
}

TEST_CASE("a chart draws at most max_series series and names those left out", "[harden][plot]") {
  SweepAxes a;
  a.seq = {1024, 2048};
  a.heads = {1, 2, 3, 4, 5};
  Report r;
  r.rows = model_rows(expand(a));
  PlotOptions o;
  o.max_series = 3;
  const auto notes = plot_notes(r, o);
  REQUIRE(notes.size() == 1);
  CHECK(notes[0] == "drew 3 of 5 series (at most 3; left out: H=4/4; H=5/5); plot fewer shapes, or pick the axis "
                    "that varies most with --x");
  const std::string script = gnuplot_script(r, PlotTerminal::svg, o);
  CHECK(script.find("$s2 <<") != std::string::npos);
  CHECK(script.find("$s3 <<") == std::string::npos);
  o.max_series = 5;
  CHECK(plot_notes(r, o).empty());
}

TEST_CASE("compare's table fits 120 columns, with units, ratios to 3 figures and the verdict last", "[harden][compare]") {
  SweepAxes axes;
  axes.seq = parse_int_axis("1K:64K:x2", "seq");
  axes.head_dim = {64, 128};
  axes.heads = {32};
  axes.kv_heads = {8};
  axes.causal = {true};
  Report a, b;
  a.rows = model_rows(expand(axes));
  b.rows = a.rows;
  add_predictions(a, find_device("h200"), 1.0);
  add_predictions(b, find_device("h100"), 0.9);
  const Comparison c = compare_reports(report_to_json(a), "h200.json", report_to_json(b), "h100.json", {});
  const std::string t = render_comparison(c, Format::table);
  std::size_t widest = 0;
  for (std::size_t pos = 0; pos < t.size();) {
    const std::size_t nl = std::min(t.find('\n', pos), t.size());
    std::size_t w = 0;
    for (std::size_t i = pos; i < nl; ++i) w += (static_cast<unsigned char>(t[i]) & 0xC0) != 0x80;
    widest = std::max(widest, w);
    pos = nl + 1;
  }
  CHECK(widest <= 120);
  CHECK_THAT(t, Catch::Contains("Sequence × head dim         A         B    B/A   Verdict"));
  CHECK_THAT(t, Catch::Contains("1024 × 64") && Catch::Contains(" µs ") && Catch::Contains(" 1.59 "));
  CHECK_THAT(t, Catch::Contains("  [1] ") && Catch::Contains("prediction.standard.seconds"));
  CHECK_THAT(t, !Catch::Contains("B/A prediction"));
  CompareTableOptions wide;
  wide.wide = true;
  const std::string w = render_comparison(c, Format::table, wide);
  CHECK_THAT(w, Catch::Contains("B/A prediction.standard.seconds") && !Catch::Contains("  [1] "));
}
