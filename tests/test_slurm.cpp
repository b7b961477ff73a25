// Issue 21: `--shard auto` from a Slurm array's environment, and `submit`'s
// scripts, manifest and messages (the command line: tests/submit_cli_test.sh;
// a real Slurm: tests/cluster_test.sh).
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "hbmscope/error.hpp"
#include "hbmscope/json_report.hpp"
#include "hbmscope/l2_sim.hpp"
#include "hbmscope/printers.hpp"
#include "hbmscope/shard.hpp"
#include "hbmscope/slurm.hpp"
#include "hbmscope/sweep.hpp"

using namespace hbmscope;

namespace {

using Env = std::map<std::string, std::string>;

EnvLookup lookup(const Env& env) {
  return [env](std::string_view name) -> std::optional<std::string> {
    const auto it = env.find(std::string(name));
    return it == env.end() ? std::nullopt : std::optional<std::string>(it->second);
  };
}

// The environment Slurm gives task `id` of the array MIN-MAX:STEP (as Slurm
// 22.05 sets it, checked on a real one).
Env array_env(std::uint64_t id, std::uint64_t min, std::uint64_t max, std::uint64_t step) {
  return {{"SLURM_ARRAY_TASK_ID", std::to_string(id)},
          {"SLURM_ARRAY_TASK_MIN", std::to_string(min)},
          {"SLURM_ARRAY_TASK_MAX", std::to_string(max)},
          {"SLURM_ARRAY_TASK_STEP", std::to_string(step)},
          {"SLURM_ARRAY_TASK_COUNT", std::to_string((max - min) / step + 1)}};
}

std::string refusal(const Env& env) {
  try {
    (void)shard_from_slurm_array(lookup(env));
  } catch (const UsageError& e) {
    return std::string("usage error: ") + e.what();
  } catch (const Error& e) {
    return e.what();
  }
  return "accepted";
}

SlurmJobs toy_jobs() {
  SlurmJobs j;
  j.tasks = 4;
  j.dir = "/shared/runs/llm";
  j.workdir = "/home/me/work";
  j.program = "/opt/hbmscope/bin/hbmscope";
  j.sweep_args = {"--config", "llm", "--device", "h100"};
  j.merge_args = {"--output", "all.json", "--plot", "all.svg", "--format", "json"};
  return j;
}

std::string line_starting(const std::string& text, const std::string& head) {
  const std::size_t at = text.find("\n" + head);
  if (at == std::string::npos) return "(none)";
  return text.substr(at + 1, text.find('\n', at + 1) - at - 1);
}

}  // namespace

TEST_CASE("shard auto: every task of an array gets its own shard, and together they are all", "[shard][slurm]") {
  struct Array {
    std::uint64_t min, max, step;
  };
  for (const Array a : {Array{0, 3, 1}, Array{1, 16, 1}, Array{0, 12, 4}, Array{5, 5, 1}, Array{100, 190, 10},
                        Array{7, 7 + 3 * 999, 3}}) {
    const std::uint64_t count = (a.max - a.min) / a.step + 1;
    std::set<std::uint64_t> seen;
    for (std::uint64_t id = a.min; id <= a.max; id += a.step) {
      const Shard s = shard_from_slurm_array(lookup(array_env(id, a.min, a.max, a.step)));
      CHECK(s.count == count);
      CHECK(s.index == (id - a.min) / a.step + 1);
      seen.insert(s.index);
    }
    CHECK(seen.size() == count);
    CHECK(*seen.begin() == 1);
    CHECK(*seen.rbegin() == count);
  }
  // _STEP and _MAX may be absent (older Slurm): a step of 1, nothing to check.
  CHECK(shard_from_slurm_array(lookup({{"SLURM_ARRAY_TASK_ID", "3"},
                                       {"SLURM_ARRAY_TASK_MIN", "1"},
                                       {"SLURM_ARRAY_TASK_COUNT", "4"}}))
            .index == 3);
  // Indices near 2^64 do not wrap.
  const std::uint64_t big = 18446744073709551610ull;
  const Shard s = shard_from_slurm_array(lookup(array_env(big + 4, big, big + 4, 2)));
  CHECK((s.index == 3 && s.count == 3));
}

