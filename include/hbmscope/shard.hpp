#pragma once
// `--shard I/N`: the I-th of N disjoint, contiguous slices of a sweep, so that
// a big sweep spreads over array jobs; `merge` joins them back in order.
#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

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

// `--shard auto`: the shard of this task of a Slurm array job, from its
// environment (`env` returns a variable's value, nullopt when unset):
// SLURM_ARRAY_TASK_ID, _COUNT and _MIN (required), _STEP (1 when unset) and
// _MAX (checked when set). Task ID of the array MIN-MAX:STEP is shard
// (ID - MIN) / STEP + 1 of COUNT. Throws Error (not UsageError: the command
// line is well formed, the environment is not an array job) with one line:
// outside an array job, on a value that is not a decimal integer, or on an
// array whose indices are not one regular range (a list such as 1,3,7, or a
// re-run of some of its tasks), where only --shard I/N can say which shard.
using EnvLookup = std::function<std::optional<std::string>(std::string_view name)>;
Shard shard_from_slurm_array(const EnvLookup& env);

// The indices in 1..count that `have` lacks, as inclusive ranges in order,
// found from the gaps between the indices present: a count of 10^18 costs no
// more than one of 2. Indices outside 1..count are ignored.
std::vector<std::pair<std::uint64_t, std::uint64_t>> missing_ranges(const std::set<std::uint64_t>& have,
                                                                    std::uint64_t count);
// Ranges as Slurm's --array takes them: "2,5-7" (sep ",") or "2, 5-7" (sep ", ").
std::string format_ranges(const std::vector<std::pair<std::uint64_t, std::uint64_t>>& ranges,
                          std::string_view sep = ",");

}  // namespace hbmscope
