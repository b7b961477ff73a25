// The floor kernel: every value of Q, K and V read once and O written once,
// the least traffic any attention kernel can have. O = Q + K + V chunk by chunk
// (so O depends on all three); where K/V are longer than Q (Nkv > Nq, or GQA
// the other way round) the surplus chunks are still read, and stored only if
// their sum is not finite, which the compiler cannot rule out and finite
// inputs never produce. 16-byte streaming loads, `Unroll` of each in flight.
// Also the L2 flush's read pass.
#include <cuda_bf16.h>

#include <cstdint>

#include "check.hpp"
#include "hbmscope/error.hpp"
#include "kernels.hpp"

namespace hbmscope::cuda {

namespace {

union Chunk {
  uint4 raw;
  __nv_bfloat162 h[4];
};

constexpr int floor_unroll = 4;

__device__ __forceinline__ bool finite_chunk(const float (&x)[8]) {
  bool ok = true;
#pragma unroll
  for (int e = 0; e < 8; ++e) ok &= isfinite(x[e]);
  return ok;
}

__global__ void __launch_bounds__(256) floor_kernel(const uint4* __restrict__ q, const uint4* __restrict__ k,
                                                    const uint4* __restrict__ v, uint4* __restrict__ o,
                                                    std::uint64_t q_chunks, std::uint64_t kv_chunks) {
  const std::uint64_t n = q_chunks > kv_chunks ? q_chunks : kv_chunks;
  const std::uint64_t stride = static_cast<std::uint64_t>(gridDim.x) * blockDim.x * floor_unroll;
  for (std::uint64_t base = static_cast<std::uint64_t>(blockIdx.x) * blockDim.x * floor_unroll + threadIdx.x;
       base < n; base += stride) {
    Chunk cq[floor_unroll], ck[floor_unroll], cv[floor_unroll];
#pragma unroll
    for (int u = 0; u < floor_unroll; ++u) {
      const std::uint64_t i = base + static_cast<std::uint64_t>(u) * blockDim.x;
      cq[u].raw = i < q_chunks ? __ldcs(q + i) : make_uint4(0, 0, 0, 0);
      ck[u].raw = i < kv_chunks ? __ldcs(k + i) : make_uint4(0, 0, 0, 0);
      cv[u].raw = i < kv_chunks ? __ldcs(v + i) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < floor_unroll; ++u) {
      const std::uint64_t i = base + static_cast<std::uint64_t>(u) * blockDim.x;
      float sum[8];
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        sum[2 * e] = __low2float(cq[u].h[e]) + __low2float(ck[u].h[e]) + __low2float(cv[u].h[e]);
        sum[2 * e + 1] = __high2float(cq[u].h[e]) + __high2float(ck[u].h[e]) + __high2float(cv[u].h[e]);
      }
      Chunk out;
#pragma unroll
      for (int e = 0; e < 4; ++e) out.h[e] = __floats2bfloat162_rn(sum[2 * e], sum[2 * e + 1]);
      if (i < q_chunks) {
        __stcs(o + i, out.raw);
      } else if (i < n && !finite_chunk(sum)) {
        o[0] = out.raw;
      }
    }
  }
}

// Reads `chunks` 16-byte chunks; like the floor kernel it stores only what
// can never happen on the flush buffer's contents (a memset pattern), so the
// loads stay.
__global__ void __launch_bounds__(256) read_pass_kernel(const uint4* __restrict__ buf, std::uint64_t chunks,
                                                        uint4* __restrict__ sink) {
  const std::uint64_t stride = static_cast<std::uint64_t>(gridDim.x) * blockDim.x;
  unsigned acc = 0;
  for (std::uint64_t i = static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < chunks;
       i += stride) {
    const uint4 x = __ldcg(buf + i);
    acc ^= x.x ^ x.y ^ x.z ^ x.w;
  }
  if (acc == 0x9e3779b9u) *sink = make_uint4(acc, 0, 0, 0);
}

// splitmix64 of (index, seed): cheap, stateless, never all zeros.
__global__ void fill_random_kernel(__nv_bfloat16* x, std::uint64_t n, std::uint64_t seed) {
  const std::uint64_t stride = static_cast<std::uint64_t>(gridDim.x) * blockDim.x;
  for (std::uint64_t i = static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    std::uint64_t z = i + seed * 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    const float u = static_cast<float>(z >> 40) * 0x1p-24f;  // [0, 1)
    x[i] = __float2bfloat16_rn(2.f * u - 1.f);
  }
}

}  // namespace

void launch_fill_random(__nv_bfloat16* x, std::uint64_t n, std::uint64_t seed, cudaStream_t stream) {
  fill_random_kernel<<<1024, 256, 0, stream>>>(x, n, seed);
  HBMSCOPE_CUDA_CHECK(cudaGetLastError());
}

void launch_floor(const FloorPlan& plan, const __nv_bfloat16* q, const __nv_bfloat16* k,
                  const __nv_bfloat16* v, __nv_bfloat16* o, cudaStream_t stream) {
  if (plan.unroll != floor_unroll || plan.threads != 256)
    throw Error("floor kernel: the plan does not match the compiled unroll (4) and block (256)");
  floor_kernel<<<plan.blocks, plan.threads, 0, stream>>>(
      reinterpret_cast<const uint4*>(q), reinterpret_cast<const uint4*>(k), reinterpret_cast<const uint4*>(v),
      reinterpret_cast<uint4*>(o), plan.q_chunks, plan.kv_chunks);
  HBMSCOPE_CUDA_CHECK(cudaGetLastError());
}

void launch_read_pass(const void* buffer, std::uint64_t bytes, int sm_count, cudaStream_t stream) {
  const std::uint64_t chunks = bytes / 16;
  // The last chunk doubles as the sink: the store never happens on a buffer
  // memset to a byte pattern whose chunk XOR is 0.
  auto* buf = static_cast<const uint4*>(buffer);
  read_pass_kernel<<<static_cast<unsigned>(sm_count > 0 ? sm_count * 8 : 1024), 256, 0, stream>>>(
      buf, chunks, const_cast<uint4*>(buf + chunks - 1));
  HBMSCOPE_CUDA_CHECK(cudaGetLastError());
}

}  // namespace hbmscope::cuda
