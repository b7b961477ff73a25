#pragma once
// What the readers of measured input share (src/config/ncu_*.cpp,
// nsys_trace.cpp, timings_import.cpp), not a public interface: records and
// lines of a text input read in a stream, and quoting user text in messages.
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "hbmscope/ncu_import.hpp"

namespace hbmscope::importing {

// 'text' for a message: control characters escaped, cut after 60 characters.
std::string shown(std::string_view s);

bool starts_with(std::string_view s, std::string_view prefix);
std::string_view trim(std::string_view s);

// Buffered CSV records over a ByteSource: quoted fields may hold commas,
// doubled quotes and line breaks; a NUL byte means the input is not text, and
// text after a closing quote is not CSV. A UTF-8 byte-order mark at the start
// is skipped.
class CsvStream {
 public:
  CsvStream(const ByteSource& read, std::string_view origin);

  std::size_t line() const { return line_; }
  std::string where(std::size_t line) const;

  // One physical line, without its line break. false at the end.
  bool next_line(std::string& out);
  // The next record's first character without taking it (-1 at the end).
  int peek();
  // One record. `complete` is false when the input ended without a line break.
  bool next_record(std::vector<std::string>& fields, bool& complete, std::size_t& first_line);

 private:
  int get();
  bool fill();

  const ByteSource& read_;
  std::string_view origin_;
  std::vector<char> buf_;
  std::size_t pos_ = 0, len_ = 0, line_ = 0;
  bool eof_ = false, started_ = false;
};

// The fields of one line known to hold no quoted line break (a header).
std::vector<std::string> split_csv_line(const std::string& line, std::string_view origin);

// A ByteSource over a string that outlives it.
ByteSource text_source(std::string_view text);

// The field at i, or "" past the end of a short row.
inline const std::string& field_at(const std::vector<std::string>& f, std::size_t i) {
  static const std::string none;
  return i < f.size() ? f[i] : none;
}

}  // namespace hbmscope::importing
