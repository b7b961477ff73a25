#include "json_check.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

namespace hbmscope::json_check {

namespace {

// The first n bytes of s or fewer, never ending inside a UTF-8 character: a
// cut character would make the message invalid UTF-8 (and the JSON library
// throws on it).
std::string_view cut_utf8(std::string_view s, std::size_t n) {
  if (s.size() <= n) return s;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xc0) == 0x80) --n;
  return s.substr(0, n);
}

// dump() that cannot throw on bytes that are not UTF-8 (they become U+FFFD).
std::string dump_safe(const nlohmann::json& v) {
  return v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// Appends a rendering of v to s, stopping once s is past `limit` characters:
// a value read from a file can be huge or deeply nested, and dumping it whole
// would take its size in memory and its depth in stack.
void brief_into(const nlohmann::json& v, std::string& s, std::size_t limit, int depth) {
  if (s.size() > limit) return;
  switch (v.type()) {
    case nlohmann::json::value_t::array:
    case nlohmann::json::value_t::object: {
      const bool array = v.is_array();
      if (depth > 0) {  // inside a container: a placeholder, never a recursion
        s += v.empty() ? (array ? "[]" : "{}") : (array ? "[...]" : "{...}");
        return;
      }
      s += array ? "[" : "{";
      bool first = true;
      for (auto it = v.begin(); it != v.end() && s.size() <= limit; ++it) {
        if (!first) s += ",";
        first = false;
        if (!array) s += dump_safe(nlohmann::json(std::string(cut_utf8(it.key(), limit)))) + ":";
        brief_into(*it, s, limit, depth + 1);
      }
      s += array ? "]" : "}";
      return;
    }
    case nlohmann::json::value_t::string: {
      const auto& t = v.get_ref<const std::string&>();
      s += dump_safe(nlohmann::json(std::string(cut_utf8(t, limit))));
      return;
    }
    case nlohmann::json::value_t::discarded: s += "nothing"; return;
    default: s += dump_safe(v); return;  // a scalar: short
  }
}

// Length of the well-formed UTF-8 sequence at s[i], or 0 if there is none.
std::size_t utf8_length(std::string_view s, std::size_t i) {
  const auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  std::size_t n = 0;
  unsigned lo = 0x80, hi = 0xbf;  // allowed range of the second byte
  if (c < 0x80) return 1;
  if (c >= 0xc2 && c <= 0xdf) n = 2;
  else if (c >= 0xe0 && c <= 0xef) n = 3, lo = c == 0xe0 ? 0xa0 : 0x80, hi = c == 0xed ? 0x9f : 0xbf;
  else if (c >= 0xf0 && c <= 0xf4) n = 4, lo = c == 0xf0 ? 0x90 : 0x80, hi = c == 0xf4 ? 0x8f : 0xbf;
  else return 0;
  if (i + n > s.size() || b(i + 1) < lo || b(i + 1) > hi) return 0;
  for (std::size_t k = 2; k < n; ++k)
    if (b(i + k) < 0x80 || b(i + k) > 0xbf) return 0;
  return n;
}

std::string hex_escape(unsigned char c) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "\\x%02x", c);
  return buf;
}

}  // namespace

std::string printable(std::string_view text) {
  std::string r;
  r.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    const std::size_t n = utf8_length(text, i);
    if (n == 0) {
      r += hex_escape(c);
      ++i;
    } else if (c == '\n') {
      r += "\\n", ++i;
    } else if (c == '\r') {
      r += "\\r", ++i;
    } else if (c == '\t') {
      r += "\\t", ++i;
    } else if (c < 0x20 || c == 0x7f) {
      r += hex_escape(c), ++i;
    } else {
      r.append(text.substr(i, n));
      i += n;
    }
  }
  return r;
}

std::string brief(const nlohmann::json& v) {
  std::string s;
  if (v.is_array()) s = v.empty() ? "an empty array" : "an array ";
  else if (v.is_object()) return v.empty() ? "an empty object" : "an object";
  if (!(v.is_array() && v.empty())) brief_into(v, s, 60, 0);
  if (s.size() > 60) s = std::string(cut_utf8(s, 57)) + "...";
  return s;
}

// Keys come from the file and may hold anything; printable() keeps the line whole.
void fail(std::string_view origin, std::string_view key, std::string_view expected,
          const nlohmann::json& got) {
  throw Error(printable(origin) + ": " + printable(key) + ": expected " + std::string(expected) +
              ", got " + brief(got));
}

