#pragma once
// Turning a Report into text: a terminal table, JSON, CSV or Markdown. Printers
// format what the rows hold; they never compute a figure.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hbmscope/report.hpp"

namespace hbmscope {

enum class Format { table, json, csv, md };
enum class Units { decimal, binary, bytes };

std::optional<Format> parse_format(std::string_view s);
std::optional<Units> parse_units(std::string_view s);

struct PrintOptions {
  Format format = Format::table;
  Units units = Units::decimal;
  bool wide = false;  // table/md: add FLOPs and arithmetic intensity columns, one table
  // Table/md column groups to show (column_groups below); empty: bytes, l2
  // and time, with --wide every group.
  std::vector<std::string> columns{};
  // A terminal table wider than this is split into one table per group (and a
  // group too wide for one table into several), each with the shape columns;
  // 0 or --wide: never split. Markdown is never split.
  std::size_t max_width = 120;
};

// The groups of table columns --columns picks from: "bytes" (one per variant),
// "l2" (the L2 simulation's detail), "time" (roofline time per variant, with
// --device), "flops" (FLOPs, intensity per variant, the ridge point).
inline const std::vector<std::string>& column_groups() {
  static const std::vector<std::string> g{"bytes", "l2", "time", "flops"};
  return g;
}

// 2097152 -> "2.1 MB" (decimal, %.3g), "2 MiB" (binary), "2097152 B" (bytes).
std::string format_bytes(std::uint64_t bytes, Units units);
// 68719476736 -> "68.7 GFLOP"
std::string format_flops(std::uint64_t flops);
// "%.3g FLOP/B"
std::string format_intensity(double flop_per_byte);

// 4.08e-5 -> "40.8 µs" (ns, µs, ms, s; %.3g)
std::string format_seconds(double seconds);
// 3.35e12 -> "3.35 TB/s"
std::string format_bandwidth(double bytes_per_s);
// 9.894e14 -> "989 TFLOP/s"
std::string format_flop_rate(double flop_per_s);

// Column heading of a variant id ("flash_no_l2" -> "FlashAttention, no L2 reuse").
std::string variant_label(std::string_view id);

// A grid of text cells: a Markdown table for Format::md, otherwise a terminal
// table, columns three spaces apart, padded to their display width. right[c]
// aligns column c to the right.
std::string render_grid(const std::vector<std::string>& head,
                        const std::vector<std::vector<std::string>>& rows,
                        const std::vector<bool>& right, Format format);

// `hbmscope devices`: the presets (or one device with its sources, detail).
std::string render_devices(const std::vector<DeviceSpec>& devices, bool detail, Format format);
// `hbmscope models`: model configs and their layer patterns (one with its sources and notes, detail).
std::string render_models(const std::vector<ModelConfig>& models, bool detail, Format format);

// Which shape fields differ between rows (each then gets a column; the rest
// go in a title line).
struct ShapeVaries {
  bool batch = false, heads = false, dtype = false, blocks = false, causal = false, pass = false;
  // Attention as served: the mask (window, chunk), DV, the kv dtype, a latent KV.
  bool mask = false, head_dim_v = false, kv_dtype = false, latent_kv = false;
  void add(const Shape& first, const Shape& s);  // s against the first row's shape
};

// What the printers must know of a report's rows before the first one is
// printed: the variants, columns and title lines they call for. It is a fold
// over the rows (add), so that a run that streams its rows can make it first
// (from the rows previewed: modelled, not yet simulated or measured), and a
// held report from its rows (layout_of).
struct RowsLayout {
  std::size_t rows = 0;
  std::vector<std::string> ids;      // variant ids, in order of first appearance
  std::vector<std::string> kernels;  // measured kernels, in order of first appearance
  bool any_pass = false;             // a row of another pass than the forward one
  bool any_l2_sim = false, any_decode = false, all_decode = false, any_label = false;
  bool any_measurements = false;
  bool any_no_fit = false;  // a prediction that does not fit in the device's memory (†)
  bool any_model = false;   // whole-model rows (Model, Layers and KV cache columns)
  bool any_ragged_prefill = false, any_served = false;  // a Sequences column; schema /3's CSV columns
  ShapeVaries varies;
  bool pages_vary = false;  // decode rows of more than one page size
  // The first row (the title's shape, L2 simulation and ridge point) and the
  // first decode row (the decode title's splits, SMs and pages).
  std::optional<Row> first, first_decode;
  bool decode_mixed = false;      // decode rows of other SM counts or page sizes than the first's
  double decode_to_ridge = 0;     // the highest decode_floor intensity / ridge point (0: none)

