#include "progress.hpp"

#include <unistd.h>

namespace hbmscope::cli {

ProgressBar::ProgressBar(std::FILE* out, ProgressMode mode, std::string what,
                         std::size_t min_total, std::size_t check_every)
    : out_(out),
      terminal_(::isatty(::fileno(out)) == 1),
      enabled_(mode == ProgressMode::always || (mode == ProgressMode::auto_ && terminal_)),
      what_(std::move(what)),
      min_total_(mode == ProgressMode::always ? 0 : min_total),
      check_every_(check_every == 0 ? 1 : check_every) {}

ProgressBar::~ProgressBar() { finish(); }

void ProgressBar::update(std::size_t done, std::size_t total) {
  if (!enabled_ || total == 0 || total < min_total_) return;
  // Looking at the clock for every one of millions of shapes would cost more
  // than the model itself.
  if (++calls_ % check_every_ != 0 && done != total) return;
  const auto now = std::chrono::steady_clock::now();
  if (drawn_ && now - last_ < std::chrono::milliseconds(100) && done != total) return;
  last_ = now;
  constexpr int width = 30;
  const double f = static_cast<double>(done) / static_cast<double>(total);
  const int filled = static_cast<int>(f * width);
  std::string bar(static_cast<std::size_t>(filled), '#');
  bar.append(static_cast<std::size_t>(width - filled), '.');
  std::fprintf(out_, "\r%s [%s] %3.0f%% %zu/%zu", what_.c_str(), bar.c_str(), f * 100.0, done, total);
  std::fflush(out_);
  drawn_ = true;
}

void ProgressBar::finish() {
  if (!drawn_) return;
  // A terminal's line is cleared; in a file (--progress always) the bar's line
  // is ended, so that what follows (an error) starts a line of its own.
  std::fprintf(out_, terminal_ ? "\r\033[K" : "\n");
  std::fflush(out_);
  drawn_ = false;
}

}  // namespace hbmscope::cli