TEST_CASE("shard auto: outside an array job or on an array it cannot place, one line (exit 1, not 2)",
          "[shard][slurm]") {
  CHECK(refusal({}) ==
        "--shard auto: not in a Slurm array job (SLURM_ARRAY_TASK_ID is not set); give --shard I/N, or submit "
        "the sweep with `hbmscope submit`");
  Env e = array_env(2, 1, 4, 1);
  e["SLURM_ARRAY_TASK_ID"] = "2x";
  CHECK(refusal(e) ==
        "--shard auto: SLURM_ARRAY_TASK_ID='2x' is not a non-negative decimal integer; give --shard I/N");
  e = array_env(2, 1, 4, 1);
  e.erase("SLURM_ARRAY_TASK_COUNT");
  CHECK(refusal(e) ==
        "--shard auto: SLURM_ARRAY_TASK_COUNT is not set, though SLURM_ARRAY_TASK_ID is; give --shard I/N");
  e = array_env(2, 1, 4, 1);
  e["SLURM_ARRAY_TASK_STEP"] = "-1";
  CHECK_THAT(refusal(e), Catch::StartsWith("--shard auto: SLURM_ARRAY_TASK_STEP='-1' is not"));
  e["SLURM_ARRAY_TASK_STEP"] = "99999999999999999999";  // past 2^64
  CHECK_THAT(refusal(e), Catch::StartsWith("--shard auto: SLURM_ARRAY_TASK_STEP='99999999999999999999' is not"));
  // A list (Slurm: 1,3,7 gives MIN 1, MAX 7, STEP 1, COUNT 3), or a re-run of
  // tasks 2 and 5 of 1-16: which shard a task is cannot be told.
  for (const std::uint64_t id : {1, 3, 7}) {
    e = {{"SLURM_ARRAY_TASK_ID", std::to_string(id)},
         {"SLURM_ARRAY_TASK_MIN", "1"},
         {"SLURM_ARRAY_TASK_MAX", "7"},
         {"SLURM_ARRAY_TASK_STEP", "1"},
         {"SLURM_ARRAY_TASK_COUNT", "3"}};
    CHECK_THAT(refusal(e), Catch::Contains("the array's indices are not one range MIN-MAX:STEP") &&
                               Catch::Contains("give --shard $SLURM_ARRAY_TASK_ID/N"));
  }
  e = array_env(6, 0, 12, 4);  // not on the step's grid
  e["SLURM_ARRAY_TASK_ID"] = "6";
  CHECK_THAT(refusal(e), Catch::EndsWith("the task is not one of the array's indices"));
  e = array_env(0, 1, 4, 1);  // below MIN
  e["SLURM_ARRAY_TASK_ID"] = "0";
  CHECK_THAT(refusal(e), Catch::EndsWith("the task is not one of the array's indices"));
  e = {{"SLURM_ARRAY_TASK_ID", "9"}, {"SLURM_ARRAY_TASK_MIN", "1"}, {"SLURM_ARRAY_TASK_COUNT", "4"}};
  CHECK_THAT(refusal(e), Catch::Contains("not one range"));  // past COUNT, no MAX to say more
  e = array_env(1, 1, 4, 1);
  e["SLURM_ARRAY_TASK_COUNT"] = "0";
  CHECK_THAT(refusal(e), Catch::EndsWith("a count and a step must be at least 1"));
}

TEST_CASE("shard I/N and auto: a malformed value is a usage error", "[shard][slurm]") {
  CHECK_THROWS_AS(parse_shard("auto"), UsageError);  // the CLI takes "auto" before parse_shard
  CHECK_THROWS_WITH(parse_shard("3"), Catch::Contains("or auto (from a Slurm array job's environment)"));
}

