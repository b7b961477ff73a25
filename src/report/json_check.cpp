#include "json_check.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace hbmscope::json_check {

std::string brief(const nlohmann::json& v) {
  std::string s;
  switch (v.type()) {
    case nlohmann::json::value_t::array: s = v.empty() ? "an empty array" : "an array " + v.dump(); break;
    case nlohmann::json::value_t::object: s = v.empty() ? "an empty object" : "an object"; break;
    case nlohmann::json::value_t::null: s = "null"; break;
    case nlohmann::json::value_t::discarded: s = "nothing"; break;
    default: s = v.dump(); break;
  }
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
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded()) {
    // Parse again with exceptions only to get the position for the message.
    try {
      const auto again = nlohmann::json::parse(text);
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
