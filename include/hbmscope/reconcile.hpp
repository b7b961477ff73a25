#pragma once
// `reconcile`: kernel launches measured elsewhere (Nsight Compute, Nsight
// Systems, plain timings) grouped into attention calls and held against the
// model. Pure data and logic: reading files is ncu_import.hpp's, printing the
// report's.
#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hbmscope/device_spec.hpp"
#include "hbmscope/l2_sim.hpp"
#include "hbmscope/shape.hpp"
#include "hbmscope/sweep.hpp"

namespace hbmscope {

// What one kernel does in an attention call (configs/kernels.json).
enum class KernelRole {
  flash_fwd,         // a fused attention forward kernel: one kernel is one call
  flash_bwd,         // a fused backward kernel (consecutive ones make one call)
  split_kv,          // a decode kernel over the KV cache (in splits or not)
  split_kv_combine,  // the reduction over the splits that follows it
  gemm,              // standard attention: S = QK^T or O = PV
  gemm_reduce,       // part of the GEMM before it (cuBLAS's splitKreduce_kernel)
  softmax,           // standard attention: P = softmax(S)
  elementwise,       // scale, mask, dropout between the GEMMs
  floor,             // hbmscope's floor kernel (every value once)
  other,             // known, not attention (flushes, fills, reductions)
  unknown,           // matched by no pattern
};

std::string_view role_name(KernelRole r);
std::optional<KernelRole> parse_role(std::string_view s);

// How a kernel's grid maps onto the shape, where its launch code is public
// (docs/reconcile.md, "Launch geometry").
enum class GridLayout {
  unknown,
  fa2,          // flash-attn 2 forward: (row blocks, batch, heads)
  fa2_splitkv,  // flash-attn 2 split-KV: (row blocks, splits, batch x heads); unsplit as fa2
  fa1,          // flash-attn 1 fmha: (batch, heads, query splits)
  vllm,         // vLLM paged attention: (heads, sequences, partitions of 512 tokens)
};
std::string_view grid_layout_name(GridLayout g);
std::optional<GridLayout> parse_grid_layout(std::string_view s);

// One pattern of the kernel table: every string of `all` must occur in the
// kernel name (case-sensitive substrings); the first entry that matches wins.
struct KernelPattern {
  std::vector<std::string> all;
  KernelRole role = KernelRole::unknown;
  std::string source;  // "PyTorch SDPA flash", "flash-attn 2", ... (for people)
  // A combine kernel joins the split kernel before it only when both are of
  // one family (or either has none): a capture cut by --launch-skip may start
  // with a combine whose split kernel was skipped.
  std::string family;
  GridLayout grid = GridLayout::unknown;
  bool paged = false;           // reads the KV cache through a page table
  bool per_query_head = false;  // one CTA per query head (GQA heads not packed)
};

struct KernelTable {
  std::string origin;  // "configs/kernels.json (built in)" or the user's file
  std::vector<KernelPattern> patterns;
};

// The first pattern that matches, or nullptr.
const KernelPattern* classify(const KernelTable& table, std::string_view kernel_name);

// Which figure a launch's time is.
enum class TimeSource : std::uint8_t {
  none,
  duration,   // gpu__time_duration.sum, a trace's duration, a timings row
  section,    // the SOL section's Duration
  cycles,     // derived: sm__cycles_elapsed.avg / .avg.per_second (or gpc__ ones)
};
std::string_view time_source_name(TimeSource t);

// One kernel launch as measured (an Nsight Compute row or block, an Nsight
// Systems trace row, a timing row).
struct MeasuredLaunch {
  std::string origin;  // "FILE:LINE" of its row
  std::string id;      // ncu's launch ID, nsys's CorrId, or the row number
  std::string kernel;  // function name as printed
  std::optional<std::uint64_t> dram_read, dram_write;  // bytes counted by the GPU
  std::optional<std::uint64_t> dram_total;  // dram__bytes.sum: reads and writes in one count
  std::optional<double> seconds;            // see time_from
  TimeSource time_from = TimeSource::none;
  std::optional<double> dram_pct_of_peak;   // ncu "DRAM Throughput", %
  // L2 read sectors requested by the SMs, and those that hit
  // (lts__t_sectors_srcunit_tex_op_read.sum, ..._lookup_hit.sum).
  std::optional<std::uint64_t> l2_read_sectors, l2_read_hit_sectors;
  std::array<std::uint64_t, 3> grid{};  // launch grid (x, y, z); 0: not given
  std::uint64_t grid_size = 0;          // CTAs in all, where only the total is given
  std::optional<std::uint64_t> start_ns;  // Nsight Systems: start on the trace's time line
  std::string nvtx;             // the innermost "hbmscope:..." range name, if any
  std::optional<Shape> shape;   // plain timings carry their shape
  // Plain timings: the row is a whole call of this kind (no grouping).
  std::optional<KernelRole> whole_call;
  // Process, context and stream as the profiler prints them: launches are
  // grouped into calls per stream, so that work on other streams in between
  // does not split a call.
  std::string stream;
};

// Call kinds: how launches were grouped.
enum class CallKind { standard, flash, flash_bwd, split_kv, floor };
std::string_view call_kind_name(CallKind k);

// "hbmscope:seq=4096,seq_kv=4096,d=128,heads=32,kv_heads=8,batch=4,causal=1"
// (keys in any order; the keys of docs/reconcile.md "Shapes": the shape
// options' fields). Text before "hbmscope:" is ignored. Throws Error naming
// the bad key.
Shape parse_nvtx_shape(std::string_view range_name, Dtype default_dtype);

// One model variant's bytes, split into reads and writes where the model
// can split them (docs/reconcile.md), and the counts beside them.
struct ModelBytesRW {
  std::string id;  // "standard", "flash_no_l2", "flash_l2_sim", "floor", "decode_split", ...
  std::uint64_t total = 0;
  std::optional<std::uint64_t> reads, writes;
  std::uint64_t splits = 0;               // decode variants: the split count modelled
  std::optional<double> l2_hit_rate;      // simulated variants: the simulation's L2 hit rate
  std::optional<double> counted_over_reads;  // counted reads / this variant's reads
  std::optional<double> counted_over_total;  // counted reads + writes (or dram__bytes.sum) / its total
};

// Where counted reads fall against the model.
enum class VerdictKind {
  no_counts,     // no DRAM byte counts in the input: time only
  no_shape,      // no shape: no model
  below_floor,   // reads < 0.95 x the floor's: inputs L2-resident or miscounted
  at_floor,      // within 5 % of the floor's reads
  between,       // between the floor and flash_no_l2
  at_no_l2,      // within 5 % of flash_no_l2's reads
  above_no_l2,   // more than flash_no_l2 (extra traffic: spills, padding, fp32)
  matches,       // standard / split-KV: within 10 % of the variant's reads
  above,         // more than 1.1 x the variant's reads
  below,         // less than 0.9 x the variant's reads
};
std::string_view verdict_name(VerdictKind v);

// One attention call: its launches, its counts and the model beside them.
struct ReconciledCall {
  std::size_t index = 0;  // 1-based, in launch order
  CallKind kind = CallKind::flash;
  std::vector<std::size_t> launches;  // indices into the measured launches
  std::string kernels;                // names of the launches, joined by " + "
  std::string source;                 // the first launch's table source
  std::string origin;                 // FILE:LINE of the first launch
  std::optional<Shape> shape;         // a decode shape (decode = true) for decode calls
  std::string shape_from;             // "nvtx", "options", "timings", "" (none)
  std::optional<std::uint64_t> read_bytes, write_bytes;  // counted, summed over launches
  // dram__bytes.sum summed (reads and writes in one count), where the input
  // has no separate read and write counts.
  std::optional<std::uint64_t> total_bytes;
  std::optional<double> seconds;      // summed over launches
  TimeSource time_from = TimeSource::none;  // the launches' (cycles when any was derived)
  std::optional<double> l2_hit_rate;  // counted: hit sectors / read sectors over the launches
  std::uint64_t flops = 0;
  std::vector<ModelBytesRW> model;         // the variants that fit the kind
  std::string judged_against;              // the variant the verdict names first
  std::string judged_why;                  // why that variant ("a paged kernel", ...)
  // Decode calls: the split count the call ran with, and where it comes from
  // ("--splits", "launch grid", "no combine kernel", "heuristic").
  std::uint64_t splits = 0;
  std::string splits_from;
  std::array<std::uint64_t, 3> grid{};  // the first launch's grid (0: not given)
  std::uint64_t grid_size = 0;          // its CTAs, where only the total is given
  std::optional<double> achieved_bandwidth;  // counted (reads + writes) / time, B/s
  std::optional<double> model_bandwidth;     // judged variant's bytes / time, B/s
  std::optional<double> pct_of_peak;         // achieved / device bandwidth, % (else ncu's DRAM Throughput)
  std::optional<Prediction> roofline;        // counted bytes (else model) and FLOPs on the device
  std::optional<double> time_over_roofline;  // seconds / roofline.seconds
  std::optional<double> reads_over_model;    // counted reads (or total) / judged variant's
  std::optional<double> position;  // flash: (reads - floor) / (no_l2 - floor), 0 floor .. 1 no reuse
  std::optional<double> sim_position;  // the same for flash_l2_sim's reads
  VerdictKind verdict = VerdictKind::no_shape;
  std::string verdict_text;  // one line for people
  std::vector<std::string> notes;
  std::optional<std::string> geometry_warning;  // the launch grid contradicts the shape (one per call)
};

struct ReconcileOptions {
  std::vector<Shape> shapes;  // empty: NVTX / timings only; one: every call; N: call i gets shape i
  // Instead of shapes: the shape options' axes, expanded only once the number
  // of calls without a shape of their own is known, and only when the product
  // is one shape or one per call (so that a large product is refused unbuilt).
  std::optional<SweepAxes> axes;
  std::optional<DeviceSpec> device;
  double bandwidth_fraction = 1.0;
  std::optional<L2SimConfig> l2;  // flash_l2_sim / standard_l2_sim when set (device L2, SMs)
  // Which of the calls' distinct forward shapes the L2 simulation runs on
  // within the run's budget (the caller's rule: `sweep`'s); notes say what was
  // left out. Unset: every shape the per-shape cap allows.
  std::function<std::vector<bool>(const std::vector<Shape>&, std::vector<std::string>& notes)> l2_plan;
  Dtype nvtx_dtype = Dtype::bf16;  // NVTX ranges without dtype=
  // Decode calls: --splits (0: the launch grid, else the heuristic) and --page-size.
  std::uint64_t splits = 0;
  std::optional<std::uint64_t> page_size;
  std::uint64_t sm_count = default_decode_sm_count;  // the split heuristic's SMs (--device's)
};

struct KernelCount {
  std::string kernel;
  KernelRole role = KernelRole::unknown;
  std::uint64_t launches = 0;
  std::optional<double> seconds;  // summed, when every launch has a time
  std::optional<std::uint64_t> read_bytes;  // counted, summed (reads, else dram__bytes.sum)
};

struct Reconciliation {
  std::vector<ReconciledCall> calls;
  std::vector<KernelCount> unmatched;  // names no pattern matched, with counts
  std::vector<KernelCount> outside;    // matched, but part of no call (role other, stray GEMMs, ...)
  std::vector<std::string> notes;
};

// Groups launches into calls: standard = GEMM, (elementwise), softmax,
// (elementwise), GEMM, each GEMM with the gemm_reduce kernels after it;
// flash = one flash_fwd kernel; flash_bwd = consecutive backward kernels;
// split-KV = split_kv (or flash_fwd) followed by combine kernels of its family
// (families[i]; empty matches any); floor = one floor kernel. Pure: no model.
struct CallGroup {
  CallKind kind = CallKind::flash;
  std::vector<std::size_t> launches;
};
std::vector<CallGroup> group_launches(const std::vector<KernelRole>& roles,
                                      const std::vector<std::optional<KernelRole>>& whole_call = {},
                                      const std::vector<std::string_view>& families = {});

// Classifies, groups, assigns shapes and evaluates the model for every call.
// Throws Error when the shape list does not fit the calls or a shape cannot be
// modelled.
Reconciliation reconcile(const std::vector<MeasuredLaunch>& launches, const KernelTable& table,
                         const ReconcileOptions& opt);

// The model's bytes for a call kind on a shape, reads and writes split.
// Split-KV calls on a shape that is no decode shape get the floor: the KV
// cache read once, Q and O.
std::vector<ModelBytesRW> model_bytes_for(CallKind kind, const Shape& s, const std::optional<L2SimConfig>& l2);

// The decode variants a split-KV call is held against (s.decode set):
// decode_floor, decode_split with `splits`, decode_paged (s.page_size) with
// `splits`, and decode_split_unpacked when the kernel runs one CTA per query
// head. Writes are O and the partials the split kernel writes.
std::vector<ModelBytesRW> decode_model_bytes(const Shape& s, std::uint64_t splits, bool per_query_head);

// Launch geometry (reconcile_geometry.cpp): the split count a decode call's
// grid shows, where the layout is public, and whether the grid fits the shape.
struct GridCheck {
  std::optional<std::uint64_t> splits;  // from the grid
  std::optional<std::string> contradiction;  // "grid (32, 1, 32) ... batch 2, heads 16 ..."
};
GridCheck check_grid(GridLayout layout, const MeasuredLaunch& launch, const Shape& s);

}  // namespace hbmscope

namespace hbmscope {

// The model rows of the calls that have a shape (for JSON reports, compare
// and merge): label "call N (kind)", the call's variants with their bytes
// and intensity. Predictions are roofline.hpp's add_predictions.
std::vector<Row> reconcile_rows(const Reconciliation& r);

}  // namespace hbmscope
