#include "json_check.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

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

}  // namespace

std::string brief(const nlohmann::json& v) {
  std::string s;
  if (v.is_array()) s = v.empty() ? "an empty array" : "an array ";
  else if (v.is_object()) return v.empty() ? "an empty object" : "an object";
  if (!(v.is_array() && v.empty())) brief_into(v, s, 60, 0);
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

void fail(std::string_view origin, std::string_view key, std::string_view expected,
          const nlohmann::json& got) {
  throw Error(std::string(origin) + ": " + std::string(key) + ": expected " + std::string(expected) +
              ", got " + brief(got));
}

void fail_text(std::string_view origin, std::string_view key, std::string_view message) {
  throw Error(std::string(origin) + ": " + std::string(key) + ": " + std::string(message));
}

void require_printable(std::string_view origin, std::string_view key, std::string_view text) {
  for (unsigned char c : text)
    if (c < 0x20 || c == 0x7f) fail_text(origin, key, "a control character is not allowed in a name");
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
      throw Error(std::string(origin) + ": " + path(where, k) + ": unknown key (known: " + list +
                  ")");
    }
  }
}

nlohmann::json parse_json_text(std::string_view text, std::string_view origin) {
  // Refused while parsing, before the nesting is built: deep values would
  // overflow the stack of any recursive walk over them later.
  const nlohmann::json::parser_callback_t depth_limit =
      [origin](int depth, nlohmann::json::parse_event_t event, nlohmann::json&) {
        if ((event == nlohmann::json::parse_event_t::array_start ||
             event == nlohmann::json::parse_event_t::object_start) &&
            depth >= max_json_depth)
          throw Error(std::string(origin) + ": nested deeper than " + std::to_string(max_json_depth) +
                      " levels: not an hbmscope file");
        return true;
      };
  nlohmann::json j = nlohmann::json::parse(text, depth_limit, false);
  if (j.is_discarded()) {
    // Parse again with exceptions only to get the position for the message.
    try {
      const auto again = nlohmann::json::parse(text, depth_limit);
      (void)again;
    } catch (const nlohmann::json::parse_error& e) {
      std::string what = e.what();
      const auto pos = what.find("parse error");
      if (pos != std::string::npos) what = what.substr(pos);
      for (char& c : what)
        if (c == '\n' || c == '\r') c = ' ';
      throw Error(std::string(origin) + ": not valid JSON: " + what);
    }
    throw Error(std::string(origin) + ": not valid JSON");
  }
  return j;
}

nlohmann::json read_json_file(const std::filesystem::path& p) {
  std::error_code ec;
  if (std::filesystem::is_directory(p, ec)) throw Error("cannot read '" + p.string() + "': is a directory");
  std::ifstream in(p, std::ios::binary);
  if (!in) throw Error("cannot read '" + p.string() + "': " + std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw Error("cannot read '" + p.string() + "'");
  return parse_json_text(ss.str(), p.string());
}

}  // namespace hbmscope::json_check