TEST_CASE("missing shards as ranges, and as Slurm's --array takes them", "[shard][slurm]") {
  using R = std::vector<std::pair<std::uint64_t, std::uint64_t>>;
  CHECK(missing_ranges({}, 4) == R{{1, 4}});
  CHECK(missing_ranges({1, 2, 3, 4}, 4).empty());
  CHECK(missing_ranges({2, 5}, 7) == R{{1, 1}, {3, 4}, {6, 7}});
  CHECK(missing_ranges({0, 3, 99}, 4) == R{{1, 2}, {4, 4}});  // outside 1..N ignored
  CHECK(missing_ranges({1}, 1000000000000000000ull) == R{{2, 1000000000000000000ull}});
  CHECK(format_ranges({{1, 1}, {3, 4}, {6, 7}}) == "1,3-4,6-7");
  CHECK(format_ranges({{1, 1}, {3, 4}}, ", ") == "1, 3-4");
  CHECK(format_ranges({}).empty());
}

TEST_CASE("shell_quote: any word comes back whole from the shell", "[slurm]") {
  CHECK(shell_quote("--config") == "--config");
  CHECK(shell_quote("/a/b-c_d.json") == "/a/b-c_d.json");
  CHECK(shell_quote("") == "''");
  CHECK(shell_quote("a b") == "'a b'");
  CHECK(shell_quote("it's") == "'it'\\''s'");
  CHECK(shell_quote("$(touch x)") == "'$(touch x)'");
  CHECK(shell_quote("`id`;rm -rf /") == "'`id`;rm -rf /'");
  CHECK(shell_quote("line\nbreak") == "'line\nbreak'");
  CHECK(shell_quote("a=b") == "'a=b'");  // never an assignment
  CHECK(shell_quote("~") == "'~'");      // never a home folder
  CHECK(shell_quote("*.json") == "'*.json'");
}

TEST_CASE("the array's script: one shard a task, the sweep's options word for word", "[slurm]") {
  SlurmJobs j = toy_jobs();
  j.partition = "gpu,gpu-long";
  j.account = "proj-42";
  j.time = "1:00:00";
  j.sbatch = {"--mem=8G"};
  j.task_sbatch = {"--constraint=h100"};
  const std::string s = task_script(j);
  CHECK(s.rfind("#!/bin/bash\n", 0) == 0);
  CHECK(line_starting(s, "#SBATCH --array") == "#SBATCH --array=1-4");
  CHECK(line_starting(s, "#SBATCH --chdir") == "#SBATCH --chdir=/shared/runs/llm");
  CHECK(line_starting(s, "#SBATCH --output") == "#SBATCH --output=logs/task-%A_%a.out");
  CHECK(line_starting(s, "#SBATCH --job-name") == "#SBATCH --job-name=hbmscope");
  CHECK(line_starting(s, "#SBATCH --partition") == "#SBATCH --partition=gpu,gpu-long");
  CHECK(line_starting(s, "#SBATCH --account") == "#SBATCH --account=proj-42");
  CHECK(line_starting(s, "#SBATCH --time") == "#SBATCH --time=1:00:00");
  CHECK(line_starting(s, "#SBATCH --mem") == "#SBATCH --mem=8G");
  CHECK(line_starting(s, "#SBATCH --constraint") == "#SBATCH --constraint=h100");
  CHECK(line_starting(s, "#SBATCH --gres") == "(none)");  // no GPU without --measure
  CHECK(line_starting(s, "cd ") == "cd -- /home/me/work");
  CHECK(line_starting(s, "exec ") ==
        "exec /opt/hbmscope/bin/hbmscope sweep --config llm --device h100 --shard \"$i/4\" --format json "
        "--output /shared/runs/llm/\"shard-$i.json\"");
  j.gpu = true;
  CHECK(line_starting(task_script(j), "#SBATCH --gres") == "#SBATCH --gres=gpu:1");
  j.gpu_type = "h100";
  CHECK(line_starting(task_script(j), "#SBATCH --gres") == "#SBATCH --gres=gpu:h100:1");
}

