#include "hbmscope/shard.hpp"

#include <charconv>
#include <string>

#include "hbmscope/error.hpp"

namespace hbmscope {

namespace {

bool parse_u64(std::string_view t, std::uint64_t& v) {
  if (t.empty()) return false;
  const auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  return ec == std::errc() && p == t.data() + t.size();
}

}  // namespace

Shard parse_shard(std::string_view text) {
  const auto bad = [&](const char* why) -> UsageError {
    return UsageError("--shard: '" + std::string(text) + "' " + why);
  };
  const std::size_t slash = text.find('/');
  if (slash == std::string_view::npos) throw bad("is not I/N (e.g. 2/8: the 2nd of 8 slices)");
  Shard s;
  if (!parse_u64(text.substr(0, slash), s.index) || !parse_u64(text.substr(slash + 1), s.count))
    throw bad("is not I/N with positive integers (e.g. 2/8)");
  if (s.count == 0) throw bad("has N = 0; N must be at least 1");
  if (s.index < 1 || s.index > s.count) throw bad("needs 1 <= I <= N");
  return s;
}

std::pair<std::uint64_t, std::uint64_t> shard_range(std::uint64_t n, Shard s) {
  // floor((i-1)*n/N) .. floor(i*n/N), in 128 bits so that n*N cannot wrap.
  __extension__ typedef unsigned __int128 u128;
  const auto at = [&](std::uint64_t i) {
    return static_cast<std::uint64_t>(static_cast<u128>(i) * n / s.count);
  };
  return {at(s.index - 1), at(s.index)};
}

}  // namespace hbmscope
