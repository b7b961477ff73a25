#include "reconcile_command.hpp"

#include <sys/stat.h>

#include <algorithm>
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

const char* const reconcile_help =
    R"(Reads what you measured (Nsight Compute CSV or console text, an Nsight Systems trace,
plain timings), groups the kernel launches into attention calls and puts the model beside
each call:
  standard attention = GEMM (and cuBLAS's splitKreduce), softmax (elementwise kernels
                       allowed around it), GEMM
  flash              = one fused kernel (PyTorch SDPA flash/cuDNN/efficient, flash-attn 1/2/3,
                       FlashInfer, Triton)
  flash_bwd          = consecutive fused backward kernels
  split_kv           = a decode kernel and the combine kernels of its family after it
Kernels are classified by configs/kernels.json (built in; --kernel-table for your own);
kernels no pattern matches are listed, never dropped silently.

Columns: reads the GPU counted (dram__bytes_read.sum; dram__bytes.sum counts reads and
writes together and is shown as "Read+write counted"); the model's reads per variant
(floor = every value once, flash_no_l2 = every K/V tile re-read, flash_l2_sim = the L2
simulation with the device's L2, standard = S and P through HBM; decode calls:
decode_floor, decode_split with the call's split count, decode_paged with --page-size,
decode_split_unpacked for kernels with one CTA per query head); counted / model; writes
counted (reported, not judged: lines still in L2 when a kernel ends are written back
outside its range); time (~ when derived from cycles); achieved bandwidth and % of the
device's peak; model bytes / time; time / roofline. --columns all adds counted / model
for every variant, the L2 hit rate counted and the launch grid with the split count.
The verdict says where reads fall: BELOW FLOOR, AT FLOOR, BETWEEN (with the share of the
way to flash_no_l2), AT NO-L2, ABOVE NO-L2; MATCHES / ABOVE / BELOW (within 10 %) for the
other kinds. A launch grid that contradicts the shape is a warning, one per call.

Decode calls take their split count from --splits, else the launch grid where the
kernel's layout is public (flash-attn 2: grid y; vLLM: grid z), else 1 when there is no
combine kernel, else FlashAttention-2's heuristic on the --device's SMs; the report says
which.

Capture (docs/reconcile.md):
  ncu --csv --page raw --clock-control none \
      --metrics dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum \
      python run.py > prof.csv
  nsys profile -o run python serve.py; nsys stats --report cuda_gpu_trace --format csv run.nsys-rep > trace.csv
Shapes: the shape options give one shape for every call, or a list (the cartesian
product of the options, in the order of `hbmscope model`) matched to the calls in
order; or NVTX ranges (ncu --nvtx; nsys stats --report nvtx_gpu_proj_trace, given as
another file) named
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
  hbmscope reconcile trace.csv nvtx.csv --device h200          (nsys trace and its NVTX ranges)
  hbmscope reconcile sdpa.json --device h200 --plot reads.svg)";