void fail_text(std::string_view origin, std::string_view key, std::string_view message) {
  throw Error(printable(origin) + ": " + printable(key) + ": " + printable(message));
}

bool has_control(std::string_view text) {
  for (unsigned char c : text)
    if (c < 0x20 || c == 0x7f) return true;
  return false;
}

void require_printable(std::string_view origin, std::string_view key, std::string_view text) {
  if (has_control(text)) fail_text(origin, key, "a control character is not allowed in a name");
}

void require_printable_strings(const nlohmann::json& j, std::string_view origin,
                               std::string_view where) {
  const auto check = [&](std::string_view key, std::string_view text, const char* what) {
    if (has_control(text)) fail_text(origin, key, std::string("a control character is not allowed in ") + what);
  };
  if (j.is_string()) {
    check(where.empty() ? "(top level)" : where, j.get_ref<const std::string&>(), "a string");
  } else if (j.is_array()) {
    for (std::size_t i = 0; i < j.size(); ++i)
      require_printable_strings(j[i], origin, std::string(where) + "[" + std::to_string(i) + "]");
  } else if (j.is_object()) {
    for (const auto& [k, v] : j.items()) {
      const std::string p = path(where, k);
      check(p, k, "a key");
      require_printable_strings(v, origin, p);
    }
  }
}

std::string path(std::string_view parent, std::string_view key) {
  if (parent.empty()) return std::string(key);
  return std::string(parent) + "." + std::string(key);
}

void only_keys(const nlohmann::json& j, std::string_view origin, std::string_view where,
               std::initializer_list<std::string_view> allowed) {
  for (const auto& [k, v] : j.items()) {
    bool ok = false;
    for (auto a : allowed) ok |= k == a;
    if (!ok) {
      std::string list;
      for (auto a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
      throw Error(printable(origin) + ": " + printable(path(where, k)) + ": unknown key (known: " + list +
                  ")");
    }
  }
}

namespace {

// Builds the value as nlohmann's own DOM parser does, with the checks of every
// hbmscope input on the way: nesting depth (refused when the container opens,
// before it is built), repeated keys (nlohmann keeps the later value silently)
// and control characters in keys. A SAX handler keeps reading linear: the
// parser-callback path of nlohmann/json 3.11.2 rescans the parent array at
// every closing brace, quadratic in the length of an array of objects.
// Optionally the elements of the top-level "rows" array are handed to a sink
// one by one instead of being kept (streaming a large report).
class CheckedBuilder {
 public:
  using json = nlohmann::json;
  CheckedBuilder(std::string_view origin, const RowSink* sink) : origin_(origin), sink_(sink) {}

  json& result() { return root_; }

  bool null() { return scalar(json(nullptr)); }
  bool boolean(bool v) { return scalar(json(v)); }
  bool number_integer(json::number_integer_t v) { return scalar(json(v)); }
  bool number_unsigned(json::number_unsigned_t v) { return scalar(json(v)); }
  bool number_float(json::number_float_t v, const json::string_t&) { return scalar(json(v)); }
  bool string(json::string_t& v) { return scalar(json(std::move(v))); }
  bool binary(json::binary_t& v) { return scalar(json(json::binary_t(std::move(v)))); }

  bool start_object(std::size_t) { return open(json::object()); }
  bool start_array(std::size_t) { return open(json::array()); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }

  bool key(json::string_t& k) {
    Frame& f = frames_.back();
    for (unsigned char c : k)
      if (c < 0x20 || c == 0x7f)
        throw Error(printable(origin_) + ": " + printable(path_to(k)) +
                    ": a control character is not allowed in a key");
    // One lookup: the member is made now, its value placed when it is read.
    const auto [it, fresh] = f.value->get_ref<json::object_t&>().emplace(k, json());
    if (!fresh) throw Error(printable(origin_) + ": " + printable(path_to(k)) + " appears twice");
    f.key = std::move(k);
    f.slot = &it->second;
    return true;
  }

  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) {
    std::string what = e.what();
    if (const auto pos = what.find("] "); what.rfind("[json.exception.", 0) == 0 && pos != std::string::npos)
      what = what.substr(pos + 2);
    throw Error(printable(origin_) + ": not valid JSON: " + printable(what));
  }

 private:
  struct Frame {
    json* value;
    std::string key;         // objects: the key of the member being read
    json* slot = nullptr;    // objects: where its value goes
    std::size_t index = 0;   // arrays: the index of the element being read
    bool streamed = false;   // the top-level "rows" array of a streamed read
  };

  // Where a value goes: the root, a member, an element, or (streamed rows) the
  // row being built. nullptr when a scalar row went to the sink at once.
  json* place(json&& v) {
    if (frames_.empty()) {
      root_ = std::move(v);
      return &root_;
    }
    Frame& f = frames_.back();
    if (f.value->is_object()) {
      *f.slot = std::move(v);
      return f.slot;
    }
    if (f.streamed) {
      if (v.is_array() || v.is_object()) {
        row_ = std::move(v);
        return &row_;
      }
      (*sink_)(f.index++, std::move(v));
      return nullptr;
    }
    auto& arr = f.value->get_ref<json::array_t&>();
    arr.push_back(std::move(v));
    ++f.index;
    return &arr.back();
  }

  bool scalar(json&& v) {
    (void)place(std::move(v));
    return true;
  }

  bool open(json&& v) {
    if (frames_.size() >= static_cast<std::size_t>(max_json_depth))
      throw Error(printable(origin_) + ": nested deeper than " + std::to_string(max_json_depth) +
                  " levels: not an hbmscope file");
    const bool rows = sink_ && frames_.size() == 1 && v.is_array() && frames_[0].value->is_object() &&
                      frames_[0].key == "rows";
    json* at = place(std::move(v));
    frames_.push_back({at, {}, nullptr, 0, rows});
    return true;
  }

  bool close() {
    frames_.pop_back();
    if (frames_.empty()) return true;
    Frame& f = frames_.back();
    if (f.streamed) {
      (*sink_)(f.index++, std::move(row_));
      row_ = json();
    }
    return true;
  }

  // "a.b[3].c" for a message; built only on error.
  std::string path_to(const std::string& last) const {
    std::string p;
    for (std::size_t i = 0; i + 1 < frames_.size(); ++i) {
      const Frame& f = frames_[i];
      if (f.value->is_array()) {
        // The index of the element open below: elements placed so far, less one
        // for the open one (a streamed array counts rows already handed over).
        const std::size_t idx = f.streamed ? f.index : f.index - 1;
        p.append("[").append(std::to_string(idx)).append("]");
        continue;
      }
      if (!p.empty()) p.append(".");
      p.append(f.key);
    }
    return path(p, last);
  }

  std::string origin_;
  const RowSink* sink_;
  json root_;
  json row_;
  std::vector<Frame> frames_;
};

nlohmann::json parse_checked(std::string_view text, std::string_view origin, const RowSink* sink) {
  CheckedBuilder b(origin, sink);
  nlohmann::json::sax_parse(text.data(), text.data() + text.size(), &b);
  return std::move(b.result());
}

std::string read_whole_file(const std::filesystem::path& p);

}  // namespace

