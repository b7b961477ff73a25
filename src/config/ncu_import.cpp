#include "hbmscope/ncu_import.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "hbmscope/error.hpp"
#include "../report/json_check.hpp"

namespace hbmscope {

namespace {

std::string shown(std::string_view s) {
  std::string v(s.substr(0, 60));
  if (s.size() > 60) v += "...";
  return "'" + json_check::printable(v) + "'";
}

// Buffered CSV records over a ByteSource: quoted fields may hold commas,
// doubled quotes and line breaks; a NUL byte means the input is not text.
class CsvStream {
 public:
  CsvStream(const ByteSource& read, std::string_view origin) : read_(read), origin_(origin), buf_(1 << 20) {}

  std::size_t line() const { return line_; }
  std::string where(std::size_t line) const { return std::string(origin_) + ":" + std::to_string(line); }

  // One physical line, without its line break. false at the end.
  bool next_line(std::string& out) {
    out.clear();
    int c = get();
    if (c < 0) return false;
    ++line_;
    while (c >= 0 && c != '\n') {
      if (out.size() >= max_csv_record_bytes)
        throw Error(where(line_) + ": a line longer than " + std::to_string(max_csv_record_bytes >> 20) +
                    " MiB: not Nsight Compute CSV");
      out += static_cast<char>(c);
      c = get();
    }
    if (!out.empty() && out.back() == '\r') out.pop_back();
    return true;
  }

  // The next record's first character without taking it (-1 at the end).
  int peek() {
    if (pos_ == len_ && !fill()) return -1;
    return static_cast<unsigned char>(buf_[pos_]);
  }

  // One record. `complete` is false when the input ended without a line break.
  bool next_record(std::vector<std::string>& fields, bool& complete, std::size_t& first_line) {
    fields.clear();
    int c = get();
    if (c < 0) return false;
    first_line = ++line_;
    std::string field;
    std::size_t bytes = 0;
    bool in_quotes = false, was_quoted = false;
    complete = false;
    for (;; c = get()) {
      if (++bytes > max_csv_record_bytes)
        throw Error(where(first_line) + ": a record longer than " + std::to_string(max_csv_record_bytes >> 20) +
                    " MiB: not Nsight Compute CSV");
      if (c < 0) {
        if (in_quotes) throw Error(where(first_line) + ": the input ends inside a quoted field (truncated?)");
        break;
      }
      if (in_quotes) {
        if (c == '"') {
          if (peek() == '"') {
            field += '"';
            (void)get();
          } else {
            in_quotes = false;
          }
        } else {
          if (c == '\n') ++line_;
          field += static_cast<char>(c);
        }
        continue;
      }
      if (c == '"') {
        if (!field.empty() || was_quoted)
          throw Error(where(line_) + ": field " + std::to_string(fields.size() + 1) +
                      ": a quote inside an unquoted field: not CSV");
        in_quotes = was_quoted = true;
      } else if (c == ',') {
        fields.push_back(std::move(field));
        field.clear();
        was_quoted = false;
      } else if (c == '\n') {
        complete = true;
        break;
      } else if (c != '\r') {
        field += static_cast<char>(c);
      }
    }
    fields.push_back(std::move(field));
    return true;
  }

 private:
  int get() {
    if (pos_ == len_ && !fill()) return -1;
    const char c = buf_[pos_++];
    if (c == '\0')
      throw Error(where(line_ == 0 ? 1 : line_) + ": binary data (a NUL byte): not a CSV file");
    return static_cast<unsigned char>(c);
  }
  bool fill() {
    if (eof_) return false;
    len_ = read_(buf_.data(), buf_.size());
    pos_ = 0;
    if (len_ == 0) eof_ = true;
    return len_ > 0;
  }

