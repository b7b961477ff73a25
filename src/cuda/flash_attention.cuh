#pragma once
// FlashAttention-2 forward, BF16 in, FP32 accumulate, for sm_80 and later
// (built for sm_90). Read top to bottom:
//   1. PTX wrappers: cp.async, ldmatrix, mma.sync m16n8k16, ex2.
//   2. The tile loader: global -> swizzled shared memory with cp.async, rows
//      past the sequence zero-filled.
//   3. The kernel: one CTA per (query block, head, batch); each warp owns 16
//      query rows. The Q tile stays resident (its fragments in registers), K/V
//      tiles stream through two shared-memory stages; S, P, the running max m
//      and sum l live in registers; O is written once through shared memory with
//      16-byte stores, with the row log-sum-exp.
// Index maps come from flash_layout.hpp, which the CPU tests check.
#include <cuda_bf16.h>

#include <cstdint>

#include "flash_layout.hpp"
#include "flash_params.hpp"
#include "online_softmax.cuh"
#include "ptx.cuh"

namespace hbmscope::flash {


// --- 1. PTX wrappers (ptx.cuh) ------------------------------------------------
using ptx::cp_async_16;
using ptx::cp_async_commit;
using ptx::cp_async_wait;
using ptx::exp2_approx;
using ptx::ldmatrix_x4;
using ptx::ldmatrix_x4_trans;
using ptx::mma_bf16;
using ptx::pack_bf16x2;
using ptx::smem_u32;

// --- 2. Tile loader ------------------------------------------------------------

// Copies rows [row0, row0 + Rows) of a [seq][D] head into a swizzled tile;
// rows at or past `seq` are zero-filled (their source address is clamped to
// row 0 so that it stays inside the allocation).
template <int Rows, int D, int Threads>
__device__ __forceinline__ void load_tile(__nv_bfloat16* tile, const __nv_bfloat16* head, int row0,
                                          int seq) {
  constexpr int steps = Rows * D / 8 / Threads;
  static_assert(Rows * D / 8 % Threads == 0, "tile chunks must divide among the threads");
#pragma unroll
  for (int step = 0; step < steps; ++step) {
    const RowCol rc = load_chunk(static_cast<int>(threadIdx.x), step, Threads, D);
    const int g = row0 + rc.row;
    const bool inside = g < seq;
    const __nv_bfloat16* src = head + static_cast<std::size_t>(inside ? g : 0) * D + rc.col;
    cp_async_16(tile + swizzled_offset(rc.row, rc.col, D), src, inside ? 16 : 0);
  }
}

// --- 3. The kernel ---------------------------------------------------------------

// The mask of flash_layout.hpp from the kernel's arguments (they stay in the
// parameter bank: no registers until a mask is evaluated). No chunks: the
// divide that a chunk's first key needs made v2 spill (docs/cuda.md), so
// `measure` refuses chunked shapes for the flash kernels.
__device__ __forceinline__ KeyMask key_mask(const FlashParams& p) {
  return {p.seq_kv, p.causal != 0, p.causal_offset, p.window, 0};
}

template <int D, int Br, int Bc>
struct FlashShape {
  static_assert(D % 64 == 0, "the swizzle needs rows of at least 8 chunks");
  static_assert(Br % 16 == 0 && Bc % 16 == 0, "blocks are made of 16 x 16 mma tiles");
  static constexpr int warps = Br / 16;
  static constexpr int threads = warps * 32;
  static constexpr int q_elems = Br * D;
  static constexpr int kv_elems = Bc * D;
  static constexpr int smem_bytes = (q_elems + 4 * kv_elems) * 2;  // Q, 2 x K, 2 x V
  static constexpr int n_tiles_s = Bc / 8;  // 16x8 accumulator tiles of S per warp
  static constexpr int n_tiles_o = D / 8;   // of O
  static constexpr int k_steps_q = D / 16;  // k steps of Q K^T
  static constexpr int k_steps_p = Bc / 16; // k steps of P V
};

template <int D, int Br, int Bc>
__global__ void __launch_bounds__(FlashShape<D, Br, Bc>::threads, 1)
    flash_forward_kernel(const FlashParams p) {
  using Sh = FlashShape<D, Br, Bc>;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  __nv_bfloat16* s_q = reinterpret_cast<__nv_bfloat16*>(smem_raw);
  __nv_bfloat16* s_k = s_q + Sh::q_elems;      // stage 0, stage 1
  __nv_bfloat16* s_v = s_k + 2 * Sh::kv_elems; // stage 0, stage 1

  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int q0 = static_cast<int>(blockIdx.x) * Br;
  const int head = static_cast<int>(blockIdx.y);
  const int batch = static_cast<int>(blockIdx.z);
  const int kv_head = head / (p.heads / p.kv_heads);

  const std::size_t q_head = (static_cast<std::size_t>(batch) * p.heads + head) * p.seq_q;
  const std::size_t kv_head_row = (static_cast<std::size_t>(batch) * p.kv_heads + kv_head) * p.seq_kv;
  const __nv_bfloat16* q = p.q + q_head * D;
  const __nv_bfloat16* k = p.k + kv_head_row * D;
  const __nv_bfloat16* v = p.v + kv_head_row * D;

  // Key blocks outside the mask's band (before a window, after the causal
  // diagonal) are never loaded. Stages go by the block's parity.
  const KeySpan blocks = key_block_range(q0, Br, Bc, p.seq_q, key_mask(p));

  load_tile<Br, D, Sh::threads>(s_q, q, q0, p.seq_q);
  if (blocks.begin < blocks.end) {
    load_tile<Bc, D, Sh::threads>(s_k + (blocks.begin & 1) * Sh::kv_elems, k, blocks.begin * Bc, p.seq_kv);
    load_tile<Bc, D, Sh::threads>(s_v + (blocks.begin & 1) * Sh::kv_elems, v, blocks.begin * Bc, p.seq_kv);
  }
  cp_async_commit();

  float o_acc[Sh::n_tiles_o][4];
#pragma unroll
  for (int t = 0; t < Sh::n_tiles_o; ++t)
#pragma unroll
    for (int e = 0; e < 4; ++e) o_acc[t][e] = 0.f;
  // This lane's two rows of the warp's 16: lane/4 and lane/4 + 8.
  float row_max[2] = {-INFINITY, -INFINITY};
  float row_sum[2] = {0.f, 0.f};  // this lane's partial sums; the quad adds them at the end
  // Per-lane byte offsets of this lane's ldmatrix rows (flash_layout.hpp):
  // each k step / n-tile pair then only XORs or adds a constant.
  const RowCol qa = ldmatrix_a_address(lane);
  const RowCol ka = ldmatrix_k_address(lane);
  const RowCol va = ldmatrix_v_address(lane);
  const std::uint32_t q_base = smem_u32(s_q);
  const int q_lane = lane_bytes(warp * 16 + qa.row, qa.col, D);
  const int k_lane = lane_bytes(ka.row, ka.col, D);
  const int v_lane = lane_bytes(va.row, va.col, D);

  for (int j = blocks.begin; j < blocks.end; ++j) {
    const int stage = j & 1;
    // Issue the next K and V tiles before the math on this pair, then wait
    // for this pair only.
    if (j + 1 < blocks.end) {
      load_tile<Bc, D, Sh::threads>(s_k + (stage ^ 1) * Sh::kv_elems, k, (j + 1) * Bc, p.seq_kv);
      load_tile<Bc, D, Sh::threads>(s_v + (stage ^ 1) * Sh::kv_elems, v, (j + 1) * Bc, p.seq_kv);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();

    const std::uint32_t tile_k = smem_u32(s_k + stage * Sh::kv_elems);
    const std::uint32_t tile_v = smem_u32(s_v + stage * Sh::kv_elems);

    // S = Q K^T for the warp's 16 rows x Bc keys (unscaled).
    float s[Sh::n_tiles_s][4];
#pragma unroll
    for (int t = 0; t < Sh::n_tiles_s; ++t)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[t][e] = 0.f;
#pragma unroll
    for (int ks = 0; ks < Sh::k_steps_q; ++ks) {
      // Q stays resident in shared memory; its fragment is re-read per k step
      // rather than held (D/4 registers that d = 128 cannot spare).
      std::uint32_t a[4];
      ldmatrix_x4(a, q_base + step_bytes(q_lane, ks));
#pragma unroll
      for (int np = 0; np < Sh::n_tiles_s / 2; ++np) {
        std::uint32_t b[4];
        ldmatrix_x4(b, tile_k + step_bytes(k_lane + np * 16 * D * 2, ks));
        mma_bf16(s[2 * np], a, b[0], b[1]);
        mma_bf16(s[2 * np + 1], a, b[2], b[3]);
      }
    }

    // Mask keys past the sequence and those outside each row's span (after
    // the causal diagonal, before the window). Only the blocks at the band's
    // edges need it.
    if (block_needs_mask(q0, j, Br, Bc, p.seq_q, key_mask(p))) {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const KeySpan span = row_keys(q0 + warp * 16 + c_fragment(lane, 2 * r).row, key_mask(p));
#pragma unroll
        for (int t = 0; t < Sh::n_tiles_s; ++t)
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int key = j * Bc + t * 8 + c_fragment(lane, 2 * r + h).col;
            if (key < span.begin || key >= span.end) s[t][2 * r + h] = -INFINITY;
          }
      }
    }

    // Online softmax over this block: m, l and O rescaled, S turned into P.
    online_softmax_step(s, o_acc, row_max, row_sum, p.scale_log2);

    // O += P V, P's A fragments straight from the S accumulators.
#pragma unroll
    for (int kk = 0; kk < Sh::k_steps_p; ++kk) {
      std::uint32_t a[4];
      p_fragment(s, kk, a);
#pragma unroll
      for (int dp = 0; dp < Sh::n_tiles_o / 2; ++dp) {
        std::uint32_t b[4];
        ldmatrix_x4_trans(b, tile_v + step_bytes(v_lane + kk * 16 * D * 2, dp));
        mma_bf16(o_acc[2 * dp], a, b[0], b[1]);
        mma_bf16(o_acc[2 * dp + 1], a, b[2], b[3]);
      }
    }
    // Every warp is done with this stage before the next iteration refills it.
    __syncthreads();
  }
  if (blocks.begin >= blocks.end) {
    // The Q copy must land before its shared memory is reused below.
    cp_async_wait<0>();
    __syncthreads();
  }

