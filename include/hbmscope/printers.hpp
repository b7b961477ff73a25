#pragma once
// Turning a Report into text: a terminal table, JSON, CSV or Markdown. Printers
// format what the rows hold; they never compute a figure.
#include <cstdint>
#include <filesystem>
#include <functional>
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

// The whole output, ready to write in one piece.
std::string render(const Report& report, const PrintOptions& options);

// Writes content to stdout and flushes it: Error "writing standard output:
// REASON" when that fails (closed, full disk), so no output is lost silently.
void write_stdout(std::string_view content);

// Writes content to path through a temporary file in the same folder and a
// rename: the path holds either its old content or all of the new, never part.
// An interrupt (SIGINT, SIGTERM, SIGHUP) while it runs removes the temporary
// file before the process ends; past the file size limit the write fails
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
// A file removed on SIGINT, SIGTERM or SIGHUP while this object lives (and by
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

 private:
  void discard();
  std::filesystem::path given_, path_;
  std::string prefix_, tmp_;
  int fd_ = -1, slot_ = -1;
  bool in_place_ = false, written_ = false;
};

}  // namespace hbmscope
