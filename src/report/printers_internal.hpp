#pragma once
// What the printers of src/report share (not a public interface): display
// widths and padding for grids, the shape labels, and the report queries and
// parts one printer hands another. Each lives in the file named beside it.
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "hbmscope/printers.hpp"
#include "hbmscope/report.hpp"

namespace hbmscope::printing {

// grid.cpp: display width of UTF-8 text (one column per code point: "×" is
// one); s padded to w columns, on the left when right; the width of a grid
// as render_grid draws it (columns three spaces apart).
std::size_t width(std::string_view s);
std::string pad(const std::string& s, std::size_t w, bool right);
std::size_t grid_width(const std::vector<std::string>& head, const std::vector<std::vector<std::string>>& rows);
// One grid when it fits max_width columns (or in Markdown), else one grid per
// set of column indices in parts, a blank line apart.
std::string render_grid_parts(const std::vector<std::string>& head, const std::vector<std::vector<std::string>>& rows,
                              const std::vector<bool>& right, Format format, std::size_t max_width,
                              const std::vector<std::vector<std::size_t>>& parts);

// model_title.cpp: "4096 × 64", "1/≤131072 × 128" (decode), "32/8" (heads/kv-heads).
std::string seq_label(const Shape& s);
std::string heads_label(const Shape& s);
std::string blocks_label(const Shape& s);
std::string pass_label(Pass p);
// "52 sliding (W 1024)", "62 total": the Layers cell of a whole-model row.
std::string model_layers_label(const Row& r);

// model_title.cpp: "window 4096", "chunk 8192" or "-"; "3: 512..4096" (a
// ragged prefill batch's sequences) or "-".
std::string mask_label(const Shape& s);
std::string mask_label(const Row& r);  // "mixed" on a whole model's total whose kinds' masks differ
std::string sequences_label(const Shape& s);
// The model table's title lines (shape, model, L2 simulation, roofline,
// decode): rep for its device and roofline, the rows' layout for the rest.
std::string title(const Report& rep, const RowsLayout& layout);

// grid.cpp: a Markdown table's head (names and alignment) and one of its lines.
std::string md_head(const std::vector<std::string>& head, const std::vector<bool>& right);
std::string md_line(const std::vector<std::string>& cells);

// measure_table.cpp: whether some row has measurements; their grid under the
// device line.
bool has_measurements(const Report& rep);
std::string render_measure_grid(const Report& rep, Format format);

// model_table.cpp: the model's grid(s) under its title: the terminal table
// (every row held) or Markdown, a row at a time.
std::string render_model(const Report& rep, const PrintOptions& opt);
std::unique_ptr<RowPrinter> markdown_printer(const PrintOptions& opt, TextSink out);

// report_csv.cpp: the report as CSV, a row at a time.
std::unique_ptr<RowPrinter> csv_printer(TextSink out);

}  // namespace hbmscope::printing
