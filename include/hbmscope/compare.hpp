#pragma once
// `hbmscope compare A.json B.json`: rows matched on their shape (all of its
// fields and the label, or the fields --match / --ignore choose), the ratio
// B/A of every number both rows hold, and a FASTER / SLOWER / SAME verdict on
// one metric. Works on the JSON so that fields added later (measurements)
// are compared too. Reports are read row by row (a 1M-row report is never
// held as a JSON tree).
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "hbmscope/printers.hpp"

namespace hbmscope {

struct CompareOptions {
  double threshold_pct = 5.0;  // |ratio - 1| within this is SAME
  std::string metric;          // a column such as "bytes.flash_no_l2"; empty: chosen (docs)
  // The fields rows are matched on: shape fields ("seq_q", "dtype", ...; "seq"
  // is seq_q and seq_kv) and "label". Empty match: the label and every shape
  // field as written, less those in ignore.
  std::vector<std::string> match, ignore;
  // Columns shown by table, csv and md beside the verdict metric and the
  // columns that differ beyond the threshold; {"all"}: every column. JSON
  // always holds every column.
  std::vector<std::string> metrics;
};

struct ComparedRow {
  std::string label;
  Shape shape;               // A's
  Shape b_shape;             // B's (differs from A's in fields not matched on)
  std::string b_label;
  std::vector<double> a, b;  // per column; NaN where a row lacks the number
  std::string verdict;       // FASTER, SLOWER, SAME, or "-" without the metric
};

struct Comparison {
  std::string a_name, b_name;
  std::vector<std::string> columns;  // dotted paths, e.g. "prediction.standard.seconds"
  std::vector<std::size_t> shown;    // indices into columns that table/csv/md print
  std::string metric;                // empty when no number can carry a verdict
  bool higher_is_better = false;
  double threshold_pct = 5.0;
  std::vector<std::string> match;        // what rows were matched on, for the header
  std::vector<std::string> differences;  // "dtype: bf16 vs fp8": axes in which matched rows differ
  std::string hint;                      // when nothing matched: which --ignore would help
  std::vector<ComparedRow> rows;
  std::vector<std::pair<std::string, Shape>> only_a, only_b;  // (label, shape)
  std::size_t faster = 0, slower = 0, same = 0;
};

// Throws Error naming the file when a report is malformed, when the schemas
// differ, or when --metric / --metrics / --match name something unknown.
Comparison compare_reports(const nlohmann::json& a, std::string_view a_name, const nlohmann::json& b,
                           std::string_view b_name, const CompareOptions& options);
// The same, reading the files row by row.
Comparison compare_report_files(const std::filesystem::path& a, const std::filesystem::path& b,
                                const CompareOptions& options);

// The fields --match and --ignore take.
const std::vector<std::string>& compare_match_fields();

// B/A, 1 when both are 0, inf when only A is 0.
double ratio(double a, double b);

// How the table (and Markdown) is laid out: by default the verdict metric's
// A, B and B/A with units, then the ratios of the other numbers shown under
// short names [1], [2], ... with a legend, in blocks of at most max_width
// columns; wide: every column in one table, named in full. JSON and CSV hold
// every number whatever these say.
struct CompareTableOptions {
  bool wide = false;
  std::size_t max_width = 120;
};

std::string render_comparison(const Comparison& c, Format format, const CompareTableOptions& options = {});

}  // namespace hbmscope
