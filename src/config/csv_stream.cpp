#include "csv_stream.hpp"

#include <cstring>
#include <memory>

#include "hbmscope/error.hpp"
#include "../report/json_check.hpp"

namespace hbmscope::importing {

std::string shown(std::string_view s) {
  std::string v(s.substr(0, 60));
  if (s.size() > 60) v += "...";
  std::string out(1, '\'');
  out.append(json_check::printable(v)).push_back('\'');
  return out;
}

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

std::string_view trim(std::string_view t) {
  while (!t.empty() && (t.front() == ' ' || t.front() == '\t')) t.remove_prefix(1);
  while (!t.empty() && (t.back() == ' ' || t.back() == '\t' || t.back() == '\r')) t.remove_suffix(1);
  return t;
}

CsvStream::CsvStream(const ByteSource& read, std::string_view origin) : read_(read), origin_(origin), buf_(64 << 10) {}

std::string CsvStream::where(std::size_t line) const { return std::string(origin_) + ":" + std::to_string(line); }

bool CsvStream::next_line(std::string& out) {
  out.clear();
  int c = get();
  if (c < 0) return false;
  ++line_;
  while (c >= 0 && c != '\n') {
    if (out.size() >= max_csv_record_bytes)
      throw Error(where(line_) + ": a line longer than " + std::to_string(max_csv_record_bytes >> 20) +
                  " MiB: not a profiler's text");
    out += static_cast<char>(c);
    c = get();
  }
  if (!out.empty() && out.back() == '\r') out.pop_back();
  return true;
}

int CsvStream::peek() {
  if (pos_ == len_ && !fill()) return -1;
  return static_cast<unsigned char>(buf_[pos_]);
}

bool CsvStream::next_record(std::vector<std::string>& fields, bool& complete, std::size_t& first_line) {
  fields.clear();
  int c = get();
  if (c < 0) return false;
  first_line = ++line_;
  std::string field;
  std::size_t bytes = 0;
  bool in_quotes = false, was_quoted = false, closed = false;
  complete = false;
  for (;; c = get()) {
    if (++bytes > max_csv_record_bytes)
      throw Error(where(first_line) + ": a record longer than " + std::to_string(max_csv_record_bytes >> 20) +
                  " MiB: not a profiler's CSV");
    if (c < 0) {
      if (in_quotes) throw Error(where(first_line) + ": the input ends inside a quoted field (truncated?)");
      break;
    }
    if (in_quotes) {
      if (c == '"') {
        if (peek() == '"') {
          field += '"';
          (void)get();
        } else {
          in_quotes = false;
          closed = true;
        }
      } else {
        if (c == '\n') ++line_;
        field += static_cast<char>(c);
      }
      continue;
    }
    if (c == ',') {
      fields.push_back(std::move(field));
      field.clear();
      was_quoted = closed = false;
    } else if (c == '\n') {
      complete = true;
      break;
    } else if (c == '\r') {
      // a CRLF line end; a lone CR inside a line is dropped as before
    } else if (closed) {
      throw Error(where(line_) + ": field " + std::to_string(fields.size() + 1) +
                  ": text after a closing quote: not CSV");
    } else if (c == '"') {
      if (!field.empty() || was_quoted)
        throw Error(where(line_) + ": field " + std::to_string(fields.size() + 1) +
                    ": a quote inside an unquoted field: not CSV");
      in_quotes = was_quoted = true;
    } else {
      field += static_cast<char>(c);
    }
  }
  fields.push_back(std::move(field));
  return true;
}

int CsvStream::get() {
  if (pos_ == len_ && !fill()) return -1;
  const char c = buf_[pos_++];
  if (c == '\0') throw Error(where(line_ == 0 ? 1 : line_) + ": binary data (a NUL byte): not a text file");
  return static_cast<unsigned char>(c);
}

bool CsvStream::fill() {
  if (eof_) return false;
  len_ = read_(buf_.data(), buf_.size());
  pos_ = 0;
  if (len_ == 0) eof_ = true;
  if (!started_ && len_ > 0) {
    started_ = true;
    // A UTF-8 byte-order mark (Windows editors, PowerShell's Out-File) is not
    // part of the first field. A source may hand out fewer bytes than asked:
    // the mark is looked for in what the first read gave.
    if (len_ >= 3 && std::memcmp(buf_.data(), "\xEF\xBB\xBF", 3) == 0) pos_ = 3;
    if (pos_ == len_) return fill();
  }
  return len_ > 0;
}

std::vector<std::string> split_csv_line(const std::string& line, std::string_view origin) {
  const ByteSource src = text_source(line);
  CsvStream s(src, origin);
  std::vector<std::string> f;
  bool complete = false;
  std::size_t first = 0;
  s.next_record(f, complete, first);
  return f;
}

ByteSource text_source(std::string_view text) {
  auto at = std::make_shared<std::size_t>(0);
  return [text, at](char* b, std::size_t n) {
    const std::size_t k = std::min(n, text.size() - *at);
    std::memcpy(b, text.data() + *at, k);
    *at += k;
    return k;
  };
}

}  // namespace hbmscope::importing
