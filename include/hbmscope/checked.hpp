#pragma once
// 64-bit arithmetic that refuses to wrap: byte counts and FLOPs of huge shapes
// must be an error, never a silently wrong number.
#include <cstdint>
#include <string_view>

#include "hbmscope/error.hpp"

namespace hbmscope {

[[noreturn]] void throw_overflow(std::string_view what);

inline std::uint64_t checked_add(std::uint64_t a, std::uint64_t b, std::string_view what) {
  std::uint64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) throw_overflow(what);
  return r;
}

inline std::uint64_t checked_mul(std::uint64_t a, std::uint64_t b, std::string_view what) {
  std::uint64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) throw_overflow(what);
  return r;
}

template <typename... Ts>
std::uint64_t checked_product(std::string_view what, std::uint64_t first, Ts... rest) {
  std::uint64_t r = first;
  ((r = checked_mul(r, static_cast<std::uint64_t>(rest), what)), ...);
  return r;
}

inline std::uint64_t ceil_div(std::uint64_t a, std::uint64_t b) { return a / b + (a % b != 0); }

}  // namespace hbmscope
