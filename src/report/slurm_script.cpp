// `hbmscope submit`'s batch scripts, manifest and messages, as text (docs in
// include/hbmscope/slurm.hpp; the manifest's reader is src/config/submit_manifest.cpp).
#include <algorithm>
#include <charconv>
#include <cstdio>
#include <string>

#include "hbmscope/error.hpp"
#include "hbmscope/json_report.hpp"
#include "hbmscope/shard.hpp"
#include "hbmscope/slurm.hpp"
#include "json_check.hpp"

namespace hbmscope {

namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_char(char c) {
  return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '.' || c == '+' ||
         c == '-';
}

bool all_digits(std::string_view s, std::size_t max = 9) {
  return !s.empty() && s.size() <= max && std::all_of(s.begin(), s.end(), is_digit);
}

// Slurm's time limit forms: MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS.
bool slurm_time(std::string_view t) {
  if (t == "UNLIMITED" || t == "INFINITE") return true;
  const std::size_t dash = t.find('-');
  if (dash != std::string_view::npos) {
    if (!all_digits(t.substr(0, dash))) return false;
    t = t.substr(dash + 1);
  }
  int fields = 0;
  for (;;) {
    const std::size_t colon = t.find(':');
    if (!all_digits(t.substr(0, colon))) return false;
    ++fields;
    if (colon == std::string_view::npos) break;
    t = t.substr(colon + 1);
  }
  return fields <= 3;
}

void check_name(const std::optional<std::string>& v, const char* option, bool list = false) {
  if (!v) return;
  const bool ok = !v->empty() && std::all_of(v->begin(), v->end(), [&](char c) {
    return is_name_char(c) || (list && c == ',');
  });
  if (!ok)
    throw UsageError(std::string(option) + ": '" + *v + "' is not a Slurm name (letters, digits, _ . + -" +
                     (list ? ", names separated by commas)" : ")"));
}

struct Owned {
  const char* long_name;
  char short_name;
  const char* instead;
};
// The options submit writes itself, and what to use instead.
constexpr Owned owned_options[] = {
    {"array", 'a', "submit makes the array from --tasks"},
    {"output", 'o', "the logs go to DIR/logs"},
    {"error", 'e', "the logs go to DIR/logs"},
    {"chdir", 'D', "the jobs run in the folder submit was run in"},
    {"dependency", 'd', "submit makes the merge depend on the array"},
    {"kill-on-invalid-dep", 0, "submit sets it on the merge jobs"},
    {"job-name", 'J', "use --job-name"},
    {"partition", 'p', "use --partition"},
    {"account", 'A', "use --account"},
    {"time", 't', "use --time"},
    {"ntasks", 'n', "each task is one process"},
    {"parsable", 0, "submit reads the job ids itself"},
    {"wait", 'W', "submit returns once the jobs are queued"},
    {"wrap", 0, "the jobs run the scripts submit writes"},
    {"gres", 0, "with --measure each task gets --gres=gpu:1 (--gpu-type names the kind)"},
    {"gpus", 'G', "with --measure each task gets --gres=gpu:1 (--gpu-type names the kind)"},
    {"gpus-per-task", 0, "with --measure each task gets --gres=gpu:1 (--gpu-type names the kind)"},
    {"gpus-per-node", 0, "with --measure each task gets --gres=gpu:1 (--gpu-type names the kind)"},
};

void append_line(std::string& s, std::string_view line) {
  s += line;
  s += '\n';
}

// The #SBATCH lines both scripts share after their own.
void scheduler_lines(std::string& s, const SlurmJobs& j) {
  if (j.partition) append_line(s, "#SBATCH --partition=" + *j.partition);
  if (j.account) append_line(s, "#SBATCH --account=" + *j.account);
  if (j.time) append_line(s, "#SBATCH --time=" + *j.time);
}

std::string command_line(const std::vector<std::string>& words) {
  std::string s;
  for (const auto& w : words) {
    s += ' ';
    s += shell_quote(w);
  }
  return s;
}

std::string path_in(const std::string& dir, std::string_view name) { return dir + "/" + std::string(name); }

}  // namespace

std::string shard_file(std::uint64_t index) { return "shard-" + std::to_string(index) + ".json"; }

std::optional<std::uint64_t> shard_file_index(std::string_view name) {
  constexpr std::string_view head = "shard-", tail = ".json";
  if (name.size() <= head.size() + tail.size() || name.substr(0, head.size()) != head ||
      name.substr(name.size() - tail.size()) != tail)
    return std::nullopt;
  const std::string_view digits = name.substr(head.size(), name.size() - head.size() - tail.size());
  std::uint64_t i = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), i);
  if (!all_digits(digits, 20) || digits[0] == '0' || ec != std::errc() || end != digits.data() + digits.size())
    return std::nullopt;
  return i;
}

