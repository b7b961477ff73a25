#include "ncu_values.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "hbmscope/error.hpp"
#include "../report/json_check.hpp"
#include "csv_stream.hpp"

namespace hbmscope {

using importing::shown;

std::optional<double> parse_ncu_number(std::string_view t) { return parse_ncu_number(t, DecimalMark::unknown); }

std::optional<double> parse_ncu_number(std::string_view t, DecimalMark mark) {
  t = importing::trim(t);
  if (t.empty() || t == "n/a" || t == "N/A" || t == "-") return std::nullopt;
  std::size_t commas = 0, dots = 0;
  std::size_t last_comma = 0, last_dot = 0;
  for (std::size_t i = 0; i < t.size(); ++i) {
    if (t[i] == ',') ++commas, last_comma = i;
    if (t[i] == '.') ++dots, last_dot = i;
  }
  const bool has_exp = t.find_first_of("eE") != std::string_view::npos;
  // Three digits after a single separator read either way, unless what comes
  // before cannot start a group (empty, "0...", or more than three digits).
  auto could_group = [&](std::size_t at) {
    std::string_view lead = t.substr(0, at);
    if (!lead.empty() && (lead.front() == '-' || lead.front() == '+')) lead.remove_prefix(1);
    return t.size() - at - 1 == 3 && !has_exp && !lead.empty() && lead.size() <= 3 && lead.front() != '0';
  };
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
    if (could_group(last_comma)) {
      // The input's other numbers tell which it is.
      if (mark == DecimalMark::unknown)
        throw Error("ambiguous number " + shown(t) + " (thousands separator or decimal comma?)");
      if (mark == DecimalMark::point) group = ',';
      else decimal = ',';
    } else {
      decimal = ',';
    }
  } else if (dots == 1 && mark == DecimalMark::comma && could_group(last_dot)) {
    group = '.';
  }
  std::string plain;
  const std::size_t dec_at = group == decimal ? std::string_view::npos
                             : decimal == ','  ? (commas && group != ',' ? last_comma : std::string_view::npos)
                                               : (dots && group != '.' ? last_dot : std::string_view::npos);
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

}  // namespace hbmscope

