#pragma once
// The online-softmax step of the flash and decode kernels, written once: for
// a warp's 16-row m-tile, fold a block of S accumulators into the running max
// m and sum l, rescale O, and hand P back as the A fragments of P V
// (docs/model.md, "Online softmax"; docs/cuda.md for the fragment layout).
#include <cuda_bf16.h>

#include <cmath>
#include <cstdint>

#include "ptx.cuh"

namespace hbmscope {

// s: this lane's S accumulators of one m-tile (NS 16x8 tiles, rows lane/4
// and lane/4 + 8), turned into P in place; o_acc: O's accumulators of the same
// rows; row_max, row_sum: m and this lane's partial l of the two rows.
template <int NS, int NO>
__device__ __forceinline__ void online_softmax_step(float (&s)[NS][4], float (&o_acc)[NO][4], float (&row_max)[2],
                                                    float (&row_sum)[2], float scale_log2) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float mx = row_max[r];
#pragma unroll
    for (int t = 0; t < NS; ++t) mx = fmaxf(mx, fmaxf(s[t][2 * r], s[t][2 * r + 1]));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    // A row that has seen only masked keys keeps m = -inf: subtract 0 then,
    // so exp2(-inf - 0) = 0 rather than exp2(-inf + inf) = NaN.
    const float m_scaled = mx == -INFINITY ? 0.f : mx * scale_log2;
    const float alpha = ptx::exp2_approx(row_max[r] * scale_log2 - m_scaled);
    row_max[r] = mx;
    float sum = 0.f;
#pragma unroll
    for (int t = 0; t < NS; ++t)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const float e = ptx::exp2_approx(fmaf(s[t][2 * r + h], scale_log2, -m_scaled));
        s[t][2 * r + h] = e;
        sum += e;
      }
    row_sum[r] = row_sum[r] * alpha + sum;
#pragma unroll
    for (int t = 0; t < NO; ++t) {
      o_acc[t][2 * r] *= alpha;
      o_acc[t][2 * r + 1] *= alpha;
    }
  }
}

// P's A fragment for k step kk of P V: the accumulators of S tiles 2kk and
// 2kk + 1, as bf16 pairs (no shared memory needed).
template <int NS>
__device__ __forceinline__ void p_fragment(const float (&s)[NS][4], int kk, std::uint32_t (&a)[4]) {
  a[0] = ptx::pack_bf16x2(s[2 * kk][0], s[2 * kk][1]);
  a[1] = ptx::pack_bf16x2(s[2 * kk][2], s[2 * kk][3]);
  a[2] = ptx::pack_bf16x2(s[2 * kk + 1][0], s[2 * kk + 1][1]);
  a[3] = ptx::pack_bf16x2(s[2 * kk + 1][2], s[2 * kk + 1][3]);
}

}  // namespace hbmscope
