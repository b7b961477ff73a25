#pragma once
// `hbmscope compare A.json B.json`: rows matched by (label, shape), the ratio
// B/A of every number both rows hold, and a FASTER / SLOWER / SAME verdict on
// one metric. Works on the JSON so that fields added later (measurements)
// are compared too.
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "hbmscope/printers.hpp"

namespace hbmscope {

struct CompareOptions {
  double threshold_pct = 5.0;  // |ratio - 1| within this is SAME
  std::string metric;          // a column such as "bytes.flash_no_l2"; empty: chosen (docs)
};

struct ComparedRow {
  std::string label;
  Shape shape;
  std::vector<double> a, b;  // per column; NaN where a row lacks the number
  std::string verdict;       // FASTER, SLOWER, SAME, or "-" without the metric
};

struct Comparison {
  std::string a_name, b_name;
  std::vector<std::string> columns;  // dotted paths, e.g. "prediction.standard.seconds"
  std::string metric;
  bool higher_is_better = false;
  double threshold_pct = 5.0;
  std::vector<ComparedRow> rows;
  std::vector<std::pair<std::string, Shape>> only_a, only_b;  // (label, shape)
};

// Throws Error naming the file when a report is malformed, when the schemas
// differ, or when --metric names a number the reports do not share.
Comparison compare_reports(const nlohmann::json& a, std::string_view a_name, const nlohmann::json& b,
                           std::string_view b_name, const CompareOptions& options);

// B/A, 1 when both are 0, inf when only A is 0.
double ratio(double a, double b);

std::string render_comparison(const Comparison& c, Format format);

}  // namespace hbmscope
