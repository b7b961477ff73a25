#pragma once
// Shared by the libFuzzer harnesses (tests/fuzz/fuzz_*.cpp): the rule they
// check is the project's, "bad input gets one clear line, never a crash".
// hbmscope::Error is that line; any other exception escaping a reader would
// reach main's "internal error", so it is let through to abort the run, and
// so are sanitizer reports, timeouts and memory blow-ups. Messages may quote
// the input as given: main escapes them on the way out.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "../../src/report/json_check.hpp"
#include "hbmscope/error.hpp"

namespace hbmscope::fuzz {

inline std::string_view text(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// A refusal says something, and main's way of printing it (escaped, as
// json_check::printable does) gives one line with no control character.
inline void check_message(const Error& e) {
  const std::string_view m = e.what();
  if (m.empty()) __builtin_trap();
  for (const char c : json_check::printable(m))
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) __builtin_trap();
}

// Runs f; an Error is a refusal (checked to be one line), anything else escapes.
template <class F>
void refusal_ok(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    check_message(e);
  }
}

}  // namespace hbmscope::fuzz
