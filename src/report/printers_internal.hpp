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

// Which shape fields differ between rows: those get a column, the rest go in
// the title line.
struct Varying {
  bool batch = false, heads = false, dtype = false, blocks = false, causal = false;
  bool pass = false;
  // Attention as served: the mask (window, chunk), DV, the kv dtype, a latent
  // KV; ragged prefill rows always get a column of their sequences.
  bool mask = false, head_dim_v = false, kv_dtype = false, latent_kv = false;
};
// model_title.cpp: "window 4096", "chunk 8192" or "-"; "fp8" (the kv dtype);
// "3: 512..4096" (a ragged prefill batch's sequences) or "-".
std::string mask_label(const Shape& s);
std::string mask_label(const Row& r);  // "mixed" on a whole model's total whose kinds' masks differ
std::string sequences_label(const Shape& s);
Varying varying(const std::vector<Row>& rows);
// The model table's title lines (shape, model, L2 simulation, roofline, decode).
std::string title(const Report& rep, const Varying& v);

// printers.cpp: whether some row has the L2 simulation / is a decode row.
bool any_l2_sim(const Report& rep);
bool any_decode(const Report& rep);

// measure_table.cpp: whether some row has measurements; their grid under the
// device line.
bool has_measurements(const Report& rep);
std::string render_measure_grid(const Report& rep, Format format);

// model_table.cpp: the model's grid(s) under its title (table or Markdown).
std::string render_model(const Report& rep, const PrintOptions& opt);

// report_csv.cpp: the report as CSV.
std::string render_csv(const Report& rep);

}  // namespace hbmscope::printing