ReconcileCommand::ReconcileCommand(CLI::App& app) {
  cmd_ = app.add_subcommand("reconcile",
                            "Put measured kernels (Nsight Compute CSV or console text, Nsight Systems traces, "
                            "timings) beside the model, per attention call");
  cmd_->add_option("files", files_,
                   "ncu --csv output (raw or details page) or console text, nsys stats CSV (cuda_gpu_trace, "
                   "nvtx_gpu_proj_trace), sdpa_peer.py JSON or a timings CSV; - is stdin; each file once")
      ->required()
      ->type_name("FILE...");
  add_shape_options(*cmd_, shape_);
  cmd_->add_option("--model-config", model_config_,
                   "Not taken: a call is one layer's kernel; give that layer's shape (hbmscope models NAME) with "
                   "the shape options or an NVTX range")
      ->type_name("NAME|FILE");
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
  cmd_->add_option("--columns", out_.columns,
                   "More table columns: ratios (counted / model for every variant), l2 (the L2 hit rate counted), "
                   "launch (grid and split count), all (JSON and CSV always hold them)")
      ->type_name("GROUPS");
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

namespace {

// One value of a list option (reconcile takes one split count and one page size).
std::uint64_t one_value(const std::string& text, const char* option, std::uint64_t lo, std::uint64_t hi) {
  const auto v = parse_int_axis(text, std::string(option).substr(2));
  if (v.size() != 1)
    throw UsageError(
        std::string(option) + ": reconcile takes one value" +
        (std::string_view(option) == "--splits"
             ? " (a call's own split count is read from its launch grid where the kernel's layout is public)"
             : std::string()));
  if (v[0] < lo || v[0] > hi)
    throw UsageError(std::string(option) + ": " + std::to_string(v[0]) + " is not in " + std::to_string(lo) + ".." +
                     std::to_string(hi));
  return v[0];
}

// The same file named twice (by device and inode, so "a.csv" and "./a.csv"
// too) would count its launches twice: refused before anything is read.
void refuse_repeated_inputs(const std::vector<std::string>& files) {
  std::vector<std::pair<std::pair<dev_t, ino_t>, std::string>> seen;
  bool stdin_seen = false;
  for (const auto& f : files) {
    if (f == "-") {
      if (stdin_seen) throw UsageError("'-' (standard input) given twice: each input is read once");
      stdin_seen = true;
      continue;
    }
    struct stat st {};
    if (::stat(f.c_str(), &st) != 0) continue;  // the reader says why it cannot read it
    const std::pair<dev_t, ino_t> id{st.st_dev, st.st_ino};
    for (const auto& [other, name] : seen)
      if (other == id)
        throw UsageError("'" + json_check::printable(f) + "' is given twice" +
                         (name == f ? std::string() : " (also as '" + json_check::printable(name) + "')") +
                         ": each input is read once, its launches counted once");
    seen.emplace_back(id, f);
  }
}

}  // namespace

int ReconcileCommand::run_reconcile() {
  // --columns names reconcile's own groups (ratios, l2, launch, all).
  const std::vector<std::string> columns =
      out_.columns ? reconcile_column_groups(*out_.columns) : std::vector<std::string>{};
  OutputOptions out = out_;
  out.columns.reset();
  const PrintOptions print = to_print_options(out);
  DeviceOptions dev{device_, bandwidth_fraction_, plot_};
  check_device_options(dev, out);
  // --output or --plot naming an input would destroy it: refused before anything is read.
  std::vector<std::string> inputs_given = files_;
  if (kernel_table_) inputs_given.push_back(*kernel_table_);
  if (device_) inputs_given.push_back(*device_);
  for (const auto& [target, option] : {std::pair{out.output, "--output"}, std::pair{plot_, "--plot"}})
    if (target && *target != "-")
      for (const auto& in : inputs_given)
        if (in != "-" && same_write_target(*target, in))
          throw Error(std::string(option) + ": '" + *target + "' is also an input of this run ('" + in +
                      "'); write the result to another file");
  refuse_repeated_inputs(files_);
  if (model_config_)
    throw UsageError("--model-config: reconcile puts each kernel call beside one shape, and a whole model's step "
                     "is a call per layer; give a layer's shape (`hbmscope models " + *model_config_ +
                     "` shows its heads, head dims, window) with the shape options or NVTX ranges");
  if (shape_.pass) throw Error("--pass: reconcile takes the pass from the kernels (forward or backward calls)");
  ReconcileOptions opt;
  if (shape_.splits) opt.splits = one_value(*shape_.splits, "--splits", 1, max_decode_splits);
  if (shape_.page_size) opt.page_size = one_value(*shape_.page_size, "--page-size", 1, std::uint64_t{1} << 32);
  ShapeOptions shape = shape_;
  shape.splits.reset();
  shape.page_size.reset();
  const bool decode = shape.decode || shape.context_lengths;
  // Every shape option but --dtype (also the default of NVTX ranges) gives the
  // calls their shape, the served ones (--window ... --seq-lens) included.
  ShapeOptions no_dtype = shape;
  no_dtype.dtype.reset();
  const bool any_shape = no_dtype.any();
  if (shape.dtype) opt.nvtx_dtype = parse_dtype_axis(*shape.dtype, "--dtype").front();
  if (any_shape) {
    if (!decode && ((!shape.seq && !shape.seq_lens) || (!shape.head_dim && !shape.mla)))
      throw Error("--seq (or --seq-lens) and --head-dim (or --mla): both are needed to give the calls a shape (or "
                  "use NVTX ranges, whose window=, chunk=, dv=, kv_dtype=, mla=, seq_lens= keys give the rest)");
    if (decode && !shape.seq_kv && !shape.context_lengths)
      throw Error("--decode: give the context (--seq-kv, or --context-lengths for a ragged batch)");
    // The product is counted, and built only once the calls are known.
    opt.axes = to_axes(shape);
  }
  std::optional<DeviceSpec> device;
  if (device_) {
    device = find_device(*device_);
    opt.device = device;
    opt.bandwidth_fraction = bandwidth_fraction_.value_or(1.0);
    opt.l2 = to_l2_config(L2Options{}, &*device);
    if (device->sm_count > 0) opt.sm_count = device->sm_count;
    // The simulation runs within the run's budget, as sweep's does.
    opt.l2_plan = [l2 = *opt.l2](const std::vector<Shape>& shapes, std::vector<std::string>& notes) {
      std::vector<const Shape*> p;
      for (const Shape& s : shapes) p.push_back(&s);
      L2SimPlan plan = plan_l2_sims(p, true, [&](const Shape&) { return l2; });
      for (auto& n : plan.notes) notes.push_back(std::move(n));
      std::vector<bool> run;
      for (auto c : plan.cost) run.push_back(c > 0);
      return run;
    };
  }
  const KernelTable table = kernel_table_ ? load_kernel_table(*kernel_table_) : builtin_kernel_table();
  LaunchStream stream;
  std::vector<ReconcileInput> inputs;
  for (const auto& f : files_) {
    const std::size_t before = stream.launches.size();
    import_measurements(f, table, stream);
    inputs.push_back({f, stream.format, stream.launches.size() - before});
  }
  apply_nvtx_ranges(stream);
  if (stream.launches.empty())
    throw Error("no kernel launch among the inputs (only NVTX ranges): give the nsys cuda_gpu_trace CSV as well");
  std::vector<std::string> notes = std::move(stream.notes);
  const Reconciliation result = reconcile(stream.launches, table, opt);
  if (result.calls.empty()) notes.push_back("no attention call among the launches: see the kernels listed");
  // --splits and --page-size shape decode calls only: said when there is none.
  const bool any_decode = std::any_of(result.calls.begin(), result.calls.end(),
                                      [](const ReconciledCall& c) { return c.shape && c.shape->decode; });
  for (const auto& [given, option] :
       {std::pair{opt.splits != 0, "--splits"}, std::pair{opt.page_size.has_value(), "--page-size"}})
    if (given && !any_decode) notes.push_back(std::string(option) + ": no decode call in the inputs; it did nothing");
  std::vector<std::string> warnings;
  for (const auto& c : result.calls)
    if (c.geometry_warning) warnings.push_back("call " + std::to_string(c.index) + ": " + *c.geometry_warning);
  Report report;
  report.command = "reconcile";
  report.rows = reconcile_rows(result);
  if (device) add_predictions(report, *device, opt.bandwidth_fraction);
  ReconcileView view{result, inputs, table.origin, report, columns};
  std::string text = render_reconcile(view, print);

  const bool to_stdout = !out.output || *out.output == "-";
  std::optional<Plot> plot;
  if (plot_) plot.emplace(*plot_, [&](PlotTerminal t) { return reconcile_gnuplot_script(result, t); });
  std::optional<AtomicFile> file;
  if (!to_stdout) file.emplace(*out.output);
  const bool chart_to_terminal = plot_ && *plot_ == "-";
  if (chart_to_terminal && to_stdout) text += "\n" + plot->text();
  // Both files' bytes on disk before either is renamed (as finish_report).
  if (file) file->write(text);
  if (plot && !chart_to_terminal) plot->write();
  if (file) {
    file->publish();
    std::fprintf(stderr, "hbmscope: wrote %s\n", json_check::printable(*out.output).c_str());
  } else {
    write_stdout(text);
  }
  if (chart_to_terminal && !to_stdout) write_stdout(plot->text());
  if (plot && !chart_to_terminal) {
    plot->publish();
    std::fprintf(stderr, "hbmscope: wrote %s\n", json_check::printable(*plot_).c_str());
  }
  for (const auto& w : warnings) std::fprintf(stderr, "hbmscope: warning: %s\n", json_check::printable(w).c_str());
  for (const auto& n : notes) std::fprintf(stderr, "hbmscope: note: %s\n", json_check::printable(n).c_str());
  return 0;
}

}  // namespace hbmscope::cli
