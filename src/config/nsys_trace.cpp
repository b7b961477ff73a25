// Nsight Systems, `nsys stats --format csv`:
//  - cuda_gpu_trace: every kernel launch of a whole run with its grid,
//      Start (ns),Duration (ns),CorrId,GrdX,GrdY,GrdZ,BlkX,BlkY,BlkZ,Reg/Trd,StcSMem (MB),DymSMem (MB),
//      Bytes (MB),Throughput (MB/s),SrcMemKd,DstMemKd,Device,Ctx,GreenCtx,Strm,Name
//    (older releases: no GreenCtx, "Throughput (MBps)"; memory copies and sets
//    share the table with an empty grid); columns are found by name, and the
//    time unit from the header ("(ns)", "(us)" with --timeunit);
//  - nvtx_gpu_proj_trace (ranges projected onto the GPU time line) and
//    nvtx_pushpop_trace (CPU push/pop times): ranges naming shapes.
// `nsys stats` prints NOTICE and "Processing [...]" lines before the header.
#include <algorithm>
#include <cmath>
#include <map>

#include "hbmscope/error.hpp"
#include "csv_stream.hpp"
#include "import_sniff.hpp"
#include "ncu_values.hpp"

namespace hbmscope::importing {

namespace {

bool has(std::string_view line, std::string_view what) { return line.find(what) != std::string_view::npos; }

// "Start (us)" -> 1000: nanoseconds per unit of the column, 0 when the
// column is not NAME with a time unit.
double ns_per_unit(std::string_view column, std::string_view name) {
  if (!starts_with(column, name) || column.size() < name.size() + 3) return 0;
  std::string_view u = column.substr(name.size());
  if (!starts_with(u, " (") || u.back() != ')') return 0;
  u = u.substr(2, u.size() - 3);
  if (u == "ns") return 1;
  if (u == "us" || u == "µs") return 1e3;
  if (u == "ms") return 1e6;
  if (u == "s") return 1e9;
  return 0;
}

struct Columns {
  std::map<std::string, std::size_t, std::less<>> index;
  std::optional<std::size_t> find(std::string_view name) const {
    const auto it = index.find(name);
    return it == index.end() ? std::nullopt : std::optional<std::size_t>(it->second);
  }
  // The column whose name is NAME with a time unit, and its ns per unit.
  std::optional<std::pair<std::size_t, double>> timed(std::string_view name) const {
    for (const auto& [n, i] : index)
      if (const double f = ns_per_unit(n, name); f > 0) return std::pair{i, f};
    return std::nullopt;
  }
};

}  // namespace

NsysReport nsys_header_kind(std::string_view line) {
  if (starts_with(line, "Time (%)") || starts_with(line, "\"Time (%)\"")) return NsysReport::summary;
  if (has(line, "Projected Start (") && has(line, "Name")) return NsysReport::nvtx_projected;
  if (!starts_with(line, "Start (") && !starts_with(line, "\"Start (")) return NsysReport::none;
  if (has(line, "End (") && (has(line, "RangeStack") || has(line, "DurChild") || has(line, "Lvl")))
    return NsysReport::nvtx_pushpop;
  if (has(line, "Duration (") && has(line, "GrdX") && has(line, "Name")) return NsysReport::gpu_trace;
  return NsysReport::none;
}

}  // namespace hbmscope::importing

