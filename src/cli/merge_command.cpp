// `hbmscope merge`: JSON reports (the shards of a sweep) joined into one,
// read row by row.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <set>
#include <unordered_map>

#include "hbmscope/error.hpp"
#include "hbmscope/json_report.hpp"
#include "hbmscope/printers.hpp"
#include "../report/json_check.hpp"
#include "command_io.hpp"
#include "sweep_commands.hpp"

namespace hbmscope::cli {

namespace {

// The first place where a and b differ, as "PATH: A vs B" (for messages);
// depth is bounded by the parser's limit.
std::string first_difference(const nlohmann::json& a, const nlohmann::json& b, const std::string& path) {
  if (a.is_object() && b.is_object()) {
    for (const auto& [k, v] : a.items()) {
      const std::string p = path + "." + k;
      if (!b.contains(k)) return p + ": " + json_check::brief(v) + " vs none";
      if (v != b[k]) return first_difference(v, b[k], p);
    }
    for (const auto& [k, v] : b.items())
      if (!a.contains(k)) return path + "." + k + ": none vs " + json_check::brief(v);
  }
  const auto side = [](const nlohmann::json& x) { return x.is_null() ? std::string("none") : json_check::brief(x); };
  return path + ": " + side(a) + " vs " + side(b);
}

std::string row_key(const nlohmann::json& row) {
  std::string key = row.value("label", std::string()) + "\n" + row["shape"].dump();
  // Whole-model rows: one per kind of layer and a total, all of one step.
  if (const auto m = row.find("model"); m != row.end() && m->is_object())
    key += "\n" + m->value("config", std::string()) + "\n" + m->value("layer_kind", std::string());
  return key;
}

}  // namespace

void SweepCommands::add_merge(CLI::App& app) {
  merge_ = app.add_subcommand("merge", "Join JSON reports (e.g. the shards of a sweep) into one");
  merge_->add_option("reports", merge_files_, "Reports to join, in order (shards are put in shard order)")
      ->type_name("FILE...");
  merge_->add_option("--from", merge_from_,
                     "Instead of FILE...: the folder of `hbmscope submit`, whose N shards (shard-1.json .. "
                     "shard-N.json, N from its manifest.json) must all be there; if some are not, one line "
                     "names them and the sbatch line that re-runs just those tasks")
      ->type_name("DIR")
      ->check(not_empty());
  add_output_options(*merge_, merge_out_);
  merge_->get_option("--format")
      ->description("json, table, csv or md [default: from the --output file's extension, else json]");
  add_plot_options(*merge_, merge_dev_);
  merge_->footer(R"(Refuses reports of another schema, of different devices or bandwidth fractions, and
any row (label and shape) that two reports both hold. Shards of one sweep are put
back in shard order; missing shards are named on stderr; shards of different
splits (another N or sweep) are refused. --units, --wide, --columns and --plot
make the table and chart as `sweep` does.
Example:
  for i in 1 2 3 4; do hbmscope sweep --config llm --shard $i/4 --format json --output p$i.json; done
  hbmscope merge p1.json p2.json p3.json p4.json --output all.json
  hbmscope merge --from runs/llm --output all.md --plot all.svg    (after `hbmscope submit`))");
}

std::vector<std::string> SweepCommands::submitted_shards(const std::string& dir, const SubmitManifest& m) {
  // The folder is listed (not each of N names tried): its size, not N, bounds the work.
  std::set<std::uint64_t> have;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const auto i = shard_file_index(it->path().filename().string());
    std::error_code ec2;
    if (i && *i <= m.tasks && it->is_regular_file(ec2)) have.insert(*i);
  }
  if (ec) throw Error("merge: --from " + dir + ": cannot list the folder: " + ec.message());
  if (have.size() != m.tasks) throw Error(missing_shards_message(dir, m.tasks, have));
  std::vector<std::string> files;
  for (const std::uint64_t i : have) files.push_back(dir + "/" + shard_file(i));
  return files;
}

