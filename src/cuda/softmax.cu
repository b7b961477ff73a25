// The standard path's middle kernel: P = softmax(S), a row of S at a time per
// CTA. Single pass: each thread loads its 16-byte chunks of the row into
// registers (several loads in flight, and the CTA's next row's loads issued
// before this row is reduced), the CTA reduces max and sum, and P is written
// from the registers, so S is read once and P written once. The mask (causal,
// sliding window, chunk) is applied here (cuBLAS computed the whole S). A row
// the mask hides completely becomes zeros. Rows too long for registers (over
// 8 * 8 * 256 values) take the two-pass kernel below, one CTA per row.
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>

#include "check.hpp"
#include "flash_layout.hpp"
#include "hbmscope/error.hpp"
#include "kernels.hpp"

namespace hbmscope::cuda {

namespace {

constexpr float log2e = 1.4426950408889634f;

__device__ __forceinline__ float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// Max (is_max) or sum over the CTA; every thread gets the result.
template <bool IsMax>
__device__ float block_reduce(float x, float* scratch) {
  for (int o = 16; o > 0; o >>= 1) {
    const float y = __shfl_xor_sync(0xffffffffu, x, o);
    x = IsMax ? fmaxf(x, y) : x + y;
  }
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int warps = static_cast<int>(blockDim.x) / 32;
  __syncthreads();  // scratch may still hold the previous reduction
  if (lane == 0) scratch[warp] = x;
  __syncthreads();
  x = lane < warps ? scratch[lane] : (IsMax ? -INFINITY : 0.f);
  for (int o = 16; o > 0; o >>= 1) {
    const float y = __shfl_xor_sync(0xffffffffu, x, o);
    x = IsMax ? fmaxf(x, y) : x + y;
  }
  return x;
}

// The columns [begin, end) row `row` of S sees (flash_layout.hpp's row span;
// empty: begin == end == 0).
__device__ __forceinline__ flash::KeySpan visible_cols(const SoftmaxArgs& a, std::uint64_t row) {
  const int r = static_cast<int>(row % static_cast<std::uint64_t>(a.rows_per_head));
  const flash::KeySpan span = flash::row_keys(r, {a.cols, a.causal != 0, a.causal_offset, a.window, a.chunk});
  return span.end > span.begin ? span : flash::KeySpan{0, 0};
}

union Chunk {
  uint4 raw;
  __nv_bfloat162 h[4];
};

// One row: the thread's chunks (already loaded) become P. Columns the mask
// hides, and the padding past the row's chunks, enter as -inf, whose
// exponential is 0: the masked and the full row take the same path, each
// exponential computed once and kept until P is written. A row the mask
// hides completely has max -inf and sum 0, and becomes zeros.
template <int ChunksPerThread, bool Full>
__device__ __forceinline__ void softmax_row(const Chunk (&c)[ChunksPerThread], uint4* p, int chunks,
                                            flash::KeySpan visible, float* scratch) {
  const int tid = static_cast<int>(threadIdx.x), step = static_cast<int>(blockDim.x);
  float x[ChunksPerThread][8];
  float mx = -INFINITY;
#pragma unroll
  for (int i = 0; i < ChunksPerThread; ++i) {
    const int col0 = (tid + i * step) * 8;
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float2 f = __bfloat1622float2(c[i].h[e]);
      x[i][2 * e] = Full || (col0 + 2 * e >= visible.begin && col0 + 2 * e < visible.end) ? f.x : -INFINITY;
      x[i][2 * e + 1] =
          Full || (col0 + 2 * e + 1 >= visible.begin && col0 + 2 * e + 1 < visible.end) ? f.y : -INFINITY;
      mx = fmaxf(mx, fmaxf(x[i][2 * e], x[i][2 * e + 1]));
    }
  }
  mx = block_reduce<true>(mx, scratch);
  const float m2 = mx == -INFINITY ? 0.f : mx * log2e;
  float sum = 0.f;
#pragma unroll
  for (int i = 0; i < ChunksPerThread; ++i)
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      x[i][e] = exp2_approx(fmaf(x[i][e], log2e, -m2));
      sum += x[i][e];
    }
  sum = block_reduce<false>(sum, scratch);
  const float inv = sum > 0.f ? 1.f / sum : 0.f;
#pragma unroll
  for (int i = 0; i < ChunksPerThread; ++i) {
    const int idx = tid + i * step;
    if (Full || idx < chunks) {
      Chunk out;
#pragma unroll
      for (int e = 0; e < 4; ++e) out.h[e] = __floats2bfloat162_rn(x[i][2 * e] * inv, x[i][2 * e + 1] * inv);
      __stcs(p + idx, out.raw);
    }
  }
}

