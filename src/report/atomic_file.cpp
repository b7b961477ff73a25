// Report and plot files are written whole or not at all: a temporary file in
// the same folder, then a rename. Where the file system has O_TMPFILE the
// temporary file has no name until it is complete (linked to a unique name,
// then renamed over the target), so that even SIGKILL leaves nothing behind;
// elsewhere it is a named file, removed on an interrupt.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <tuple>

#include "hbmscope/error.hpp"
#include "hbmscope/printers.hpp"

namespace hbmscope {

namespace {

// The temporary files in flight (a report and a plot can be pending at once),
// for the signal handler, which may only use async-signal-safe calls (unlink,
// signal, raise).
constexpr int max_pending = 8;
char pending_path[max_pending][4096];
volatile std::sig_atomic_t pending[max_pending] = {};

extern "C" void remove_pending_and_reraise(int sig) {
  for (int i = 0; i < max_pending; ++i)
    if (pending[i]) ::unlink(pending_path[i]);
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

// SIGQUIT too: it ends the process as SIGTERM does (with a core dump).
constexpr int guarded_signals[4] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
struct sigaction old_actions[4] {};
bool installed[4] = {};
int registered = 0;

// Registers tmp for removal on an interrupt, installing the handler with the
// first one; -1 when the path is too long or no slot is free (no cleanup then).
int register_pending(const std::string& tmp) {
  if (tmp.size() >= sizeof pending_path[0]) return -1;
  for (int i = 0; i < max_pending; ++i) {
    if (pending[i]) continue;
    std::memcpy(pending_path[i], tmp.c_str(), tmp.size() + 1);
    if (registered++ == 0) {
      struct sigaction sa {};
      sa.sa_handler = remove_pending_and_reraise;
      sigemptyset(&sa.sa_mask);
      // A signal the process ignores (SIGHUP under nohup) stays ignored:
      // replacing SIG_IGN by our handler would let it end the process.
      for (std::size_t k = 0; k < std::size(guarded_signals); ++k) {
        installed[k] = false;
        if (::sigaction(guarded_signals[k], nullptr, &old_actions[k]) != 0) continue;
        if (old_actions[k].sa_handler == SIG_IGN) continue;
        installed[k] = ::sigaction(guarded_signals[k], &sa, nullptr) == 0;
      }
    }
    pending[i] = 1;
    return i;
  }
  return -1;
}

// The handler goes with the last registration: the old one is restored.
void release_pending(int slot) {
  if (slot < 0) return;
  pending[slot] = 0;
  if (--registered == 0)
    for (std::size_t k = 0; k < std::size(guarded_signals); ++k)
      if (installed[k]) ::sigaction(guarded_signals[k], &old_actions[k], nullptr);
}

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
std::filesystem::path resolve_links(std::filesystem::path p, const std::string& prefix) {
  namespace fs = std::filesystem;
  for (int hops = 0; hops < 40; ++hops) {
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return p;
    std::error_code ec;
    const fs::path target = fs::read_symlink(p, ec);
    if (ec) throw Error(prefix + "cannot write '" + p.string() + "': " + ec.message());
    p = target.is_absolute() ? target : p.parent_path() / target;
  }
  throw Error(prefix + "cannot write '" + p.string() + "': " + std::strerror(ELOOP));
}

// The path to write (links followed) and whether it is written in place;
// Error when it cannot be written at all.
std::pair<std::filesystem::path, bool> examine(const std::filesystem::path& given, const std::string& prefix) {
  namespace fs = std::filesystem;
  const auto fail = [&](const std::string& why) {
    return Error(prefix + "cannot write '" + given.string() + "': " + why);
  };
  const fs::path path = resolve_links(given, prefix);
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    if (S_ISDIR(st.st_mode)) throw fail("it is a directory");
    if (!S_ISCHR(st.st_mode) && !S_ISFIFO(st.st_mode))
      throw fail("not a regular file, character device or FIFO");
    return {path, true};  // a rename would replace the device or FIFO by a file
  }
  // A new or regular file is renamed into place: its name must fit (the
  // temporary name is cut to fit, so only the rename would fail) and its
  // folder must take files.
  const fs::path dir = path.has_parent_path() ? path.parent_path() : fs::path(".");
  long name_max = ::pathconf(dir.c_str(), _PC_NAME_MAX);
  if (name_max <= 0) name_max = 255;
  if (path.filename().string().size() > static_cast<std::size_t>(name_max)) throw fail(std::strerror(ENAMETOOLONG));
  struct stat ds {};
  if (::stat(dir.c_str(), &ds) != 0) throw fail(std::strerror(errno));
  if (!S_ISDIR(ds.st_mode)) throw fail(std::strerror(ENOTDIR));
  if (::access(dir.c_str(), W_OK | X_OK) != 0) throw fail(std::strerror(errno));
  return {path, false};
}

// The mode of a new file: 0666 less the umask, as open(2) would give it.
mode_t new_file_mode() {
  const mode_t mask = ::umask(0);  // the only way to read it; set back at once
  ::umask(mask);
  return static_cast<mode_t>(0666 & ~mask);
}

// mkstemp template for a temporary file beside target: ".NAME.tmp-XXXXXX", NAME
// cut so that the whole stays within a file name's 255 bytes.
std::string temp_template_for(const std::filesystem::path& target) {
  const std::filesystem::path dir = target.has_parent_path() ? target.parent_path() : std::filesystem::path(".");
  constexpr std::size_t max_name = 255, extra = 1 + 11;  // "." + ".tmp-XXXXXX"
  std::string name = target.filename().string();
  if (name.size() > max_name - extra) name.resize(max_name - extra);
  return (dir / ("." + name + ".tmp-XXXXXX")).string();
}

}  // namespace

void check_write_target(const std::filesystem::path& target, const std::string& prefix) {
  (void)examine(target, prefix);
}

bool same_write_target(const std::filesystem::path& a, const std::filesystem::path& b) {
  namespace fs = std::filesystem;
  const auto key = [](const fs::path& p) {
    fs::path r = p;
    try {
      r = resolve_links(p, "");
    } catch (const Error&) {
    }
    std::error_code ec;
    const fs::path c = fs::weakly_canonical(r, ec);
    return ec ? fs::absolute(r, ec).lexically_normal() : c;
  };
  if (key(a) == key(b)) return true;
  struct stat sa {}, sb {};  // hard links: one file under two names
  return ::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0 && sa.st_dev == sb.st_dev &&
         sa.st_ino == sb.st_ino;
}

RemoveOnSignal::RemoveOnSignal(const std::string& path) : slot_(register_pending(path)) {}

RemoveOnSignal::~RemoveOnSignal() { release_pending(slot_); }

bool AtomicFile::unnamed_temporaries = true;

namespace {

// An unnamed file in dir (O_TMPFILE), or -1 where the file system or kernel
// has none (EOPNOTSUPP, EISDIR, EINVAL...): the caller falls back to a name.
int open_unnamed(const std::filesystem::path& dir) {
#ifdef O_TMPFILE
  return ::open(dir.c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);
#else
  (void)dir;
  return -1;
#endif
}

// A name for the finished unnamed file beside target: ".NAME.tmp-" and six
// letters (the named fallback's form), different at every call.
std::string link_name_for(const std::filesystem::path& target) {
  static std::uint64_t state = static_cast<std::uint64_t>(::getpid()) * 0x9e3779b97f4a7c15ull ^
                               static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  std::string name = temp_template_for(target);
  for (std::size_t i = name.size() - 6; i < name.size(); ++i) {
    state ^= state << 13, state ^= state >> 7, state ^= state << 17;
    name[i] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"[state % 62];
  }
  return name;
}

// Gives the unnamed file open on fd the name `name`; false (errno set) when
// it cannot (/proc not mounted and no CAP_DAC_READ_SEARCH, EEXIST...).
bool link_unnamed(int fd, const std::string& name) {
  const std::string proc = "/proc/self/fd/" + std::to_string(fd);
  if (::linkat(AT_FDCWD, proc.c_str(), AT_FDCWD, name.c_str(), AT_SYMLINK_FOLLOW) == 0) return true;
  if (errno == EEXIST) return false;
#ifdef AT_EMPTY_PATH
  if (::linkat(fd, "", AT_FDCWD, name.c_str(), AT_EMPTY_PATH) == 0) return true;
#endif
  return false;
}

// Copies what fd holds into fd_out (the last resort when it cannot be linked).
bool copy_all(int fd, int fd_out) {
  if (::lseek(fd, 0, SEEK_SET) != 0) return false;
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;
    if (n == 0) return true;
    if (!write_all(fd_out, std::string_view(buf, static_cast<std::size_t>(n)))) return false;
  }
}

}  // namespace

