// The details page of Nsight Compute CSV (`ncu --csv`, `--page details`, the
// default): one metric per row, a launch's rows together. Headers of 12
// (2020: "Kernel Time", no rule columns), 15 (2021: rule columns) and 20
// (current: Block Size, Grid Size, Device, CC, estimated speedups) columns;
// metric rows may stop short of the header (a trailing comma), rule rows run
// its full width.
#include "hbmscope/error.hpp"
#include "ncu_csv.hpp"

namespace hbmscope::importing {

void read_ncu_details(CsvStream& in, NcuHeader h, std::size_t header_line, std::string_view origin,
                      LaunchStream& into, ProfilerLines& prof) {
  const std::size_t before = into.launches.size();
  NumberStyle style;
  LaunchIds ids;
  std::optional<MeasuredLaunch> cur;
  std::string cur_key;
  LaunchValues values;
  NcuRows rows(in, h, prof);
  while (rows.next()) {
    const auto& f = rows.fields();
    const std::string& where = rows.where();
    if (rows.header()) {  // another process, or another capture
      values.finish_into(cur, style.mark(), into);
      ids.clear();
      cur_key.clear();
      continue;
    }
    const std::string& id = field_at(f, h.col("ID").value_or(0));
    const std::string process = h.col("Process ID") ? field_at(f, *h.col("Process ID")) : std::string();
    const std::string key = process + "/" + id;
    if (!cur || key != cur_key) {
      values.finish_into(cur, style.mark(), into);
      MeasuredLaunch l = ncu_launch(f, h, where);
      ids.see(f, h, origin, rows.line());
      cur = std::move(l);
      cur_key = key;
    }
    if (cur->nvtx.empty())
      for (auto i : h.nvtx)
        if (i < f.size())
          if (auto t = nvtx_shape_text(f[i]); !t.empty()) cur->nvtx = t;
    const std::string& value = field_at(f, *h.col("Metric Value"));
    style.learn(value);
    const std::string& name = field_at(f, *h.col("Metric Name"));
    const MetricInfo mi = metric_of(name);
    if (mi.metric == Metric::none) continue;
    values.add(mi, field_at(f, *h.col("Metric Unit")), value, where, "Metric Value (" + name + ")");
  }
  values.finish_into(cur, style.mark(), into);
  if (into.launches.size() == before && !prof.first_error.empty()) refuse_empty(origin, prof, "");
  check_ncu_capture(origin, header_line, before, into, true);
}

}  // namespace hbmscope::importing
