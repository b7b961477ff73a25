#pragma once
// The values of Nsight Compute (and Nsight Systems) launches, shared by the
// readers and not a public interface: which metric a column or row names,
// numbers in the input's own style, units, and the figures a launch is given
// once all its values are in (a time derived from cycles, an L2 hit count).
#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hbmscope/ncu_import.hpp"

namespace hbmscope::importing {

enum class Metric {
  none,
  read,          // dram__bytes_read.sum, dram__sectors_read.sum
  write,         // dram__bytes_write.sum, dram__sectors_write.sum
  total,         // dram__bytes.sum: reads and writes in one count
  time,          // gpu__time_duration.sum
  section_time,  // the SOL section's "Duration"
  pct,           // DRAM throughput, % of peak
  sm_cycles,
  sm_rate,  // sm__cycles_elapsed.avg, .avg.per_second
  gpc_cycles,
  gpc_rate,  // gpc__cycles_elapsed.max, gpc__cycles_elapsed.avg.per_second ("Elapsed Cycles", "SM Frequency")
  l2_reads,
  l2_hits,
  l2_misses,  // lts__t_sectors_srcunit_tex_op_read.sum, _lookup_hit, _lookup_miss
  grid_size,  // "Grid Size" of Launch Statistics, launch__grid_size: CTAs in all
  count,      // the number of metrics above
};

struct MetricInfo {
  Metric metric = Metric::none;
  double base = 1;  // the scale of a value without a unit (32 for sector counts of DRAM bytes)
};
MetricInfo metric_of(std::string_view name);

// Learns an input's decimal mark from its numbers, so that a grouping
// separator alone ("295,808") can be read once the input has shown its mark.
class NumberStyle {
 public:
  void learn(std::string_view text);
  DecimalMark mark() const { return mark_; }

 private:
  DecimalMark mark_ = DecimalMark::unknown;
};

// The metric values of one launch, kept as text until the launch is complete
// (a details page spreads them over rows; the input's decimal mark may show
// only later in the launch), then converted into it. The first value of a
// metric wins.
class LaunchValues {
 public:
  void add(const MetricInfo& m, std::string_view unit, std::string_view text, const std::string& where,
           std::string_view column);
  bool has(Metric m) const { return values_[static_cast<std::size_t>(m)].has_value(); }
  // Converts every value into `l` (units, the time from cycles where there is
  // no duration); throws Error naming the row and column of a bad value.
  void finish(MeasuredLaunch& l, DecimalMark mark) const;
  // Finishes `cur` (when there is one) into the stream, and starts afresh.
  void finish_into(std::optional<MeasuredLaunch>& cur, DecimalMark mark, LaunchStream& into);
  void clear();

 private:
  struct Value {
    double base = 1;
    std::string unit, text, where, column;
  };
  std::array<std::optional<Value>, static_cast<std::size_t>(Metric::count)> values_;
};

// Whether a launch from index `from` on has a figure the model can use (DRAM
// bytes, a time, ncu's DRAM throughput).
bool any_figure(const LaunchStream& s, std::size_t from);

// "(9, 32, 1)" as printed in the Grid Size and Block Size columns (separators
// allowed in the numbers); std::nullopt when it is not three whole numbers.
std::optional<std::array<std::uint64_t, 3>> parse_dims(std::string_view text);

// The innermost "hbmscope:..." range name in an NVTX field or range name.
std::string nvtx_shape_text(std::string_view field);

// The capture command docs/reconcile.md recommends, for messages.
extern const char* const ncu_metric_help;

// The message for an input in which no launch was read: what its ==PROF==,
// ==WARNING== and ==ERROR== lines say (nothing profiled, the application
// failed), or `otherwise`.
struct ProfilerLines {
  std::size_t prof = 0, warnings = 0;
  std::string first_error;    // the first ==ERROR== line
  bool none_profiled = false; // "==WARNING== No kernels were profiled."
  void see(std::string_view line);
  bool any() const { return prof || warnings || !first_error.empty(); }
};
[[noreturn]] void refuse_empty(std::string_view origin, const ProfilerLines& p, const std::string& otherwise);

}  // namespace hbmscope::importing
