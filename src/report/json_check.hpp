#pragma once
// Small helpers that turn a JSON value of the wrong shape into one line:
// "ORIGIN: KEY: expected WHAT, got VALUE". Shared by the config loaders and
// the report reader.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <initializer_list>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "hbmscope/error.hpp"

namespace hbmscope::json_check {

// A short rendering of a value for messages (long values are cut).
std::string brief(const nlohmann::json& v);

[[noreturn]] void fail(std::string_view origin, std::string_view key, std::string_view expected,
                       const nlohmann::json& got);
[[noreturn]] void fail_text(std::string_view origin, std::string_view key, std::string_view message);

// Throws unless j is an object whose keys are all in `allowed`.
void only_keys(const nlohmann::json& j, std::string_view origin, std::string_view where,
               std::initializer_list<std::string_view> allowed);

std::string path(std::string_view parent, std::string_view key);  // "a.b", or "b" at top level

// Names and labels end up in table cells, CSV fields and plot titles: a control
// character (newline, escape sequence, NUL) would break those, so it is refused.
void require_printable(std::string_view origin, std::string_view key, std::string_view text);
bool has_control(std::string_view text);  // what require_printable refuses

// A user-given path or value made fit for a one-line message: control
// characters and bytes that are not UTF-8 become escapes (\n, \x1b).
std::string printable(std::string_view text);

// Every string and object key in j, checked as require_printable: device files
// and sweep configs contribute their strings to tables, reports and messages.
void require_printable_strings(const nlohmann::json& j, std::string_view origin,
                               std::string_view where = "");

// Largest input file read: comfortably above the largest report hbmscope
// writes (1M rows at about 2.6 kB each).
inline constexpr std::uint64_t max_input_bytes = std::uint64_t{4} << 30;

// Deepest nesting of arrays and objects accepted on input; hbmscope's own
// files nest 5 levels at most.
inline constexpr int max_json_depth = 64;

// Reads a whole file and parses it; errors name the file. Every JSON input
// goes through these (depth limit, duplicate keys refused, one-line errors).
// Only regular files up to max_input_bytes are read: a FIFO would block and a
// device such as /dev/zero never ends.
nlohmann::json read_json_file(const std::filesystem::path& p);
nlohmann::json parse_json_text(std::string_view text, std::string_view origin);

// Streaming read of a report: each element of the top-level "rows" array is
// handed to the sink (its index, the value) as soon as it is read, and not
// kept; the value returned holds everything else, with "rows" an empty array.
// Memory is one row, not the file's rows. Same checks as read_json_file.
using RowSink = std::function<void(std::size_t index, nlohmann::json&& row)>;
nlohmann::json read_json_rows(const std::filesystem::path& p, const RowSink& sink);
nlohmann::json parse_json_rows(std::string_view text, std::string_view origin, const RowSink& sink);

}  // namespace hbmscope::json_check
