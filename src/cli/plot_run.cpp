#include "plot_run.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <sstream>

#include "hbmscope/error.hpp"
#include "hbmscope/plot.hpp"
#include "hbmscope/printers.hpp"

extern char** environ;

namespace hbmscope::cli {

namespace {

std::string find_in_path(const std::string& exe) {
  const char* path = std::getenv("PATH");
  if (!path) return {};
  std::string p(path);
  std::size_t pos = 0;
  while (pos <= p.size()) {
    const std::size_t colon = std::min(p.find(':', pos), p.size());
    std::string cand = colon > pos ? p.substr(pos, colon - pos) : std::string(1, '.');
    cand += '/';
    cand += exe;
    if (::access(cand.c_str(), X_OK) == 0) return cand;
    pos = colon + 1;
  }
  return {};
}

// A temporary file that removes itself, also when a signal ends the process
// while gnuplot runs.
struct TempFile {
  std::string path;
  std::optional<RemoveOnSignal> guard;
  explicit TempFile(std::string tmpl) : path(std::move(tmpl)) {
    const int fd = ::mkstemp(path.data());
    if (fd < 0) throw Error("--plot: cannot create a temporary file '" + path + "': " + std::strerror(errno));
    guard.emplace(path);
    ::close(fd);
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  ~TempFile() {
    ::unlink(path.c_str());
    guard.reset();
  }
};

}  // namespace

std::string gnuplot_or_throw() {
  const std::string g = find_in_path("gnuplot");
  if (g.empty())
    throw Error("--plot: gnuplot is not on the PATH (Debian: apt-get install gnuplot-nox, or run "
                "scripts/install-deps.sh)");
  return g;
}

Plot::Plot(const Report& report, const std::string& target)
    : Plot(target, [&](PlotTerminal t) { return gnuplot_script(report, t); }) {}

Plot::Plot(const std::string& target, const std::function<std::string(PlotTerminal)>& make_script) {
  const PlotTerminal term = plot_terminal_for(target);
  const std::string gnuplot = gnuplot_or_throw();

  // The target is checked, and its temporary file made beside it, before
  // gnuplot runs: the same rules as --output (links followed, a device or
  // FIFO written in place, a directory refused).
  if (term != PlotTerminal::dumb) file_.emplace(target, "--plot: ");
  // gnuplot draws into a private file; install() copies that to the target.
  TempFile chart("/tmp/hbmscope-plot-out-XXXXXX");
  const std::string& out = chart.path;
  TempFile script("/tmp/hbmscope-plot-XXXXXX");
  TempFile errors("/tmp/hbmscope-plot-err-XXXXXX");
  {
    std::ofstream f(script.path);
    // No file name in the script: gnuplot draws to its stdout, which is the image.
    f << make_script(term);
    if (!f) throw Error("--plot: cannot write the gnuplot script " + script.path);
  }

  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, out.c_str(), O_WRONLY | O_TRUNC, 0);
  posix_spawn_file_actions_addopen(&fa, 2, errors.path.c_str(), O_WRONLY | O_TRUNC, 0);
  std::string a0 = "gnuplot", a1 = script.path;
  char* argv[] = {a0.data(), a1.data(), nullptr};
  pid_t pid = 0;
  const int rc = ::posix_spawn(&pid, gnuplot.c_str(), &fa, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) throw Error("--plot: cannot run " + gnuplot + ": " + std::strerror(rc));
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::ifstream e(errors.path);
    std::string line, first;
    while (std::getline(e, line))
      if (line.find_first_not_of(" \t^") != std::string::npos) first = line;  // last non-empty line
    throw Error("--plot: gnuplot failed" + (first.empty() ? std::string() : ": " + first));
  }
  struct stat st {};
  if (::stat(out.c_str(), &st) != 0 || st.st_size == 0)
    throw Error("--plot: gnuplot wrote nothing" + (file_ ? " for " + target : std::string()));
  std::ifstream in(chart.path, std::ios::binary);
  std::string& content = file_ ? image_ : text_;
  content.assign(std::istreambuf_iterator<char>(in), {});
}

void Plot::install() {
  write();
  publish();
}

void Plot::write() {
  if (file_) file_->write(image_);
}

void Plot::publish() {
  if (!file_) return;
  file_->publish();
  file_.reset();
}

}  // namespace hbmscope::cli