  // Normalise; a row that saw no key at all gets O = 0 and lse = -inf.
  float inv[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float l = row_sum[r];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    row_sum[r] = l;
    inv[r] = l > 0.f ? 1.f / l : 0.f;
  }

  // Stage the warp's 16 rows of O in its own rows of the Q tile (only this
  // warp ever reads them), then store 16-byte chunks.
#pragma unroll
  for (int t = 0; t < Sh::n_tiles_o; ++t)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const RowCol rc = c_fragment(lane, 2 * r);
      *reinterpret_cast<std::uint32_t*>(s_q + swizzled_offset(warp * 16 + rc.row, t * 8 + rc.col, D)) =
          pack_bf16x2(o_acc[t][2 * r] * inv[r], o_acc[t][2 * r + 1] * inv[r]);
    }
  __syncwarp();
  constexpr int chunks_per_row = D / 8;
#pragma unroll
  for (int i = lane; i < 16 * chunks_per_row; i += 32) {
    const int row = i / chunks_per_row;
    const int col = (i % chunks_per_row) * 8;
    const int g = q0 + warp * 16 + row;
    if (g < p.seq_q) {
      const uint4 val = *reinterpret_cast<const uint4*>(s_q + swizzled_offset(warp * 16 + row, col, D));
      *reinterpret_cast<uint4*>(p.o + (q_head + g) * D + col) = val;
    }
  }
  if (lane % 4 == 0) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int g = q0 + warp * 16 + lane / 4 + 8 * r;
      if (g < p.seq_q)
        p.lse[q_head + g] = row_sum[r] > 0.f ? row_max[r] * p.scale + logf(row_sum[r]) : -INFINITY;
    }
  }
}

}  // namespace hbmscope::flash