TEST_CASE("the merge's script: the report options, after `merge --from DIR`", "[slurm]") {
  SlurmJobs j = toy_jobs();
  j.sbatch = {"--mem=8G"};
  j.task_sbatch = {"--constraint=h100"};
  j.gpu = true;
  const std::string s = merge_script(j);
  CHECK(line_starting(s, "#SBATCH --job-name") == "#SBATCH --job-name=hbmscope-merge");
  CHECK(line_starting(s, "#SBATCH --output") == "#SBATCH --output=logs/merge-%j.out");
  CHECK(line_starting(s, "#SBATCH --mem") == "#SBATCH --mem=8G");
  CHECK(line_starting(s, "#SBATCH --constraint") == "(none)");  // the array's only
  CHECK(line_starting(s, "#SBATCH --gres") == "(none)");        // the merge needs no GPU
  CHECK(line_starting(s, "#SBATCH --array") == "(none)");
  CHECK(line_starting(s, "exec ") ==
        "exec /opt/hbmscope/bin/hbmscope merge --from /shared/runs/llm --output all.json --plot all.svg "
        "--format json");
}

TEST_CASE("scripts: labels, paths and options that a shell would run stay words", "[slurm]") {
  SlurmJobs j = toy_jobs();
  j.workdir = "/home/me/it's $(reboot)";
  j.program = "/opt/`id`/hbmscope";
  j.sweep_args = {"--config", "x'; touch /tmp/pwned; '.json", "--variants", "$(touch /tmp/pwned)"};
  j.merge_args = {"--output", "a\nb.json"};
  const std::string t = task_script(j);
  CHECK(line_starting(t, "cd ") == "cd -- '/home/me/it'\\''s $(reboot)'");
  CHECK(line_starting(t, "exec ") ==
        "exec '/opt/`id`/hbmscope' sweep --config 'x'\\''; touch /tmp/pwned; '\\''.json' --variants "
        "'$(touch /tmp/pwned)' --shard \"$i/4\" --format json --output /shared/runs/llm/\"shard-$i.json\"");
  // A newline in a word stays inside its quotes: the next line is the word's.
  CHECK(merge_script(j).find("--output 'a\nb.json'\n") != std::string::npos);
}

TEST_CASE("submit's values: what a #SBATCH line cannot carry is refused with one line", "[slurm]") {
  const auto refused = [](SlurmJobs j) -> std::string {
    try {
      check_slurm_jobs(j);
    } catch (const UsageError& e) {
      return e.what();
    }
    return "accepted";
  };
  SlurmJobs j = toy_jobs();
  CHECK(refused(j) == "accepted");
  for (const char* t : {"30", "30:00", "1:00:00", "2-12", "2-12:30", "2-12:30:00", "UNLIMITED", "INFINITE"}) {
    j.time = t;
    CHECK(refused(j) == "accepted");
  }
  for (const char* t : {"", "1h", "1:2:3:4", "-1", "1-", "1-2-3", "::", "1 day", "30\n#SBATCH --x"}) {
    j.time = t;
    CHECK_THAT(refused(j), Catch::StartsWith("--time: '"));
  }
  j = toy_jobs();
  j.partition = "gpu;rm";
  CHECK_THAT(refused(j), Catch::StartsWith("--partition: 'gpu;rm' is not a Slurm name"));
  j = toy_jobs();
  j.account = "a,b";
  CHECK_THAT(refused(j), Catch::StartsWith("--account: 'a,b' is not a Slurm name"));
  j = toy_jobs();
  j.job_name = "my job";
  CHECK_THAT(refused(j), Catch::StartsWith("--job-name: 'my job'"));
  j = toy_jobs();
  j.gpu_type = "h100";
  CHECK(refused(j) == "--gpu-type: needs --measure among the sweep's options (a GPU for what?)");
  for (const char* dir : {"/a b", "/a#b", "/a%j", "/a\"b", "/a'b", "/a\\b", "/a\nb", "relative"}) {
    j = toy_jobs();
    j.dir = dir;
    CHECK_THAT(refused(j), Catch::StartsWith("--dir: '") && Catch::Contains("cannot carry"));
  }
  j = toy_jobs();
  j.tasks = 0;
  CHECK_THAT(refused(j), Catch::StartsWith("--tasks: 0 is not from 1"));
}