int SweepCommands::run_merge() {
  if (merge_from_ && !merge_files_.empty()) throw UsageError("merge: give reports (FILE...) or --from DIR, not both");
  if (!merge_from_ && merge_files_.empty()) throw UsageError("merge: no reports given: FILE... or --from DIR");
  const Format f = resolve_format(merge_out_.format, merge_out_.output, Format::json);
  OutputOptions target = merge_out_;  // as `sweep` takes them, but JSON by default
  if (target.format.empty() && f == Format::json) target.format = "json";
  const PrintOptions print = to_print_options(target);
  check_device_options(merge_dev_, target);
  std::optional<SubmitManifest> manifest;
  if (merge_from_) {
    const std::string dir = absolute_path(*merge_from_);  // the message's commands work from anywhere
    manifest = read_submit_manifest(dir + "/" + std::string(manifest_file));
    merge_files_ = submitted_shards(dir, *manifest);
  }
  refuse_input_as_output(merge_out_.output, merge_files_, "--output");
  if (merge_dev_.plot && *merge_dev_.plot != "-") refuse_input_as_output(merge_dev_.plot, merge_files_, "--plot");
  const bool keep_rows = f != Format::json || merge_dev_.plot.has_value();  // as Rows, for a table or chart
  // Each input is read row by row: every row is checked and kept as the text
  // the merged report will hold (or, for other formats, as a Row), never as a
  // JSON tree, so that memory stays near the size of the output.
  struct Input {
    std::string name;
    nlohmann::json j;   // everything but the rows
    Report r;
    std::string rows_text;   // json: the rows as they will be written, comma-separated
    std::vector<Row> rows;   // other formats
    std::size_t count = 0;
  };
  std::vector<Input> in;
  std::unordered_map<std::string, std::size_t> owner;  // row key -> input
  std::optional<std::string> overlap;  // the first overlap, refused after the header checks
  for (const auto& name : merge_files_) {
    Input x;
    x.name = name;
    const std::size_t me = in.size();
    x.j = json_check::read_json_rows(name, [&](std::size_t i, nlohmann::json&& row) {
      Row checked = row_from_json(row, name, i);
      const auto [it, fresh] = owner.try_emplace(row_key(row), me);
      if (!fresh && !overlap)
        overlap = "merge: rows overlap: " + (checked.label.empty() ? "" : checked.label + ": ") +
                  describe(checked.shape) + " is in both " + in[it->second].name + " and " + name;
      if (f == Format::json) {
        if (x.count) x.rows_text += ",\n";
        x.rows_text += "    ";
        // As dump(2) writes it inside the rows array (4 spaces deeper), straight
        // into the text: no copy of the row and no second pass to indent it.
        nlohmann::detail::serializer<nlohmann::json> out(nlohmann::detail::output_adapter<char>(x.rows_text), ' ');
        out.dump(row, true, false, 2, 4);
      }
      if (keep_rows) x.rows.push_back(std::move(checked));
      ++x.count;
    });
    if (!in.empty() && x.j.is_object() && x.j.contains("schema") && in[0].j.contains("schema") &&
        x.j["schema"] != in[0].j["schema"] &&
        !(x.j["schema"].is_string() && in[0].j["schema"].is_string() &&
          readable_report_schema(x.j["schema"].get<std::string>()) &&
          readable_report_schema(in[0].j["schema"].get<std::string>())))
      throw Error("merge: " + name + " has schema " + json_check::brief(x.j["schema"]) + ", " +
                  in[0].name + " has " + json_check::brief(in[0].j["schema"]) + ": refusing to mix them");
    x.r = report_from_json(x.j, name);
    in.push_back(std::move(x));
  }
  const auto& first = in.front();
  for (const auto& x : in) {
    if (x.r.command != first.r.command)
      throw Error("merge: " + x.name + " comes from `" + x.r.command + "`, " + first.name + " from `" +
                  first.r.command + "`: refusing to mix them");
    const nlohmann::json da = x.j.value("roofline", nlohmann::json()), db = first.j.value("roofline", nlohmann::json());
    if (da != db) {
      // Name what differs: the device names when they do, else the first
      // differing figure or the fractions.
      const std::string na = x.r.roofline ? x.r.roofline->device.name : std::string("none");
      const std::string nb = first.r.roofline ? first.r.roofline->device.name : std::string("none");
      throw Error("merge: " + x.name + " and " + first.name +
                  " were predicted for different devices or bandwidth fractions (" +
                  (na != nb ? na + " vs " + nb : first_difference(da, db, "roofline")) + ")");
    }
    // Measured on another kind of GPU (the shards of a submitted sweep land on
    // whatever nodes are free): one report would name one of them for all rows.
    const auto gpu = [](const Input& i) { return i.r.device ? i.r.device->info.name : std::string("no GPU"); };
    if (gpu(x) != gpu(first))
      throw Error("merge: " + x.name + " was measured on " + gpu(x) + ", " + first.name + " on " + gpu(first) +
                  ": refusing to mix them (submit --gpu-type TYPE keeps every task on one kind)");
  }
  // Shards of one sweep go back in shard order; shards of different splits
  // (or a shard with a whole report) would merge into a report that is
  // neither, so they are refused.
  const auto shard_name = [](const Input& x) {
    return x.r.shard ? "shard " + std::to_string(x.r.shard->index) + "/" + std::to_string(x.r.shard->count) +
                           " of " + std::to_string(x.r.shard->total_rows) + " rows"
                     : std::string("not a shard");
  };
  for (const auto& x : in) {
    const bool same = x.r.shard.has_value() == first.r.shard.has_value() &&
                      (!x.r.shard || (x.r.shard->count == first.r.shard->count &&
                                      x.r.shard->total_rows == first.r.shard->total_rows));
    if (!same)
      throw Error("merge: " + first.name + " is " + shard_name(first) + ", " + x.name + " is " + shard_name(x) +
                  ": refusing to mix shards of different splits (merge the N shards of one --shard I/N run)");
  }
  if (overlap) throw Error(*overlap);
  if (manifest && (!first.r.shard || first.r.shard->count != manifest->tasks ||
                   first.r.shard->total_rows != manifest->total_rows))
    throw Error("merge: " + first.name + " is " + shard_name(first) + ", not one of the " +
                std::to_string(manifest->tasks) + " shards of " + std::to_string(manifest->total_rows) +
                " rows that " + *merge_from_ + "/manifest.json describes");
  const bool shards = first.r.shard.has_value();
  if (shards)
    std::stable_sort(in.begin(), in.end(),
                     [](const Input& a, const Input& b) { return a.r.shard->index < b.r.shard->index; });
  std::size_t total = 0;
  for (const auto& x : in) total += x.count;
  if (shards) {
    const std::uint64_t count = in.front().r.shard->count;
    std::set<std::uint64_t> have;
    for (const auto& x : in) have.insert(x.r.shard->index);
    if (have.size() != count || total != in.front().r.shard->total_rows) {
      // Named as ranges ("2-5, 7"), at most 20 of them.
      auto ranges = missing_ranges(have, count);
      const std::size_t more = ranges.size() > 20 ? ranges.size() - 20 : 0;
      ranges.resize(ranges.size() - more);
      std::string missing = format_ranges(ranges, ", ");
      if (more) missing += ", ... (" + std::to_string(more) + " more ranges)";
      std::fprintf(stderr, "hbmscope: note: merged %zu of %llu shards (%zu of %llu rows)%s\n", have.size(),
                   static_cast<unsigned long long>(count), total,
                   static_cast<unsigned long long>(in.front().r.shard->total_rows),
                   missing.empty() ? "" : ("; missing: " + missing).c_str());
    }
  }
  nlohmann::json head = in.front().j;
  head.erase("shard");
  head["schema"] = std::string(report_schema);  // a /1 input is read as /2
  head["rows"] = nlohmann::json::array();
  std::string text;
  if (f == Format::json) {
    // The header as dump(2) writes it, the rows spliced in: the same text as
    // dumping the whole merged report.
    const std::string h = head.dump(2);
    const std::string slot = "\"rows\": []";
    const std::size_t at = h.find(slot);
    std::size_t size = h.size() + 16;
    for (const auto& x : in) size += x.rows_text.size() + 2;
    text.reserve(size);
    text = h.substr(0, at + slot.size() - 1);
    if (total == 0) {
      text += "]";
    } else {
      text += "\n";
      bool any = false;
      for (auto& x : in) {
        if (x.count == 0) continue;
        if (any) text += ",\n";
        text += x.rows_text;
        std::string().swap(x.rows_text);
        any = true;
      }
      text += "\n  ]";
    }
    text += h.substr(at + slot.size());
    text += "\n";
  }
  Report merged = report_from_json(head, "merged report");
  merged.rows.reserve(total);
  for (auto& x : in)
    for (auto& row : x.rows) merged.rows.push_back(std::move(row));
  if (f != Format::json) text = render(merged, print);
  return write_report(merged, std::move(text), target, merge_dev_);
}

}  // namespace hbmscope::cli
