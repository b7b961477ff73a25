// Turning a Report into text by format: the table and Markdown printers
// (model_table.cpp, measure_table.cpp), CSV (report_csv.cpp), JSON
// (json_report.cpp); the grids they share are in grid.cpp.
#include "hbmscope/printers.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "hbmscope/error.hpp"
#include "hbmscope/json_report.hpp"
#include "printers_internal.hpp"

namespace hbmscope {

namespace printing {

bool any_l2_sim(const Report& rep) {
  for (const Row& r : rep.rows)
    if (r.l2_sim) return true;
  return false;
}

bool any_decode(const Report& rep) {
  for (const Row& r : rep.rows)
    if (r.shape.decode) return true;
  return false;
}

}  // namespace printing

std::string render(const Report& report, const PrintOptions& options) {
  switch (options.format) {
    case Format::table:
    case Format::md: return printing::render_model(report, options);
    case Format::csv: return printing::render_csv(report);
    case Format::json: return report_json_text(report);
  }
  return {};
}

void write_stdout(std::string_view content) {
  if (std::fwrite(content.data(), 1, content.size(), stdout) != content.size() || std::fflush(stdout) != 0)
    throw Error(std::string("writing standard output: ") + std::strerror(errno));
}

}  // namespace hbmscope