  const ByteSource& read_;
  std::string_view origin_;
  std::vector<char> buf_;
  std::size_t pos_ = 0, len_ = 0, line_ = 0;
  bool eof_ = false;
};

// Splits one line that is known to be a header (no quoted line breaks).
std::vector<std::string> split_line(const std::string& line, std::string_view origin) {
  std::size_t i = 0;
  ByteSource src = [&](char* b, std::size_t n) {
    const std::size_t k = std::min(n, line.size() - i);
    std::memcpy(b, line.data() + i, k);
    i += k;
    return k;
  };
  CsvStream s(src, origin);
  std::vector<std::string> f;
  bool complete = false;
  std::size_t first = 0;
  s.next_record(f, complete, first);
  return f;
}

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

bool is_ncu_header(std::string_view line) { return starts_with(line, "\"ID\",") || starts_with(line, "ID,"); }


// The innermost "hbmscope:..." range name in an NVTX field.
std::string nvtx_shape_text(std::string_view field) {
  const std::size_t at = field.rfind("hbmscope:");
  if (at == std::string_view::npos) return {};
  std::size_t end = at + 9;
  while (end < field.size()) {
    const char c = field[end];
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '=' || c == ',' || c == '_' || c == '.')) break;
    ++end;
  }
  return std::string(field.substr(at, end - at));
}

enum class Metric { none, read, write, time, pct };

struct MetricInfo {
  Metric metric = Metric::none;
  double extra = 1;  // sectors: x 32 when the unit says nothing
};

MetricInfo metric_of(std::string_view name) {
  if (name == "dram__bytes_read.sum") return {Metric::read, 1};
  if (name == "dram__bytes_write.sum") return {Metric::write, 1};
  if (name == "dram__sectors_read.sum") return {Metric::read, 32};
  if (name == "dram__sectors_write.sum") return {Metric::write, 32};
  if (name == "gpu__time_duration.sum" || name == "Duration") return {Metric::time, 1};
  if (name == "dram__throughput.avg.pct_of_peak_sustained_elapsed" || name == "DRAM Throughput")
    return {Metric::pct, 1};
  return {};
}

const char* metric_help =
    "capture with: ncu --csv --page raw --metrics dram__bytes_read.sum,dram__bytes_write.sum,"
    "gpu__time_duration.sum ...";

// Stores one value of a metric into a launch, converting its unit.
void store(MeasuredLaunch& l, const MetricInfo& mi, std::string_view unit, std::string_view text,
           const std::string& where, std::string_view column) {
  std::optional<double> v;
  try {
    v = parse_ncu_number(text);
  } catch (const Error& e) {
    throw Error(where + ": column '" + std::string(column) + "': " + e.what());
  }
  if (!v) return;
  if (*v < 0) throw Error(where + ": column '" + std::string(column) + "': negative value " + shown(text));
  const bool time = mi.metric == Metric::time;
  std::optional<double> scale;
  if (mi.metric == Metric::pct) scale = unit.empty() || unit == "%" ? std::optional<double>(1) : std::nullopt;
  else if (unit.empty()) scale = time ? 1e-9 : mi.extra;  // --csv prints base units: ns, bytes, sectors
  else if (unit == "sector" || unit == "sectors") scale = 32.0;
  else scale = unit_scale(unit, time);
  if (!scale)
    throw Error(where + ": column '" + std::string(column) + "': unit " + shown(unit) + " is not " +
                (time ? "a time unit (nsecond, usecond, msecond, second)"
                 : mi.metric == Metric::pct ? "%"
                                            : "a byte unit (byte, Kbyte, Mbyte, Gbyte, sector)"));
  const double x = *v * *scale;
  switch (mi.metric) {
    case Metric::read:
    case Metric::write: {
      if (!(x < 1.8e19)) throw Error(where + ": column '" + std::string(column) + "': " + shown(text) + " bytes is too large");
      const auto b = static_cast<std::uint64_t>(std::nearbyint(x));
      (mi.metric == Metric::read ? l.dram_read : l.dram_write) = b;
      break;
    }
    case Metric::time: l.seconds = x; break;
    case Metric::pct: l.dram_pct_of_peak = x; break;
    case Metric::none: break;
  }
}

struct Header {
  std::vector<std::string> names;
  std::map<std::string, std::size_t> index;
  std::vector<std::size_t> nvtx;
  std::size_t needed = 0;  // fields a complete row must reach
};

