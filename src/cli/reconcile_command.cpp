#include "reconcile_command.hpp"

#include <cstdio>

#include "hbmscope/device_config.hpp"
#include "hbmscope/error.hpp"
#include "hbmscope/kernel_table.hpp"
#include "hbmscope/ncu_import.hpp"
#include "hbmscope/reconcile_report.hpp"
#include "hbmscope/roofline.hpp"
#include "hbmscope/sweep.hpp"
#include "../report/json_check.hpp"
#include "plot_run.hpp"
#include "sweep_commands.hpp"

namespace hbmscope::cli {

const char* const reconcile_help = R"(Reads what you measured (Nsight Compute CSV, or plain timings), groups the kernel
launches into attention calls and puts the model beside each call:
  standard attention = GEMM, softmax (elementwise kernels allowed around it), GEMM
  flash              = one fused kernel (PyTorch SDPA flash/cuDNN/efficient, flash-attn 2/3, FlashInfer)
  flash_bwd          = consecutive fused backward kernels
  split_kv           = a decode kernel and the combine kernels after it (judged against the floor)
Kernels are classified by configs/kernels.json (built in; --kernel-table for your own);
kernels no pattern matches are listed, never dropped silently.

Columns: reads the GPU counted (dram__bytes_read.sum); the model's reads per variant
(floor = every value once, flash_no_l2 = every K/V tile re-read, flash_l2_sim = the L2
simulation with the device's L2, standard = S and P through HBM); counted / model;
writes counted (reported, not judged: lines still in L2 when a kernel ends are written
back outside its range); time; achieved bandwidth (reads + writes) / time and % of the
device's peak; model bytes / time (the bandwidth papers quote); time / roofline, where
roofline = max(counted bytes / bandwidth, FLOPs / peak). The verdict says where reads
fall: BELOW FLOOR, AT FLOOR, BETWEEN (with the share of the way to flash_no_l2), AT
NO-L2, ABOVE NO-L2; MATCHES / ABOVE / BELOW (within 10 %) for the other kinds.

Capture (docs/reconcile.md):
  ncu --csv --page raw --clock-control none \
      --metrics dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum \
      python run.py > prof.csv
Shapes: the shape options give one shape for every call, or a list (the cartesian
product of the options, in the order of `hbmscope model`) matched to the calls in
order; or NVTX ranges (ncu --nvtx) named
  hbmscope:seq=4096,seq_kv=4096,d=128,heads=32,kv_heads=8,batch=4,causal=1
e.g. in PyTorch:
  import torch, torch.nn.functional as F
  q = k = v = torch.randn(4, 32, 4096, 128, device="cuda", dtype=torch.bfloat16)
  torch.cuda.nvtx.range_push("hbmscope:seq=4096,d=128,heads=32,batch=4,causal=1")
  F.scaled_dot_product_attention(q, k, v, is_causal=True)
  torch.cuda.nvtx.range_pop()
Plain timings: the JSON of scripts/sdpa_peer.py, or a CSV with columns seq_q, head_dim,
time_s (and batch, heads, kv_heads, seq_kv, dtype, causal, pass, dram_bytes_read,
dram_bytes_write, kernel).
Examples:
  hbmscope reconcile prof.csv --seq 4096 --head-dim 128 --batch 4 --heads 16 --device h100
  hbmscope reconcile prof.csv --device h200 --format json --output rec.json   (NVTX shapes)
  hbmscope reconcile decode.csv --seq 1 --seq-kv 16384 --heads 32 --head-dim 128 --dtype fp16 --device 4090
  hbmscope reconcile sdpa.json --device h200 --plot reads.svg)";

ReconcileCommand::ReconcileCommand(CLI::App& app) {
  cmd_ = app.add_subcommand("reconcile",
                            "Put measured kernels (Nsight Compute CSV, timings) beside the model, per attention call");
  cmd_->add_option("files", files_, "ncu --csv output (raw or details page), sdpa_peer.py JSON or a timings CSV; - is stdin")
      ->required()
      ->type_name("FILE...");
  add_shape_options(*cmd_, shape_);
  cmd_->add_option("--device", device_,
                   "The GPU the measurements come from, for % of peak, the roofline and the L2 simulation: a preset "
                   "(h100, h200, a100, b200, l40s, 4090) or a JSON file")
      ->type_name("NAME|FILE");
  cmd_->add_option("--bandwidth-fraction", bandwidth_fraction_,
                   "Share of the datasheet bandwidth the roofline assumes, in (0, 1] [default: 1.0]")
      ->type_name("F")
      ->check(finite_number());
  cmd_->add_option("--kernel-table", kernel_table_,
                   "Classify kernels with this JSON table instead of the built-in configs/kernels.json")
      ->type_name("FILE")
      ->check(not_empty());
  cmd_->add_option("--format", out_.format, "Output: table (terminal), json, csv (one line per call), md")
      ->type_name("table|json|csv|md");
  cmd_->add_option("--units", out_.units, "Byte units in table/md: decimal, binary, bytes")
      ->type_name("decimal|binary|bytes");
  cmd_->add_option("--output", out_.output, "Write the report to FILE atomically instead of stdout (- is stdout)")
      ->type_name("FILE")
      ->check(not_empty());
  cmd_->add_option("--plot", plot_,
                   "Chart of counted vs model reads per call through gnuplot: FILE.svg, FILE.png or - (terminal)")
      ->type_name("FILE|-")
      ->check(not_empty());
  cmd_->footer(reconcile_help);
}

bool ReconcileCommand::run(int& rc) {
  if (!cmd_->parsed()) return false;
  rc = run_reconcile();
  return true;
}

int ReconcileCommand::run_reconcile() {
  const PrintOptions print = to_print_options(out_);
  DeviceOptions dev{device_, bandwidth_fraction_, plot_};
  check_device_options(dev, out_);
  // --output or --plot naming an input would destroy it: refused before anything is read.
  std::vector<std::string> inputs_given = files_;
  if (kernel_table_) inputs_given.push_back(*kernel_table_);
  if (device_) inputs_given.push_back(*device_);
  for (const auto& [target, option] : {std::pair{out_.output, "--output"}, std::pair{plot_, "--plot"}})
    if (target && *target != "-")
      for (const auto& in : inputs_given)
        if (in != "-" && same_write_target(*target, in))
          throw Error(std::string(option) + ": '" + *target + "' is also an input of this run ('" + in +
                      "'); write the result to another file");
  const bool any_shape = shape_.seq || shape_.seq_kv || shape_.head_dim || shape_.batch || shape_.heads ||
                         shape_.kv_heads || shape_.block_rows || shape_.block_cols || shape_.causal || shape_.pass;
  if (shape_.pass) throw Error("--pass: reconcile takes the pass from the kernels (forward or backward calls)");
  ReconcileOptions opt;
  if (shape_.dtype) opt.nvtx_dtype = parse_dtype_axis(*shape_.dtype, "--dtype").front();
  if (any_shape) {
    if (!shape_.seq || !shape_.head_dim)
      throw Error("--seq and --head-dim: both are needed to give the calls a shape (or use NVTX ranges)");
    opt.shapes = expand(to_axes(shape_));
  }
  std::optional<DeviceSpec> device;
  if (device_) {
    device = find_device(*device_);
    opt.device = device;
    opt.bandwidth_fraction = bandwidth_fraction_.value_or(1.0);
    opt.l2 = to_l2_config(L2Options{}, &*device);
  }
  const KernelTable table = kernel_table_ ? load_kernel_table(*kernel_table_) : builtin_kernel_table();
  std::vector<MeasuredLaunch> launches;
  std::vector<ReconcileInput> inputs;
  std::vector<std::string> notes;
  for (const auto& f : files_) {
    ImportedFile in = import_measurements(f, table);
    inputs.push_back({f, in.format, in.launches.size()});
    for (auto& n : in.notes) notes.push_back(std::move(n));
    if (launches.size() + in.launches.size() > max_launches)
      throw Error(f + ": more than " + std::to_string(max_launches) + " launches in all");
    for (auto& l : in.launches) launches.push_back(std::move(l));
  }
  const Reconciliation result = reconcile(launches, table, opt);
  if (result.calls.empty()) notes.push_back("no attention call among the launches: see the kernels listed");
  Report report;
  report.command = "reconcile";
  report.rows = reconcile_rows(result);
  if (device) add_predictions(report, *device, opt.bandwidth_fraction);
  ReconcileView view{result, inputs, table.origin, report};
  std::string text = render_reconcile(view, print);

  const bool to_stdout = !out_.output || *out_.output == "-";
  std::optional<Plot> plot;
  if (plot_) plot.emplace(*plot_, [&](PlotTerminal t) { return reconcile_gnuplot_script(result, t); });
  std::optional<AtomicFile> file;
  if (!to_stdout) file.emplace(*out_.output);
  const bool chart_to_terminal = plot_ && *plot_ == "-";
  if (chart_to_terminal && to_stdout) text += "\n" + plot->text();
  // Both files' bytes on disk before either is renamed (as finish_report).
  if (file) file->write(text);
  if (plot && !chart_to_terminal) plot->write();
  if (file) {
    file->publish();
    std::fprintf(stderr, "hbmscope: wrote %s\n", json_check::printable(*out_.output).c_str());
  } else {
    write_stdout(text);
  }
  if (chart_to_terminal && !to_stdout) write_stdout(plot->text());
  if (plot && !chart_to_terminal) {
    plot->publish();
    std::fprintf(stderr, "hbmscope: wrote %s\n", json_check::printable(*plot_).c_str());
  }
  for (const auto& n : notes) std::fprintf(stderr, "hbmscope: note: %s\n", n.c_str());
  return 0;
}

}  // namespace hbmscope::cli