TEST_CASE("submit's extra #SBATCH options: normalised, or refused naming what to use instead", "[slurm]") {
  CHECK(sbatch_line("mem=8G", "--sbatch") == "--mem=8G");
  CHECK(sbatch_line("--qos=high", "--sbatch") == "--qos=high");
  CHECK(sbatch_line("--mem 8G", "--sbatch") == "--mem 8G");
  CHECK(sbatch_line("-N 1", "--sbatch") == "-N 1");
  CHECK(sbatch_line("comment=\"two words\"", "--sbatch") == "--comment=\"two words\"");
  const auto refused = [](const char* text) -> std::string {
    try {
      (void)sbatch_line(text, "--sbatch");
    } catch (const UsageError& e) {
      return e.what();
    }
    return "accepted";
  };
  CHECK(refused("mem=8G\nrm -rf /") ==
        "--sbatch: 'mem=8G\\nrm -rf /' holds a control character, which would end the #SBATCH line");
  CHECK(refused("comment=a#b") == "--sbatch: 'comment=a#b' holds '#', which starts a comment in a #SBATCH line");
  CHECK(refused("array=1-4") == "--sbatch: 'array=1-4' is set by submit: submit makes the array from --tasks");
  CHECK(refused("-p gpu") == "--sbatch: '-p gpu' is set by submit: use --partition");
  CHECK(refused("--time=5") == "--sbatch: '--time=5' is set by submit: use --time");
  CHECK_THAT(refused("gres=gpu:2"), Catch::Contains("is set by submit: with --measure each task gets --gres=gpu:1"));
  CHECK_THAT(refused("dependency=afterok:1"), Catch::Contains("is set by submit"));
  CHECK_THAT(refused("--Mem=8G"), Catch::Contains("is not an sbatch option"));
  CHECK_THAT(refused("-"), Catch::Contains("is not an sbatch option"));
  CHECK_THAT(refused("=8G"), Catch::Contains("is not an sbatch option"));
}

TEST_CASE("a merge with shards missing: one line naming them and the sbatch line that re-runs them", "[slurm]") {
  CHECK(missing_shards_message("/shared/runs/llm", 16, {1, 3, 4, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}) ==
        "merge: 3 of 16 shards missing in /shared/runs/llm (2, 5, 16): their tasks failed, were killed or have "
        "not run (logs in /shared/runs/llm/logs); re-run just them, then the merge: j=$(sbatch --parsable "
        "--array=2,5,16 /shared/runs/llm/tasks.sbatch) && sbatch --dependency=afterok:${j%%;*} "
        "--kill-on-invalid-dep=yes /shared/runs/llm/merge.sbatch");
  CHECK_THAT(missing_shards_message("/r", 4, {}), Catch::StartsWith("merge: 4 of 4 shards missing in /r (1-4)") &&
                                                      Catch::Contains("--array=1-4 /r/tasks.sbatch"));
}

TEST_CASE("shard file names", "[slurm]") {
  CHECK(shard_file(7) == "shard-7.json");
  CHECK(shard_file_index("shard-7.json") == 7u);
  CHECK(shard_file_index("shard-18446744073709551615.json") == 18446744073709551615ull);
  for (const char* other : {"shard-07.json", "shard-.json", "shard-0.json", "shard-7.json.tmp", ".shard-7.json.tmp-x",
                            "shard-7x.json", "manifest.json", "shard-99999999999999999999.json"})
    CHECK_FALSE(shard_file_index(other).has_value());
}

