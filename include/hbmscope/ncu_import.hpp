#pragma once
// Reading what users measured, one reader per form (docs/reconcile.md
// "Inputs"), all into one LaunchStream, the MeasuredLaunch stream the core
// consumes: Nsight Compute CSV (details page: ncu_details.cpp; raw page:
// ncu_raw.cpp; every header generation), Nsight Compute console text
// (ncu_console.cpp), Nsight Systems `nsys stats` CSV (cuda_gpu_trace and the
// NVTX range reports: nsys_trace.cpp) and plain timings (timings_import.cpp).
// Files are read in a stream: memory grows with the launches kept, never with
// the file, and the launches kept are bounded by their memory.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hbmscope/reconcile.hpp"

namespace hbmscope {

// An NVTX range of an Nsight Systems report whose name holds "hbmscope:".
struct NvtxRange {
  std::string name;
  std::uint64_t start_ns = 0, end_ns = 0;  // [start, end] on the report's time line
  bool projected = true;  // nvtx_gpu_proj_trace (GPU time); false: nvtx_pushpop_trace (CPU time)
  std::string origin;     // FILE:LINE
};

// The most memory the launches and ranges of one run may hold: a launch costs
// its record (520 B) and its strings (0.7 kB or so with a long templated
// kernel name), so this is a million and a half launches or more. More is
// refused with a line saying how to cut the capture.
inline constexpr std::size_t max_launch_bytes = std::size_t{1} << 30;

// The launches of every input of a run, in the order read; what each reader
// appends to and reconcile() consumes.
struct LaunchStream {
  std::string format;  // of the last input read: "ncu-raw", "ncu-details", "ncu-console", "nsys-trace", ...
  std::vector<MeasuredLaunch> launches;
  std::vector<NvtxRange> ranges;
  std::vector<std::string> notes;  // e.g. "FILE: no units row: base units assumed"
  std::size_t bytes = 0;           // memory held by launches and ranges
  std::size_t max_bytes = max_launch_bytes;

  // Appends, or throws Error naming the launch's row once past max_bytes.
  void add(MeasuredLaunch l);
  void add(NvtxRange r);
};
// The stream of one input (tests, fuzzing).
using ImportedFile = LaunchStream;

// A number as ncu prints it: plain, or with grouping separators where that is
// unambiguous ("1,234.5", "27.595.520", "1.234,5"); std::nullopt for n/a or
// empty. Throws Error (message without a location) on anything else, e.g.
// "1,234" (grouping or a decimal comma?).
std::optional<double> parse_ncu_number(std::string_view text);

// The decimal mark of an input, learned from its other numbers ("12.58" says
// the point is the decimal mark, so "295,808" groups thousands).
enum class DecimalMark { unknown, point, comma };
std::optional<double> parse_ncu_number(std::string_view text, DecimalMark mark);

// Scale to base units: bytes for byte/Kbyte/Mbyte/Gbyte/Tbyte (SI) and
// sector (32 B), seconds for nsecond/usecond/msecond/second (and ns, us, ms,
// s), 1 for "%" and "" (base). std::nullopt when the unit is not one of these.
std::optional<double> unit_scale(std::string_view unit, bool time);

using ByteSource = std::function<std::size_t(char*, std::size_t)>;

// Nsight Compute CSV (details or raw page) from a byte source: `read(buf, n)`
// fills up to n bytes and returns how many (0 at the end). Lines before the
// header ("ID",...) and ==PROF== lines are skipped. `origin` names the input
// in errors ("FILE:LINE: column 'X': ..."). Throws Error on malformed input.
void read_ncu_csv(const ByteSource& read, std::string_view origin, LaunchStream& into);
// Nsight Compute's console text (ncu without --csv): kernel lines, Section
// blocks and their tables.
void read_ncu_console(const ByteSource& read, std::string_view origin, LaunchStream& into);
// `nsys stats --format csv` output: a cuda_gpu_trace (launches), or an
// nvtx_gpu_proj_trace / nvtx_pushpop_trace (ranges naming shapes).
void read_nsys_csv(const ByteSource& read, std::string_view origin, LaunchStream& into);
// The plain timings CSV (header row with at least seq_q, head_dim, time_s).
void read_timings_csv(const ByteSource& read, std::string_view origin, const KernelTable& table,
                      LaunchStream& into);
// The JSON of scripts/sdpa_peer.py ({"results": [...]}): one call per "ok" result.
void read_timings_json(std::string_view text, std::string_view origin, LaunchStream& into);

// The same over a string (tests, fuzzing).
LaunchStream read_ncu_csv_text(std::string_view text, std::string_view origin);
LaunchStream read_ncu_console_text(std::string_view text, std::string_view origin);
LaunchStream read_nsys_csv_text(std::string_view text, std::string_view origin);
LaunchStream read_timings_json(std::string_view text, std::string_view origin);

// Any supported input, by its content (docs/reconcile.md): timings JSON, a
// timings CSV, Nsight Compute CSV or console text, nsys CSV; "-" is standard
// input. A file with nothing profiled, or whose application failed, says so
// in one line. `table` classifies the kernels of timings rows.
void import_measurements(const std::string& path, const KernelTable& table, LaunchStream& into);

// Gives the launches of Nsight Systems traces (those with start_ns) the name
// of the innermost "hbmscope:" range that holds their start; a note says how
// many were left without one.
void apply_nvtx_ranges(LaunchStream& s);

// Longest CSV record accepted (a line of a raw page with every metric is a
// few hundred kB).
inline constexpr std::size_t max_csv_record_bytes = std::size_t{16} << 20;

}  // namespace hbmscope
