// Lists of lengths: inline, or from a file named with '@'.
#include "hbmscope/length_list.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>

#include "hbmscope/error.hpp"
#include "hbmscope/sweep.hpp"
#include "../report/json_check.hpp"

namespace hbmscope {

namespace {

constexpr std::string_view separators = ",# \t\r\n";

// A refusal of the whole file (too many values), not of one of its lines.
struct TooMany : Error {
  using Error::Error;
};

// The items of a list file, each handed to add (which returns how many values
// it made) with the refusals named by origin and line. `noun`: "lengths",
// "sequences".
void parse_items(std::string_view content, std::string_view origin, std::string_view option, std::string_view noun,
                 const std::function<std::size_t(std::string_view)>& add) {
  const std::string opt = "--" + std::string(option);
  const std::string where = json_check::printable(origin);
  std::size_t line = 1, count = 0;
  for (std::size_t pos = 0; pos < content.size();) {
    const char c = content[pos];
    if (c == '#') {
      while (pos < content.size() && content[pos] != '\n') ++pos;
      continue;
    }
    if (separators.find(c) != std::string_view::npos) {
      line += c == '\n';
      ++pos;
      continue;
    }
    std::size_t end = pos;
    while (end < content.size() && separators.find(content[end]) == std::string_view::npos) ++end;
    const std::string_view item = content.substr(pos, end - pos);
    const std::string at = " (" + where + ", line " + std::to_string(line) + ")";
    // A message is a C string on its way out: a NUL would cut it short, and
    // other control bytes would reach the terminal. Such an item is named escaped.
    if (json_check::has_control(item))
      throw Error(opt + ": '" + json_check::printable(item) + "' is not a length" + at);
    try {
      count += add(item);
    } catch (const TooMany&) {
      throw;
    } catch (const Error& e) {
      throw Error(json_check::printable(e.what()) + at);
    }
    pos = end;
  }
  if (count == 0) throw Error(opt + ": '" + where + "' holds no " + std::string(noun));
}

template <class T, class ParseItem>
std::vector<T> parse_list(std::string_view content, std::string_view origin, std::string_view option,
                          std::string_view noun, ParseItem&& parse_item) {
  std::vector<T> out;
  parse_items(content, origin, option, noun, [&](std::string_view item) {
    const std::vector<T> v = parse_item(item, option);
    if (v.size() > max_context_lengths - out.size())
      throw TooMany("--" + std::string(option) + ": '" + json_check::printable(origin) + "' holds more than " +
                  std::to_string(max_context_lengths) + " " + std::string(noun));
    out.insert(out.end(), v.begin(), v.end());
    return v.size();
  });
  return out;
}

// The text of list file `path` (at most max_length_file_bytes).
std::string read_list_file(const std::string& path, std::string_view option) {
  const std::string opt = "--" + std::string(option);
  const std::string shown = json_check::printable(path);
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) throw Error(opt + ": cannot read '" + shown + "': " + std::strerror(errno));
  std::string content;
  char buf[65536];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) {
    content.append(buf, n);
    if (content.size() > max_length_file_bytes) {
      std::fclose(f);
      throw Error(opt + ": '" + shown + "' is larger than " + std::to_string(max_length_file_bytes >> 20) + " MiB");
    }
  }
  const bool failed = std::ferror(f) != 0;
  std::fclose(f);
  if (failed) throw Error(opt + ": error reading '" + shown + "'");
  return content;
}

}  // namespace

std::vector<std::uint64_t> parse_length_list(std::string_view content, std::string_view origin,
                                             std::string_view option) {
  return parse_list<std::uint64_t>(content, origin, option, "lengths", parse_int_axis);
}

std::vector<SeqLen> parse_seq_len_list(std::string_view content, std::string_view origin, std::string_view option) {
  return parse_list<SeqLen>(content, origin, option, "sequences", parse_seq_len_items);
}

std::vector<std::uint64_t> read_length_list(std::string_view text, std::string_view option) {
  if (text.empty() || text[0] != '@') return parse_int_axis(text, option);
  const std::string path(text.substr(1));
  return parse_length_list(read_list_file(path, option), path, option);
}

std::vector<SeqLen> read_seq_len_list(std::string_view text, std::string_view option) {
  if (text.empty() || text[0] != '@') return parse_seq_len_items(text, option);
  const std::string path(text.substr(1));
  return parse_seq_len_list(read_list_file(path, option), path, option);
}

}  // namespace hbmscope