TEST_CASE("the manifest reads back, and a malformed one is refused with one line", "[slurm]") {
  SubmitManifest m;
  m.tasks = 4;
  m.total_rows = 8;
  m.identity = "0123456789abcdef";
  m.sweep_args = {"--seq", "1K:8K:x2", "--label's"};
  m.workdir = "/w";
  m.program = "/p/hbmscope";
  const auto path = std::filesystem::temp_directory_path() / "hbmscope_test_manifest.json";
  const auto write = [&](const std::string& text) { std::ofstream(path) << text; };
  write(manifest_json(m));
  const SubmitManifest back = read_submit_manifest(path.string());
  CHECK(back.tasks == 4);
  CHECK(back.total_rows == 8);
  CHECK(back.identity == m.identity);
  CHECK(back.sweep_args == m.sweep_args);
  CHECK(back.workdir == "/w");
  CHECK(back.program == "/p/hbmscope");
  auto j = nlohmann::json::parse(manifest_json(m));
  const auto refused = [&](const nlohmann::json& k) -> std::string {
    write(k.dump());
    try {
      (void)read_submit_manifest(path.string());
    } catch (const Error& e) {
      return e.what();
    }
    return "accepted";
  };
  auto k = j;
  k["tasks"] = 0;
  CHECK_THAT(refused(k), Catch::Contains("tasks: expected an integer from 1 to"));
  k = j;
  k["total_rows"] = 3;  // fewer rows than tasks
  CHECK_THAT(refused(k), Catch::Contains("total_rows: expected an integer from 4 to"));
  k = j;
  k["schema"] = "hbmscope.report/2";
  CHECK_THAT(refused(k), Catch::Contains("schema: expected \"hbmscope.submit/1\""));
  k = j;
  k["sweep"][1] = 5;
  CHECK_THAT(refused(k), Catch::Contains("sweep[1]: expected a string"));
  k = j;
  k["extra"] = true;
  CHECK_THAT(refused(k), Catch::Contains("unknown key"));
  std::filesystem::remove(path);
}

TEST_CASE("a sweep's identity: its options, task count and rows", "[slurm]") {
  const auto shapes = expand(note_axes());
  const std::vector<std::string> labels(shapes.size(), "");
  const std::string base = sweep_identity({"--config", "seed"}, 3, shapes, labels);
  CHECK(base.size() == 16);
  CHECK(sweep_identity({"--config", "seed"}, 3, shapes, labels) == base);
  CHECK(sweep_identity({"--config", "seed"}, 2, shapes, labels) != base);
  CHECK(sweep_identity({"--config", "seed", "--fa1"}, 3, shapes, labels) != base);
  CHECK(sweep_identity({"--configseed"}, 3, shapes, labels) != sweep_identity({"--config", "seed"}, 3, shapes, labels));
  auto other = shapes;
  other[1].causal = true;  // a config edited between two submissions
  CHECK(sweep_identity({"--config", "seed"}, 3, other, labels) != base);
  auto relabelled = labels;
  relabelled[0] = "Llama";
  CHECK(sweep_identity({"--config", "seed"}, 3, shapes, relabelled) != base);
  // A long sweep: its first and last rows and its length count.
  SweepAxes a;
  a.seq = parse_int_axis("1:10000:+1", "seq");
  auto many = expand(a);
  const std::vector<std::string> none(many.size(), "");
  const std::string long_id = sweep_identity({}, 2, many, none);
  many.back().causal = true;
  CHECK(sweep_identity({}, 2, many, none) != long_id);
  many.pop_back();
  CHECK(sweep_identity({}, 2, many, std::vector<std::string>(many.size(), "")) != long_id);
}

