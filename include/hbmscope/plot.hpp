#pragma once
// Charts of a report as a gnuplot script (data inline): HBM bytes against
// sequence length, one line per variant and series; with a device, predicted
// time too, marking which bound binds. Running gnuplot is the CLI's job.
#include <string>
#include <string_view>

#include "hbmscope/report.hpp"

namespace hbmscope {

enum class PlotTerminal { svg, png, dumb };

// "chart.svg" -> svg, "chart.png" -> png, "-" -> dumb; throws Error otherwise.
PlotTerminal plot_terminal_for(const std::string& target);

// s as a gnuplot single-quoted string: no substitution of any kind when the
// script runs; control characters (line breaks) become spaces.
std::string gnuplot_quoted(std::string_view s);

// The whole script. gnuplot draws to its stdout, which the caller points at
// the image file, so that no file name is ever parsed by gnuplot. Throws Error
// when there is nothing to plot.
std::string gnuplot_script(const Report& report, PlotTerminal terminal);

}  // namespace hbmscope