std::string sbatch_line(std::string_view text, const char* option) {
  const std::string given(text);
  const auto refuse = [&](const std::string& why) {
    throw UsageError(std::string(option) + ": '" + json_check::printable(given) + "' " + why);
  };
  if (json_check::has_control(text)) refuse("holds a control character, which would end the #SBATCH line");
  if (text.find('#') != std::string_view::npos) refuse("holds '#', which starts a comment in a #SBATCH line");
  std::string line = text.rfind('-', 0) == 0 ? given : "--" + given;
  std::string name;
  char letter = 0;
  if (line.rfind("--", 0) == 0) {
    name = line.substr(2, line.find_first_of("= ") - 2);
    if (name.empty() || !std::all_of(name.begin(), name.end(), [](char c) {
          return is_digit(c) || (c >= 'a' && c <= 'z') || c == '-';
        }))
      refuse("is not an sbatch option (e.g. mem=8G, --qos=high, --constraint=h100)");
  } else {
    letter = line.size() > 1 ? line[1] : 0;
    if (!((letter >= 'a' && letter <= 'z') || (letter >= 'A' && letter <= 'Z')))
      refuse("is not an sbatch option (e.g. mem=8G, --qos=high, -N 1)");
  }
  for (const Owned& o : owned_options)
    if ((!name.empty() && name == o.long_name) || (letter && letter == o.short_name))
      refuse(std::string("is set by submit: ") + o.instead);
  return line;
}

void check_slurm_jobs(const SlurmJobs& j) {
  if (j.tasks < 1 || j.tasks > max_slurm_tasks)
    throw UsageError("--tasks: " + std::to_string(j.tasks) + " is not from 1 to " + std::to_string(max_slurm_tasks));
  check_name(j.partition, "--partition", true);
  check_name(j.account, "--account");
  check_name(j.gpu_type, "--gpu-type");
  check_name(j.job_name, "--job-name");
  if (j.time && !slurm_time(*j.time))
    throw UsageError("--time: '" + json_check::printable(*j.time) +
                     "' is not a Slurm time limit (MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS or UNLIMITED)");
  if (j.gpu_type && !j.gpu) throw UsageError("--gpu-type: needs --measure among the sweep's options (a GPU for what?)");
  const auto bad = std::find_if(j.dir.begin(), j.dir.end(), [](char c) {
    return static_cast<unsigned char>(c) < 0x20 || c == 0x7f || c == ' ' || c == '\t' || c == '"' || c == '\'' ||
           c == '\\' || c == '#' || c == '%';
  });
  if (j.dir.empty() || j.dir[0] != '/' || bad != j.dir.end())
    throw UsageError("--dir: '" + json_check::printable(j.dir) +
                     "' holds a character that a #SBATCH line cannot carry (whitespace, quotes, \\, #, %); "
                     "give another folder");
}

std::string shell_quote(std::string_view w) {
  const bool plain = !w.empty() && std::all_of(w.begin(), w.end(), [](char c) {
    return is_name_char(c) || c == '/' || c == ':' || c == ',' || c == '@' || c == '%';
  });
  if (plain) return std::string(w);
  std::string s = "'";
  for (char c : w) s += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return s + "'";
}