Header parse_header(const std::vector<std::string>& f, const std::string& where) {
  Header h;
  h.names = f;
  for (std::size_t i = 0; i < f.size(); ++i) {
    const std::string& n = f[i];
    const bool identity = n == "ID" || n == "Process ID" || n == "Process Name" || n == "Host Name" ||
                          n == "Kernel Name" || n == "Kernel Time" || n == "Context" || n == "Stream" ||
                          n == "Block Size" || n == "Grid Size" || n == "Device" || n == "CC";
    const bool used = identity || metric_of(n).metric != Metric::none || n == "Metric Name" ||
                      n == "Metric Unit" || n == "Metric Value";
    if (used) {
      const auto [it, fresh] = h.index.emplace(n, i);
      if (!fresh)
        throw Error(where + ": duplicate column '" + json_check::printable(n) + "' (columns " +
                    std::to_string(it->second + 1) + " and " + std::to_string(i + 1) + ")");
    }
    // NVTX columns sit before "Kernel Name" and their names vary between ncu
    // versions: every column that is not an identity or metric column is
    // searched for an "hbmscope:" range name.
    if (!used) h.nvtx.push_back(i);
  }
  if (!h.index.count("Kernel Name"))
    throw Error(where + ": the header has no 'Kernel Name' column: not Nsight Compute CSV");
  return h;
}

std::string field(const std::vector<std::string>& f, std::size_t i) { return i < f.size() ? f[i] : std::string(); }

void check_width(const std::vector<std::string>& f, const Header& h, const std::string& where) {
  // A trailing empty field (the comma ncu leaves after short rows) is not extra.
  std::size_t n = f.size();
  while (n > h.names.size() && f[n - 1].empty()) --n;
  if (n > h.names.size())
    throw Error(where + ": " + std::to_string(f.size()) + " fields, the header has " +
                std::to_string(h.names.size()));
}

// Process, context and stream: the calls of one stream are grouped together.
std::string stream_key(const std::vector<std::string>& f, const Header& h) {
  std::string k;
  for (const char* c : {"Process ID", "Context", "Stream"})
    if (const auto it = h.index.find(c); it != h.index.end()) (k += field(f, it->second)) += '/';
  return k;
}

void add_nvtx(MeasuredLaunch& l, const std::vector<std::string>& f, const Header& h) {
  for (auto i : h.nvtx)
    if (i < f.size())
      if (auto t = nvtx_shape_text(f[i]); !t.empty()) l.nvtx = t;
}

void finish(ImportedFile& out, std::string_view origin, std::size_t header_line, bool any_metric_column) {
  if (out.launches.empty())
    throw Error(std::string(origin) + ":" + std::to_string(header_line) +
                ": a header and no kernel launches after it");
  bool any = false;
  for (const auto& l : out.launches) any = any || l.dram_read || l.dram_write || l.seconds || l.dram_pct_of_peak;
  if (!any_metric_column || !any)
    throw Error(std::string(origin) + ": no DRAM byte or duration metric " +
                (any_metric_column ? "values" : "columns") +
                " (dram__bytes_read.sum, dram__bytes_write.sum, gpu__time_duration.sum); " + metric_help);
}

}  // namespace

std::optional<double> parse_ncu_number(std::string_view t) {
  while (!t.empty() && (t.front() == ' ' || t.front() == '\t')) t.remove_prefix(1);
  while (!t.empty() && (t.back() == ' ' || t.back() == '\t')) t.remove_suffix(1);
  if (t.empty() || t == "n/a" || t == "N/A" || t == "-") return std::nullopt;
  std::size_t commas = 0, dots = 0;
  std::size_t last_comma = 0, last_dot = 0;
  for (std::size_t i = 0; i < t.size(); ++i) {
    if (t[i] == ',') ++commas, last_comma = i;
    if (t[i] == '.') ++dots, last_dot = i;
  }
  const bool has_exp = t.find_first_of("eE") != std::string_view::npos;
  // Which separator groups thousands, and which is the decimal point.
  char group = 0, decimal = '.';
  if (commas && dots) {
    if (last_comma < last_dot) group = ',', decimal = '.';
    else group = '.', decimal = ',';
  } else if (commas > 1) {
    group = ',';
  } else if (dots > 1) {
    group = '.';
  } else if (commas == 1) {
    // Three digits after a single comma read either way, unless what comes
    // before cannot start a group (empty, "0...", or more than three digits).
    std::string_view lead = t.substr(0, last_comma);
    if (!lead.empty() && (lead.front() == '-' || lead.front() == '+')) lead.remove_prefix(1);
    const bool could_group = !lead.empty() && lead.size() <= 3 && lead.front() != '0';
    if (t.size() - last_comma - 1 == 3 && !has_exp && could_group)
      throw Error("ambiguous number " + shown(t) + " (thousands separator or decimal comma?)");
    decimal = ',';
  }
  std::string plain;
  const std::size_t dec_at = decimal == ',' ? (commas ? last_comma : std::string_view::npos)
                                            : (dots ? last_dot : std::string_view::npos);
  // Grouping: every group after the first has exactly three digits.
  std::size_t run = 0;
  bool seen_group = false;
  for (std::size_t i = 0; i < t.size(); ++i) {
    const char c = t[i];
    if (group && c == group) {
      if ((seen_group && run != 3) || run == 0 || run > 3 || (dec_at != std::string_view::npos && i > dec_at))
        throw Error("ambiguous number " + shown(t) + " (misplaced grouping separator)");
      seen_group = true;
      run = 0;
      continue;
    }
    if (i == dec_at) {
      if (seen_group && run != 3) throw Error("ambiguous number " + shown(t) + " (misplaced grouping separator)");
      plain += '.';
      run = 0;
      seen_group = false;
      continue;
    }
    if (c >= '0' && c <= '9') ++run;
    plain += c;
  }
  if (seen_group && run != 3) throw Error("ambiguous number " + shown(t) + " (misplaced grouping separator)");
  // The rest must be a plain decimal number.
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(plain.c_str(), &end);
  const bool digits_only = plain.find_first_not_of("0123456789.eE+-") == std::string::npos;
  if (plain.empty() || !digits_only || end != plain.c_str() + plain.size() || !std::isfinite(v) ||
      plain.find_first_of("0123456789") == std::string::npos)
    throw Error("not a number: " + shown(t));
  return v;
}

