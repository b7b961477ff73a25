#pragma once
// `--shard I/N`: the I-th of N disjoint, contiguous slices of a sweep, so that
// a big sweep spreads over array jobs; `merge` joins them back in order.
#include <cstdint>
#include <string_view>
#include <utility>

namespace hbmscope {

struct Shard {
  std::uint64_t index = 1;  // 1-based
  std::uint64_t count = 1;
};

// "3/8" -> {3, 8}. Throws Error naming the text unless 1 <= I <= N.
Shard parse_shard(std::string_view text);

// [begin, end) of shard s over n items: sizes differ by at most one, the
// slices are disjoint and cover [0, n).
std::pair<std::uint64_t, std::uint64_t> shard_range(std::uint64_t n, Shard s);

}  // namespace hbmscope