AtomicFile::AtomicFile(std::filesystem::path target, std::string prefix)
    : given_(std::move(target)), prefix_(std::move(prefix)) {
  std::tie(path_, in_place_) = examine(given_, prefix_);
  if (in_place_) return;  // opened at the first write: a FIFO would block until read
  if (unnamed_temporaries) {
    fd_ = open_unnamed(path_.has_parent_path() ? path_.parent_path() : std::filesystem::path("."));
    if (fd_ >= 0) {
      unnamed_ = true;
      return;
    }
  }
  tmp_ = temp_template_for(path_);
  fd_ = ::mkstemp(tmp_.data());
  if (fd_ < 0) {
    const int err = errno;
    tmp_.clear();
    throw Error(prefix_ + "cannot write '" + given_.string() + "': " + std::strerror(err));
  }
  slot_ = register_pending(tmp_);
}

AtomicFile::~AtomicFile() { discard(); }

void AtomicFile::discard() {
  if (fd_ >= 0) ::close(fd_);  // an unnamed file goes with its last descriptor
  fd_ = -1;
  if (!tmp_.empty()) ::unlink(tmp_.c_str());
  tmp_.clear();
  release_pending(slot_);
  slot_ = -1;
}

void AtomicFile::commit(std::string_view content, const std::function<void()>& before_rename) {
  write(content);
  if (before_rename) before_rename();
  publish();
}