std::optional<double> unit_scale(std::string_view u, bool time) {
  if (time) {
    if (u == "nsecond" || u == "ns" || u == "nsec") return 1e-9;
    if (u == "usecond" || u == "us" || u == "usec" || u == "µs") return 1e-6;
    if (u == "msecond" || u == "ms" || u == "msec") return 1e-3;
    if (u == "second" || u == "s" || u == "sec") return 1.0;
    return std::nullopt;
  }
  if (u == "byte" || u == "B" || u == "bytes") return 1.0;
  if (u == "Kbyte" || u == "KB" || u == "kB" || u == "kbyte") return 1e3;
  if (u == "Mbyte" || u == "MB") return 1e6;
  if (u == "Gbyte" || u == "GB") return 1e9;
  if (u == "Tbyte" || u == "TB") return 1e12;
  if (u == "sector" || u == "sectors") return 32.0;
  return std::nullopt;
}

ImportedFile read_ncu_csv(const ByteSource& read, std::string_view origin) {
  CsvStream in(read, origin);
  ImportedFile out;
  std::string line;
  std::size_t header_line = 0;
  while (in.next_line(line))
    if (is_ncu_header(line)) {
      header_line = in.line();
      break;
    }
  if (header_line == 0)
    throw Error(std::string(origin) +
                ": no Nsight Compute CSV header (a line starting with \"ID\",): not `ncu --csv` output; " +
                metric_help);
  Header h = parse_header(split_line(line, origin), in.where(header_line));
  const bool details = h.index.count("Metric Name") > 0;
  out.format = details ? "ncu-details" : "ncu-raw";
  std::vector<MetricInfo> col_metric(h.names.size());
  bool any_metric_column = false;
  auto map_columns = [&] {
    col_metric.assign(h.names.size(), {});
    any_metric_column = false;
    for (std::size_t i = 0; i < h.names.size(); ++i) {
      col_metric[i] = metric_of(h.names[i]);
      any_metric_column = any_metric_column || col_metric[i].metric != Metric::none;
    }
    h.needed = 0;
    for (const auto& [n, i] : h.index)
      if (n == "ID" || n == "Kernel Name" || metric_of(n).metric != Metric::none || n == "Metric Value")
        h.needed = std::max(h.needed, i + 1);
  };
  map_columns();
  if (details) {
    for (const char* c : {"Metric Unit", "Metric Value"})
      if (!h.index.count(c))
        throw Error(in.where(header_line) + ": the details page header has no '" + c + "' column");
    any_metric_column = true;
  } else if (!any_metric_column) {
    throw Error(in.where(header_line) +
                ": none of the metric columns dram__bytes_read.sum, dram__bytes_write.sum, "
                "gpu__time_duration.sum is in the header; " + metric_help);
  }
  std::vector<std::string> units(h.names.size());
  bool units_seen = false;
  std::unordered_map<std::string, std::size_t> by_id;  // details page: launch of each ID
  std::vector<std::string> f;
  bool complete = false;
  std::size_t at = 0;
  const std::size_t id_col = h.index.count("ID") ? h.index.at("ID") : 0;
  while (true) {
    // ==PROF== / ==WARNING== lines from ncu itself may sit between rows.
    if (in.peek() == '=') {
      if (!in.next_line(line)) break;
      continue;
    }
    if (!in.next_record(f, complete, at)) break;
    const std::string where = in.where(at);
    if (f.size() == 1 && f[0].empty()) continue;  // blank line
    const std::string id = field(f, id_col);
    if (id == "ID") {  // a new header (another process): columns may differ
      h = parse_header(f, where);
      if ((h.index.count("Metric Name") > 0) != details)
        throw Error(where + ": a header of the other page form: one page per file");
      map_columns();
      units.assign(h.names.size(), {});
      units_seen = false;
      continue;
    }
    check_width(f, h, where);
    if (!complete && f.size() < h.needed)
      throw Error(where + ": the last row ends after " + std::to_string(f.size()) + " of " +
                  std::to_string(h.names.size()) + " fields (truncated?)");
    if (!details && id.empty()) {
      if (units_seen || !out.launches.empty()) throw Error(where + ": a row without an ID");
      for (std::size_t i = 0; i < f.size() && i < units.size(); ++i) units[i] = f[i];
      units_seen = true;
      continue;
    }
    if (id.empty() || id.find_first_not_of("0123456789") != std::string::npos)
      throw Error(where + ": column 'ID': " + shown(id) + " is not a launch number");
    const std::string kernel = field(f, h.index.at("Kernel Name"));
    if (kernel.empty()) throw Error(where + ": column 'Kernel Name' is empty");
    if (details) {
      const std::string key = field(f, h.index.count("Process ID") ? h.index.at("Process ID") : id_col) + "/" + id;
      auto [it, fresh] = by_id.emplace(key, out.launches.size());
      if (fresh) {
        if (out.launches.size() >= max_launches)
          throw Error(where + ": more than " + std::to_string(max_launches) + " launches in one file");
        MeasuredLaunch l;
        l.origin = where;
        l.id = id;
        l.kernel = kernel;
        l.stream = stream_key(f, h);
        out.launches.push_back(std::move(l));
      }
      MeasuredLaunch& l = out.launches[it->second];
      add_nvtx(l, f, h);
      const std::string name = field(f, h.index.at("Metric Name"));
      const MetricInfo mi = metric_of(name);
      if (mi.metric == Metric::none) continue;
      const bool have = mi.metric == Metric::read    ? l.dram_read.has_value()
                        : mi.metric == Metric::write ? l.dram_write.has_value()
                        : mi.metric == Metric::time  ? l.seconds.has_value()
                                                     : l.dram_pct_of_peak.has_value();
      if (have) continue;  // the first section that reports a metric wins
      store(l, mi, field(f, h.index.at("Metric Unit")), field(f, h.index.at("Metric Value")), where,
            "Metric Value (" + name + ")");
      continue;
    }
    if (out.launches.size() >= max_launches)
      throw Error(where + ": more than " + std::to_string(max_launches) + " launches in one file");
    MeasuredLaunch l;
    l.origin = where;
    l.id = id;
    l.kernel = kernel;
    l.stream = stream_key(f, h);
    add_nvtx(l, f, h);
    for (std::size_t i = 0; i < f.size() && i < col_metric.size(); ++i)
      if (col_metric[i].metric != Metric::none) store(l, col_metric[i], units[i], f[i], where, h.names[i]);
    out.launches.push_back(std::move(l));
  }
  if (!details && !units_seen) out.notes.push_back(std::string(origin) + ": no units row: base units (bytes, ns) assumed");
  finish(out, origin, header_line, any_metric_column);
  return out;
}