std::string task_script(const SlurmJobs& j) {
  const std::string n = std::to_string(j.tasks);
  std::string s;
  append_line(s, "#!/bin/bash");
  append_line(s, "# Written by `hbmscope submit`: task I of this array runs shard I/" + n +
                     " of the sweep below and writes it to");
  append_line(s, "# shard-I.json in this folder (whole or not at all: a temporary file, renamed when");
  append_line(s, "# complete); merge.sbatch joins the shards. Re-run some tasks: sbatch --array=2,5 tasks.sbatch");
  append_line(s, "#SBATCH --job-name=" + j.job_name);
  append_line(s, "#SBATCH --array=1-" + n);
  append_line(s, "#SBATCH --chdir=" + j.dir);
  append_line(s, "#SBATCH --output=" + std::string(logs_folder) + "/task-%A_%a.out");
  append_line(s, "#SBATCH --ntasks=1");
  scheduler_lines(s, j);
  // A GPU of its own: Slurm hands a GPU GRES to one job at a time.
  if (j.gpu) append_line(s, "#SBATCH --gres=gpu:" + (j.gpu_type ? *j.gpu_type + ":" : std::string()) + "1");
  for (const auto& l : j.sbatch) append_line(s, "#SBATCH " + l);
  for (const auto& l : j.task_sbatch) append_line(s, "#SBATCH " + l);
  append_line(s, "set -eu");
  append_line(s, "i=${SLURM_ARRAY_TASK_ID:-}");
  append_line(s, "case $i in");
  append_line(s, "  '' | *[!0-9]*)");
  append_line(s, "    echo \"hbmscope: error: tasks.sbatch: SLURM_ARRAY_TASK_ID='$i' is not a task of an array "
                 "numbered 1-" + n + " (submit with sbatch --array=1-" + n + ")\" >&2");
  append_line(s, "    exit 2 ;;");
  append_line(s, "esac");
  append_line(s, "cd -- " + shell_quote(j.workdir));
  append_line(s, "exec " + shell_quote(j.program) + " sweep" + command_line(j.sweep_args) + " --shard \"$i/" + n +
                     "\" --format json --output " + shell_quote(j.dir + "/") + "\"shard-$i.json\"");
  return s;
}

std::string merge_script(const SlurmJobs& j) {
  const std::string n = std::to_string(j.tasks);
  std::string s;
  append_line(s, "#!/bin/bash");
  append_line(s, "# Written by `hbmscope submit`: joins the " + n +
                     " shards of tasks.sbatch in this folder into the report; if some are");
  append_line(s, "# missing it fails with one line naming them and the sbatch line that re-runs just them.");
  append_line(s, "#SBATCH --job-name=" + j.job_name + "-merge");
  append_line(s, "#SBATCH --chdir=" + j.dir);
  append_line(s, "#SBATCH --output=" + std::string(logs_folder) + "/merge-%j.out");
  append_line(s, "#SBATCH --ntasks=1");
  scheduler_lines(s, j);
  for (const auto& l : j.sbatch) append_line(s, "#SBATCH " + l);
  append_line(s, "set -eu");
  append_line(s, "cd -- " + shell_quote(j.workdir));
  append_line(s, "exec " + shell_quote(j.program) + " merge --from " + shell_quote(j.dir) + command_line(j.merge_args));
  return s;
}

std::string missing_shards_message(const std::string& dir, std::uint64_t tasks, const std::set<std::uint64_t>& have) {
  const auto ranges = missing_ranges(have, tasks);
  std::uint64_t missing = 0;
  for (const auto& [a, b] : ranges) missing += b - a + 1;
  return "merge: " + std::to_string(missing) + " of " + std::to_string(tasks) + " shards missing in " + dir + " (" +
         format_ranges(ranges, ", ") + "): their tasks failed, were killed or have not run (logs in " +
         path_in(dir, logs_folder) + "); re-run just them, then the merge: j=$(sbatch --parsable --array=" +
         format_ranges(ranges) + " " + shell_quote(path_in(dir, tasks_script_file)) +
         ") && sbatch --dependency=afterok:${j%%;*} --kill-on-invalid-dep=yes " +
         shell_quote(path_in(dir, merge_script_file));
}

std::string manifest_json(const SubmitManifest& m) {
  nlohmann::ordered_json j;
  j["schema"] = submit_manifest_schema;
  j["identity"] = m.identity;
  j["tasks"] = m.tasks;
  j["total_rows"] = m.total_rows;
  j["sweep"] = m.sweep_args;
  j["workdir"] = m.workdir;
  j["program"] = m.program;
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

std::string sweep_identity(const std::vector<std::string>& sweep_args, std::uint64_t tasks,
                           const std::vector<Shape>& shapes, const std::vector<std::string>& labels) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  const auto add = [&](std::string_view s) {
    for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
    h = (h ^ 0xffu) * 0x100000001b3ull;  // a separator no UTF-8 text holds
  };
  for (const auto& a : sweep_args) add(a);
  add("tasks=" + std::to_string(tasks));
  add("rows=" + std::to_string(shapes.size()));
  // Up to identity_rows rows, evenly spaced: a sweep of 4 M shapes is
  // fingerprinted in milliseconds, not the minute every row would take.
  const std::size_t n = shapes.size(), k = std::min<std::size_t>(n, identity_rows);
  for (std::size_t j = 0; j < k; ++j) {
    const std::size_t i = k < 2 ? 0 : j * (n - 1) / (k - 1);
    add(i < labels.size() ? labels[i] : std::string());
    add(shape_to_json(shapes[i]).dump());
  }
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(h));
  return text;
}

}  // namespace hbmscope
