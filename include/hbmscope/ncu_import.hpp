#pragma once
// Reading what users measured: Nsight Compute CSV (`ncu --csv`, raw or
// details page, any header generation) and plain timings (the JSON of
// scripts/sdpa_peer.py, a CSV with shape columns and time_s). Formats in
// docs/reconcile.md. Files are read in a stream: memory grows with the
// launches kept, never with the file.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hbmscope/reconcile.hpp"

namespace hbmscope {

struct ImportedFile {
  std::string format;  // "ncu-raw", "ncu-details", "timings-json", "timings-csv"
  std::vector<MeasuredLaunch> launches;
  std::vector<std::string> notes;  // e.g. "no units row: base units assumed"
};

// A number as ncu prints it: plain, or with grouping separators where that is
// unambiguous ("1,234.5", "27.595.520", "1.234,5"); std::nullopt for n/a or
// empty. Throws Error (message without a location) on anything else, e.g.
// "1,234" (grouping or a decimal comma?).
std::optional<double> parse_ncu_number(std::string_view text);

// Scale to base units: bytes for byte/Kbyte/Mbyte/Gbyte/Tbyte (SI) and
// sector (32 B), seconds for nsecond/usecond/msecond/second (and ns, us, ms,
// s), 1 for "%" and "" (base). std::nullopt when the unit is not one of these.
std::optional<double> unit_scale(std::string_view unit, bool time);

// Reads an ncu CSV from a byte source: `read(buf, n)` fills up to n bytes and
// returns how many (0 at the end). Lines before the header ("ID",...) and
// ==PROF== lines are skipped. `origin` names the input in errors
// ("FILE:LINE: column 'X': ..."). Throws Error on malformed input.
using ByteSource = std::function<std::size_t(char*, std::size_t)>;
ImportedFile read_ncu_csv(const ByteSource& read, std::string_view origin);

// The same over a string (tests, fuzzing).
ImportedFile read_ncu_csv_text(std::string_view text, std::string_view origin);

// Any supported input, by its content: '{' first is timings JSON, a first
// line with a time_s column a timings CSV, otherwise Nsight Compute CSV.
// "-" is standard input. `table` classifies the kernels of timings rows.
ImportedFile import_measurements(const std::string& path, const KernelTable& table);

// The JSON of scripts/sdpa_peer.py ({"results": [...]}): one call per "ok" result.
ImportedFile read_timings_json(std::string_view text, std::string_view origin);

// The plain timings CSV (header row with at least seq_q, head_dim, time_s).
ImportedFile read_timings_csv(const ByteSource& read, std::string_view origin, const KernelTable& table);

// Longest CSV record accepted (a line of a raw page with every metric is a
// few hundred kB).
inline constexpr std::size_t max_csv_record_bytes = std::size_t{16} << 20;
// Most launches kept from one input.
inline constexpr std::size_t max_launches = 20'000'000;

}  // namespace hbmscope
