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
#include <memory>
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

// A temporary file that removes itself.
struct TempFile {
  std::string path;
  explicit TempFile(std::string tmpl) : path(std::move(tmpl)) {
    const int fd = ::mkstemp(path.data());
    if (fd < 0) throw Error("--plot: cannot create a temporary file '" + path + "': " + std::strerror(errno));
    ::close(fd);
  }
  ~TempFile() { ::unlink(path.c_str()); }
};

}  // namespace

std::string gnuplot_or_throw() {
  const std::string g = find_in_path("gnuplot");
  if (g.empty())
    throw Error("--plot: gnuplot is not on the PATH (Debian: apt-get install gnuplot-nox, or run "
                "scripts/install-deps.sh)");
  return g;
}

Plot::Plot(const Report& report, const std::string& target) : target_(target) {
  try {
    make(report);
  } catch (...) {
    if (!image_.empty()) ::unlink(image_.c_str());
    throw;
  }
}

void Plot::make(const Report& report) {
  const std::string& target = target_;
  const PlotTerminal term = plot_terminal_for(target);
  const std::string gnuplot = gnuplot_or_throw();

  // The image's temporary file, next to the target: creating it is the check
  // that the folder exists and takes files.
  namespace fs = std::filesystem;
  std::unique_ptr<TempFile> chart;
  if (term != PlotTerminal::dumb) {
    image_ = temp_template_for(fs::path(target));
    const int fd = ::mkstemp(image_.data());
    if (fd < 0) {
      const int err = errno;
      image_.clear();
      throw Error("--plot: cannot write '" + target + "': " + std::strerror(err));
    }
    ::close(fd);
  } else {
    chart = std::make_unique<TempFile>("/tmp/hbmscope-plot-out-XXXXXX");
  }
  const std::string out = chart ? chart->path : image_;
  TempFile script("/tmp/hbmscope-plot-XXXXXX");
  TempFile errors("/tmp/hbmscope-plot-err-XXXXXX");
  {
    std::ofstream f(script.path);
    // No file name in the script: gnuplot draws to its stdout, which is the image.
    f << gnuplot_script(report, term, std::string());
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
    throw Error("--plot: gnuplot wrote nothing" + (chart ? std::string() : " to " + target));
  if (chart) {
    std::ifstream in(chart->path, std::ios::binary);
    text_.assign(std::istreambuf_iterator<char>(in), {});
  }
}

Plot::~Plot() {
  if (!image_.empty()) ::unlink(image_.c_str());
}

void Plot::install() {
  if (image_.empty()) return;
  ::chmod(image_.c_str(), 0644);
  if (std::rename(image_.c_str(), target_.c_str()) != 0)
    throw Error("--plot: cannot write '" + target_ + "': " + std::strerror(errno));
  image_.clear();
}

}  // namespace hbmscope::cli
