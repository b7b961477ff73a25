// `hbmscope submit`: a sweep as Slurm jobs (an array of N tasks, one shard
// each, and the merge after them). The scripts and the manifest are made in
// src/report/slurm_script.cpp; here the options are checked, the folder
// written and sbatch run.
#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <set>

#include "hbmscope/error.hpp"
#include "hbmscope/model_config.hpp"
#include "hbmscope/printers.hpp"
#include "../report/json_check.hpp"
#include "command_io.hpp"
#include "sweep_commands.hpp"

extern char** environ;

namespace hbmscope::cli {

namespace fs = std::filesystem;

namespace {

const char* const submit_help = R"(In full: hbmscope submit --tasks N --dir DIR [OPTIONS] -- SWEEP-OPTIONS...

Runs a sweep on a Slurm cluster. An array job of N tasks: task I runs
`hbmscope sweep ... --shard I/N` and writes DIR/shard-I.json, whole or not at all
(a temporary file renamed when complete, so a task that fails or is killed leaves
no shard). Then a merge job, once all N tasks have succeeded
(--dependency=afterok), joins the shards into the one report (and chart) the
sweep asks for: the same rows, in the same order, as the sweep run in one process.
If a task fails, a second merge job (--dependency=afternotok) runs instead and
fails with one line naming the missing shards and the sbatch line that re-runs
just those tasks and then the merge.

Everything after -- is the sweep, as `hbmscope sweep` takes it, checked here
before anything is submitted. Its report options (--output, --format, --units,
--wide, --columns, --plot, --x) go to the merge; every other option goes to each
task word for word. Without --output the report is DIR/report.txt (.json,
.csv, .md after --format). With --measure each task gets a GPU of its own
(--gres=gpu:1, or gpu:TYPE:1 with --gpu-type), which it sees as device 0.

DIR gets manifest.json (the sweep's options, N and a fingerprint of its rows),
tasks.sbatch, merge.sbatch, the shards and logs/ (task-JOB_I.out,
merge-JOB.out). A folder that holds another sweep's shards is refused; the same
sweep submitted again starts over. The jobs run the hbmscope at this path from
this folder: both must be on a file system the compute nodes share.
--dry-run prints the scripts and the sbatch lines without writing or submitting.

Examples:
  hbmscope submit --tasks 16 --dir runs/llm --partition gpu --time 1:00:00 -- \
      --config llm --device h100 --output llm.json --plot llm.svg
  hbmscope submit --tasks 8 --dir runs/measured --gpu-type h100 --sbatch mem=16G -- \
      --config llm --measure --kernels flash --output measured.md
  hbmscope merge --from runs/llm --output llm.md      (the shards there, any time)
Re-run failed tasks 2 and 5, then merge (what the failed merge prints):
  j=$(sbatch --parsable --array=2,5 runs/llm/tasks.sbatch) &&
      sbatch --dependency=afterok:${j%%;*} --kill-on-invalid-dep=yes runs/llm/merge.sbatch)";

// The sweep's report options: they shape the merged report, not the shards.
constexpr const char* report_options[] = {"--output", "--format", "--units", "--wide", "--columns", "--plot", "--x"};

struct SweepArgs {
  std::vector<std::string> task, report;
  std::set<std::string> given;  // the long names of the options given
};

// Splits the sweep's words (already parsed by CLI11, so well formed) by option:
// "--name=value" is one word, "--name value" two (the sweep's options take one
// value each), a flag one.
SweepArgs split_sweep_args(const std::vector<std::string>& args, CLI::App& sweep) {
  std::set<const CLI::Option*> report;
  for (const char* name : report_options) report.insert(sweep.get_option(name));
  SweepArgs out;
  for (std::size_t i = 0; i < args.size();) {
    const std::string& word = args[i];
    const std::size_t eq = word.find('=');
    const CLI::Option* o = word.rfind("--", 0) == 0 ? sweep.get_option_no_throw(word.substr(0, eq)) : nullptr;
    std::size_t take = 1;
    if (o) {
      out.given.insert(word.substr(0, eq));
      if (eq == std::string::npos && o->get_items_expected_max() > 0) take = 2;
    }
    take = std::min(take, args.size() - i);
    auto& to = o && report.count(o) ? out.report : out.task;
    to.insert(to.end(), args.begin() + static_cast<std::ptrdiff_t>(i),
              args.begin() + static_cast<std::ptrdiff_t>(i + take));
    i += take;
  }
  return out;
}

struct Ran {
  int status = -1;  // the exit status, -1 when it did not exit
  std::string out, err;
};

// Runs a program found on the PATH with these words, stdin from /dev/null,
// and collects its stdout and stderr.
Ran run_program(const std::vector<std::string>& words) {
  int out_pipe[2], err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) throw Error(std::string("cannot make a pipe: ") + std::strerror(errno));
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
    ::close(out_pipe[0]);
    ::close(out_pipe[1]);
    throw Error(std::string("cannot make a pipe: ") + std::strerror(errno));
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, out_pipe[1], 1);
  posix_spawn_file_actions_adddup2(&fa, err_pipe[1], 2);
  std::vector<std::string> copy = words;
  std::vector<char*> argv;
  for (auto& w : copy) argv.push_back(w.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int rc = ::posix_spawnp(&pid, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  Ran ran;
  if (rc != 0) {
    ::close(out_pipe[0]);
    ::close(err_pipe[0]);
    throw Error(words[0] + (rc == ENOENT ? std::string(" is not on the PATH (run submit on a Slurm login node; "
                                                       "--dry-run prints the scripts without it)")
                                         : ": cannot run it: " + std::string(std::strerror(rc))));
  }
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* sinks[2] = {&ran.out, &ran.err};
  for (int open = 2; open > 0;) {
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int k = 0; k < 2; ++k) {
      if (fds[k].fd < 0 || !fds[k].revents) continue;
      char buf[4096];
      const ssize_t n = ::read(fds[k].fd, buf, sizeof buf);
      if (n > 0) {
        sinks[k]->append(buf, static_cast<std::size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        ::close(fds[k].fd);
        fds[k].fd = -1;
        --open;
      }
    }
  }
  for (auto& f : fds)
    if (f.fd >= 0) ::close(f.fd);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  ran.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return ran;
}

std::string last_line(const std::string& text) {
  std::string t = text;
  while (!t.empty() && (t.back() == '\n' || t.back() == '\r')) t.pop_back();
  const std::size_t nl = t.rfind('\n');
  return json_check::printable(nl == std::string::npos ? t : t.substr(nl + 1));
}

// `sbatch --parsable ...`: the job id ("123", or "123;cluster": the number).
std::string submit_job(const std::vector<std::string>& args, const std::string& what) {
  std::vector<std::string> words{"sbatch", "--parsable"};
  words.insert(words.end(), args.begin(), args.end());
  const Ran r = run_program(words);
  const std::string line = last_line(r.out);
  const std::string id = line.substr(0, line.find(';'));
  if (r.status != 0 || id.empty() || !std::all_of(id.begin(), id.end(), [](char c) { return c >= '0' && c <= '9'; }))
    throw Error("sbatch did not submit the " + what +
                (r.status == 0 ? " (its output '" + line + "' is not a job id)"
                               : ": " + (last_line(r.err).empty() ? "exit status " + std::to_string(r.status)
                                                                  : last_line(r.err))));
  return id;
}

std::string words_text(const std::vector<std::string>& words) {
  std::string s;
  for (const auto& w : words) {
    if (!s.empty()) s += ' ';
    s += shell_quote(w);
  }
  return s;
}

// A folder that may take this sweep: new, empty, or holding the same sweep.
// Returns true when it holds an earlier submission of the same sweep.
bool check_folder(const std::string& dir, const std::string& identity) {
  std::error_code ec;
  const fs::file_status st = fs::status(dir, ec);
  if (!fs::exists(st)) return false;
  if (!fs::is_directory(st)) throw Error("--dir: " + dir + " exists and is not a folder");
  const std::string manifest = dir + "/" + std::string(manifest_file);
  if (fs::exists(manifest, ec)) {
    const SubmitManifest m = read_submit_manifest(manifest);
    if (m.identity == identity) return true;
    std::string sweep = words_text(m.sweep_args);
    if (sweep.size() > 160) sweep = sweep.substr(0, 157) + "...";
    throw Error("--dir: " + dir + " holds the shards of another sweep (" + manifest + ": " +
                std::to_string(m.tasks) + " tasks of " + std::to_string(m.total_rows) + " rows of `sweep " + sweep +
                "`); give another --dir, or remove that folder first");
  }
  if (!fs::is_empty(dir, ec))
    throw Error("--dir: " + dir + " is not empty and holds no " + std::string(manifest_file) +
                " of `hbmscope submit`; give a new or empty folder");
  return false;
}

}  // namespace

void SweepCommands::add_submit(CLI::App& app) {
  submit_ = app.add_subcommand("submit", "Run a sweep on a Slurm cluster: an array job of shards and the merge after it");
  submit_->add_option("--tasks", submit_jobs_.tasks, "The array's tasks N: the sweep is cut into N shards, one a task")
      ->required()
      ->type_name("N")
      ->check(integer_in(1, static_cast<std::int64_t>(max_slurm_tasks)));
  submit_->add_option("--dir", submit_dir_,
                      "The output folder: scripts, manifest, shards and logs (created; on a file system the "
                      "compute nodes share)")
      ->required()
      ->type_name("DIR")
      ->check(not_empty());
  submit_->add_option("--partition", submit_jobs_.partition, "#SBATCH --partition: where the jobs run")
      ->type_name("NAME");
  submit_->add_option("--account", submit_jobs_.account, "#SBATCH --account: charged for the jobs")->type_name("NAME");
  submit_->add_option("--time", submit_jobs_.time,
                      "#SBATCH --time: each job's limit, in Slurm's forms MM, HH:MM:SS, D-HH:MM ... "
                      "[default: the partition's]")
      ->type_name("LIMIT");
  submit_->add_option("--gpu-type", submit_jobs_.gpu_type,
                      "With --measure: the GPU kind each task asks for (--gres=gpu:TYPE:1) [default: any, gpu:1]")
      ->type_name("TYPE");
  submit_->add_option("--job-name", submit_jobs_.job_name, "The array's job name; the merge's is NAME-merge")
      ->type_name("NAME");
  submit_->add_option("--sbatch", submit_jobs_.sbatch,
                      "An extra #SBATCH option of both scripts, e.g. --sbatch mem=8G --sbatch qos=high (the "
                      "leading -- may be left out; repeat for several)")
      ->type_name("OPTION")
      ->allow_extra_args(false);  // one value each time
  submit_->add_option("--task-sbatch", submit_jobs_.task_sbatch,
                      "An extra #SBATCH option of the array's script only, e.g. constraint=h100")
      ->type_name("OPTION")
      ->allow_extra_args(false);
  submit_->add_option("--program", submit_program_,
                      "The hbmscope the jobs run [default: this one, at its absolute path]")
      ->type_name("PATH")
      ->check(not_empty());
  submit_->add_flag("--dry-run", submit_dry_run_, "Print the scripts and the sbatch lines; write and submit nothing");
  submit_->footer(submit_help);
}

void SweepCommands::take_submit_sweep(std::vector<std::string>& reversed_args) {
  if (reversed_args.empty() || reversed_args.back() != "submit") return;
  // The first "--" (the last in CLI11's reversed order) ends submit's options.
  const auto mark = std::find(reversed_args.rbegin(), reversed_args.rend(), "--");
  if (mark == reversed_args.rend()) return;
  const auto at = mark.base() - 1;  // the "--" itself
  submit_sweep_args_.assign(reversed_args.begin(), at);
  std::reverse(submit_sweep_args_.begin(), submit_sweep_args_.end());
  reversed_args.erase(reversed_args.begin(), at + 1);
}

int SweepCommands::run_submit() {
  SlurmJobs jobs = submit_jobs_;
  if (submit_sweep_args_.empty())
    throw UsageError("submit: no sweep given: put the sweep's options after --, e.g. -- --config llm");
  for (auto& l : jobs.sbatch) l = sbatch_line(l, "--sbatch");
  for (auto& l : jobs.task_sbatch) l = sbatch_line(l, "--task-sbatch");
  jobs.workdir = fs::current_path().string();
  jobs.dir = absolute_path(submit_dir_);
  std::error_code ec;
  jobs.program = submit_program_ ? absolute_path(*submit_program_) : fs::read_symlink("/proc/self/exe", ec).string();
  if (jobs.program.empty() || ::access(jobs.program.c_str(), X_OK) != 0)
    throw Error("--program: '" + jobs.program + "' is not a program this user can run");

  // The sweep, parsed and checked as `hbmscope sweep` would, with nothing run.
  CLI::App app{"hbmscope"};
  app.name("hbmscope");
  SweepCommands sweep(app);
  std::vector<std::string> words(submit_sweep_args_.rbegin(), submit_sweep_args_.rend());
  words.push_back("sweep");
  try {
    app.parse(words);
  } catch (const CLI::CallForHelp&) {
    throw UsageError("submit: --help after -- is the sweep's: see `hbmscope sweep --help`");
  } catch (const CLI::ParseError& e) {
    throw UsageError(std::string("submit: the sweep after --: ") + e.what());
  }
  const SweepArgs split = split_sweep_args(submit_sweep_args_, *sweep.sweep_);
  if (split.given.count("--shard")) throw UsageError("submit: --shard: submit gives each task its shard (--tasks N)");
  jobs.gpu = sweep.measure_;
  if (jobs.gpu && split.given.count("--device-index"))
    throw UsageError("submit: --device-index: each task is given one GPU of its own by Slurm, which it sees as "
                     "device 0; leave --device-index out");
  if (sweep.dev_.plot && *sweep.dev_.plot == "-")
    throw UsageError("submit: --plot -: the merge job has no terminal; give the chart a file, e.g. --plot all.svg");
  check_slurm_jobs(jobs);
  SweepPlan plan = sweep.plan_sweep();
  const LabelledShapes all = sweep.plan_points(plan);
  const std::size_t points = all.shapes.size();  // shards cut between them
  if (jobs.tasks > points)
    throw Error("--tasks: " + std::to_string(jobs.tasks) + " tasks for a sweep of " + std::to_string(points) +
                " shapes would leave some without a shape; give --tasks " + std::to_string(points) + " or fewer");
  const std::size_t rows = plan_rows(all, 0, points);
  // No task's size is bounded: each writes its shard as JSON a row at a time (run_rows).

  jobs.sweep_args = split.task;
  jobs.merge_args = split.report;
  // The report format the sweep would have resolved (merge's own default is
  // JSON), and a file for it (the merge job's stdout is its log).
  const Format format = resolve_format(sweep.out_.format, sweep.out_.output);
  static constexpr const char* names[] = {"table", "json", "csv", "md"};
  static constexpr const char* extensions[] = {"txt", "json", "csv", "md"};
  if (!split.given.count("--format")) jobs.merge_args.insert(jobs.merge_args.end(), {"--format", names[int(format)]});
  if (!sweep.out_.output || *sweep.out_.output == "-") {
    std::vector<std::string> kept;  // without "--output -"
    for (std::size_t i = 0; i < jobs.merge_args.size(); ++i) {
      if (jobs.merge_args[i] == "--output") ++i;
      else if (jobs.merge_args[i].rfind("--output=", 0) != 0) kept.push_back(jobs.merge_args[i]);
    }
    jobs.merge_args = kept;
    jobs.merge_args.insert(jobs.merge_args.end(),
                           {"--output", jobs.dir + "/report." + std::string(extensions[int(format)])});
  }

  SubmitManifest manifest;
  manifest.tasks = jobs.tasks;
  manifest.total_rows = rows;
  manifest.sweep_args = jobs.sweep_args;
  manifest.workdir = jobs.workdir;
  manifest.program = jobs.program;
  // A whole-model point's model is part of its row: its id joins the label.
  std::vector<std::string> row_names = all.labels;
  for (std::size_t i = 0; i < all.models.size() && i < row_names.size(); ++i)
    if (all.models[i]) row_names[i] += "\n" + all.models[i]->id;
  manifest.identity = sweep_identity(jobs.sweep_args, jobs.tasks, all.shapes, row_names);
  const bool resubmission = check_folder(jobs.dir, manifest.identity);
  const std::string tasks_path = jobs.dir + "/" + std::string(tasks_script_file);
  const std::string merge_path = jobs.dir + "/" + std::string(merge_script_file);
  std::string report = jobs.merge_args.back();  // --output's, the last pair when submit added it
  if (sweep.out_.output && *sweep.out_.output != "-") report = *sweep.out_.output;
  if (sweep.dev_.plot) report += " and " + *sweep.dev_.plot;
  const std::string n = std::to_string(jobs.tasks);

  if (submit_dry_run_) {
    std::string text = "# hbmscope submit --dry-run: nothing written, nothing submitted. " + n + " tasks of " +
                       std::to_string(points) + " shapes; " + jobs.dir + "/" + std::string(manifest_file) +
                       (resubmission ? " holds this sweep already" : " would record the sweep") + ".\n";
    text += "# ---- " + tasks_path + "\n" + task_script(jobs);
    text += "# ---- " + merge_path + "\n" + merge_script(jobs);
    text += "# ---- then:\n# ARRAY=$(sbatch --parsable " + shell_quote(tasks_path) + ")\n";
    for (const char* dep : {"afterok", "afternotok"})
      text += std::string("# sbatch --parsable --dependency=") + dep + ":$ARRAY --kill-on-invalid-dep=yes " +
              shell_quote(merge_path) + "\n";
    write_stdout(text);
    return 0;
  }

  (void)run_program({"sbatch", "--version"});  // sbatch is here, before anything is written
  fs::create_directories(jobs.dir + "/" + std::string(logs_folder), ec);
  if (ec) throw Error("--dir: cannot create " + jobs.dir + "/" + std::string(logs_folder) + ": " + ec.message());
  // The same sweep submitted again starts over: its earlier shards go.
  if (resubmission)
    for (const auto& e : fs::directory_iterator(jobs.dir, ec))
      if (shard_file_index(e.path().filename().string())) fs::remove(e.path(), ec);
  write_file_atomic(jobs.dir + "/" + std::string(manifest_file), manifest_json(manifest));
  write_file_atomic(tasks_path, task_script(jobs));
  write_file_atomic(merge_path, merge_script(jobs));

  const std::string array = submit_job({tasks_path}, "array job of " + tasks_path);
  std::string merge_ok, merge_fault;
  try {
    merge_ok = submit_job({"--dependency=afterok:" + array, "--kill-on-invalid-dep=yes", merge_path}, "merge job");
    merge_fault =
        submit_job({"--dependency=afternotok:" + array, "--kill-on-invalid-dep=yes", merge_path}, "fault merge job");
  } catch (const Error& e) {
    throw Error(std::string(e.what()) + "; array job " + array +
                (merge_ok.empty() ? " is queued" : " and merge job " + merge_ok + " are queued") +
                ": cancel with scancel " + array + (merge_ok.empty() ? "" : " " + merge_ok) +
                ", or submit the merge by hand: sbatch --dependency=afterok:" + array + " " + shell_quote(merge_path));
  }
  write_stdout("Submitted " + n + " tasks of " + std::to_string(points) + " shapes to Slurm; folder " + jobs.dir +
               "\n  array job " + array + ": task I writes shard-I.json (logs: " + std::string(logs_folder) +
               "/task-" + array + "_I.out)\n  merge job " + merge_ok + ": after all " + n + " succeed, writes " +
               report + "\n  merge job " + merge_fault +
               ": only if a task fails; it names the missing shards and the sbatch line that re-runs them (log: " +
               std::string(logs_folder) + "/merge-" + merge_fault + ".out)\nFollow them: squeue -j " + array + "," +
               merge_ok + "," + merge_fault + "\n");
  return 0;
}

}  // namespace hbmscope::cli
