#pragma once
// Nsight Compute CSV as the two page readers share it (ncu_details.cpp,
// ncu_raw.cpp), not a public interface: the header, identity columns, and
// launch IDs seen within one capture.
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "csv_stream.hpp"
#include "import_sniff.hpp"
#include "ncu_values.hpp"

namespace hbmscope::importing {

struct NcuHeader {
  std::vector<std::string> names;
  std::map<std::string, std::size_t> index;  // identity and used columns by name
  std::vector<std::size_t> nvtx;             // every other column: searched for "hbmscope:" ranges
  std::vector<bool> identity;                // per column: an identity column (ID, names, CC, ...)
  std::vector<MetricInfo> metrics;           // per column (the raw page's metric columns)
  bool details = false;                      // "Metric Name" present: the details page
  bool any_metric = false;                   // a DRAM byte, time or DRAM throughput metric
  std::size_t needed = 0;                    // fields a complete row must reach

  std::optional<std::size_t> col(const char* name) const {
    const auto it = index.find(name);
    return it == index.end() ? std::nullopt : std::optional<std::size_t>(it->second);
  }
};

NcuHeader parse_ncu_header(const std::vector<std::string>& fields, const std::string& where);

// A row with more fields than the header (a trailing empty one is the comma
// ncu leaves after short rows, not extra).
void check_width(const std::vector<std::string>& f, const NcuHeader& h, const std::string& where);

// A launch's identity: ID, kernel, the stream key (process, context, stream),
// its grid where a column gives it, and an NVTX "hbmscope:" range.
MeasuredLaunch ncu_launch(const std::vector<std::string>& f, const NcuHeader& h, const std::string& where);

// Launch IDs of one capture (one header): a launch met twice is refused.
class LaunchIds {
 public:
  // Throws Error when (process, id) was met before in this capture; `line`
  // is the row's line in `origin`.
  void see(const std::vector<std::string>& f, const NcuHeader& h, std::string_view origin, std::size_t line);
  void clear() { seen_.clear(); }

 private:
  std::map<std::string, std::unordered_map<std::uint64_t, std::size_t>> seen_;  // process -> id -> first line
};

// The rows of a capture after its first header, as both pages read them:
// ncu's own lines (==PROF==, ==WARNING==, ==ERROR==: seen by `prof`) and blank
// lines skipped, each row checked against the header's width (a short last
// row is truncated). A new header (another process or capture) replaces `h`
// and is returned with `header` set; one of the other page form is refused.
class NcuRows {
 public:
  NcuRows(CsvStream& in, NcuHeader& h, ProfilerLines& prof) : in_(in), h_(h), prof_(prof) {}
  bool next();
  const std::vector<std::string>& fields() const { return f_; }
  const std::string& where() const { return where_; }
  std::size_t line() const { return at_; }
  bool header() const { return header_; }

 private:
  CsvStream& in_;
  NcuHeader& h_;
  ProfilerLines& prof_;
  std::vector<std::string> f_;
  std::string where_, text_;
  std::size_t at_ = 0;
  bool header_ = false;
};

// The page readers, from the line after the first header on.
void read_ncu_details(CsvStream& in, NcuHeader h, std::size_t header_line, std::string_view origin,
                      LaunchStream& into, ProfilerLines& prof);
void read_ncu_raw(CsvStream& in, NcuHeader h, std::size_t header_line, std::string_view origin,
                  LaunchStream& into, ProfilerLines& prof);

// After a capture is read: refuses one with no launch or no value the model can use.
void check_ncu_capture(std::string_view origin, std::size_t header_line, std::size_t launches_before,
                       const LaunchStream& into, bool any_metric_column);

}  // namespace hbmscope::importing
