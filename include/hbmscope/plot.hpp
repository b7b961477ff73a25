#pragma once
// Charts of a report as a gnuplot script (data inline): HBM bytes against
// sequence length, one line per variant and series; with a device, predicted
// time too, marking which bound binds. Running gnuplot is the CLI's job.
#include <string>

#include "hbmscope/report.hpp"

namespace hbmscope {

enum class PlotTerminal { svg, png, dumb };

// "chart.svg" -> svg, "chart.png" -> png, "-" -> dumb; throws Error otherwise.
PlotTerminal plot_terminal_for(const std::string& target);

// The whole script; `output` is the file gnuplot writes (ignored for dumb,
// which writes to gnuplot's stdout). Throws Error when there is nothing to plot.
std::string gnuplot_script(const Report& report, PlotTerminal terminal, const std::string& output);

}  // namespace hbmscope
