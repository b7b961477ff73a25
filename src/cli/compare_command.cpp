// `hbmscope compare`: two JSON reports row by row, with a verdict per row.
#include <cstdio>

#include "hbmscope/compare.hpp"
#include "hbmscope/error.hpp"
#include "command_io.hpp"
#include "sweep_commands.hpp"

namespace hbmscope::cli {

void SweepCommands::add_compare(CLI::App& app) {
  compare_ = app.add_subcommand("compare", "Compare two JSON reports row by row (matched by shape)");
  compare_->add_option("reports", compare_files_, "A.json B.json: reports from `--format json`")
      ->required()
      ->expected(2)
      ->type_name("A.json B.json");
  compare_->add_option("--threshold", threshold_,
                       "Percent within which the metric counts as SAME, e.g. 2 [default: 5]")
      ->type_name("PCT")
      ->check(finite_number());
  compare_->add_option("--metric", metric_,
                       "The number the verdict is on, e.g. bytes.standard or "
                       "prediction.flash_no_l2.seconds [default: a measured time, else "
                       "prediction.flash_no_l2.seconds, else bytes.flash_no_l2; decode reports: "
                       "prediction.decode_split.seconds, else bytes.decode_split]")
      ->type_name("PATH")
      ->check(not_empty());
  compare_->add_option("--match", match_,
                       "Match rows on these fields only, e.g. --match seq_q,seq_kv,head_dim when the "
                       "reports differ in dtype (fields: label, batch, heads, kv_heads, seq_q, seq_kv "
                       "(seq: both), head_dim, dtype, block_rows, block_cols, causal, pass; decode, "
                       "splits, page_size, context_lengths; window, chunk, head_dim_v, kv_dtype, latent_kv, "
                       "seq_lens) "
                       "[default: the label and every shape field]")
      ->type_name("LIST");
  compare_->add_option("--ignore", ignore_,
                       "Match rows on every field but these, e.g. --ignore dtype (bf16 vs fp8), "
                       "--ignore kv_dtype (a bf16 against an fp8 KV cache) or --ignore window")
      ->type_name("LIST")
      ->excludes(compare_->get_option("--match"));
  compare_->add_option("--metrics", metrics_,
                       "Also show these numbers in table, csv and md, e.g. bytes.standard,flops; all "
                       "shows every one [default: the verdict metric and the numbers that differ "
                       "beyond the threshold; JSON holds every number]")
      ->type_name("LIST|all");
  compare_->add_option("--fail-on", fail_on_,
                       "Exit 4 when a row's verdict is SLOWER (slower), FASTER (faster) or either (any), "
                       "after writing the output: a regression gate for CI")
      ->type_name("slower|faster|any");
  compare_->add_flag("--wide", compare_wide_,
                     "Table/md: every number shown in one table, headed by its full path (by default the "
                     "verdict's table, then the other ratios under [1], [2], ... in blocks of at most 120 "
                     "columns, with a legend)");
  compare_->add_option("--format", compare_format_,
                       "table, json, csv or md [default: from the --output file's extension, else table]")
      ->type_name("table|json|csv|md");
  compare_->add_option("--output", compare_output_, "Write to FILE atomically instead of stdout (- is stdout)")
      ->type_name("FILE")
      ->check(not_empty());
  compare_->footer(R"(Rows are matched by their shape (and group label), or by the fields of --match /
--ignore; the header names what rows were matched on, the axes in which matched
rows differ, and the verdict metric. The table shows A and B of the metric with units, their
ratio B/A to three figures and the verdict; then B/A ("inf" when only A is 0) of
every other number that differs by more than the threshold in some row, under
short names [1], [2], ... explained below the table, in blocks that fit 120
columns (--wide: one table, full names; --metrics adds more numbers; --format
json holds every number).
Verdict on the metric: FASTER when B is better by more than the threshold,
SLOWER when worse, SAME otherwise. Rows in only one report are listed after the
table.
Exit status: 0, or 4 with --fail-on when a verdict says so; 1 bad input, 2 usage.
Examples:
  hbmscope compare before.json after.json
  hbmscope compare bf16.json fp8.json --ignore dtype
  hbmscope compare h100.json h200.json --metric prediction.flash_no_l2.seconds --threshold 1
  hbmscope compare base.json new.json --fail-on slower     (CI: exit 4 on a regression))");
}

int SweepCommands::run_compare() {
  const Format f = resolve_format(compare_format_, compare_output_, Format::table);
  CompareOptions opt;
  opt.threshold_pct = threshold_;
  if (metric_) opt.metric = *metric_;
  if (match_) opt.match = split_list(*match_, "--match");
  if (ignore_) opt.ignore = split_list(*ignore_, "--ignore");
  if (metrics_) opt.metrics = split_list(*metrics_, "--metrics");
  if (fail_on_ && *fail_on_ != "slower" && *fail_on_ != "faster" && *fail_on_ != "any")
    throw UsageError("--fail-on: '" + *fail_on_ + "' is not one of slower, faster, any");
  if (metrics_ && f == Format::json)
    throw UsageError("--metrics: applies to table, csv and md output; json holds every number");
  if (compare_wide_ && (f == Format::json || f == Format::csv))
    throw UsageError(std::string("--wide: applies to table and md output; ") +
                     (f == Format::json ? "json" : "csv") + " holds every number");
  refuse_input_as_output(compare_output_, compare_files_, "--output");
  const Comparison c = compare_report_files(compare_files_.at(0), compare_files_.at(1), opt);
  CompareTableOptions layout;
  layout.wide = compare_wide_;
  emit(render_comparison(c, f, layout), compare_output_);
  if (fail_on_) {
    const bool slower = c.slower > 0 && *fail_on_ != "faster";
    const bool faster = c.faster > 0 && *fail_on_ != "slower";
    if (slower || faster) {
      std::fprintf(stderr, "hbmscope: compare: %zu SLOWER, %zu FASTER (--fail-on %s): exit %d\n", c.slower,
                   c.faster, fail_on_->c_str(), compare_fail_exit);
      return compare_fail_exit;
    }
  }
  return 0;
}

}  // namespace hbmscope::cli
