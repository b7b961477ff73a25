// Nsight Compute's console text (ncu without --csv), as people paste it into
// issues:
//   [1433] python3@127.0.0.1
//     NAME (GX, GY, GZ)x(BX, BY, BZ), Context C, Stream S, Device D, CC X.Y
//       Section: GPU Speed Of Light Throughput
//       ----------------------- ----------- ------------
//       Metric Name             Metric Unit Metric Value
//       ----------------------- ----------- ------------
//       Duration                    usecond       606.56
//       ...
//       ----------------------- ----------- ------------
// Older versions print the table without its "Metric Name" row. Columns are
// found from the dashed line; units are ncu's automatic ones (usecond,
// Kbyte, cycle/nsecond, Ghz, %); numbers carry grouping separators.
#include <optional>

#include "hbmscope/error.hpp"
#include "csv_stream.hpp"
#include "import_sniff.hpp"
#include "ncu_values.hpp"

namespace hbmscope::importing {

namespace {

struct KernelLine {
  std::string name;
  std::array<std::uint64_t, 3> grid{};
  std::string context, stream, device;
};

// The kernel line: the name, then "(GX, GY, GZ)x(BX, BY, BZ)", then ", Key
// value" items (Context, Stream, Device, CC; other items are ignored).
std::optional<KernelLine> parse_kernel_line(std::string_view line) {
  const std::size_t x = line.rfind(")x(");
  if (x == std::string_view::npos) return std::nullopt;
  const std::size_t open = line.rfind('(', x);
  const std::size_t close = line.find(')', x + 3);
  if (open == std::string_view::npos || close == std::string_view::npos || open == 0) return std::nullopt;
  const auto grid = parse_dims(line.substr(open, x + 1 - open));
  const auto block = parse_dims(line.substr(x + 2, close + 1 - (x + 2)));
  if (!grid || !block) return std::nullopt;
  KernelLine k;
  k.name = std::string(trim(line.substr(0, open)));
  k.grid = *grid;
  std::string_view rest = line.substr(close + 1);
  bool identified = false;
  while (starts_with(rest, ", ")) {
    rest.remove_prefix(2);
    const std::size_t end = std::min(rest.find(", "), rest.size());
    const std::string_view item = trim(rest.substr(0, end));
    rest = rest.substr(end);
    auto value = [&](std::string_view key) -> std::optional<std::string> {
      if (!starts_with(item, key)) return std::nullopt;
      return std::string(trim(item.substr(key.size())));
    };
    if (auto v = value("Context ")) k.context = *v, identified = true;
    else if (auto w = value("Stream ")) k.stream = *w, identified = true;
    else if (auto d = value("Device ")) k.device = *d, identified = true;
    else if (starts_with(item, "CC ")) identified = true;
  }
  if (!identified || k.name.empty()) return std::nullopt;
  return k;
}

bool dashed(std::string_view t) {
  return !t.empty() && t.find_first_not_of("- ") == std::string_view::npos && t[0] == '-';
}

// The [begin, end) of each run of dashes: the table's columns.
std::vector<std::pair<std::size_t, std::size_t>> dash_spans(std::string_view line) {
  std::vector<std::pair<std::size_t, std::size_t>> s;
  for (std::size_t i = 0; i < line.size();) {
    if (line[i] != '-') {
      ++i;
      continue;
    }
    const std::size_t b = i;
    while (i < line.size() && line[i] == '-') ++i;
    s.emplace_back(b, i);
  }
  return s;
}

struct TableRow {
  std::string name, unit, value;
};

// A table row: the value is its last word; the unit the word before it when
// that starts in the unit column; the name the rest.
TableRow table_row(std::string_view line, const std::vector<std::pair<std::size_t, std::size_t>>& spans) {
  TableRow r;
  std::string_view t = line;
  while (!t.empty() && (t.back() == ' ' || t.back() == '\r')) t.remove_suffix(1);
  const std::size_t vs = t.find_last_of(' ');
  if (vs == std::string_view::npos) {
    r.name = std::string(trim(t));
    return r;
  }
  r.value = std::string(t.substr(vs + 1));
  std::string_view before = t.substr(0, vs);
  while (!before.empty() && before.back() == ' ') before.remove_suffix(1);
  const std::size_t us = before.find_last_of(' ');
  const std::size_t unit_col = spans.size() >= 3 ? spans[1].first : std::string_view::npos;
  if (us != std::string_view::npos && unit_col != std::string_view::npos && us + 1 >= unit_col) {
    r.unit = std::string(before.substr(us + 1));
    before = before.substr(0, us);
  }
  r.name = std::string(trim(before));
  return r;
}

}  // namespace

bool is_ncu_kernel_line(std::string_view line) { return parse_kernel_line(trim(line)).has_value(); }

}  // namespace hbmscope::importing

