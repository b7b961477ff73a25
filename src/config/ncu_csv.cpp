// Nsight Compute CSV: finding the header among the application's output and
// ncu's own lines, the header of either page form and every generation, and
// the identity of a launch. The pages are read by ncu_details.cpp and
// ncu_raw.cpp.
#include "ncu_csv.hpp"

#include "hbmscope/error.hpp"
#include "../report/json_check.hpp"

namespace hbmscope::importing {

bool is_ncu_header_line(std::string_view line) { return starts_with(line, "\"ID\",") || starts_with(line, "ID,"); }

namespace {

bool identity_column(const std::string& n) {
  for (const char* c : {"ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Kernel Time", "Context",
                        "Stream", "Block Size", "Grid Size", "Device", "CC", "Section Name", "Metric Name",
                        "Metric Unit", "Metric Value", "Rule Name", "Rule Type", "Rule Description",
                        "Estimated Speedup Type", "Estimated Speedup"})
    if (n == c) return true;
  return false;
}

}  // namespace

NcuHeader parse_ncu_header(const std::vector<std::string>& f, const std::string& where) {
  NcuHeader h;
  h.names = f;
  h.metrics.assign(f.size(), {});
  h.identity.assign(f.size(), false);
  for (std::size_t i = 0; i < f.size(); ++i) {
    const std::string& n = f[i];
    const bool identity = identity_column(n);
    h.identity[i] = identity;
    if (!identity) h.metrics[i] = metric_of(n);
    const bool used = identity || h.metrics[i].metric != Metric::none;
    if (used) {
      const auto [it, fresh] = h.index.emplace(n, i);
      if (!fresh)
        throw Error(where + ": duplicate column '" + json_check::printable(n) + "' (columns " +
                    std::to_string(it->second + 1) + " and " + std::to_string(i + 1) + ")");
    }
    const Metric m = h.metrics[i].metric;
    h.any_metric = h.any_metric || (m != Metric::none && m != Metric::grid_size && m != Metric::l2_reads &&
                                    m != Metric::l2_hits && m != Metric::l2_misses);
    // NVTX columns sit before "Kernel Name" and their names vary between ncu
    // versions: every column that is not an identity or metric column is
    // searched for an "hbmscope:" range name.
    if (!used) h.nvtx.push_back(i);
  }
  if (!h.index.count("Kernel Name"))
    throw Error(where + ": the header has no 'Kernel Name' column: not Nsight Compute CSV");
  h.details = h.index.count("Metric Name") > 0;
  if (h.details) {
    for (const char* c : {"Metric Unit", "Metric Value"})
      if (!h.index.count(c)) throw Error(where + ": the details page header has no '" + c + "' column");
    h.any_metric = true;
  }
  for (const auto& [n, i] : h.index)
    if (n == "ID" || n == "Kernel Name" || n == "Metric Name" || n == "Metric Value" ||
        h.metrics[i].metric != Metric::none)
      h.needed = std::max(h.needed, i + 1);
  return h;
}

bool NcuRows::next() {
  bool complete = false;
  while (true) {
    if (in_.peek() == '=') {
      if (!in_.next_line(text_)) return false;
      prof_.see(text_);
      continue;
    }
    if (!in_.next_record(f_, complete, at_)) return false;
    where_ = in_.where(at_);
    if (f_.size() == 1 && f_[0].empty()) continue;  // blank line
    header_ = field_at(f_, h_.col("ID").value_or(0)) == "ID";
    if (header_) {
      const bool details = h_.details;
      h_ = parse_ncu_header(f_, where_);
      if (h_.details != details) throw Error(where_ + ": a header of the other page form: one page per file");
      return true;
    }
    check_width(f_, h_, where_);
    if (!complete && f_.size() < h_.needed)
      throw Error(where_ + ": the last row ends after " + std::to_string(f_.size()) + " of " +
                  std::to_string(h_.names.size()) + " fields (truncated?)");
    return true;
  }
}

void check_width(const std::vector<std::string>& f, const NcuHeader& h, const std::string& where) {
  std::size_t n = f.size();
  while (n > h.names.size() && f[n - 1].empty()) --n;
  if (n > h.names.size())
    throw Error(where + ": " + std::to_string(f.size()) + " fields, the header has " + std::to_string(h.names.size()));
}

MeasuredLaunch ncu_launch(const std::vector<std::string>& f, const NcuHeader& h, const std::string& where) {
  MeasuredLaunch l;
  l.origin = where;
  l.id = field_at(f, h.col("ID").value_or(0));
  if (l.id.empty() || l.id.size() > 19 || l.id.find_first_not_of("0123456789") != std::string::npos)
    throw Error(where + ": column 'ID': " + shown(l.id) + " is not a launch number");
  l.kernel = field_at(f, *h.col("Kernel Name"));
  if (l.kernel.empty()) throw Error(where + ": column 'Kernel Name' is empty");
  // Process, context and stream: the calls of one stream are grouped together.
  for (const char* c : {"Process ID", "Context", "Stream"})
    if (const auto i = h.col(c)) (l.stream += field_at(f, *i)) += '/';
  if (const auto i = h.col("Grid Size"))
    if (const auto d = parse_dims(field_at(f, *i))) l.grid = *d;
  for (auto i : h.nvtx)
    if (i < f.size())
      if (auto t = nvtx_shape_text(f[i]); !t.empty()) l.nvtx = t;
  return l;
}

void LaunchIds::see(const std::vector<std::string>& f, const NcuHeader& h, std::string_view origin, std::size_t line) {
  const std::string& id = field_at(f, h.col("ID").value_or(0));
  const std::string process = h.col("Process ID") ? field_at(f, *h.col("Process ID")) : std::string();
  const auto [it, fresh] = seen_[process].emplace(std::stoull(id), line);
  if (!fresh)
    throw Error(std::string(origin) + ":" + std::to_string(line) + ": launch ID " + id +
                (process.empty() ? "" : " of process " + shown(process)) + " again (first at " + std::string(origin) +
                ":" + std::to_string(it->second) +
                "): one launch twice in one capture; remove the repeated rows, or keep each capture under its "
                "own header");
}

void check_ncu_capture(std::string_view origin, std::size_t header_line, std::size_t launches_before,
                       const LaunchStream& into, bool any_metric_column) {
  if (into.launches.size() == launches_before)
    throw Error(std::string(origin) + ":" + std::to_string(header_line) + ": a header and no kernel launches after it");
  const bool any = any_figure(into, launches_before);
  if (!any_metric_column || !any)
    throw Error(std::string(origin) + ": no DRAM byte or duration metric " +
                (any_metric_column ? "values" : "columns") +
                " (dram__bytes_read.sum, dram__bytes_write.sum, dram__bytes.sum, gpu__time_duration.sum, "
                "sm__cycles_elapsed.avg with .avg.per_second); " +
                ncu_metric_help);
}

}  // namespace hbmscope::importing