ImportedFile read_ncu_csv_text(std::string_view text, std::string_view origin) {
  std::size_t i = 0;
  ByteSource src = [&](char* b, std::size_t n) {
    const std::size_t k = std::min(n, text.size() - i);
    std::memcpy(b, text.data() + i, k);
    i += k;
    return k;
  };
  return read_ncu_csv(src, origin);
}

namespace {

std::optional<KernelRole> kind_word(std::string_view k) {
  if (k == "standard" || k == "math") return KernelRole::gemm;
  if (k == "flash" || k == "flash_fwd" || k == "cudnn" || k == "efficient") return KernelRole::flash_fwd;
  if (k == "flash_bwd") return KernelRole::flash_bwd;
  if (k == "split_kv" || k == "decode") return KernelRole::split_kv;
  if (k == "floor") return KernelRole::floor;
  return std::nullopt;
}

KernelRole call_role(std::optional<KernelRole> r) {
  if (!r) return KernelRole::flash_fwd;
  switch (*r) {
    case KernelRole::flash_fwd:
    case KernelRole::flash_bwd:
    case KernelRole::split_kv:
    case KernelRole::floor:
    case KernelRole::gemm: return *r;
    case KernelRole::softmax:
    case KernelRole::elementwise: return KernelRole::gemm;
    case KernelRole::split_kv_combine: return KernelRole::split_kv;
    default: return KernelRole::flash_fwd;
  }
}

std::uint64_t csv_u64(const std::string& v, const std::string& where, const std::string& col) {
  if (v.empty() || v.size() > 19 || v.find_first_not_of("0123456789") != std::string::npos)
    throw Error(where + ": column '" + col + "': " + shown(v) + " is not a whole number");
  return std::stoull(v);
}

}  // namespace

