#pragma once
// Host-side decisions of the CUDA backend that need no GPU: which FlashAttention
// instantiation runs, launch geometry, buffer sizes, the validation shape.
// Plain C++ (src/cuda/launch_plan.cpp), covered by CPU tests.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "hbmscope/shape.hpp"

namespace hbmscope {

// One compiled (head dim, Br, Bc, version) instantiation of the flash kernel.
// Version 1 ("flash_v1", src/cuda/flash_attention.cuh): each warp owns 16 query
// rows, so a CTA has Br/16 warps. Version 2 ("flash", flash_attention_v2.cuh):
// each warp owns 32 rows (two m-tiles share every K/V fragment), Br/32 warps.
struct FlashConfig {
  int head_dim = 0;
  int block_rows = 0;  // Br
  int block_cols = 0;  // Bc
  int version = 1;     // kernel layout: 1 or 2
  friend bool operator==(const FlashConfig&, const FlashConfig&) = default;
};

// Every instantiation the backend compiles (both versions), in a fixed order.
std::span<const FlashConfig> flash_configs();
// The default per head dim (Br = 128, Bc chosen to allow 2 CTAs per SM for v2;
// the same blocks for v1).
FlashConfig default_flash_config(std::uint64_t head_dim, int version = 1);
// The instantiation for (head_dim, Br, Bc, version); unset Br/Bc take the
// default's. Throws Error listing that version's instantiations when there is none.
FlashConfig choose_flash_config(std::uint64_t head_dim, std::optional<std::uint64_t> block_rows,
                                std::optional<std::uint64_t> block_cols, int version = 1);
bool flash_supports(std::uint64_t head_dim);
std::string describe(const FlashConfig& c);  // "d=128 Br=128 Bc=64" (v1), "... Bc=64 v2 (4 warps)"

int flash_warps(const FlashConfig& c);
int flash_threads(const FlashConfig& c);
// Q tile + two stages of K and V tiles, bf16.
std::size_t flash_smem_bytes(const FlashConfig& c);

// What ptxas reports for an instantiation built for sm_90 (-Xptxas=-v,
// recorded in docs/cuda.md; tests/test_launch_plan.cpp keeps the two in
// step): registers per thread, and whether it has spills or a stack frame.
// 0 registers: not in the table (an instantiation not compiled).
int flash_registers(const FlashConfig& c);

// Per-SM limits of a GPU that decide how many CTAs are resident at once.
struct SmLimits {
  std::uint64_t smem_per_sm = 228 * 1024;   // bytes, sm_90
  std::uint64_t smem_reserved_per_cta = 1024;  // the runtime's share per CTA
  std::uint32_t registers_per_sm = 65536;
  std::uint32_t threads_per_sm = 2048;
  std::uint32_t ctas_per_sm = 32;
};
// The limits of a device by its name ("A100 ...": 164 KiB of shared memory;
// "L40S", "RTX 4090": 100 KiB, 1536 threads, 24 CTAs); sm_90's otherwise.
SmLimits sm_limits_for_device(std::string_view device_name);
// CTAs of the instantiation resident on one SM: the least of what shared
// memory, registers (rounded up to 8 per thread, allocated per warp in 256s),
// threads and the CTA limit allow. At least 1.
std::uint32_t flash_ctas_per_sm(const FlashConfig& c, const SmLimits& lim = {});
// The CTAs per SM of the kernel `hbmscope measure` would run on a shape (v2
// with its blocks when compiled, else v1); for head dims with no compiled
// kernel, the shared-memory bound of a v2-like CTA of the shape's blocks.
std::uint32_t shape_ctas_per_sm(const Shape& s, const SmLimits& lim = {});

struct LaunchGeometry {
  std::uint32_t grid_x = 1, grid_y = 1, grid_z = 1;
  std::uint32_t threads = 1;
  std::size_t smem_bytes = 0;
};

// Grid (query blocks, heads, batch): the query block fastest, so co-resident
// CTAs share one head's K and V in L2. Throws Error past CUDA's grid limits.
LaunchGeometry flash_geometry(const Shape& s, const FlashConfig& c);

// The standard path's S and P rows are padded to a multiple of 8 values so
// that each row starts 16-byte aligned (cuBLAS ldc, softmax 16-byte loads).
std::uint64_t score_row_stride(const Shape& s);

// Row softmax: one CTA per row of S; each thread holds chunks_per_thread
// 16-byte chunks in registers so S is read once. Rows too long for that
// (more than 8 * 8 * 256 = 16384 values) take a two-pass kernel that reads S twice.
struct SoftmaxPlan {
  std::uint32_t threads = 0;
  std::uint32_t chunks_per_thread = 0;  // 1, 2, 4 or 8 (single pass)
  bool single_pass = true;
  std::uint64_t rows = 0;  // grid size
};
SoftmaxPlan softmax_plan(const Shape& s);

// Streaming floor kernel: 16-byte chunks, `unroll` loads of each of Q, K, V in
// flight per thread, a grid-stride loop over enough CTAs to fill the device.
struct FloorPlan {
  std::uint64_t q_chunks = 0, kv_chunks = 0;  // 16-byte chunks of Q (= O) and of K (= V)
  std::uint32_t threads = 256;
  std::uint32_t unroll = 4;
  std::uint32_t blocks = 0;
};
FloorPlan floor_plan(const Shape& s, int sm_count);

// softmax: the standard path's middle kernel alone (S -> P), timed on its own
// so that its bandwidth can be held against the copy's.
// flash_v1: the v1 layout of the flash kernel, kept beside v2 ("flash").
// decode, decode_paged: the split-KV decode kernels (decode_plan.hpp) on decode
// rows, with a contiguous or a paged KV cache.
enum class KernelKind { standard, flash, floor, copy, softmax, flash_v1, decode, decode_paged };

// Device bytes one kernel family needs for a shape (inputs, output, scratch),
// not counting the L2 flush buffer. Throws Error on overflow.
std::uint64_t device_footprint(const Shape& s, KernelKind k);

// Why a kernel cannot run a shape (dtype, head dim, cuBLAS's 32-bit sizes), or
// nothing when it can. `measure` reports such a kernel skipped, with the reason,
// and runs the others.
std::optional<std::string> unsupported_reason(const Shape& s, KernelKind k);

// What of the shape kernel k does not run at all (a phrase after "our
// kernels do not run"), or nothing: V and O of another head dim than Q and K (head_dim_v), latent KV
// (MLA), a KV dtype other than the kernels' BF16, ragged prefill (seq_lens),
// chunked attention for the flash kernels. `measure` and `sweep --measure`
// refuse such a shape, in one line, before any device work (the model counts
// it; no kernel of ours would be held against those counts); both backends'
// run() refuse it the same way (check_measurable).
std::optional<std::string> measure_refusal(const Shape& s, KernelKind k);
// Throws Error "measure: our kernels do not run WHAT (kernel K, shape S);
// `hbmscope model` counts it" for the first kind that refuses the shape
// (measure_refusal gives WHAT).
void check_measurable(const Shape& s, std::span<const KernelKind> kinds);

// Does `need` fit in `free_bytes` with a margin (5% and 256 MiB) kept back?
bool fits_in_memory(std::uint64_t need, std::uint64_t free_bytes);

// The shape validation runs on: the shape itself when its CPU reference is
// cheap (batch*heads*Nq*Nkv*d <= validation_budget), else batch <= 2,
// kv_heads <= 2, group <= 2, and each length over 1024 cut to 1000 (ragged for
// every block size), keeping head dim, dtype, blocks, causal and the sign of
// Nkv - Nq; a window or chunk that hid keys and would not once the keys are
// cut becomes half the cut keys (cut_band). See docs/cuda.md.
inline constexpr std::uint64_t validation_budget = 1ull << 30;
Shape validation_shape(const Shape& s);
// A window or chunk `band` (0: none) of a problem of `keys` keys cut to
// `cut_keys`: unchanged when it hides nothing (band >= keys) or still fits
// (band < cut_keys), else max(1, cut_keys / 2), so that it still hides keys.
std::uint64_t cut_band(std::uint64_t band, std::uint64_t keys, std::uint64_t cut_keys);

// The L2 flush buffer: at least twice the device's L2, rounded up to 1 MiB.
std::uint64_t flush_bytes(std::uint64_t l2_bytes);

}  // namespace hbmscope