  void add(const Row& row);
  // The variants whose predictions say whether they fit in memory, in ids' order.
  std::vector<std::string> footprint_ids() const;

 private:
  std::vector<std::string> footprint_seen_;
};

RowsLayout layout_of(const std::vector<Row>& rows);

// A report printed as its rows come: begin() with the report but its rows
// (command, device, roofline, shard) and the rows' layout, row() for each row
// in order, end(). JSON, CSV and Markdown print every row as it comes, so
// that a run holds one row at a time; the terminal table holds them all until
// end() (its column widths need every row).
using TextSink = std::function<void(std::string_view)>;
class RowPrinter {
 public:
  virtual ~RowPrinter() = default;
  virtual void begin(const Report& head, const RowsLayout& layout) = 0;
  virtual void row(const Row& row) = 0;
  virtual void end() = 0;
};
std::unique_ptr<RowPrinter> make_row_printer(const PrintOptions& options, TextSink out);
// Whether rows in this format are printed as they come (json, csv, md) or
// held until the last one (the table).
inline bool streams_rows(Format f) { return f != Format::table; }

// The whole output, ready to write in one piece (the row printers' text).
std::string render(const Report& report, const PrintOptions& options);

// Writes content to stdout and flushes it: Error "writing standard output:
// REASON" when that fails (closed, full disk), so no output is lost silently.
void write_stdout(std::string_view content);

// Writes content to path through a temporary file in the same folder and a
// rename: the path holds either its old content or all of the new, never part.
// The temporary file is unnamed (O_TMPFILE) where the file system allows, so
// that not even SIGKILL leaves it behind; a named one is removed by an
// interrupt (SIGINT, SIGTERM, SIGHUP, SIGQUIT) before the process ends; past the file size limit the write fails
// (SIGXFSZ is ignored meanwhile). A symbolic link is followed (the file it
// names is replaced, the link stays); a character device or FIFO is written in
// place; a directory or other special file is an error. before_rename is a
// test seam.
void write_file_atomic(const std::filesystem::path& path, std::string_view content,
                       const std::function<void()>& before_rename = {});

// The checks write_file_atomic makes before it writes, for a command to run
// on every target before it writes any: Error "PREFIXcannot write 'PATH':
// REASON" for a directory, a special file other than a character device or
// FIFO, a name longer than the file system takes, or a folder that is missing
// or takes no file.
void check_write_target(const std::filesystem::path& target, const std::string& prefix = {});

// Whether a and b name one file once links and "." or ".." are resolved.
bool same_write_target(const std::filesystem::path& a, const std::filesystem::path& b);

// write_file_atomic in two steps, so that every target of a command can be
// checked, and its temporary file made, before any is written: the
// constructor checks as check_write_target and creates the temporary file;
// commit writes and renames (or writes a device or FIFO in place). The
// temporary file is removed unless committed, and on an interrupt.
// A file removed on SIGINT, SIGTERM, SIGHUP or SIGQUIT while this object lives (and by
// its owner otherwise): gnuplot's temporary files. Signals the process
// ignores (nohup) stay ignored.
class RemoveOnSignal {
 public:
  explicit RemoveOnSignal(const std::string& path);
  RemoveOnSignal(const RemoveOnSignal&) = delete;
  RemoveOnSignal& operator=(const RemoveOnSignal&) = delete;
  ~RemoveOnSignal();

 private:
  int slot_ = -1;
};

class AtomicFile {
 public:
  explicit AtomicFile(std::filesystem::path target, std::string prefix = {});
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  ~AtomicFile();
  void commit(std::string_view content, const std::function<void()>& before_rename = {});
  // commit in two steps, for files that must appear together (a report and
  // its plot): write() puts every byte on disk (a full disk fails here, with
  // nothing renamed), publish() renames. The file takes the mode of the file
  // it replaces, else 0666 less the umask.
  void write(std::string_view content);
  void publish();
  // write() in pieces, for a report written as its rows are made: append()
  // as often as needed, then write() with the last piece (or nothing).
  void append(std::string_view content);
  // Where the file system has O_TMPFILE, the temporary file has no name until
  // publish() (SIGKILL leaves nothing); false: a named temporary file always,
  // as elsewhere (for tests of that path).
  static bool unnamed_temporaries;

 private:
  void discard();
  [[noreturn]] void fail(const char* what, int err);
  std::filesystem::path given_, path_;
  std::string prefix_, tmp_;
  int fd_ = -1, slot_ = -1;
  bool in_place_ = false, written_ = false, unnamed_ = false;
};

}  // namespace hbmscope