ImportedFile read_timings_csv(const ByteSource& read, std::string_view origin, const KernelTable& table) {
  CsvStream in(read, origin);
  ImportedFile out;
  out.format = "timings-csv";
  std::vector<std::string> f;
  bool complete = false;
  std::size_t at = 0;
  // The header: the first line that is not blank or a # comment.
  std::map<std::string, std::size_t> col;
  std::size_t width = 0;
  while (true) {
    if (in.peek() == '#') {
      std::string skip;
      in.next_line(skip);
      continue;
    }
    if (!in.next_record(f, complete, at)) throw Error(std::string(origin) + ": empty timings CSV");
    if (f.size() == 1 && f[0].empty()) continue;
    static const char* known[] = {"batch", "heads", "kv_heads", "seq_q", "seq",  "seq_kv", "head_dim",
                                  "d", "dtype", "causal", "pass", "time_s", "dram_bytes_read",
                                  "dram_bytes_write", "kernel"};
    for (std::size_t i = 0; i < f.size(); ++i) {
      bool ok = false;
      for (const char* k : known) ok = ok || f[i] == k;
      if (!ok)
        throw Error(in.where(at) + ": unknown column " + shown(f[i]) +
                    " (known: batch, heads, kv_heads, seq_q, seq_kv, head_dim, dtype, causal, pass, time_s, "
                    "dram_bytes_read, dram_bytes_write, kernel)");
      std::string name = f[i] == "seq" ? "seq_q" : f[i] == "d" ? "head_dim" : f[i];
      if (!col.emplace(name, i).second) throw Error(in.where(at) + ": duplicate column " + shown(f[i]));
    }
    width = f.size();
    break;
  }
  for (const char* need : {"seq_q", "head_dim", "time_s"})
    if (!col.count(need)) throw Error(in.where(at) + ": the timings CSV needs a '" + need + "' column");
  const std::size_t header_line = at;
  while (in.next_record(f, complete, at)) {
    const std::string where = in.where(at);
    if (f.size() == 1 && f[0].empty()) continue;
    if (f.size() != width)
      throw Error(where + ": " + std::to_string(f.size()) + " fields, the header has " + std::to_string(width) +
                  (complete ? "" : " (truncated?)"));
    auto get = [&](const char* k) { return col.count(k) ? f[col[k]] : std::string(); };
    MeasuredLaunch l;
    l.origin = where;
    l.id = std::to_string(out.launches.size() + 1);
    Shape s;
    s.seq_q = csv_u64(get("seq_q"), where, "seq_q");
    s.head_dim = csv_u64(get("head_dim"), where, "head_dim");
    s.seq_kv = col.count("seq_kv") ? csv_u64(get("seq_kv"), where, "seq_kv") : s.seq_q;
    s.batch = col.count("batch") ? csv_u64(get("batch"), where, "batch") : 1;
    s.heads = col.count("heads") ? csv_u64(get("heads"), where, "heads") : 1;
    s.kv_heads = col.count("kv_heads") ? csv_u64(get("kv_heads"), where, "kv_heads") : s.heads;
    if (col.count("dtype")) {
      const auto d = parse_dtype(get("dtype"));
      if (!d) throw Error(where + ": column 'dtype': " + shown(get("dtype")) + " is not fp32, fp16, bf16 or fp8");
      s.dtype = *d;
    }
    if (col.count("causal")) {
      const std::string c = get("causal");
      if (c != "0" && c != "1" && c != "true" && c != "false")
        throw Error(where + ": column 'causal': " + shown(c) + " is not 0, 1, true or false");
      s.causal = c == "1" || c == "true";
    }
    if (col.count("pass")) {
      const auto p = parse_pass(get("pass"));
      if (!p || *p == Pass::fwdbwd) throw Error(where + ": column 'pass': " + shown(get("pass")) + " is not fwd or bwd");
      s.pass = *p;
    }
    try {
      validate(s);
    } catch (const Error& e) {
      throw Error(where + ": " + e.what());
    }
    l.shape = s;
    MetricInfo t{Metric::time, 1};
    store(l, t, "second", get("time_s"), where, "time_s");
    if (!l.seconds || *l.seconds <= 0) throw Error(where + ": column 'time_s': " + shown(get("time_s")) + " is not a positive time");
    MetricInfo rd{Metric::read, 1}, wr{Metric::write, 1};
    if (col.count("dram_bytes_read")) store(l, rd, "byte", get("dram_bytes_read"), where, "dram_bytes_read");
    if (col.count("dram_bytes_write")) store(l, wr, "byte", get("dram_bytes_write"), where, "dram_bytes_write");
    l.kernel = get("kernel");
    std::optional<KernelRole> role;
    if (!l.kernel.empty()) {
      role = kind_word(l.kernel);
      if (!role)
        if (const auto* p = classify(table, l.kernel)) role = p->role;
    } else {
      l.kernel = "timings row " + l.id;
    }
    if (s.pass == Pass::bwd && (!role || *role == KernelRole::flash_fwd)) role = KernelRole::flash_bwd;
    l.whole_call = call_role(role);
    if (out.launches.size() >= max_launches) throw Error(where + ": more than " + std::to_string(max_launches) + " rows");
    out.launches.push_back(std::move(l));
  }
  if (out.launches.empty()) throw Error(in.where(header_line) + ": a header and no timing rows after it");
  return out;
}

