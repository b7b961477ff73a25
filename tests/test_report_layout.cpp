// Issue 14: tables that fit a terminal, column groups, the memory mark, and
// charts whose lines stay apart (series by the other axes, no empty entries).
#include <catch2/catch.hpp>
#include <sstream>
#include <string>

#include "hbmscope/device_config.hpp"
#include "hbmscope/json_report.hpp"
#include "hbmscope/l2_sim.hpp"
#include "hbmscope/model.hpp"
#include "hbmscope/plot.hpp"
#include "hbmscope/printers.hpp"
#include "hbmscope/roofline.hpp"
#include "hbmscope/sweep.hpp"

using namespace hbmscope;

namespace {

// Display columns of the widest line (one per code point, as the printer counts).
std::size_t widest_line(const std::string& text) {
  std::istringstream in(text);
  std::string line;
  std::size_t most = 0;
  while (std::getline(in, line)) {
    std::size_t w = 0;
    for (unsigned char c : line) w += (c & 0xC0) != 0x80;
    most = std::max(most, w);
  }
  return most;
}

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

Report device_report(const std::string& seq, const std::string& heads, bool sim) {
  SweepAxes a;
  a.seq = parse_int_axis(seq, "seq");
  a.head_dim = {128};
  a.heads = parse_int_axis(heads, "heads");
  a.kv_heads = {8};
  a.causal = {true};
  Report r;
  r.rows = model_rows(expand(a));
  if (sim)
    for (Row& row : r.rows)
      if (l2_sim_accesses(row.shape) <= (std::uint64_t{1} << 22)) add_l2_sim(row, L2SimConfig{50u << 20});
  add_predictions(r, find_device("h100"), 1.0);
  return r;
}

}  // namespace

TEST_CASE("a table with a device fits 120 columns: one table per group", "[report][layout]") {
  const Report r = device_report("4K:32K:x2", "32,64", true);
  const std::string wide = render(r, {Format::table, Units::decimal, true});
  CHECK(widest_line(wide) > 120);  // everything in one table
  CHECK(count(wide, "Sequence × head dim") == 1);
  CHECK_THAT(wide, Catch::Contains("Time: standard_l2_sim") && Catch::Contains("Ridge"));
  const std::string t = render(r, {});
  CHECK(widest_line(t) <= 120);
  CHECK_THAT(t, Catch::Contains("\nHBM bytes by variant; ids as in `hbmscope model --help`:\n"));
  CHECK_THAT(t, Catch::Contains("\nL2 simulation:\n"));
  CHECK_THAT(t, Catch::Contains("\nPredicted time on H100 SXM"));
  CHECK_THAT(t, !Catch::Contains("Intensity:"));  // the flops group only with --wide or --columns
  // Every group's table repeats the shape columns, so each row is read alone.
  CHECK(count(t, "Sequence × head dim") >= 3);
  // A narrow limit spreads a group over several tables, still within it.
  PrintOptions narrow;
  narrow.max_width = 70;
  const std::string n = render(r, narrow);
  const std::size_t below_title = n.find("\n\n"), footnote = n.find("\n†");
  REQUIRE(footnote != std::string::npos);
  CHECK(widest_line(n.substr(below_title, footnote - below_title)) <= 70);  // every grid line fits
  CHECK_THAT(n, Catch::Contains("(1 of "));
  // Markdown keeps one table.
  CHECK(count(render(r, {Format::md}), "| Sequence × head dim") == 1);
}

TEST_CASE("a table that fits stays one table, as the note's", "[report][layout]") {
  SweepAxes a = note_axes();
  Report r;
  r.rows = model_rows(expand(a));
  const std::string t = render(r, {});
  CHECK(count(t, "Sequence × head dim") == 1);
  CHECK_THAT(t, Catch::Contains("Standard attention   FlashAttention, no L2 reuse   Every value once (floor)"));
}

TEST_CASE("column groups: --columns picks them", "[report][layout]") {
  const Report r = device_report("4K,8K", "32", false);
  PrintOptions p;
  p.columns = {"time"};
  const std::string t = render(r, p);
  CHECK_THAT(t, Catch::Contains("Time: flash_no_l2"));
  CHECK_THAT(t, !Catch::Contains("Standard attention"));
  p.columns = {"bytes", "flops"};
  const std::string b = render(r, p);
  CHECK_THAT(b, Catch::Contains("Standard attention") && Catch::Contains("Intensity: floor") &&
                    Catch::Contains("Ridge"));
  CHECK_THAT(b, !Catch::Contains("Time:"));
  CHECK(column_groups() == std::vector<std::string>{"bytes", "l2", "time", "flops"});
}