namespace hbmscope {

void read_nsys_csv(const ByteSource& read, std::string_view origin, LaunchStream& into) {
  using namespace importing;
  const std::string o(origin);
  CsvStream in(read, origin);
  std::string line;
  NsysReport kind = NsysReport::none;
  std::size_t header_line = 0;
  while (in.next_line(line)) {
    kind = nsys_header_kind(trim(line));
    if (kind != NsysReport::none) {
      header_line = in.line();
      break;
    }
  }
  if (kind == NsysReport::none)
    throw Error(o + ": no Nsight Systems CSV header (Start (ns),Duration (ns),...,Name): not `nsys stats --format csv` "
                    "output; run nsys stats --report cuda_gpu_trace --format csv REPORT.nsys-rep");
  const std::string at_header = in.where(header_line);
  if (kind == NsysReport::summary)
    throw Error(at_header + ": a summary report (total time per kernel), not a trace: reconcile needs each launch; "
                            "run nsys stats --report cuda_gpu_trace --format csv");
  Columns c;
  const auto names = split_csv_line(line, origin);
  for (std::size_t i = 0; i < names.size(); ++i) c.index.emplace(std::string(trim(names[i])), i);
  auto need = [&](std::string_view name) {
    const auto i = c.find(name);
    if (!i) throw Error(at_header + ": the header has no '" + std::string(name) + "' column");
    return *i;
  };
  auto need_timed = [&](std::string_view name) {
    const auto t = c.timed(name);
    if (!t) throw Error(at_header + ": the header has no '" + std::string(name) + " (ns)' column");
    return *t;
  };
  const std::size_t name_col = need("Name");
  const bool trace = kind == NsysReport::gpu_trace;
  into.format = trace ? "nsys-trace" : "nsys-nvtx";
  std::pair<std::size_t, double> start{}, length{};
  std::optional<std::pair<std::size_t, double>> end_col;
  if (trace) start = need_timed("Start"), length = need_timed("Duration");
  else if (kind == NsysReport::nvtx_projected)
    start = need_timed("Projected Start"), length = need_timed("Projected Duration");
  else
    start = need_timed("Start"), end_col = need_timed("End");
  std::array<std::size_t, 3> grid_cols{};
  if (trace) grid_cols = {need("GrdX"), need("GrdY"), need("GrdZ")};
  NumberStyle style;
  std::vector<std::string> f;
  bool complete = false;
  std::size_t row_line = 0, copies = 0, other_ranges = 0;
  const std::size_t before_launches = into.launches.size(), before_ranges = into.ranges.size();
  auto number = [&](const std::vector<std::string>& row, std::size_t col, const std::string& where) {
    try {
      return parse_ncu_number(field_at(row, col), style.mark());
    } catch (const Error& e) {
      throw Error(where + ": column '" + names[col] + "': " + e.what());
    }
  };
  auto nanoseconds = [&](const std::vector<std::string>& row, std::pair<std::size_t, double> col,
                         const std::string& where) -> std::optional<double> {
    const auto v = number(row, col.first, where);
    if (!v) return std::nullopt;
    if (*v < 0)
      throw Error(where + ": column '" + names[col.first] + "': negative time " + shown(field_at(row, col.first)));
    // Nanoseconds on a 64-bit time line (585 years).
    if (!(*v * col.second < 1.8e19))
      throw Error(where + ": column '" + names[col.first] + "': " + shown(field_at(row, col.first)) + " is too large");
    return *v * col.second;
  };
  while (in.next_record(f, complete, row_line)) {
    const std::string where = in.where(row_line);
    if (f.size() == 1 && trim(f[0]).empty()) continue;
    if (f.size() != names.size())
      throw Error(where + ": " + std::to_string(f.size()) + " fields, the header has " + std::to_string(names.size()) +
                  (complete ? "" : " (truncated?)"));
    for (const auto& v : f) style.learn(v);
    const std::string& name = f[name_col];
    if (!trace) {
      const std::string text = nvtx_shape_text(name);
      if (text.empty()) {
        ++other_ranges;
        continue;
      }
      const auto s = nanoseconds(f, start, where);
      const auto e = end_col ? nanoseconds(f, *end_col, where) : nanoseconds(f, length, where);
      if (!s || !e) continue;  // a range without times (never ended)
      NvtxRange r;
      r.name = text;
      r.start_ns = static_cast<std::uint64_t>(*s);
      r.end_ns =
          end_col ? static_cast<std::uint64_t>(*e) : r.start_ns + std::min(static_cast<std::uint64_t>(*e), ~r.start_ns);
      r.projected = kind == NsysReport::nvtx_projected;
      r.origin = where;
      into.add(std::move(r));
      continue;
    }
    if (trim(f[grid_cols[0]]).empty()) {  // [CUDA memcpy ...], [CUDA memset]
      ++copies;
      continue;
    }
    MeasuredLaunch l;
    l.origin = where;
    l.kernel = name;
    if (l.kernel.empty()) throw Error(where + ": column 'Name' is empty");
    if (const auto id = c.find("CorrId")) l.id = f[*id];
    if (l.id.empty()) l.id = std::to_string(into.launches.size() - before_launches + 1);
    for (std::size_t k = 0; k < 3; ++k) {
      const auto g = number(f, grid_cols[k], where);
      if (!g || *g < 1 || *g > 4294967295.0 || *g != std::floor(*g))
        throw Error(where + ": column '" + names[grid_cols[k]] + "': " + shown(f[grid_cols[k]]) +
                    " is not a grid size");
      l.grid[k] = static_cast<std::uint64_t>(*g);
    }
    const auto s = nanoseconds(f, start, where);
    const auto d = nanoseconds(f, length, where);
    if (s) l.start_ns = static_cast<std::uint64_t>(*s);
    if (d) {
      if (*d != 0 && *d < 1e-3)
        throw Error(where + ": column '" + names[length.first] + "': " + shown(f[length.first]) +
                    " is not a kernel's duration (below a picosecond)");
      l.seconds = *d * 1e-9;
      l.time_from = TimeSource::duration;
    }
    for (const char* k : {"Device", "Ctx", "GreenCtx", "Strm"})
      if (const auto i = c.find(k)) (l.stream += f[*i]) += '/';
    into.add(std::move(l));
  }
  if (trace) {
    if (copies) into.notes.push_back(o + ": " + std::to_string(copies) + " memory copies and sets left out");
    if (into.launches.size() == before_launches)
      throw Error(o + ": no kernel launch in the trace" +
                  (copies ? " (only " + std::to_string(copies) + " memory copies and sets)" : std::string()));
  } else if (into.ranges.size() == before_ranges) {
    throw Error(o + ": no NVTX range named hbmscope:... among " + std::to_string(other_ranges) +
                " range(s); name the attention calls' ranges as docs/reconcile.md shows");
  }
}

LaunchStream read_nsys_csv_text(std::string_view text, std::string_view origin) {
  LaunchStream s;
  read_nsys_csv(importing::text_source(text), origin, s);
  return s;
}

void apply_nvtx_ranges(LaunchStream& s) {
  if (s.ranges.empty()) return;
  std::vector<const NvtxRange*> r;
  for (const auto& x : s.ranges) r.push_back(&x);
  std::stable_sort(r.begin(), r.end(),
                   [](const NvtxRange* a, const NvtxRange* b) { return a->start_ns < b->start_ns; });
  // max_end[i]: the latest end among ranges 0..i, so that the walk back from a
  // launch stops once no earlier range can still be open.
  std::vector<std::uint64_t> max_end(r.size());
  for (std::size_t i = 0; i < r.size(); ++i) max_end[i] = std::max(i ? max_end[i - 1] : 0, r[i]->end_ns);
  std::size_t traced = 0, named = 0;
  bool cpu_times = false;
  for (auto& l : s.launches) {
    if (!l.start_ns || !l.nvtx.empty()) continue;
    ++traced;
    const std::uint64_t t = *l.start_ns;
    auto i =
        std::upper_bound(r.begin(), r.end(), t, [](std::uint64_t v, const NvtxRange* x) { return v < x->start_ns; }) -
        r.begin();
    // The innermost range holding t is the one that started last.
    while (i > 0 && max_end[static_cast<std::size_t>(i - 1)] >= t) {
      const NvtxRange& x = *r[static_cast<std::size_t>(--i)];
      if (x.end_ns >= t) {
        l.nvtx = x.name;
        cpu_times = cpu_times || !x.projected;
        ++named;
        break;
      }
    }
  }
  if (traced > named)
    s.notes.push_back(std::to_string(traced - named) + " of " + std::to_string(traced) +
                      " traced launch(es) started inside no hbmscope: range");
  if (cpu_times)
    s.notes.push_back("nvtx_pushpop_trace ranges are CPU times: a launch is in a range when it started on the GPU "
                      "before the range was popped (synchronise inside the range, or use nvtx_gpu_proj_trace)");
}

}  // namespace hbmscope
