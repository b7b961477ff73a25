#pragma once
// Charts of a report as a gnuplot script (data inline): HBM bytes against
// sequence length, one line per variant and series; with a device, predicted
// time too, marking which bound binds. Running gnuplot is the CLI's job.
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hbmscope/report.hpp"

namespace hbmscope {

enum class PlotTerminal { svg, png, dumb };

// "chart.svg" -> svg, "chart.png" -> png, "-" -> dumb; throws Error otherwise.
PlotTerminal plot_terminal_for(const std::string& target);

// s as a gnuplot single-quoted string: no substitution of any kind when the
// script runs; control characters (line breaks) become spaces.
std::string gnuplot_quoted(std::string_view s);

// The shape field a chart puts on its x axis (--x); rows that differ in any
// other field (or group label) are separate series, one line each.
enum class PlotAxis { seq, seq_kv, head_dim, batch, heads };
// "seq", "seq_kv", "head_dim", "batch", "heads" (also with '-'); none otherwise.
std::optional<PlotAxis> parse_plot_axis(std::string_view s);

inline constexpr std::size_t default_max_plot_series = 32;

struct PlotOptions {
  // The x axis; unset: seq, or seq_kv (the context) when every row is a decode row.
  std::optional<PlotAxis> x;
  // Variants the run meant to have (e.g. a simulation asked for): those with
  // no row in the report are named in the chart's note.
  std::vector<std::string> expected;
  // The most series (lines per variant) a chart draws: gnuplot's time grows
  // about as the square of their number, and a legend of hundreds is not
  // read. The first ones (in the order of their shapes) are drawn; the note
  // names those left out.
  std::size_t max_series = default_max_plot_series;
};

// The whole script. gnuplot draws to its stdout, which the caller points at
// the image file, so that no file name is ever parsed by gnuplot. Throws Error
// when there is nothing to plot, or when the x axis has one value only (the
// message names the fields that do vary).
std::string gnuplot_script(const Report& report, PlotTerminal terminal);
std::string gnuplot_script(const Report& report, PlotTerminal terminal, const PlotOptions& options);

// What the chart leaves out, for a note on stderr and in the chart: expected
// variants with no point at all (a simulation skipped on every shape),
// variants with no point in some series (no legend entry is drawn for those),
// and the series past max_series.
std::vector<std::string> plot_notes(const Report& report, const PlotOptions& options = {});

}  // namespace hbmscope