template <int ChunksPerThread>
__device__ __forceinline__ void load_row(const uint4* s, int chunks, Chunk (&c)[ChunksPerThread]) {
#pragma unroll
  for (int i = 0; i < ChunksPerThread; ++i) {
    const int idx = static_cast<int>(threadIdx.x) + i * static_cast<int>(blockDim.x);
    c[i].raw = idx < chunks ? __ldcs(s + idx) : make_uint4(0, 0, 0, 0);
  }
}

// CTAs of 256 threads per SM the register budget must allow: 6 (42
// registers) up to 2 chunks per thread (rows up to 4096 values), 3 (85) at 4
// chunks (8192 values), and no bound at 8 (16384 values: 64 exponentials and
// the next row's 32 registers). docs/cuda.md has ptxas's figures.
template <int ChunksPerThread>
constexpr int softmax_min_ctas = ChunksPerThread <= 2 ? 6 : ChunksPerThread == 4 ? 3 : 1;

// Rows blockIdx.x, + gridDim.x, ...: with a persistent grid (as many CTAs as
// fit at once) the next row's loads are issued before this row's reductions,
// so every CTA keeps a row in flight while it computes, and no CTA is
// launched per row (a row is only 2-8 KB); with a grid of one CTA per row
// the loop runs once.
template <int ChunksPerThread>
__global__ void __launch_bounds__(256, softmax_min_ctas<ChunksPerThread>) softmax_rows_kernel(const SoftmaxArgs a) {
  __shared__ float scratch[32];
  const int chunks = a.row_stride / 8;
  const bool padded = chunks != static_cast<int>(blockDim.x) * ChunksPerThread;
  const auto s_row = [&](std::uint64_t row) {
    return reinterpret_cast<const uint4*>(a.s + row * static_cast<std::uint64_t>(a.row_stride));
  };
  std::uint64_t row = blockIdx.x;
  Chunk cur[ChunksPerThread];
  if (row < a.rows) load_row<ChunksPerThread>(s_row(row), chunks, cur);
  for (; row < a.rows; row += gridDim.x) {
    Chunk next[ChunksPerThread];
    const std::uint64_t next_row = row + gridDim.x;
    if (next_row < a.rows) load_row<ChunksPerThread>(s_row(next_row), chunks, next);
    uint4* p = reinterpret_cast<uint4*>(a.p + row * static_cast<std::uint64_t>(a.row_stride));
    const flash::KeySpan visible = visible_cols(a, row);
    // Uniform over the CTA (one row at a time).
    if (!padded && visible.begin == 0 && visible.end == a.row_stride)
      softmax_row<ChunksPerThread, true>(cur, p, chunks, visible, scratch);
    else
      softmax_row<ChunksPerThread, false>(cur, p, chunks, visible, scratch);
#pragma unroll
    for (int i = 0; i < ChunksPerThread; ++i) cur[i].raw = next[i].raw;
  }
}

