#pragma once
// Runs gnuplot on a script from hbmscope::gnuplot_script.
#include <string>

#include "hbmscope/report.hpp"

namespace hbmscope::cli {

// target: FILE.svg, FILE.png (written atomically: a temporary file in the same
// folder, then a rename) or "-" (gnuplot's dumb terminal on stdout). Throws
// Error when gnuplot is not on the PATH or fails.
void plot_report(const Report& report, const std::string& target);

}  // namespace hbmscope::cli
