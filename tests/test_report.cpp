#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "hbmscope/json_report.hpp"
#include "hbmscope/printers.hpp"
#include "hbmscope/sweep.hpp"

using namespace hbmscope;

namespace {
Report note_report() {
  Report r;
  r.rows = model_rows(expand(note_axes()));
  return r;
}
}  // namespace

TEST_CASE("byte units", "[report][units]") {
  CHECK(format_bytes(999, Units::decimal) == "999 B");
  CHECK(format_bytes(1000, Units::decimal) == "1 kB");
  CHECK(format_bytes(999'700, Units::decimal) == "1 MB");  // not "1e+03 kB"
  CHECK(format_bytes(2097152, Units::decimal) == "2.1 MB");
  CHECK(format_bytes(2097152, Units::binary) == "2 MiB");
  CHECK(format_bytes(2097152, Units::bytes) == "2097152 B");
  CHECK(format_bytes(545'000'000'000, Units::decimal) == "545 GB");
  CHECK(format_flops(4294967296) == "4.29 GFLOP");
  CHECK(format_intensity(31.5) == "31.5 FLOP/B");
  CHECK(format_intensity(1638.4) == "1638 FLOP/B");
}

TEST_CASE("the default table is the note's table", "[report][note]") {
  const std::string t = render(note_report(), {});
  CHECK(t ==
        "One head, forward pass (model, BF16, blocks of 128)\n"
        "\n"
        "Sequence × head dim   Standard attention   FlashAttention, no L2 reuse   Every value once (floor)\n"
        "4096 × 64                         136 MB                       34.6 MB                     2.1 MB\n"
        "4096 × 128                        138 MB                       69.2 MB                    4.19 MB\n"
        "8192 × 128                        545 MB                        273 MB                    8.39 MB\n");
}

TEST_CASE("varying fields become columns, constant ones go in the title", "[report]") {
  SweepAxes a;
  a.seq = {1024};
  a.head_dim = {128};
  a.heads = {32};
  a.kv_heads = {8};
  a.causal = {false, true};
  Report r;
  r.rows = model_rows(expand(a));
  const std::string t = render(r, {Format::table, Units::decimal, true});
  CHECK_THAT(t, Catch::StartsWith("Batch 1, 32 heads (8 kv-heads), forward pass (model, BF16, blocks of 128)"));
  CHECK_THAT(t, Catch::Contains("Causal"));
  CHECK_THAT(t, Catch::Contains("FLOPs"));
  CHECK_THAT(t, Catch::Contains("FLOP/B"));
}

TEST_CASE("JSON report follows schema hbmscope.report/3", "[report][json]") {
  const auto j = nlohmann::json::parse(render(note_report(), {Format::json}));
  CHECK(j["schema"] == "hbmscope.report/3");
  CHECK(j["tool"]["name"] == "hbmscope");
  CHECK(j["tool"]["version"].is_string());
  REQUIRE(j["rows"].size() == 3);
  const auto& row = j["rows"][0];
  for (const char* k : {"batch", "heads", "kv_heads", "seq_q", "seq_kv", "head_dim", "dtype",
                        "elem_bytes", "block_rows", "block_cols", "causal"})
    CHECK(row["shape"].contains(k));
  CHECK(row["shape"]["dtype"] == "bf16");
  CHECK(row["bytes"]["standard"] == 136314880);
  CHECK(row["bytes"]["flash_no_l2"] == 34603008);
  CHECK(row["bytes"]["floor"] == 2097152);
  CHECK(row["bytes"]["standard"].is_number_unsigned());
  CHECK(row["flops"] == 4294967296);
  CHECK(row["intensity"]["floor"].get<double>() == Approx(2048.0));
}

TEST_CASE("CSV has one header row and raw numbers", "[report][csv]") {
  const std::string csv = render(note_report(), {Format::csv});
  std::istringstream in(csv);
  std::string header, first;
  std::getline(in, header);
  std::getline(in, first);
  CHECK(header ==
        "batch,heads,kv_heads,seq_q,seq_kv,head_dim,dtype,elem_bytes,block_rows,block_cols,causal,"
        "flops,bytes_standard,bytes_flash_no_l2,bytes_floor,intensity_standard,"
        "intensity_flash_no_l2,intensity_floor");
  CHECK_THAT(first, Catch::StartsWith("1,1,1,4096,4096,64,bf16,2,128,128,false,4294967296,"
                                      "136314880,34603008,2097152,"));
}

TEST_CASE("Markdown table", "[report][md]") {
  const std::string md = render(note_report(), {Format::md});
  CHECK_THAT(md, Catch::Contains("| Sequence × head dim | Standard attention |"));
  CHECK_THAT(md, Catch::Contains("| 4096 × 64 | 136 MB | 34.6 MB | 2.1 MB |"));
}

TEST_CASE("atomic write replaces the whole file or nothing", "[report][io]") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / "hbmscope-test-atomic";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path file = dir / "r.json";
  write_file_atomic(file, "first");
  write_file_atomic(file, "second, longer");
  std::ifstream in(file);
  std::string content((std::istreambuf_iterator<char>(in)), {});
  CHECK(content == "second, longer");
  CHECK(std::distance(fs::directory_iterator(dir), fs::directory_iterator{}) == 1);  // no temp left
  CHECK_THROWS_WITH(write_file_atomic(dir / "missing" / "r.json", "x"), Catch::Contains("cannot write"));
  fs::remove_all(dir);
}

TEST_CASE("atomic write follows a symlink and refuses a directory", "[report][io]") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / "hbmscope-test-special";
  fs::remove_all(dir);
  fs::create_directories(dir / "sub");
  fs::create_symlink("sub/real.json", dir / "link.json");
  write_file_atomic(dir / "link.json", "through the link");
  CHECK(fs::is_symlink(dir / "link.json"));  // the link stays a link
  std::ifstream in(dir / "sub" / "real.json");
  CHECK(std::string((std::istreambuf_iterator<char>(in)), {}) == "through the link");
  CHECK_THROWS_WITH(write_file_atomic(dir / "sub", "x"), Catch::Contains("is a directory"));
  CHECK(std::distance(fs::directory_iterator(dir / "sub"), fs::directory_iterator{}) == 1);
  fs::remove_all(dir);
}

TEST_CASE("an atomic file checks its target before anything is written", "[report][io]") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / "hbmscope-test-two-step";
  fs::remove_all(dir);
  fs::create_directories(dir / "sub");
  const std::string long_name(252, 'a');
  CHECK_THROWS_WITH(check_write_target(dir / (long_name + ".svg"), "--plot: "),
                    Catch::StartsWith("--plot: cannot write") && Catch::EndsWith("File name too long"));
  CHECK_THROWS_WITH(AtomicFile(dir / (long_name + ".svg")), Catch::EndsWith("File name too long"));
  CHECK_THROWS_WITH(check_write_target(dir / "sub"), Catch::EndsWith("it is a directory"));
  CHECK_THROWS_WITH(check_write_target(dir / "missing" / "r.json"), Catch::EndsWith("No such file or directory"));
  CHECK_NOTHROW(check_write_target(dir / (long_name.substr(0, 251) + ".svg")));  // 255 bytes fit
  {
    AtomicFile never(dir / "never.json");  // not committed: its temporary file goes
  }
  {
    AtomicFile f(dir / "r.json");
    CHECK_FALSE(fs::exists(dir / "r.json"));  // nothing at the target until commit
    f.commit("whole");
  }
  CHECK(std::distance(fs::directory_iterator(dir), fs::directory_iterator{}) == 2);  // sub, r.json
  fs::create_symlink("r.json", dir / "link.json");
  CHECK(same_write_target(dir / "link.json", dir / "r.json"));
  CHECK(same_write_target(dir / "sub" / ".." / "new.json", dir / "new.json"));
  CHECK_FALSE(same_write_target(dir / "a.json", dir / "b.json"));
  fs::remove_all(dir);
}

TEST_CASE("an interrupted atomic write leaves neither a partial report nor a temporary file", "[report][io]") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / "hbmscope-test-interrupt";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path file = dir / "r.json";
  write_file_atomic(file, "old");
  std::fflush(nullptr);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    // Interrupted after the whole temporary file is written, before the rename
    // (a named one: an unnamed one needs no handler, test_harden.cpp).
    AtomicFile::unnamed_temporaries = false;
    write_file_atomic(file, std::string(1 << 20, 'x'), [] { std::raise(SIGINT); });
    ::_exit(0);  // not reached: SIGINT ends the child
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  CHECK(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGINT);
  std::ifstream in(file);
  std::string content((std::istreambuf_iterator<char>(in)), {});
  CHECK(content == "old");
  CHECK(std::distance(fs::directory_iterator(dir), fs::directory_iterator{}) == 1);
  fs::remove_all(dir);
}