TEST_CASE("standard attention whose matrices do not fit the device is marked", "[report][memory]") {
  const Report r = device_report("4K,128K", "32", false);
  const auto* small = r.rows[0].variant("standard");
  const auto* big = r.rows[1].variant("standard");
  REQUIRE(small->prediction);
  REQUIRE(big->prediction);
  CHECK(small->prediction->fits_in_memory);
  CHECK_FALSE(big->prediction->fits_in_memory);
  // S and P of 32 heads at 128K in bf16, with Q, K, V, O.
  const std::uint64_t n = 131072;
  CHECK(big->prediction->footprint_bytes == 2 * (2 * 32 * n * n + 2 * 32 * n * 128 + 2 * 8 * n * 128));
  CHECK(standard_resident_bytes(r.rows[1].shape) == big->prediction->footprint_bytes);
  CHECK(r.rows[1].variant("flash_no_l2")->prediction->footprint_bytes == 0);  // not modelled: fits
  const std::string t = render(r, {});
  CHECK(count(t, " †") == 1);
  CHECK_THAT(t, Catch::Contains("† needs more than the 80 GB of H100 SXM memory at once"));
  // JSON keeps it, and reads it back.
  const auto j = nlohmann::json::parse(render(r, {Format::json}));
  CHECK(j["rows"][1]["prediction"]["standard"]["fits_in_memory"] == false);
  CHECK(j["roofline"]["device"]["memory_bytes"] == 80000000000ull);
  const Report back = report_from_json(j, "r.json");
  CHECK_FALSE(back.rows[1].variant("standard")->prediction->fits_in_memory);
  CHECK(back.roofline->device.memory_bytes == 80000000000ull);
  // CSV too: one column for the variants where it is modelled.
  std::istringstream csv(render(r, {Format::csv}));
  std::string head, first, second;
  std::getline(csv, head);
  std::getline(csv, first);
  std::getline(csv, second);
  CHECK_THAT(head, Catch::EndsWith(",fits_in_memory_standard"));
  CHECK_THAT(first, Catch::EndsWith(",true"));
  CHECK_THAT(second, Catch::EndsWith(",false"));
  // A device with no memory figure marks nothing.
  DeviceSpec d = find_device("h100");
  d.memory_bytes = 0;
  Report r2 = r;
  add_predictions(r2, d, 1.0);
  CHECK(r2.rows[1].variant("standard")->prediction->fits_in_memory);
}

TEST_CASE("presets list their aliases", "[report][devices]") {
  const DeviceSpec h100 = find_device("h100");
  CHECK(h100.id == "h100-sxm");
  CHECK(h100.aliases == std::vector<std::string>{"h100"});
  CHECK(h100.memory_bytes == 80000000000ull);
  const std::string t = render_devices(preset_devices(), false, Format::table);
  CHECK_THAT(t, Catch::Contains("h100-sxm, h100 "));
  CHECK_THAT(t, Catch::Contains("rtx-4090, 4090, geforce-rtx-4090"));
  for (const auto& d : preset_devices())
    for (const auto& [k, v] : d.sources) {
      INFO(d.id << " " << k << ": " << v);
      CHECK(v.find("shared/") == std::string::npos);
      CHECK(v.find("reference.md") == std::string::npos);
    }
}

