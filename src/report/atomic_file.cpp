// Report files are written whole or not at all: a temporary file in the same
// folder, then a rename. An interrupt removes the temporary file too.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>

#include "hbmscope/error.hpp"
#include "hbmscope/printers.hpp"

namespace hbmscope {

namespace {

// The temporary file in flight, for the signal handler (which may only use
// async-signal-safe calls: unlink, signal, raise).
char pending_path[4096];
volatile std::sig_atomic_t pending = 0;

extern "C" void remove_pending_and_reraise(int sig) {
  if (pending) ::unlink(pending_path);
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

// Installs the handler for the lifetime of one write, then restores the old.
class InterruptGuard {
 public:
  explicit InterruptGuard(const std::string& tmp) {
    if (tmp.size() >= sizeof pending_path) return;  // too long to register: no cleanup
    std::memcpy(pending_path, tmp.c_str(), tmp.size() + 1);
    struct sigaction sa {};
    sa.sa_handler = remove_pending_and_reraise;
    sigemptyset(&sa.sa_mask);
    for (std::size_t i = 0; i < std::size(signals_); ++i) ::sigaction(signals_[i], &sa, &old_[i]);
    pending = 1;
    active_ = true;
  }
  InterruptGuard(const InterruptGuard&) = delete;
  InterruptGuard& operator=(const InterruptGuard&) = delete;
  ~InterruptGuard() {
    if (!active_) return;
    pending = 0;
    for (std::size_t i = 0; i < std::size(signals_); ++i) ::sigaction(signals_[i], &old_[i], nullptr);
  }

 private:
  static constexpr int signals_[3] = {SIGINT, SIGTERM, SIGHUP};
  struct sigaction old_[3] {};
  bool active_ = false;
};

// Beyond the file size limit (ulimit -f) a write fails with EFBIG, handled as
// any write error, instead of SIGXFSZ ending the process and leaving the
// temporary file behind.
class IgnoreFileSizeSignal {
 public:
  IgnoreFileSizeSignal() {
    struct sigaction sa {};
    sa.sa_handler = SIG_IGN;
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGXFSZ, &sa, &old_);
  }
  IgnoreFileSizeSignal(const IgnoreFileSizeSignal&) = delete;
  IgnoreFileSizeSignal& operator=(const IgnoreFileSizeSignal&) = delete;
  ~IgnoreFileSizeSignal() { ::sigaction(SIGXFSZ, &old_, nullptr); }

 private:
  struct sigaction old_ {};
};

// False with errno set when a write fails.
bool write_all(int fd, std::string_view content) {
  std::size_t done = 0;
  while (done < content.size()) {
    const ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    done += static_cast<std::size_t>(n);
  }
  return true;
}

// The path a chain of symbolic links ends at (existing or not), so that the
// report replaces the file the link names and the link stays a link.
std::filesystem::path resolve_links(std::filesystem::path p) {
  namespace fs = std::filesystem;
  for (int hops = 0; hops < 40; ++hops) {
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return p;
    std::error_code ec;
    const fs::path target = fs::read_symlink(p, ec);
    if (ec) throw Error("cannot write '" + p.string() + "': " + ec.message());
    p = target.is_absolute() ? target : p.parent_path() / target;
  }
  throw Error("cannot write '" + p.string() + "': " + std::strerror(ELOOP));
}

}  // namespace

std::string temp_template_for(const std::filesystem::path& target) {
  const std::filesystem::path dir = target.has_parent_path() ? target.parent_path() : std::filesystem::path(".");
  constexpr std::size_t max_name = 255, extra = 1 + 11;  // "." + ".tmp-XXXXXX"
  std::string name = target.filename().string();
  if (name.size() > max_name - extra) name.resize(max_name - extra);
  return (dir / ("." + name + ".tmp-XXXXXX")).string();
}

void write_file_atomic(const std::filesystem::path& given, std::string_view content,
                       const std::function<void()>& before_rename) {
  namespace fs = std::filesystem;
  const IgnoreFileSizeSignal no_sigxfsz;
  const fs::path path = resolve_links(given);
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    if (S_ISDIR(st.st_mode)) throw Error("cannot write '" + given.string() + "': it is a directory");
    if (!S_ISCHR(st.st_mode) && !S_ISFIFO(st.st_mode))
      throw Error("cannot write '" + given.string() +
                  "': not a regular file, character device or FIFO");
    // A device or FIFO is written in place: a rename would replace it by a file.
    const int fd = ::open(path.c_str(), O_WRONLY | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) throw Error("cannot write '" + given.string() + "': " + std::strerror(errno));
    if (!write_all(fd, content)) {
      const int err = errno;
      ::close(fd);
      throw Error("cannot write '" + given.string() + "': write: " + std::strerror(err));
    }
    if (::close(fd) != 0)
      throw Error("cannot write '" + given.string() + "': close: " + std::strerror(errno));
    return;
  }
  std::string tmpl = temp_template_for(path);
  const int fd = ::mkstemp(tmpl.data());
  if (fd < 0) throw Error("cannot write '" + given.string() + "': " + std::strerror(errno));
  const InterruptGuard guard(tmpl);
  auto fail = [&](const char* what) {
    const int err = errno;
    ::close(fd);
    ::unlink(tmpl.c_str());
    throw Error("cannot write '" + given.string() + "': " + what + ": " + std::strerror(err));
  };
  if (!write_all(fd, content)) fail("write");
  if (::fchmod(fd, 0644) != 0) fail("chmod");
  if (::fsync(fd) != 0) fail("fsync");
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmpl.c_str());
    throw Error("cannot write '" + given.string() + "': close: " + std::strerror(err));
  }
  if (before_rename) before_rename();
  if (std::rename(tmpl.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmpl.c_str());
    throw Error("cannot write '" + given.string() + "': rename: " + std::strerror(err));
  }
}

}  // namespace hbmscope
