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
  if (slash == std::string_view::npos)
    throw bad("is not I/N (e.g. 2/8: the 2nd of 8 slices) or auto (from a Slurm array job's environment)");
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

Shard shard_from_slurm_array(const EnvLookup& env) {
  const std::string where = "--shard auto: ";
  const auto id_text = env("SLURM_ARRAY_TASK_ID");
  if (!id_text)
    throw Error(where + "not in a Slurm array job (SLURM_ARRAY_TASK_ID is not set); give --shard I/N, or "
                        "submit the sweep with `hbmscope submit`");
  // Each variable read as a decimal integer, named with its text when it is not.
  const auto number = [&](const char* name, std::optional<std::uint64_t> fallback) -> std::uint64_t {
    const auto text = env(name);
    if (!text) {
      if (fallback) return *fallback;
      throw Error(where + name + " is not set, though SLURM_ARRAY_TASK_ID is; give --shard I/N");
    }
    std::uint64_t v = 0;
    if (!parse_u64(*text, v))
      throw Error(where + name + "='" + *text + "' is not a non-negative decimal integer; give --shard I/N");
    return v;
  };
  const std::uint64_t id = number("SLURM_ARRAY_TASK_ID", std::nullopt);
  const std::uint64_t count = number("SLURM_ARRAY_TASK_COUNT", std::nullopt);
  const std::uint64_t min = number("SLURM_ARRAY_TASK_MIN", std::nullopt);
  const std::uint64_t step = number("SLURM_ARRAY_TASK_STEP", 1);
  const std::string array = "SLURM_ARRAY_TASK_ID=" + std::to_string(id) + " of an array of " +
                            std::to_string(count) + " from " + std::to_string(min) + " by " + std::to_string(step);
  if (count == 0 || step == 0) throw Error(where + array + ": a count and a step must be at least 1");
  if (id < min || (id - min) % step != 0)
    throw Error(where + array + ": the task is not one of the array's indices");
  const std::uint64_t index = (id - min) / step + 1;
  // Slurm sets _MAX beside _MIN; with a count that a regular range would not
  // have (1,3,7 gives MIN 1, MAX 7, STEP 1, COUNT 3), the task's place in the
  // array, and so its shard, cannot be told from the environment.
  std::optional<std::uint64_t> max;
  if (env("SLURM_ARRAY_TASK_MAX")) max = number("SLURM_ARRAY_TASK_MAX", std::nullopt);
  const bool regular = index <= count && (!max || (*max >= min && (*max - min) % step == 0 &&
                                                   (*max - min) / step == count - 1));
  if (!regular)
    throw Error(where + array + (max ? " to " + std::to_string(*max) : std::string()) +
                ": the array's indices are not one range MIN-MAX:STEP (a list, or a re-run of some of its "
                "tasks), so its shards cannot be told; give --shard $SLURM_ARRAY_TASK_ID/N with the array "
                "numbered 1-N");
  return Shard{index, count};
}

std::vector<std::pair<std::uint64_t, std::uint64_t>> missing_ranges(const std::set<std::uint64_t>& have,
                                                                    std::uint64_t count) {
  std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges;
  std::uint64_t next = 1;  // the first index not yet accounted for
  for (const std::uint64_t i : have) {
    if (i < next || i > count) continue;
    if (i > next) ranges.emplace_back(next, i - 1);
    next = i + 1;
  }
  if (next <= count) ranges.emplace_back(next, count);
  return ranges;
}

std::string format_ranges(const std::vector<std::pair<std::uint64_t, std::uint64_t>>& ranges, std::string_view sep) {
  std::string out;
  for (const auto& [a, b] : ranges) {
    if (!out.empty()) out += sep;
    out += std::to_string(a);
    if (b > a) {
      out += '-';
      out += std::to_string(b);
    }
  }
  return out;
}

}  // namespace hbmscope