TEST_CASE("plot: rows that differ in another axis are separate series", "[plot][layout]") {
  SweepAxes a;
  a.seq = parse_int_axis("1K:4K:x2", "seq");
  a.head_dim = {64, 128};
  a.batch = {1, 4};
  Report r;
  r.rows = model_rows(expand(a));
  std::string s = gnuplot_script(r, PlotTerminal::svg);
  // 4 series (d x batch), 3 points each, x ascending in each block.
  CHECK(count(s, " << EOD\n") == 4);
  CHECK_THAT(s, Catch::Contains("$s0 << EOD\n1024 "));
  CHECK_THAT(s, Catch::Contains("title 'floor (d=128, batch 4)'"));
  // The title names what every series shares.
  CHECK_THAT(s, Catch::Contains("HBM bytes (reads + writes): 1 head, bf16, no mask, forward pass"));
  // On the terminal (no dashes) each series has its own point character.
  const std::string d = gnuplot_script(r, PlotTerminal::dumb);
  CHECK_THAT(d, Catch::Contains("pt 4 title 'standard (d=64, batch 1)'"));
  CHECK_THAT(d, Catch::Contains("pt 10 title 'standard (d=128, batch 4)'"));
  // --x head_dim: the sequence lengths become series.
  PlotOptions o;
  o.x = PlotAxis::head_dim;
  s = gnuplot_script(r, PlotTerminal::svg, o);
  CHECK(count(s, " << EOD\n") == 6);
  CHECK_THAT(s, Catch::Contains("set xlabel 'head dimension d'"));
  CHECK_THAT(s, Catch::Contains("$s0 << EOD\n64 "));
  CHECK_THAT(s, Catch::Contains("(Nq=1024, batch 1)"));
  // An axis with one value is refused, naming the axes that vary.
  o.x = PlotAxis::heads;
  CHECK_THROWS_WITH(gnuplot_script(r, PlotTerminal::svg, o),
                    Catch::Contains("every row has the same heads (1)") &&
                        Catch::Contains("--x (seq, seq_kv, head_dim, batch vary)"));
  CHECK(parse_plot_axis("seq-kv") == PlotAxis::seq_kv);
  CHECK(parse_plot_axis("head_dim") == PlotAxis::head_dim);
  CHECK_FALSE(parse_plot_axis("tokens"));
}

TEST_CASE("plot: coinciding variants keep their own style, drawn under the exact ones", "[plot][layout]") {
  SweepAxes a;
  a.seq = parse_int_axis("1K:4K:x2", "seq");
  Report r;
  r.rows = model_rows(expand(a));
  for (Row& row : r.rows) add_l2_sim(row, L2SimConfig{60u << 20});
  add_predictions(r, find_device("h200"), 1.0);
  const std::string s = gnuplot_script(r, PlotTerminal::svg);
  // floor and flash_l2_sim are equal here: distinct colour, dashes and points;
  // the simulated one drawn first and thick.
  const std::size_t sim = s.find("title 'flash_l2_sim'"), floor = s.find("title 'floor'");
  REQUIRE(sim != std::string::npos);
  REQUIRE(floor != std::string::npos);
  CHECK(sim < floor);
  CHECK_THAT(s, Catch::Contains("lt 4 lw 4 dt 4 pt 10 title 'flash_l2_sim'"));
  CHECK_THAT(s, Catch::Contains("lt 3 lw 1.5 dt 3 pt 8 title 'floor'"));
  CHECK_THAT(s, Catch::Contains("on H200 SXM"));
  // The terminal chart: every drawn entry has a legend entry, no untitled markers.
  const std::string d = gnuplot_script(r, PlotTerminal::dumb);
  CHECK(count(d, "notitle") == 0);
  CHECK(count(s, "notitle") > 0);
}

TEST_CASE("plot: a variant with no point in a series has no legend entry, and a note", "[plot][layout]") {
  SweepAxes a;
  a.seq = parse_int_axis("1K:4K:x2", "seq");
  a.head_dim = {64, 128};
  Report r;
  r.rows = model_rows(expand(a));
  for (Row& row : r.rows)
    if (row.shape.head_dim == 64) add_l2_sim(row, L2SimConfig{60u << 20});
  const std::string s = gnuplot_script(r, PlotTerminal::svg);
  CHECK_THAT(s, Catch::Contains("title 'flash_l2_sim (d=64)'"));
  CHECK_THAT(s, !Catch::Contains("title 'flash_l2_sim (d=128)'"));
  const auto notes = plot_notes(r);
  REQUIRE(notes.size() == 1);
  CHECK_THAT(notes[0], Catch::Contains("no points for flash_l2_sim (d=128), standard_l2_sim (d=128)"));
  CHECK_THAT(s, Catch::Contains("set label 1 'Note: no points for flash_l2_sim (d=128)"));
  PlotOptions o;
  o.expected = {"flash_l2_sim"};
  Report none;
  none.rows = model_rows(expand(a));
  CHECK_THAT(plot_notes(none, o)[0], Catch::Contains("no points for flash_l2_sim (not simulated on any shape)"));
}
