#include "json_check.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <set>
#include <vector>

namespace hbmscope::json_check {

namespace {

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
        if (!array) s += nlohmann::json(it.key()).dump() + ":";
        brief_into(*it, s, limit, depth + 1);
      }
      s += array ? "]" : "}";
      return;
    }
    case nlohmann::json::value_t::string: {
      const auto& t = v.get_ref<const std::string&>();
      s += nlohmann::json(t.size() > limit ? t.substr(0, limit) : t).dump();
      return;
    }
    case nlohmann::json::value_t::discarded: s += "nothing"; return;
    default: s += v.dump(); return;  // a scalar: short
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
  if (s.size() > 60) s = s.substr(0, 57) + "...";
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

namespace {

bool has_control(std::string_view text) {
  for (unsigned char c : text)
    if (c < 0x20 || c == 0x7f) return true;
  return false;
}

}  // namespace

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

// Where the parser is: one frame per open object or array, to name a repeated
// key by its path and refuse it (nlohmann keeps the later value silently).
struct KeyTracker {
  struct Frame {
    bool object;
    std::set<std::string> keys;
    std::string key;
    std::size_t index = 0;
  };
  std::vector<Frame> frames;

  std::string path_to(const std::string& last) const {
    std::string p;
    for (std::size_t i = 0; i + 1 < frames.size(); ++i) {
      if (!frames[i].object) {
        p.append("[").append(std::to_string(frames[i].index)).append("]");
        continue;
      }
      if (!p.empty()) p.append(".");
      p.append(frames[i].key);
    }
    return path(p, last);
  }
  void value_done() {
    if (!frames.empty() && !frames.back().object) ++frames.back().index;
  }
};

}  // namespace

nlohmann::json parse_json_text(std::string_view text, std::string_view origin) {
  using event = nlohmann::json::parse_event_t;
  KeyTracker keys;
  // Refused while parsing, before the nesting is built: deep values would
  // overflow the stack of any recursive walk over them later.
  const nlohmann::json::parser_callback_t check =
      [origin, &keys](int depth, event e, nlohmann::json& parsed) {
        switch (e) {
          case event::array_start:
          case event::object_start:
            if (depth >= max_json_depth)
              throw Error(printable(origin) + ": nested deeper than " +
                          std::to_string(max_json_depth) + " levels: not an hbmscope file");
            keys.frames.push_back({e == event::object_start, {}, {}, 0});
            break;
          case event::key: {
            auto& f = keys.frames.back();
            f.key = parsed.get<std::string>();
            if (!f.keys.insert(f.key).second)
              throw Error(printable(origin) + ": " + printable(keys.path_to(f.key)) +
                          " appears twice");
            break;
          }
          case event::array_end:
          case event::object_end:
            keys.frames.pop_back();
            keys.value_done();
            break;
          case event::value: keys.value_done(); break;
        }
        return true;
      };
  nlohmann::json j = nlohmann::json::parse(text, check, false);
  if (j.is_discarded()) {
    // Parse again with exceptions only to get the reason and position for the
    // message: a syntax error, or a number out of range (1e400).
    keys.frames.clear();
    try {
      const auto again = nlohmann::json::parse(text, check);
      (void)again;
    } catch (const nlohmann::json::exception& e) {
      std::string what = e.what();
      if (const auto pos = what.find("] "); what.rfind("[json.exception.", 0) == 0 && pos != std::string::npos)
        what = what.substr(pos + 2);
      throw Error(printable(origin) + ": not valid JSON: " + printable(what));
    }
    throw Error(printable(origin) + ": not valid JSON");
  }
  return j;
}

nlohmann::json read_json_file(const std::filesystem::path& p) {
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
  return parse_json_text(text, p.string());
}

}  // namespace hbmscope::json_check