namespace hbmscope {

void read_ncu_console(const ByteSource& read, std::string_view origin, LaunchStream& into) {
  using namespace importing;
  CsvStream in(read, origin);
  ProfilerLines prof;
  NumberStyle style;
  LaunchValues values;
  std::optional<MeasuredLaunch> cur;
  const std::size_t before = into.launches.size();
  std::string process, line;
  std::size_t launches = 0;
  bool in_table = false, header_seen = false, rows_seen = false;
  std::vector<std::pair<std::size_t, std::size_t>> spans;
  while (in.next_line(line)) {
    const std::string where = in.where(in.line());
    const std::string_view t = trim(line);
    if (starts_with(t, "==")) {
      prof.see(t);
      continue;
    }
    if (t.empty()) continue;
    if (t[0] == '[') {  // "[1433] python3@127.0.0.1": the process of the kernels below
      const std::size_t close = t.find("] ");
      if (close != std::string_view::npos && close > 1 &&
          t.substr(1, close - 1).find_first_not_of("0123456789") == std::string_view::npos) {
        process = std::string(t.substr(1, close - 1));
        continue;
      }
    }
    if (auto k = parse_kernel_line(t)) {
      values.finish_into(cur, style.mark(), into);
      in_table = false;
      MeasuredLaunch l;
      l.origin = where;
      l.id = std::to_string(++launches);
      l.kernel = std::move(k->name);
      l.grid = k->grid;
      l.stream = process + "/" + k->context + "/" + k->stream + "/";
      cur = std::move(l);
      continue;
    }
    if (!cur) continue;  // the application's own output
    if (dashed(t)) {
      if (!in_table) {
        in_table = true;
        header_seen = rows_seen = false;
        spans = dash_spans(line);
      } else if (!(header_seen && !rows_seen)) {
        in_table = false;  // the closing line (the one after the header row continues the table)
      } else {
        rows_seen = true;  // rows follow
        header_seen = false;
      }
      continue;
    }
    if (starts_with(t, "Section:")) in_table = false;
    if (!in_table) {  // "Section:" lines, rule advice, chart titles, NVTX ranges
      if (const auto n = nvtx_shape_text(t); !n.empty()) cur->nvtx = n;
      continue;
    }
    if (starts_with(t, "Metric Name")) {  // the header row, between two dashed lines
      header_seen = true;
      continue;
    }
    const TableRow r = table_row(line, spans);
    rows_seen = true;
    style.learn(r.value);
    const MetricInfo mi = metric_of(r.name);
    if (mi.metric != Metric::none) values.add(mi, r.unit, r.value, where, r.name);
  }
  values.finish_into(cur, style.mark(), into);
  into.format = "ncu-console";
  if (into.launches.size() == before)
    refuse_empty(origin, prof,
                 std::string(origin) +
                     ": no kernel line (NAME (GX, GY, GZ)x(BX, BY, BZ), Context C, Stream S, Device D, CC X.Y): not "
                     "Nsight Compute's console output");
  if (!any_figure(into, before))
    throw Error(std::string(origin) +
                ": no Duration, DRAM Throughput or dram__bytes metric in any Section table; run ncu with "
                "--section SpeedOfLight, or --metrics dram__bytes_read.sum,dram__bytes_write.sum,"
                "gpu__time_duration.sum");
}

LaunchStream read_ncu_console_text(std::string_view text, std::string_view origin) {
  LaunchStream s;
  read_ncu_console(importing::text_source(text), origin, s);
  return s;
}

}  // namespace hbmscope
