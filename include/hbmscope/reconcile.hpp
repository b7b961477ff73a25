#pragma once
// `reconcile`: kernel launches measured elsewhere (Nsight Compute, plain
// timings) grouped into attention calls and held against the model. Pure data
// and logic: reading files is ncu_import.hpp's, printing the report's.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hbmscope/device_spec.hpp"
#include "hbmscope/l2_sim.hpp"
#include "hbmscope/shape.hpp"

namespace hbmscope {

// What one kernel does in an attention call (configs/kernels.json).
enum class KernelRole {
  flash_fwd,         // a fused attention forward kernel: one kernel is one call
  flash_bwd,         // a fused backward kernel (consecutive ones make one call)
  split_kv,          // a decode kernel over the KV cache (in splits or not)
  split_kv_combine,  // the reduction over the splits that follows it
  gemm,              // standard attention: S = QK^T or O = PV
  softmax,           // standard attention: P = softmax(S)
  elementwise,       // scale, mask, dropout between the GEMMs
  floor,             // hbmscope's floor kernel (every value once)
  other,             // known, not attention (flushes, fills, reductions)
  unknown,           // matched by no pattern
};

std::string_view role_name(KernelRole r);
std::optional<KernelRole> parse_role(std::string_view s);

// One pattern of the kernel table: every string of `all` must occur in the
// kernel name (case-sensitive substrings); the first entry that matches wins.
struct KernelPattern {
  std::vector<std::string> all;
  KernelRole role = KernelRole::unknown;
  std::string source;  // "PyTorch SDPA flash", "flash-attn 2", ... (for people)
};

struct KernelTable {
  std::string origin;  // "configs/kernels.json (built in)" or the user's file
  std::vector<KernelPattern> patterns;
};

// The first pattern that matches, or nullptr.
const KernelPattern* classify(const KernelTable& table, std::string_view kernel_name);

// One kernel launch as measured (an Nsight Compute row, a timing row).
struct MeasuredLaunch {
  std::string origin;  // "FILE:LINE" of its row
  std::string id;      // ncu's launch ID, or the row number
  std::string kernel;  // function name as printed
  std::optional<std::uint64_t> dram_read, dram_write;  // bytes counted by the GPU
  std::optional<double> seconds;                       // gpu__time_duration / time_s
  std::optional<double> dram_pct_of_peak;              // ncu "DRAM Throughput", %
  std::string nvtx;             // the innermost "hbmscope:..." range name, if any
  std::optional<Shape> shape;   // plain timings carry their shape
  // Plain timings: the row is a whole call of this kind (no grouping).
  std::optional<KernelRole> whole_call;
  // Process, context and stream as ncu prints them: launches are grouped
  // into calls per stream, so that work on other streams in between does not
  // split a call.
  std::string stream;
};

// Call kinds: how launches were grouped.
enum class CallKind { standard, flash, flash_bwd, split_kv, floor };
std::string_view call_kind_name(CallKind k);

// "hbmscope:seq=4096,seq_kv=4096,d=128,heads=32,kv_heads=8,batch=4,causal=1"
// (keys in any order; seq_kv defaults to seq, kv_heads to heads, batch to 1,
// causal to 0; also dtype=bf16, pass=fwd). Text before "hbmscope:" is
// ignored. Throws Error naming the bad key.
Shape parse_nvtx_shape(std::string_view range_name, Dtype default_dtype);

// One model variant's bytes, split into reads and writes where the model
// can split them (docs/reconcile.md).
struct ModelBytesRW {
  std::string id;  // "standard", "flash_no_l2", "flash_l2_sim", "floor", ...
  std::uint64_t total = 0;
  std::optional<std::uint64_t> reads, writes;
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
  std::optional<Shape> shape;
  std::string shape_from;             // "nvtx", "options", "timings", "" (none)
  std::optional<std::uint64_t> read_bytes, write_bytes;  // counted, summed over launches
  std::optional<double> seconds;           // summed over launches
  std::uint64_t flops = 0;
  std::vector<ModelBytesRW> model;         // the variants that fit the kind
  std::string judged_against;              // the variant the verdict names first
  std::optional<double> achieved_bandwidth;  // counted (reads + writes) / time, B/s
  std::optional<double> model_bandwidth;     // judged variant's bytes / time, B/s
  std::optional<double> pct_of_peak;         // achieved / device bandwidth, % (else ncu's DRAM Throughput)
  std::optional<Prediction> roofline;        // counted bytes (else model) and FLOPs on the device
  std::optional<double> time_over_roofline;  // seconds / roofline.seconds
  std::optional<double> reads_over_model;    // counted reads / judged variant's reads
  std::optional<double> position;  // flash: (reads - floor) / (no_l2 - floor), 0 floor .. 1 no reuse
  std::optional<double> sim_position;  // the same for flash_l2_sim's reads
  VerdictKind verdict = VerdictKind::no_shape;
  std::string verdict_text;  // one line for people
  std::vector<std::string> notes;
};

struct ReconcileOptions {
  std::vector<Shape> shapes;  // empty: NVTX / timings only; one: every call; N: call i gets shape i
  std::optional<DeviceSpec> device;
  double bandwidth_fraction = 1.0;
  std::optional<L2SimConfig> l2;  // flash_l2_sim when set (device L2, SMs)
  Dtype nvtx_dtype = Dtype::bf16;  // NVTX ranges without dtype=
};

struct KernelCount {
  std::string kernel;
  KernelRole role = KernelRole::unknown;
  std::uint64_t launches = 0;
};

struct Reconciliation {
  std::vector<ReconciledCall> calls;
  std::vector<KernelCount> unmatched;  // names no pattern matched, with counts
  std::vector<KernelCount> outside;    // matched, but part of no call (role other, stray GEMMs, ...)
  std::vector<std::string> notes;
};

// Groups launches into calls: standard = GEMM, (elementwise), softmax,
// (elementwise), GEMM; flash = one flash_fwd kernel; flash_bwd = consecutive
// backward kernels; split-KV = split_kv (or flash_fwd) followed by combine
// kernels; floor = one floor kernel. Pure: no model.
struct CallGroup {
  CallKind kind = CallKind::flash;
  std::vector<std::size_t> launches;
};
std::vector<CallGroup> group_launches(const std::vector<KernelRole>& roles,
                                      const std::vector<std::optional<KernelRole>>& whole_call = {});

// Classifies, groups, assigns shapes and evaluates the model for every call.
// Throws Error when the shape list does not fit the calls or a shape cannot be
// modelled.
Reconciliation reconcile(const std::vector<MeasuredLaunch>& launches, const KernelTable& table,
                         const ReconcileOptions& opt);

// The model's bytes for a call kind on a shape, reads and writes split.
// Split-KV (decode) calls get the floor: the KV cache read once, Q and O.
std::vector<ModelBytesRW> model_bytes_for(CallKind kind, const Shape& s, const std::optional<L2SimConfig>& l2);

}  // namespace hbmscope

namespace hbmscope {

// The model rows of the calls that have a shape (for JSON reports, compare
// and merge): label "call N (kind)", the call's variants with their bytes
// and intensity. Predictions are roofline.hpp's add_predictions.
std::vector<Row> reconcile_rows(const Reconciliation& r);

}  // namespace hbmscope
