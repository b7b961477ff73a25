#include "plot_run.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <sstream>
#include <thread>

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

// A scratch file for gnuplot's script, image and errors: unnamed (O_TMPFILE)
// where /tmp allows, so that no kill leaves it behind; else a named file that
// removes itself, also when a signal ends the process while gnuplot runs.
struct ScratchFile {
  int fd = -1;
  std::string path;  // empty for an unnamed file
  std::optional<RemoveOnSignal> guard;
  explicit ScratchFile(const char* tmpl) {
#ifdef O_TMPFILE
    fd = ::open("/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd >= 0) return;
#endif
    path = tmpl;
    fd = ::mkstemp(path.data());
    if (fd < 0) throw Error("--plot: cannot create a temporary file '" + path + "': " + std::strerror(errno));
    guard.emplace(path);
  }
  ScratchFile(const ScratchFile&) = delete;
  ScratchFile& operator=(const ScratchFile&) = delete;
  ~ScratchFile() {
    ::close(fd);
    if (!path.empty()) ::unlink(path.c_str());
    guard.reset();
  }
  void put(const std::string& text) const {
    for (std::size_t done = 0; done < text.size();) {
      const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) throw Error(std::string("--plot: cannot write the gnuplot script: ") + std::strerror(errno));
      done += static_cast<std::size_t>(n);
    }
    ::lseek(fd, 0, SEEK_SET);
  }
  std::string content() const {
    std::string out;
    char buf[1 << 16];
    for (off_t at = 0;;) {
      const ssize_t n = ::pread(fd, buf, sizeof buf, at);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return out;
      out.append(buf, static_cast<std::size_t>(n));
      at += n;
    }
  }
};

// gnuplot's time limit: HBMSCOPE_GNUPLOT_TIMEOUT seconds (default 60).
unsigned gnuplot_time_limit() {
  const char* v = std::getenv("HBMSCOPE_GNUPLOT_TIMEOUT");
  if (!v || !*v) return 60;
  char* end = nullptr;
  const unsigned long n = std::strtoul(v, &end, 10);
  if (*end != '\0' || n == 0 || n > 86400)
    throw Error("HBMSCOPE_GNUPLOT_TIMEOUT: '" + std::string(v) + "' is not a number of seconds from 1 to 86400");
  return static_cast<unsigned>(n);
}

// Waits for pid up to `limit` seconds; false when it ran past it (it is then
// killed and reaped).
bool wait_within(pid_t pid, int& status, unsigned limit) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(limit);
  for (;;) {
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) return true;
    if (r < 0 && errno != EINTR) return true;  // not ours any more: nothing to wait for
    if (std::chrono::steady_clock::now() >= until) {
      ::kill(pid, SIGKILL);
      while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

}  // namespace

std::string gnuplot_or_throw() {
  const std::string g = find_in_path("gnuplot");
  if (g.empty())
    throw Error("--plot: gnuplot is not on the PATH (Debian: apt-get install gnuplot-nox, or run "
                "scripts/install-deps.sh)");
  return g;
}

Plot::Plot(const Report& report, const std::string& target, const PlotOptions& options)
    : Plot(target, [&](PlotTerminal t) { return gnuplot_script(report, t, options); }) {}

Plot::Plot(const std::string& target, const std::function<std::string(PlotTerminal)>& make_script) {
  const PlotTerminal term = plot_terminal_for(target);
  const std::string gnuplot = gnuplot_or_throw();

  // The target is checked, and its temporary file made beside it, before
  // gnuplot runs: the same rules as --output (links followed, a device or
  // FIFO written in place, a directory refused).
  if (term != PlotTerminal::dumb) file_.emplace(target, "--plot: ");
  // gnuplot reads the script on its stdin and draws to its stdout, both
  // private files; install() copies the image to the target.
  const unsigned limit = gnuplot_time_limit();
  const ScratchFile script("/tmp/hbmscope-plot-XXXXXX");
  const ScratchFile chart("/tmp/hbmscope-plot-out-XXXXXX");
  const ScratchFile errors("/tmp/hbmscope-plot-err-XXXXXX");
  // No file name in the script: gnuplot draws to its stdout, which is the image.
  script.put(make_script(term));

  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, script.fd, 0);
  posix_spawn_file_actions_adddup2(&fa, chart.fd, 1);
  posix_spawn_file_actions_adddup2(&fa, errors.fd, 2);
  std::string a0 = "gnuplot";
  char* argv[] = {a0.data(), nullptr};
  pid_t pid = 0;
  const int rc = ::posix_spawn(&pid, gnuplot.c_str(), &fa, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) throw Error("--plot: cannot run " + gnuplot + ": " + std::strerror(rc));
  int status = 0;
  if (!wait_within(pid, status, limit))
    throw Error("--plot: gnuplot did not finish within " + std::to_string(limit) +
                " s (HBMSCOPE_GNUPLOT_TIMEOUT); plot fewer shapes or series");
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::istringstream e(errors.content());
    std::string line, first;
    while (std::getline(e, line))
      if (line.find_first_not_of(" \t^") != std::string::npos) first = line;  // last non-empty line
    throw Error("--plot: gnuplot failed" + (first.empty() ? std::string() : ": " + first));
  }
  std::string& content = file_ ? image_ : text_;
  content = chart.content();
  if (content.empty()) throw Error("--plot: gnuplot wrote nothing" + (file_ ? " for " + target : std::string()));
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
