#pragma once
// A progress bar for long sweeps, on stderr only when stderr is a terminal:
// nothing of it reaches a pipe or a log file (unless --progress always).
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <string>

namespace hbmscope::cli {

enum class ProgressMode { auto_, always, never };

class ProgressBar {
 public:
  // `auto_`: drawn when `out` is a terminal and the work counts at least
  // `min_total` items (short sweeps never show it). Redrawn at most 10 times a
  // second.
  // `check_every`: look at the clock on every check_every-th update only (one
  // update per shape of a million-shape sweep; 1 where each update is slow work).
  ProgressBar(std::FILE* out, ProgressMode mode, std::string what, std::size_t min_total = 100000,
              std::size_t check_every = 256);
  ~ProgressBar();
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  void update(std::size_t done, std::size_t total);
  void finish();  // clears the bar's line on a terminal, ends it elsewhere
  bool drawn() const { return drawn_; }

 private:
  std::FILE* out_;
  bool terminal_;
  bool enabled_;
  std::string what_;
  std::size_t min_total_;
  std::size_t check_every_;
  std::chrono::steady_clock::time_point last_;
  std::size_t calls_ = 0;
  bool drawn_ = false;
};

}  // namespace hbmscope::cli