namespace hbmscope::importing {

const char* const ncu_metric_help =
    "capture with: ncu --csv --page raw --metrics dram__bytes_read.sum,dram__bytes_write.sum,"
    "gpu__time_duration.sum ...";

MetricInfo metric_of(std::string_view n) {
  struct Name {
    std::string_view name;
    Metric metric;
    double base;
  };
  static constexpr Name names[] = {
      {"dram__bytes_read.sum", Metric::read, 1},
      {"dram__bytes_write.sum", Metric::write, 1},
      {"dram__sectors_read.sum", Metric::read, 32},
      {"dram__sectors_write.sum", Metric::write, 32},
      {"dram__bytes.sum", Metric::total, 1},
      {"dram__sectors.sum", Metric::total, 32},
      {"gpu__time_duration.sum", Metric::time, 1},
      {"Duration", Metric::section_time, 1},
      {"dram__throughput.avg.pct_of_peak_sustained_elapsed", Metric::pct, 1},
      {"gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed", Metric::pct, 1},
      {"DRAM Throughput", Metric::pct, 1},
      {"SOL FB", Metric::pct, 1},  // ncu 2019-2020: the frame buffer (DRAM) % of peak
      {"sm__cycles_elapsed.avg", Metric::sm_cycles, 1},
      {"sm__cycles_elapsed.avg.per_second", Metric::sm_rate, 1},
      {"gpc__cycles_elapsed.max", Metric::gpc_cycles, 1},
      {"gpc__cycles_elapsed.avg.per_second", Metric::gpc_rate, 1},
      {"Elapsed Cycles", Metric::gpc_cycles, 1},
      {"SM Frequency", Metric::gpc_rate, 1},
      {"lts__t_sectors_srcunit_tex_op_read.sum", Metric::l2_reads, 1},
      {"lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum", Metric::l2_hits, 1},
      {"lts__t_sectors_srcunit_tex_op_read_lookup_miss.sum", Metric::l2_misses, 1},
      {"Grid Size", Metric::grid_size, 1},
      {"launch__grid_size", Metric::grid_size, 1},
  };
  for (const auto& x : names)
    if (x.name == n) return {x.metric, x.base};
  return {};
}

void NumberStyle::learn(std::string_view t) {
  if (mark_ != DecimalMark::unknown) return;
  t = trim(t);
  if (t.empty() || t.find_first_not_of("0123456789,.+-eE") != std::string_view::npos ||
      t.find_first_of("0123456789") == std::string_view::npos)
    return;
  const std::size_t commas = static_cast<std::size_t>(std::count(t.begin(), t.end(), ','));
  const std::size_t dots = static_cast<std::size_t>(std::count(t.begin(), t.end(), '.'));
  const std::size_t last_comma = t.rfind(','), last_dot = t.rfind('.');
  auto digits_after = [&](std::size_t at) {
    std::size_t n = 0;
    for (std::size_t i = at + 1; i < t.size() && t[i] >= '0' && t[i] <= '9'; ++i) ++n;
    return n;
  };
  if (commas && dots) mark_ = last_comma < last_dot ? DecimalMark::point : DecimalMark::comma;
  else if (commas > 1) mark_ = DecimalMark::point;
  else if (dots > 1) mark_ = DecimalMark::comma;
  else if (commas == 1 && digits_after(last_comma) != 3) mark_ = DecimalMark::comma;
  else if (dots == 1 && digits_after(last_dot) != 3) mark_ = DecimalMark::point;
}

void LaunchValues::add(const MetricInfo& m, std::string_view unit, std::string_view text, const std::string& where,
                       std::string_view column) {
  auto& v = values_[static_cast<std::size_t>(m.metric)];
  if (m.metric == Metric::none || v) return;
  if (trim(text).empty()) return;  // not measured: a later value may be
  v = Value{m.base, std::string(trim(unit)), std::string(text), where, std::string(column)};
}

void LaunchValues::clear() {
  for (auto& v : values_) v.reset();
}

void LaunchValues::finish_into(std::optional<MeasuredLaunch>& cur, DecimalMark mark, LaunchStream& into) {
  if (cur) {
    finish(*cur, mark);
    into.add(std::move(*cur));
    cur.reset();
  }
  clear();
}

bool any_figure(const LaunchStream& s, std::size_t from) {
  for (std::size_t i = from; i < s.launches.size(); ++i) {
    const auto& l = s.launches[i];
    if (l.dram_read || l.dram_write || l.dram_total || l.seconds || l.dram_pct_of_peak) return true;
  }
  return false;
}

namespace {

std::optional<double> scale_of(Metric m, std::string_view u, double base) {
  auto any = [&](std::initializer_list<std::string_view> names) {
    for (auto n : names)
      if (u == n) return true;
    return false;
  };
  switch (m) {
    case Metric::read:
    case Metric::write:
    case Metric::total:
      if (u.empty()) return base;  // --csv prints base units: bytes, or sectors
      return unit_scale(u, false);
    case Metric::time:
    case Metric::section_time:
      if (u.empty()) return 1e-9;
      return unit_scale(u, true);
    case Metric::pct: return u.empty() || u == "%" ? std::optional<double>(1) : std::nullopt;
    case Metric::sm_cycles:
    case Metric::gpc_cycles:
      if (u.empty() || any({"cycle", "cycles"})) return 1;
      if (any({"Kcycle"})) return 1e3;
      if (any({"Mcycle"})) return 1e6;
      if (any({"Gcycle"})) return 1e9;
      return std::nullopt;
    case Metric::sm_rate:
    case Metric::gpc_rate:
      if (u.empty() || any({"cycle/second", "cycle/s", "hz", "Hz"})) return 1;
      if (any({"cycle/msecond", "cycle/ms", "Khz", "KHz", "kHz", "khz"})) return 1e3;
      if (any({"cycle/usecond", "cycle/us", "Mhz", "MHz", "mhz"})) return 1e6;
      if (any({"cycle/nsecond", "cycle/ns", "Ghz", "GHz", "ghz"})) return 1e9;
      return std::nullopt;
    case Metric::l2_reads:
    case Metric::l2_hits:
    case Metric::l2_misses:
      if (u.empty() || any({"sector", "sectors"})) return 1;
      if (any({"Ksector"})) return 1e3;
      if (any({"Msector"})) return 1e6;
      if (any({"Gsector"})) return 1e9;
      return std::nullopt;
    case Metric::grid_size: return u.empty() || any({"block", "blocks"}) ? std::optional<double>(1) : std::nullopt;
    case Metric::none:
    case Metric::count: break;
  }
  return std::nullopt;
}

const char* unit_kind(Metric m) {
  switch (m) {
    case Metric::time:
    case Metric::section_time: return "a time unit (nsecond, usecond, msecond, second)";
    case Metric::pct: return "%";
    case Metric::sm_cycles:
    case Metric::gpc_cycles: return "a cycle count (cycle)";
    case Metric::sm_rate:
    case Metric::gpc_rate: return "a clock rate (cycle/second, cycle/nsecond, hz, Ghz)";
    case Metric::l2_reads:
    case Metric::l2_hits:
    case Metric::l2_misses: return "a sector count (sector)";
    case Metric::grid_size: return "a block count";
    default: return "a byte unit (byte, Kbyte, Mbyte, Gbyte, sector)";
  }
}

std::uint64_t whole(double x, const std::string& where, const std::string& column, const std::string& text,
                    const char* what) {
  if (!(x < 1.8e19))
    throw Error(where + ": column '" + column + "': " + shown(text) + " " + what + " is too large");
  return static_cast<std::uint64_t>(std::nearbyint(x));
}

}  // namespace

void LaunchValues::finish(MeasuredLaunch& l, DecimalMark mark) const {
  std::array<std::optional<double>, static_cast<std::size_t>(Metric::count)> x;
  for (std::size_t i = 0; i < values_.size(); ++i) {
    if (!values_[i]) continue;
    const Value& v = *values_[i];
    const auto m = static_cast<Metric>(i);
    const std::string at = v.where + ": column '" + json_check::printable(v.column) + "'";
    std::optional<double> n;
    try {
      n = parse_ncu_number(v.text, mark);
    } catch (const Error& e) {
      throw Error(at + ": " + e.what());
    }
    if (!n) continue;
    if (*n < 0) throw Error(at + ": negative value " + shown(v.text));
    const auto scale = scale_of(m, v.unit, v.base);
    if (!scale) throw Error(at + ": unit " + shown(v.unit) + " is not " + unit_kind(m));
    x[i] = *n * *scale;
    if (!std::isfinite(*x[i])) throw Error(at + ": " + shown(v.text) + " is too large");
    if (m == Metric::read || m == Metric::write || m == Metric::total) {
      const std::uint64_t b = whole(*x[i], v.where, json_check::printable(v.column), v.text, "bytes");
      (m == Metric::read ? l.dram_read : m == Metric::write ? l.dram_write : l.dram_total) = b;
    }
  }
  auto get = [&](Metric m) -> const std::optional<double>& { return x[static_cast<std::size_t>(m)]; };
  auto value = [&](Metric m) -> const Value& { return *values_[static_cast<std::size_t>(m)]; };
  // The time: the duration metric, else the SOL section's, else cycles over
  // cycles per second (derived, and marked so).
  std::optional<Metric> from;
  if (get(Metric::time)) l.seconds = get(Metric::time), l.time_from = TimeSource::duration, from = Metric::time;
  else if (get(Metric::section_time))
    l.seconds = get(Metric::section_time), l.time_from = TimeSource::section, from = Metric::section_time;
  else
    for (auto [c, r] : {std::pair{Metric::sm_cycles, Metric::sm_rate}, std::pair{Metric::gpc_cycles, Metric::gpc_rate}})
      if (get(c) && get(r) && *get(r) > 0) {
        l.seconds = *get(c) / *get(r);
        l.time_from = TimeSource::cycles;
        from = c;
        break;
      }
  // A duration that is not zero but below a picosecond is no kernel's time
  // (a bandwidth over it would be infinite).
  if (l.seconds && (!std::isfinite(*l.seconds) || (*l.seconds != 0 && !(*l.seconds >= 1e-12))))
    throw Error(value(*from).where + ": column '" + json_check::printable(value(*from).column) + "': " +
                shown(value(*from).text) + " is not a kernel's duration (below a picosecond, or unbounded)");
  if (get(Metric::pct)) l.dram_pct_of_peak = get(Metric::pct);
  const auto& hits = get(Metric::l2_hits);
  const auto& misses = get(Metric::l2_misses);
  std::optional<double> reads = get(Metric::l2_reads);
  if (hits && misses) reads = *hits + *misses;
  if (reads && hits && *reads > 0) {
    l.l2_read_sectors = whole(*reads, value(Metric::l2_hits).where, "lts__t_sectors", "", "sectors");
    l.l2_read_hit_sectors = std::min(*l.l2_read_sectors, whole(*hits, value(Metric::l2_hits).where,
                                                                    "lts__t_sectors", "", "sectors"));
  }
  if (get(Metric::grid_size) && l.grid[0] == 0)
    l.grid_size = whole(*get(Metric::grid_size), value(Metric::grid_size).where, "Grid Size",
                        value(Metric::grid_size).text, "blocks");
}

std::optional<std::array<std::uint64_t, 3>> parse_dims(std::string_view t) {
  t = trim(t);
  if (t.size() < 7 || t.front() != '(' || t.back() != ')') return std::nullopt;
  t = t.substr(1, t.size() - 2);
  std::array<std::uint64_t, 3> d{};
  for (std::size_t i = 0; i < 3; ++i) {
    // Items are separated by ", "; a number may itself hold grouping commas
    // ("2,560"): an item ends at a comma followed by a space.
    std::size_t end = t.find(", ");
    if (i == 2) end = t.size();
    if (end == std::string_view::npos) return std::nullopt;
    std::string num;
    for (char c : t.substr(0, end))
      if (c != ',') num += c;
    if (num.empty() || num.size() > 12 || num.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
    d[i] = std::stoull(num);
    t = i == 2 ? std::string_view{} : t.substr(end + 2);
  }
  return d;
}

std::string nvtx_shape_text(std::string_view field) {
  const std::size_t at = field.rfind("hbmscope:");
  if (at == std::string_view::npos) return {};
  std::size_t end = at + 9, key = end;
  while (end < field.size()) {
    const char c = field[end];
    if (c == ',') key = end + 1;
    // ':' separates nested range names (ncu's NVTX columns): inside the range
    // it only joins Q:KV in a seq_lens item, between digits. Lists take ';'.
    const bool in_seq_lens = field.substr(key, 9) == "seq_lens=";
    const bool item_colon = c == ':' && in_seq_lens && end + 1 < field.size() &&
                            std::isdigit(static_cast<unsigned char>(field[end + 1])) &&
                            std::isdigit(static_cast<unsigned char>(field[end - 1]));
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '=' || c == ',' || c == '_' || c == '.' || c == ';' ||
          item_colon))
      break;
    ++end;
  }
  return std::string(field.substr(at, end - at));
}

void ProfilerLines::see(std::string_view line) {
  if (starts_with(line, "==PROF==")) ++prof;
  if (starts_with(line, "==WARNING==")) {
    ++warnings;
    if (line.find("No kernels were profiled") != std::string_view::npos) none_profiled = true;
  }
  if (starts_with(line, "==ERROR==") && first_error.empty()) first_error = std::string(trim(line.substr(0, 240)));
}

void refuse_empty(std::string_view origin, const ProfilerLines& p, const std::string& otherwise) {
  const std::string o(origin);
  if (!p.first_error.empty())
    throw Error(o + ": no kernel was profiled: the profiler reported an error ('" +
                json_check::printable(p.first_error) + "'): the application failed or ncu could not profile it");
  if (p.none_profiled || p.prof)
    throw Error(o + ": no kernel was profiled (" +
                (p.none_profiled ? std::string("\"No kernels were profiled\"")
                                 : "only " + std::to_string(p.prof) + " ==PROF== line(s)") +
                "): check ncu's --kernel-name, --launch-skip and --launch-count filters");
  throw Error(otherwise);
}

}  // namespace hbmscope::importing
