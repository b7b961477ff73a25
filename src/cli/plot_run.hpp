#pragma once
// Runs gnuplot on a script from hbmscope::gnuplot_script.
#include <functional>
#include <optional>
#include <string>

#include "hbmscope/plot.hpp"
#include "hbmscope/printers.hpp"
#include "hbmscope/report.hpp"

namespace hbmscope::cli {

// The path of gnuplot; Error when it is not on the PATH.
std::string gnuplot_or_throw();

// A chart made before the report is written, so that a plot that cannot be
// made fails the command with nothing written.
class Plot {
 public:
  // target: FILE.svg, FILE.png or "-" (gnuplot's dumb terminal, kept as
  // text). Throws Error when gnuplot is not on the PATH, the target cannot be
  // written (as write_file_atomic's checks), or gnuplot fails.
  Plot(const Report& report, const std::string& target);
  // The same for any chart: `script` makes the gnuplot script for the terminal.
  Plot(const std::string& target, const std::function<std::string(PlotTerminal)>& script);
  Plot(const Plot&) = delete;
  Plot& operator=(const Plot&) = delete;
  ~Plot() = default;  // an image not installed leaves no file

  // The chart for the terminal ("-"); empty for a file.
  const std::string& text() const { return text_; }
  // Writes the image to the target as write_file_atomic does (nothing for "-").
  void install();
  // install() in two steps (AtomicFile::write and publish), so that a report
  // and its chart are both on disk before either is renamed into place.
  void write();
  void publish();

 private:
  std::string image_, text_;
  std::optional<AtomicFile> file_;
};

}  // namespace hbmscope::cli