ImportedFile read_timings_json(std::string_view text, std::string_view origin) {
  namespace jc = json_check;
  const nlohmann::json j = jc::parse_json_text(text, origin);
  if (!j.is_object()) jc::fail(origin, "(top level)", "an object (the JSON of scripts/sdpa_peer.py)", j);
  if (!j.contains("results") || !j["results"].is_array())
    jc::fail(origin, "results", "an array (the JSON of scripts/sdpa_peer.py)", j.value("results", nlohmann::json()));
  ImportedFile out;
  out.format = "timings-json";
  std::size_t skipped = 0;
  const auto& rs = j["results"];
  for (std::size_t i = 0; i < rs.size(); ++i) {
    const std::string k = "results[" + std::to_string(i) + "]";
    const auto& r = rs[i];
    if (!r.is_object()) jc::fail(origin, k, "an object", r);
    if (r.contains("status") && !r["status"].is_string()) jc::fail(origin, k + ".status", "a string", r["status"]);
    if (r.value("status", std::string("ok")) != "ok") {
      ++skipped;
      continue;
    }
    auto u64 = [&](const char* key, std::optional<std::uint64_t> dflt) -> std::uint64_t {
      if (!r.contains(key)) {
        if (dflt) return *dflt;
        jc::fail_text(origin, k + "." + key, "missing");
      }
      if (!r[key].is_number_unsigned()) jc::fail(origin, k + "." + key, "a non-negative integer", r[key]);
      return r[key].get<std::uint64_t>();
    };
    Shape s;
    s.batch = u64("batch", 1);
    s.heads = u64("heads", 1);
    s.kv_heads = u64("kv_heads", s.heads);
    s.seq_q = u64("seq", std::nullopt);
    s.seq_kv = u64("seq_kv", s.seq_q);
    s.head_dim = u64("head_dim", std::nullopt);
    if (r.contains("causal")) {
      if (!r["causal"].is_boolean()) jc::fail(origin, k + ".causal", "true or false", r["causal"]);
      s.causal = r["causal"].get<bool>();
    }
    if (r.contains("dtype")) {
      const auto d = r["dtype"].is_string() ? parse_dtype(r["dtype"].get<std::string>()) : std::nullopt;
      if (!d) jc::fail(origin, k + ".dtype", "fp32, fp16, bf16 or fp8", r["dtype"]);
      s.dtype = *d;
    }
    try {
      validate(s);
    } catch (const Error& e) {
      jc::fail_text(origin, k, e.what());
    }
    if (!r.contains("median_s") || !r["median_s"].is_number() || !(r["median_s"].get<double>() > 0) ||
        !std::isfinite(r["median_s"].get<double>()))
      jc::fail(origin, k + ".median_s", "a positive number of seconds", r.value("median_s", nlohmann::json()));
    std::string backend = "sdpa";
    if (r.contains("backend")) {
      if (!r["backend"].is_string()) jc::fail(origin, k + ".backend", "a string", r["backend"]);
      backend = r["backend"].get<std::string>();
    }
    jc::require_printable(origin, k + ".backend", backend);
    MeasuredLaunch l;
    l.origin = std::string(origin) + ":" + k;
    l.id = std::to_string(i + 1);
    l.kernel = "sdpa " + backend;
    l.shape = s;
    l.seconds = r["median_s"].get<double>();
    l.whole_call = backend == "math" ? KernelRole::gemm : KernelRole::flash_fwd;
    out.launches.push_back(std::move(l));
  }
  if (skipped) out.notes.push_back(std::string(origin) + ": " + std::to_string(skipped) + " skipped result(s) left out");
  if (out.launches.empty()) throw Error(std::string(origin) + ": no results with status \"ok\"");
  return out;
}

