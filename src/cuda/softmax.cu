// The standard path's middle kernel: P = softmax(S), one CTA per row of S.
// Single pass: each thread loads its 16-byte chunks of the row into registers
// (several loads in flight), the CTA reduces max and sum, and P is written
// from the registers, so S is read once and P written once. The mask (causal,
// sliding window, chunk) is applied here (cuBLAS computed the whole S). A row
// the mask hides completely becomes zeros. Rows too long for registers (over 8 * 8 * 256 values) take the
// two-pass kernel below.
#include <cuda_bf16.h>

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

// Masked or ragged rows (causal, padding, a row shorter than the CTA's
// chunks): a predicate per element, and exp2 computed twice (for the sum,
// then for the output) rather than kept.
template <int ChunksPerThread>
__device__ __forceinline__ void softmax_row_masked(const uint4* s, uint4* p, int chunks, flash::KeySpan visible,
                                                   float* scratch) {

  Chunk c[ChunksPerThread];
#pragma unroll
  for (int i = 0; i < ChunksPerThread; ++i) {
    const int idx = static_cast<int>(threadIdx.x) + i * static_cast<int>(blockDim.x);
    c[i].raw = idx < chunks ? __ldcs(s + idx) : make_uint4(0, 0, 0, 0);
  }
  float mx = -INFINITY;
#pragma unroll
  for (int i = 0; i < ChunksPerThread; ++i) {
    const int col0 = (static_cast<int>(threadIdx.x) + i * static_cast<int>(blockDim.x)) * 8;
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      const float x = e % 2 ? __high2float(c[i].h[e / 2]) : __low2float(c[i].h[e / 2]);
      if (col0 + e >= visible.begin && col0 + e < visible.end) mx = fmaxf(mx, x);
    }
  }
  mx = block_reduce<true>(mx, scratch);
  const float m2 = mx == -INFINITY ? 0.f : mx * log2e;
  // exp2 is computed twice (for the sum, then for the output) rather than
  // kept: 8 chunks x 8 floats more per thread would spill.
  float sum = 0.f;
#pragma unroll
  for (int i = 0; i < ChunksPerThread; ++i) {
    const int col0 = (static_cast<int>(threadIdx.x) + i * static_cast<int>(blockDim.x)) * 8;
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      const float x = e % 2 ? __high2float(c[i].h[e / 2]) : __low2float(c[i].h[e / 2]);
      sum += col0 + e >= visible.begin && col0 + e < visible.end ? exp2_approx(fmaf(x, log2e, -m2)) : 0.f;
    }
  }
  sum = block_reduce<false>(sum, scratch);
  const float inv = sum > 0.f ? 1.f / sum : 0.f;
#pragma unroll
  for (int i = 0; i < ChunksPerThread; ++i) {
    const int idx = static_cast<int>(threadIdx.x) + i * static_cast<int>(blockDim.x);
    if (idx < chunks) {
      Chunk out;
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float v[2];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const float x = h ? __high2float(c[i].h[e]) : __low2float(c[i].h[e]);
          const int col = idx * 8 + 2 * e + h;
          v[h] = col >= visible.begin && col < visible.end ? exp2_approx(fmaf(x, log2e, -m2)) * inv : 0.f;
        }
        out.h[e] = __floats2bfloat162_rn(v[0], v[1]);
      }
      __stcs(p + idx, out.raw);
    }
  }
}

// Full rows: every column visible, no padding, and exactly blockDim.x *
// ChunksPerThread chunks. No predicates; each exponential computed once and
// kept in registers until P is written.
template <int ChunksPerThread>
__device__ __forceinline__ void softmax_row_full(const uint4* s, uint4* p, float* scratch) {
  const int tid = static_cast<int>(threadIdx.x), step = static_cast<int>(blockDim.x);
  Chunk c[ChunksPerThread];
#pragma unroll
  for (int i = 0; i < ChunksPerThread; ++i) c[i].raw = __ldcs(s + tid + i * step);
  float x[ChunksPerThread][8];
  float mx = -INFINITY;
#pragma unroll
  for (int i = 0; i < ChunksPerThread; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float2 f = __bfloat1622float2(c[i].h[e]);
      x[i][2 * e] = f.x;
      x[i][2 * e + 1] = f.y;
      mx = fmaxf(mx, fmaxf(f.x, f.y));
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
    Chunk out;
#pragma unroll
    for (int e = 0; e < 4; ++e) out.h[e] = __floats2bfloat162_rn(x[i][2 * e] * inv, x[i][2 * e + 1] * inv);
    __stcs(p + tid + i * step, out.raw);
  }
}

// CTAs of 256 threads per SM the register budget must allow: 4 (64
// registers) up to 2 chunks per thread (rows up to 4096 values), 3 (85) at 4
// chunks (8192 values; the masked path needs about 80), and no bound at 8
// (16384 values: 64 exponentials in registers). docs/cuda.md has ptxas's figures.
template <int ChunksPerThread>
constexpr int softmax_min_ctas = ChunksPerThread <= 2 ? 4 : ChunksPerThread == 4 ? 3 : 1;

template <int ChunksPerThread>
__global__ void __launch_bounds__(256, softmax_min_ctas<ChunksPerThread>) softmax_rows_kernel(const SoftmaxArgs a) {
  __shared__ float scratch[32];
  const std::uint64_t row = blockIdx.x;
  const uint4* s = reinterpret_cast<const uint4*>(a.s + row * static_cast<std::uint64_t>(a.row_stride));
  uint4* p = reinterpret_cast<uint4*>(a.p + row * static_cast<std::uint64_t>(a.row_stride));
  const int chunks = a.row_stride / 8;
  const flash::KeySpan visible = visible_cols(a, row);
  // Uniform over the CTA (one row per CTA).
  if (visible.begin == 0 && visible.end == a.row_stride && chunks == static_cast<int>(blockDim.x) * ChunksPerThread)
    softmax_row_full<ChunksPerThread>(s, p, scratch);
  else
    softmax_row_masked<ChunksPerThread>(s, p, chunks, visible, scratch);
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

}  // namespace

void launch_softmax(const SoftmaxPlan& plan, const SoftmaxArgs& a, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(plan.rows));
  const dim3 block(plan.threads);
  if (!plan.single_pass) {
    softmax_rows_two_pass_kernel<<<grid, block, 0, stream>>>(a);
  } else {
    switch (plan.chunks_per_thread) {
      case 1: softmax_rows_kernel<1><<<grid, block, 0, stream>>>(a); break;
      case 2: softmax_rows_kernel<2><<<grid, block, 0, stream>>>(a); break;
      case 4: softmax_rows_kernel<4><<<grid, block, 0, stream>>>(a); break;
      case 8: softmax_rows_kernel<8><<<grid, block, 0, stream>>>(a); break;
      default: throw Error("softmax kernel: no instantiation for " + std::to_string(plan.chunks_per_thread) + " chunks per thread");
    }
  }
  HBMSCOPE_CUDA_CHECK(cudaGetLastError());
}

}  // namespace hbmscope::cuda
