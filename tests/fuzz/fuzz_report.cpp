// libFuzzer: the report reader behind `compare` and `merge`
// (docs/report-schema.md), then what those commands print from a report.
#include "../../src/report/json_check.hpp"
#include "fuzz_common.hpp"
#include "hbmscope/compare.hpp"
#include "hbmscope/json_report.hpp"
#include "hbmscope/printers.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace hbmscope;
  fuzz::refusal_ok([&] {
    const nlohmann::json j = json_check::parse_json_text(fuzz::text(data, size), "a.json");
    fuzz::refusal_ok([&] {
      const Report r = report_from_json(j, "a.json");
      for (const Format f : {Format::table, Format::json, Format::csv, Format::md}) (void)render(r, {f, Units::decimal, true});
    });
    // The streaming reader behind compare and merge, row by row.
    fuzz::refusal_ok([&] {
      (void)json_check::parse_json_rows(fuzz::text(data, size), "a.json", [](std::size_t i, nlohmann::json&& row) {
        (void)row_from_json(row, "a.json", i);
      });
    });
    // A report compared with itself.
    const Comparison c = compare_reports(j, "a.json", j, "b.json", {});
    for (const Format f : {Format::table, Format::json, Format::csv, Format::md}) (void)render_comparison(c, f);
  });
  return 0;
}