void AtomicFile::fail(const char* what, int err) {
  discard();
  throw Error(prefix_ + "cannot write '" + given_.string() + "': " + what + ": " + std::strerror(err));
}

void AtomicFile::append(std::string_view content) {
  const IgnoreFileSizeSignal no_sigxfsz;
  if (written_) throw Error(prefix_ + "cannot write '" + given_.string() + "': written already");
  if (in_place_ && fd_ < 0) {
    fd_ = ::open(path_.c_str(), O_WRONLY | O_NOCTTY | O_CLOEXEC);
    if (fd_ < 0) throw Error(prefix_ + "cannot write '" + given_.string() + "': " + std::strerror(errno));
  }
  if (fd_ < 0) throw Error(prefix_ + "cannot write '" + given_.string() + "': discarded");
  if (!write_all(fd_, content)) fail("write", errno);
}

void AtomicFile::write(std::string_view content) {
  append(content);
  const IgnoreFileSizeSignal no_sigxfsz;
  if (in_place_) {
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) fail("close", errno);
    written_ = true;
    return;
  }
  // The file replaced keeps its mode (a 0600 report stays private); a new
  // one gets what the umask allows.
  struct stat old {};
  const mode_t mode = ::stat(path_.c_str(), &old) == 0 && S_ISREG(old.st_mode) ? (old.st_mode & 07777) : new_file_mode();
  if (::fchmod(fd_, mode) != 0) fail("chmod", errno);
  if (::fsync(fd_) != 0) fail("fsync", errno);
  if (!unnamed_) {  // an unnamed file keeps its descriptor until it is linked
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) fail("close", errno);
  }
  written_ = true;
}

void AtomicFile::publish() {
  if (!written_) throw Error(prefix_ + "cannot write '" + given_.string() + "': nothing written");
  if (in_place_) return;
  if (unnamed_) {
    if (fd_ < 0) return;  // published already
    // A name first (linkat cannot replace a file), then the rename over the
    // target; the name is removed on an interrupt meanwhile.
    bool linked = false;
    for (int attempt = 0; attempt < 100 && !linked; ++attempt) {
      tmp_ = link_name_for(path_);
      linked = link_unnamed(fd_, tmp_);
      if (!linked && errno != EEXIST) break;
    }
    if (!linked) {
      // No way to name it (no /proc, no capability): a named copy instead.
      tmp_ = temp_template_for(path_);
      const int out = ::mkstemp(tmp_.data());
      if (out < 0) {
        const int err = errno;
        tmp_.clear();
        fail("link", err);
      }
      slot_ = register_pending(tmp_);
      struct stat st {};
      const bool copied = ::fstat(fd_, &st) == 0 && copy_all(fd_, out) && ::fchmod(out, st.st_mode & 07777) == 0 &&
                          ::fsync(out) == 0;
      const int err = errno;
      if (::close(out) != 0 || !copied) fail("copy", err ? err : EIO);
    } else {
      slot_ = register_pending(tmp_);
    }
    const int fd = fd_;
    fd_ = -1;
    ::close(fd);
  }
  if (tmp_.empty()) return;
  if (std::rename(tmp_.c_str(), path_.c_str()) != 0) {
    const int err = errno;
    discard();
    throw Error(prefix_ + "cannot write '" + given_.string() + "': rename: " + std::strerror(err));
  }
  tmp_.clear();
  release_pending(slot_);
  slot_ = -1;
}

void write_file_atomic(const std::filesystem::path& given, std::string_view content,
                       const std::function<void()>& before_rename) {
  AtomicFile file(given);
  file.commit(content, before_rename);
}

}  // namespace hbmscope
