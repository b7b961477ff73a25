// Turning a Report into text by format, a row at a time (RowPrinter): the
// table and Markdown printers (model_table.cpp, measure_table.cpp), CSV
// (report_csv.cpp), JSON (json_report.cpp); the grids they share are in
// grid.cpp, the rows' layout in rows_layout.cpp.
#include "hbmscope/printers.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string>

#include "hbmscope/error.hpp"
#include "hbmscope/json_report.hpp"
#include "printers_internal.hpp"

namespace hbmscope {

namespace {

Report head_of(const Report& r) {
  Report h;
  h.command = r.command;
  h.device = r.device;
  h.roofline = r.roofline;
  h.shard = r.shard;
  return h;
}

class JsonPrinter : public RowPrinter {
 public:
  explicit JsonPrinter(TextSink out) : out_(std::move(out)) {}
  void begin(const Report& head, const RowsLayout&) override {
    text_.emplace(head);
    out_(text_->open());
  }
  void row(const Row& r) override { out_(text_->row(r)); }
  void end() override { out_(text_->close()); }

 private:
  TextSink out_;
  std::optional<JsonReportText> text_;
};

// The terminal table: column widths need every row, so the rows are held
// (a run bounds their number before it starts: max_table_rows).
class TablePrinter : public RowPrinter {
 public:
  TablePrinter(const PrintOptions& opt, TextSink out) : opt_(opt), out_(std::move(out)) {}
  void begin(const Report& head, const RowsLayout&) override { held_ = head; }
  void row(const Row& r) override { held_.rows.push_back(r); }
  void end() override { out_(printing::render_model(held_, opt_)); }

 private:
  PrintOptions opt_;
  TextSink out_;
  Report held_;
};

}  // namespace

std::unique_ptr<RowPrinter> make_row_printer(const PrintOptions& options, TextSink out) {
  switch (options.format) {
    case Format::json: return std::make_unique<JsonPrinter>(std::move(out));
    case Format::csv: return printing::csv_printer(std::move(out));
    case Format::md: return printing::markdown_printer(options, std::move(out));
    case Format::table: break;
  }
  return std::make_unique<TablePrinter>(options, std::move(out));
}

std::string render(const Report& report, const PrintOptions& options) {
  if (options.format == Format::table) return printing::render_model(report, options);
  std::string out;
  auto printer = make_row_printer(options, [&out](std::string_view s) { out.append(s); });
  printer->begin(head_of(report), layout_of(report.rows));
  for (const Row& r : report.rows) printer->row(r);
  printer->end();
  return out;
}

void write_stdout(std::string_view content) {
  if (std::fwrite(content.data(), 1, content.size(), stdout) != content.size() || std::fflush(stdout) != 0)
    throw Error(std::string("writing standard output: ") + std::strerror(errno));
}

}  // namespace hbmscope
