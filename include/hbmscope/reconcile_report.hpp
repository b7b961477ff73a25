#pragma once
// Printing a reconciliation (reconcile.hpp): a table per call with the
// verdicts below it, Markdown, CSV (one line per call), JSON (the report
// schema's rows plus a "reconcile" object, docs/report-schema.md) and a
// gnuplot chart of counted against model bytes. Printers never compute.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hbmscope/plot.hpp"
#include "hbmscope/printers.hpp"
#include "hbmscope/reconcile.hpp"

namespace hbmscope {

struct ReconcileInput {
  std::string name;    // the file as given
  std::string format;  // "ncu-raw", ...
  std::size_t launches = 0;
};

struct ReconcileView {
  const Reconciliation& result;
  std::vector<ReconcileInput> inputs;
  std::string kernel_table;  // its origin
  const Report& report;      // reconcile_rows with predictions and roofline
  // Table column groups beyond the default (--columns): "ratios" (counted /
  // model for every variant), "l2" (the counted L2 hit rate), "launch" (grid,
  // splits and where they come from).
  std::vector<std::string> columns{};
};

// The --columns groups of `reconcile`: ratios, l2, launch, all.
std::vector<std::string> reconcile_column_groups(const std::string& text);

std::string render_reconcile(const ReconcileView& v, const PrintOptions& options);
nlohmann::json reconcile_to_json(const ReconcileView& v);
// One line per call (reconcile_export.cpp).
std::string reconcile_csv(const ReconcileView& v);
// One call as JSON (rows[].call and reconcile.calls[]).
nlohmann::json reconciled_call_to_json(const ReconciledCall& c);

// Counted reads and the model's reads per call (log bytes against call
// number). Throws Error when no call has both a count and a shape.
std::string reconcile_gnuplot_script(const Reconciliation& r, PlotTerminal terminal);

// "flash_fwd_kernel" from "pytorch_flash::flash_fwd_kernel<Flash_fwd_traits<...>>(Params)":
// template arguments and parameters dropped, namespaces kept.
std::string short_kernel_name(const std::string& name);

// The model variants a reconcile report may hold, in the order they print.
const std::vector<std::string>& reconcile_variant_ids();

}  // namespace hbmscope