TEST_CASE("a report read back from JSON prints as it did: L2 detail, measurements, the measured device",
          "[slurm][json]") {
  // What a merged shard report must keep for `merge --format table` to print
  // the sweep's own table.
  SweepAxes a;
  a.seq = {1024, 2048};
  a.head_dim = {64, 128};
  a.causal = {true};
  Report r;
  r.command = "sweep";
  r.rows = model_rows(expand(a));
  L2SimConfig c;
  c.l2_bytes = 1 << 20;
  c.sm_count = 8;
  for (Row& row : r.rows) add_l2_sim(row, c);
  KernelMeasurement ok;
  ok.kernel = "flash";
  ok.variant = "flash_no_l2";
  ok.status = MeasureStatus::ok;
  ok.rel_error = 3e-3;
  ok.lse_rel_error = std::nan("");
  ok.block_rows = ok.block_cols = 128;
  ok.warps = 4;
  ok.timing.median = 1.25e-4;
  ok.timing.min = 1.2e-4;
  ok.timing.max = 1.5e-4;
  ok.timing.samples = {1.25e-4, 1.2e-4, 1.5e-4};
  ok.model_bytes = r.rows[0].variant("flash_no_l2")->bytes;
  ok.bandwidth = 2.5e12;
  ok.copy_fraction = 0.8;
  ok.tflops = 123.4;
  ok.flops = r.rows[0].flops;  // not in the JSON: the table's TFLOP/s must not need it
  ok.predicted_copy = 1e-4;
  ok.measured_over_predicted = 1.25;
  ok.dram_read_bytes = 1234567;
  ok.counters = "ok";
  KernelMeasurement skipped;
  skipped.kernel = "standard";
  skipped.variant = "standard";
  skipped.reason = "needs 70 GB of device memory, 60 GB free";
  for (Row& row : r.rows) row.measurements = {ok, skipped};
  DeviceReport dev;
  dev.info.name = "Fake GPU";
  dev.info.cc_major = 9;
  dev.info.sm_count = 132;
  dev.info.peak_bandwidth = 4.8e12;
  dev.copy.kernel = dev.copy.variant = "copy";
  dev.copy.status = MeasureStatus::ok;
  dev.copy.bandwidth = 4e12;
  r.device = dev;
  const Report back = report_from_json(nlohmann::json::parse(render(r, {Format::json})), "r.json");
  REQUIRE(back.rows.size() == r.rows.size());
  REQUIRE(back.rows[0].l2_sim.has_value());
  CHECK(back.rows[0].l2_sim->flash.hit_rate == r.rows[0].l2_sim->flash.hit_rate);
  CHECK(back.rows[0].l2_sim->waves == r.rows[0].l2_sim->waves);
  REQUIRE(back.rows[0].measurements.size() == 2);
  CHECK(back.rows[0].measurements[0].dram_read_bytes == ok.dram_read_bytes);
  CHECK(std::isnan(back.rows[0].measurements[0].lse_rel_error));
  CHECK(back.rows[0].measurements[0].timing.samples == ok.timing.samples);
  CHECK(back.rows[0].measurements[1].status == MeasureStatus::skipped);
  REQUIRE(back.device.has_value());
  CHECK(back.device->info.cc_major == 9);
  for (const Format f : {Format::table, Format::md, Format::csv, Format::json}) {
    PrintOptions p;
    p.format = f;
    p.wide = true;
    CHECK(render(back, p) == render(r, p));
  }
  CHECK_THAT(render(back, {Format::table}), Catch::Contains(" 123 "));  // TFLOP/s
  // A decode row's simulations come back in the row's variant order.
  SweepAxes d;
  d.decode = true;
  d.seq = {1};
  d.head_dim = {128};
  d.seq_kv = {4096};
  d.heads = {32};
  d.kv_heads = {8};
  Report dr;
  dr.rows = model_rows(expand(d));
  for (Row& row : dr.rows) add_l2_sim(row, c);
  const Report dback = report_from_json(nlohmann::json::parse(render(dr, {Format::json})), "d.json");
  REQUIRE(dback.rows[0].l2_sim.has_value());
  REQUIRE(dback.rows[0].l2_sim->decode.size() == dr.rows[0].l2_sim->decode.size());
  for (std::size_t i = 0; i < dr.rows[0].l2_sim->decode.size(); ++i)
    CHECK(dback.rows[0].l2_sim->decode[i].id == dr.rows[0].l2_sim->decode[i].id);
  CHECK(render(dback, {Format::table}) == render(dr, {Format::table}));
}