namespace hbmscope {

void read_ncu_csv(const ByteSource& read, std::string_view origin, LaunchStream& into) {
  using namespace importing;
  CsvStream in(read, origin);
  ProfilerLines prof;
  std::string line;
  std::size_t header_line = 0;
  while (in.next_line(line)) {
    if (is_ncu_header_line(line)) {
      header_line = in.line();
      break;
    }
    prof.see(line);
  }
  if (header_line == 0)
    refuse_empty(origin, prof,
                 std::string(origin) + ": no Nsight Compute CSV header (a line starting with \"ID\",): not `ncu --csv` "
                                       "output; " + ncu_metric_help);
  NcuHeader h = parse_ncu_header(split_csv_line(line, origin), in.where(header_line));
  if (!h.details && !h.any_metric)
    throw Error(in.where(header_line) +
                ": none of the metric columns dram__bytes_read.sum, dram__bytes_write.sum, dram__bytes.sum, "
                "gpu__time_duration.sum is in the header; " + ncu_metric_help);
  into.format = h.details ? "ncu-details" : "ncu-raw";
  if (h.details) read_ncu_details(in, std::move(h), header_line, origin, into, prof);
  else read_ncu_raw(in, std::move(h), header_line, origin, into, prof);
}

LaunchStream read_ncu_csv_text(std::string_view text, std::string_view origin) {
  LaunchStream s;
  read_ncu_csv(importing::text_source(text), origin, s);
  return s;
}

}  // namespace hbmscope