ImportedFile import_measurements(const std::string& path, const KernelTable& table) {
  const bool is_stdin = path == "-";
  const std::string origin = is_stdin ? std::string("(stdin)") : json_check::printable(path);
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> owned(nullptr, &std::fclose);
  std::FILE* fp = stdin;
  if (!is_stdin) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) throw Error(origin + ": cannot read: " + std::strerror(errno));
    if (S_ISDIR(st.st_mode)) throw Error(origin + ": is a directory, not a CSV or JSON file");
    owned.reset(std::fopen(path.c_str(), "rb"));
    if (!owned) throw Error(origin + ": cannot read: " + std::strerror(errno));
    fp = owned.get();
  }
  // A first chunk decides the format; it is then replayed before the rest.
  std::string head(64 * 1024, '\0');
  std::size_t head_len = std::fread(head.data(), 1, head.size(), fp);
  if (std::ferror(fp)) throw Error(origin + ": cannot read: " + std::strerror(errno));
  head.resize(head_len);
  std::size_t replay = 0;
  ByteSource src = [&](char* b, std::size_t n) -> std::size_t {
    if (replay < head.size()) {
      const std::size_t k = std::min(n, head.size() - replay);
      std::memcpy(b, head.data() + replay, k);
      replay += k;
      return k;
    }
    const std::size_t k = std::fread(b, 1, n, fp);
    if (k == 0 && std::ferror(fp)) throw Error(origin + ": read error: " + std::strerror(errno));
    return k;
  };
  const std::size_t first = head.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && head[first] == '{') {
    std::string text = head;
    char buf[1 << 16];
    for (std::size_t k; (k = std::fread(buf, 1, sizeof buf, fp)) > 0;) {
      if (text.size() + k > json_check::max_input_bytes) throw Error(origin + ": larger than 4 GiB");
      text.append(buf, k);
    }
    return read_timings_json(text, origin);
  }
  // The first line that is not blank or a # comment decides between the CSVs.
  std::string first_line;
  for (std::size_t at = 0; at < head.size();) {
    const std::size_t nl = std::min(head.find('\n', at), head.size());
    const std::string l = head.substr(at, nl - at);
    at = nl + 1;
    if (l.find_first_not_of(" \t\r") == std::string::npos || l[0] == '#') continue;
    first_line = l;
    break;
  }
  if (!is_ncu_header(first_line) && first_line.find("time_s") != std::string::npos &&
      first_line.find('\0') == std::string::npos)
    return read_timings_csv(src, origin, table);
  return read_ncu_csv(src, origin);
}

}  // namespace hbmscope