// Rows longer than 8 * 8 * 256 values: an online max/sum pass, then a pass
// that writes P. Reads S twice (docs/cuda.md says so).
__global__ void __launch_bounds__(1024) softmax_rows_two_pass_kernel(const SoftmaxArgs a) {
  __shared__ float scratch[32];
  const std::uint64_t row = blockIdx.x;
  const uint4* s = reinterpret_cast<const uint4*>(a.s + row * static_cast<std::uint64_t>(a.row_stride));
  uint4* p = reinterpret_cast<uint4*>(a.p + row * static_cast<std::uint64_t>(a.row_stride));
  const int chunks = a.row_stride / 8;
  const flash::KeySpan visible = visible_cols(a, row);
  float m = -INFINITY, l = 0.f;
  for (int idx = static_cast<int>(threadIdx.x); idx < chunks; idx += static_cast<int>(blockDim.x)) {
    Chunk c;
    c.raw = __ldcg(s + idx);  // not evict-first: the second pass reads S again
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      if (idx * 8 + e >= visible.end) break;
      if (idx * 8 + e < visible.begin) continue;
      const float x = (e % 2 ? __high2float(c.h[e / 2]) : __low2float(c.h[e / 2])) * log2e;
      if (x == -INFINITY) continue;  // adds nothing; e^(-inf - -inf) would be NaN
      if (x > m) {
        l = l * exp2_approx(m - x) + 1.f;
        m = x;
      } else {
        l += exp2_approx(x - m);
      }
    }
  }
  const float gm = block_reduce<true>(m, scratch);
  l = m == -INFINITY ? 0.f : l * exp2_approx(m - gm);
  const float gl = block_reduce<false>(l, scratch);
  const float inv = gl > 0.f ? 1.f / gl : 0.f;
  for (int idx = static_cast<int>(threadIdx.x); idx < chunks; idx += static_cast<int>(blockDim.x)) {
    Chunk c, out;
    c.raw = __ldcs(s + idx);
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      float v[2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const float x = h ? __high2float(c.h[e]) : __low2float(c.h[e]);
        const int col = idx * 8 + 2 * e + h;
        v[h] = col >= visible.begin && col < visible.end ? exp2_approx(fmaf(x, log2e, -gm)) * inv : 0.f;
      }
      out.h[e] = __floats2bfloat162_rn(v[0], v[1]);
    }
    __stcs(p + idx, out.raw);
  }
}

// The persistent grid: as many CTAs of softmax_rows_kernel<ChunksPerThread>
// as the device holds at once, never more than the rows. The runtime is asked
// once per device and block size, not at every (timed) launch.
template <int ChunksPerThread>
dim3 resident_grid(unsigned threads, std::uint64_t rows) {
  static int cached_device = -1;
  static unsigned cached_threads = 0;
  static std::uint64_t resident = 0;
  int device = 0;
  HBMSCOPE_CUDA_CHECK(cudaGetDevice(&device));
  if (device != cached_device || threads != cached_threads) {
    int sms = 0, per_sm = 0;
    HBMSCOPE_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    HBMSCOPE_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
        &per_sm, softmax_rows_kernel<ChunksPerThread>, static_cast<int>(threads), 0));
    resident = static_cast<std::uint64_t>(std::max(sms, 1)) * static_cast<std::uint64_t>(std::max(per_sm, 1));
    cached_device = device;
    cached_threads = threads;
  }
  return dim3(static_cast<unsigned>(std::min<std::uint64_t>(rows, resident)));
}

}  // namespace

void launch_softmax(const SoftmaxPlan& plan, const SoftmaxArgs& a, cudaStream_t stream) {
  const dim3 block(plan.threads);
  if (!plan.single_pass) {
    softmax_rows_two_pass_kernel<<<dim3(static_cast<unsigned>(plan.rows)), block, 0, stream>>>(a);
  } else {
    // Persistent up to 2 chunks per thread (rows up to 4096 values: 0.77 ->
    // 0.83 of copy on the H200); at 4 a CTA per row was faster (0.91 against
    // 0.84 persistent), docs/results/2026-12-04-h200-afternoon.md.
    const dim3 one_per_row(static_cast<unsigned>(plan.rows));
    switch (plan.chunks_per_thread) {
      case 1: softmax_rows_kernel<1><<<resident_grid<1>(plan.threads, plan.rows), block, 0, stream>>>(a); break;
      case 2: softmax_rows_kernel<2><<<resident_grid<2>(plan.threads, plan.rows), block, 0, stream>>>(a); break;
      case 4: softmax_rows_kernel<4><<<one_per_row, block, 0, stream>>>(a); break;
      case 8: softmax_rows_kernel<8><<<one_per_row, block, 0, stream>>>(a); break;
      default: throw Error("softmax kernel: no instantiation for " + std::to_string(plan.chunks_per_thread) + " chunks per thread");
    }
  }
  HBMSCOPE_CUDA_CHECK(cudaGetLastError());
}

}  // namespace hbmscope::cuda
