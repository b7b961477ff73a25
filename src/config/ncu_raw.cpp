// The raw page of Nsight Compute CSV (`ncu --csv --page raw`): a header of
// identity columns and one column per metric (hundreds on current GPUs), a
// units row, then one row per launch. A second header (another process or
// capture) comes with its own units row.
#include "hbmscope/error.hpp"
#include "ncu_csv.hpp"

namespace hbmscope::importing {

void read_ncu_raw(CsvStream& in, NcuHeader h, std::size_t header_line, std::string_view origin, LaunchStream& into,
                  ProfilerLines& prof) {
  const std::size_t before = into.launches.size();
  std::vector<std::string> units(h.names.size());
  bool units_seen = false, any_units_missing = false;
  std::size_t in_capture = 0;  // launches since the last header
  NumberStyle style;
  LaunchIds ids;
  LaunchValues values;
  NcuRows rows(in, h, prof);
  while (rows.next()) {
    const auto& f = rows.fields();
    const std::string& where = rows.where();
    if (rows.header()) {  // columns may differ, and its units row follows
      if (!units_seen) any_units_missing = true;
      units.assign(h.names.size(), {});
      units_seen = false;
      in_capture = 0;
      ids.clear();
      continue;
    }
    if (field_at(f, h.col("ID").value_or(0)).empty()) {
      if (units_seen || in_capture > 0) throw Error(where + ": a row without an ID");
      for (std::size_t i = 0; i < f.size() && i < units.size(); ++i) units[i] = f[i];
      units_seen = true;
      continue;
    }
    MeasuredLaunch l = ncu_launch(f, h, where);
    ids.see(f, h, origin, rows.line());
    // The decimal mark from the metric values (not from identity columns:
    // "127.0.0.1", CC "9.0").
    for (std::size_t i = 0; i < f.size() && i < h.identity.size(); ++i)
      if (!h.identity[i]) style.learn(f[i]);
    values.clear();
    for (std::size_t i = 0; i < f.size() && i < h.metrics.size(); ++i)
      if (h.metrics[i].metric != Metric::none) values.add(h.metrics[i], units[i], f[i], where, h.names[i]);
    values.finish(l, style.mark());
    into.add(std::move(l));
    ++in_capture;
  }
  if (!units_seen) any_units_missing = true;
  if (into.launches.size() == before && !prof.first_error.empty()) refuse_empty(origin, prof, "");
  if (any_units_missing) into.notes.push_back(std::string(origin) + ": no units row: base units (bytes, ns) assumed");
  check_ncu_capture(origin, header_line, before, into, true);
}

}  // namespace hbmscope::importing
