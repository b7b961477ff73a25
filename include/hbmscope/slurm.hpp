#pragma once
// `hbmscope submit`: a sweep as Slurm jobs. An array of N tasks, task I
// running `sweep --shard I/N` into DIR/shard-I.json, and a merge job that joins
// the shards once all of them have succeeded (a second one, after any failure,
// runs the same merge, which then names the missing shards and the sbatch line
// that re-runs them). DIR/manifest.json records which sweep the folder's
// shards are of. Here: the scripts, the manifest and the messages, as text;
// the command line (src/cli/submit_command.cpp) writes and submits them.
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "hbmscope/shape.hpp"

namespace hbmscope {

// The two jobs of a submitted sweep.
struct SlurmJobs {
  std::uint64_t tasks = 0;  // N: the array's tasks, the sweep's shards
  std::string dir;          // the output folder, absolute
  std::string workdir;      // where the sweep's relative paths resolve (submit's), absolute
  std::string program;      // the hbmscope that the jobs run, absolute
  std::vector<std::string> sweep_args;  // each task's `sweep` options, verbatim
  std::vector<std::string> merge_args;  // the report options, for `merge --from DIR`
  std::string job_name = "hbmscope";    // the array's; the merge's is NAME-merge
  std::optional<std::string> partition, account, time;
  bool gpu = false;                     // --measure: --gres=gpu:1, a GPU of its own per task
  std::optional<std::string> gpu_type;  // --gres=gpu:TYPE:1
  std::vector<std::string> sbatch;       // extra #SBATCH options of both scripts ("--mem=8G")
  std::vector<std::string> task_sbatch;  // of the array's only
};

// The folder's files.
inline constexpr std::string_view manifest_file = "manifest.json";
inline constexpr std::string_view tasks_script_file = "tasks.sbatch";
inline constexpr std::string_view merge_script_file = "merge.sbatch";
inline constexpr std::string_view logs_folder = "logs";
std::string shard_file(std::uint64_t index);  // "shard-7.json"
// The index of a shard file's name ("shard-7.json" -> 7), nullopt for any
// other name (leading zeros included).
std::optional<std::uint64_t> shard_file_index(std::string_view name);

// The most tasks one submission makes (Slurm's own MaxArraySize is 1001 by
// default; sites raise it to 4 M at most).
inline constexpr std::uint64_t max_slurm_tasks = 4'000'000;

// An option of `sbatch` as a #SBATCH line takes it: "mem=8G" and "--mem=8G"
// both give "--mem=8G". UsageError naming `option` for one that could break
// the script (a control character; '#', which starts a comment there) or that
// submit sets itself (--array, --output, --dependency, --partition ...: the
// message names the option of submit to use instead).
std::string sbatch_line(std::string_view text, const char* option);

// Refuses (UsageError, one line naming the option) a partition, account, GPU
// type or job name with characters Slurm does not use in names, a --time that
// is not one of Slurm's forms (MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM,
// D-HH:MM:SS, UNLIMITED), a folder whose path a #SBATCH line cannot carry
// (whitespace, quotes, '\', '#', '%'), and a task count out of range.
void check_slurm_jobs(const SlurmJobs& jobs);

// The batch scripts. Every user value in the shell part is a single-quoted
// word (shell_quote); in #SBATCH lines only checked values appear.
std::string task_script(const SlurmJobs& jobs);
std::string merge_script(const SlurmJobs& jobs);

// One word for a POSIX shell: as it is when it holds only [A-Za-z0-9_./:,+@%-],
// else in single quotes with each ' as '\''.
std::string shell_quote(std::string_view word);

// The one line (an Error's text) of a merge whose shards are not all there:
// how many of N, which, and the command that re-runs just those tasks and
// then the merge.
std::string missing_shards_message(const std::string& dir, std::uint64_t tasks,
                                   const std::set<std::uint64_t>& have);

// DIR/manifest.json: schema "hbmscope.submit/1".
struct SubmitManifest {
  std::uint64_t tasks = 0;
  std::uint64_t total_rows = 0;
  std::string identity;                 // sweep_identity
  std::vector<std::string> sweep_args;  // as SlurmJobs
  std::string workdir, program;
};
inline constexpr std::string_view submit_manifest_schema = "hbmscope.submit/1";
std::string manifest_json(const SubmitManifest& m);
// Checked as every input (src/config/submit_manifest.cpp): Error naming the
// file and key on anything malformed.
SubmitManifest read_submit_manifest(const std::string& path);

// What makes two submissions the same sweep: the tasks' options, the task
// count, the row count and the label and shape of every row (of identity_rows
// evenly spaced rows, the first and last among them, in a longer sweep) as the
// sweep expands them: a config file edited between two submissions is another
// sweep. 64-bit FNV-1a, as 16 hex digits: a fingerprint against mistakes, not
// against forgery.
inline constexpr std::size_t identity_rows = 4096;
std::string sweep_identity(const std::vector<std::string>& sweep_args, std::uint64_t tasks,
                           const std::vector<Shape>& shapes, const std::vector<std::string>& labels);

}  // namespace hbmscope
