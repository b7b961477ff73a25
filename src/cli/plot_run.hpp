#pragma once
// Runs gnuplot on a script from hbmscope::gnuplot_script.
#include <string>

#include "hbmscope/report.hpp"

namespace hbmscope::cli {

// The path of gnuplot; Error when it is not on the PATH.
std::string gnuplot_or_throw();

// A chart made before the report is written, so that a plot that cannot be
// made fails the command with nothing written.
class Plot {
 public:
  // target: FILE.svg, FILE.png (drawn into a temporary file in the same folder)
  // or "-" (gnuplot's dumb terminal, kept as text). Throws Error when gnuplot
  // is not on the PATH, the folder takes no file, or gnuplot fails.
  Plot(const Report& report, const std::string& target);
  Plot(const Plot&) = delete;
  Plot& operator=(const Plot&) = delete;
  ~Plot();  // removes an image that was not installed

  // The chart for the terminal ("-"); empty for a file.
  const std::string& text() const { return text_; }
  // Renames the image to the target (nothing for "-").
  void install();

 private:
  void make(const Report& report);
  std::string target_, image_, text_;
};

}  // namespace hbmscope::cli