nlohmann::json parse_json_text(std::string_view text, std::string_view origin) {
  return parse_checked(text, origin, nullptr);
}

nlohmann::json read_json_file(const std::filesystem::path& p) {
  return parse_checked(read_whole_file(p), p.string(), nullptr);
}

nlohmann::json read_json_rows(const std::filesystem::path& p, const RowSink& sink) {
  return parse_checked(read_whole_file(p), p.string(), &sink);
}

nlohmann::json parse_json_rows(std::string_view text, std::string_view origin, const RowSink& sink) {
  return parse_checked(text, origin, &sink);
}

namespace {

std::string read_whole_file(const std::filesystem::path& p) {
  const std::string name = "'" + printable(p.string()) + "'";
  // O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused below.
  const int fd = ::open(p.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) throw Error("cannot read " + name + ": " + std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw Error("cannot read " + name + ": " + std::strerror(errno));
  if (S_ISDIR(st.st_mode)) throw Error("cannot read " + name + ": is a directory");
  if (!S_ISREG(st.st_mode)) throw Error("cannot read " + name + ": not a regular file");
  const auto limit_message = [&] {
    return "cannot read " + name + ": larger than " + std::to_string(max_input_bytes >> 30) +
           " GiB, the limit for an input file";
  };
  if (static_cast<std::uint64_t>(st.st_size) > max_input_bytes) throw Error(limit_message());
  std::string text;
  text.reserve(static_cast<std::size_t>(st.st_size));
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw Error("cannot read " + name + ": " + std::strerror(errno));
    if (n == 0) break;
    if (text.size() + static_cast<std::size_t>(n) > max_input_bytes) throw Error(limit_message());  // grew
    text.append(buf, static_cast<std::size_t>(n));
  }
  return text;
}

}  // namespace

}  // namespace hbmscope::json_check
