#pragma once
// FlashAttention-2 forward, v2 warp layout (the default "flash" kernel; the
// v1 layout of flash_attention.cuh stays selectable as "flash_v1").
//
// What changes from v1, and why (docs/cuda.md, section "flash (... v2 layout ...)"):
//   - Each warp owns 32 query rows (two 16-row m-tiles), so a CTA of Br = 128
//     has 4 warps. Every K fragment (ldmatrix.x4) and V fragment
//     (ldmatrix.x4.trans) then feeds four mma.m16n8k16 instead of two: the
//     shared-memory reads per MMA halve, which is what bound v1.
//   - K and V are separate cp.async groups: V[j] is issued before Q K[j]^T and
//     K[j+1] before P V[j], and each barrier waits for the one tile the next
//     MMA needs, so the loads overlap both MMAs.
//   - __launch_bounds__(threads, 2): two CTAs per SM where shared memory
//     allows (the defaults: 80 and 96 KiB per CTA).
//   - Causal: the grid's first CTAs take the last query blocks (the heaviest,
//     they see the most keys), so the tail of the launch is short blocks.
// The tile loader, PTX wrappers and index maps are v1's (flash_layout.hpp;
// the CPU emulation in tests/test_flash_emulation.cpp runs this layout too).
#include "flash_attention.cuh"

namespace hbmscope::flash {

// The v1 loader's chunk map (load_chunk: chunk tid + step * Threads) written
// as one base address per thread plus a constant per step: a row of D/8
// chunks, Threads/(D/8) rows per step. v1's form leaves ptxas one 64-bit
// address per step live across the key loop, which spilled here.
template <int Rows, int D, int Threads>
__device__ __forceinline__ void load_tile_v2(__nv_bfloat16* tile, const __nv_bfloat16* head, int row0,
                                             int seq) {
  constexpr int chunks_per_row = D / 8;
  static_assert(Threads % chunks_per_row == 0, "whole rows per step");
  constexpr int rows_per_step = Threads / chunks_per_row;
  static_assert(Rows % rows_per_step == 0, "tile rows must divide among the steps");
  const int r = static_cast<int>(threadIdx.x) / chunks_per_row;
  const int c = (static_cast<int>(threadIdx.x) % chunks_per_row) * 8;
  const __nv_bfloat16* src = head + static_cast<std::size_t>(row0 + r) * D + c;
#pragma unroll
  for (int step = 0; step < Rows / rows_per_step; ++step) {
    const int row = r + step * rows_per_step;  // load_chunk_v2(threadIdx.x, step, ...).row
    const bool inside = row0 + row < seq;
    // Rows past the sequence: 16 zero bytes from a valid address (row 0).
    cp_async_16(tile + swizzled_offset(row, c, D), inside ? src + step * rows_per_step * D : head, inside ? 16 : 0);
  }
}

// Special registers read afresh: asm volatile keeps the compiler from holding
// the first read live across the key loop (registers are what v2 is short of).
__device__ __forceinline__ int fresh_sreg_tid() {
  int v;
  asm volatile("mov.u32 %0, %%tid.x;\n" : "=r"(v));
  return v;
}
__device__ __forceinline__ int fresh_sreg_ctaid(int which) {
  int v;
  if (which == 0) asm volatile("mov.u32 %0, %%ctaid.x;\n" : "=r"(v));
  else if (which == 1) asm volatile("mov.u32 %0, %%ctaid.y;\n" : "=r"(v));
  else asm volatile("mov.u32 %0, %%ctaid.z;\n" : "=r"(v));
  return v;
}
__device__ __forceinline__ int fresh_sreg_nctaid_x() {
  int v;
  asm volatile("mov.u32 %0, %%nctaid.x;\n" : "=r"(v));
  return v;
}

// Element offset of this CTA's K/V head, read afresh from the special
// registers (two registers fewer held through the key loop; the kv head by a
// multiply-high, not a divide, whose temporaries spilled).
__device__ __forceinline__ std::size_t fresh_kv_offset(const FlashParams& p, int d) {
  const int kv_head = fast_quotient(fresh_sreg_ctaid(1), p.group_div);
  return ((static_cast<std::size_t>(fresh_sreg_ctaid(2)) * p.kv_heads + kv_head) * p.seq_kv) * d;
}

template <int D, int Br, int Bc>
struct FlashShapeV2 {
  static_assert(D % 64 == 0, "the swizzle needs rows of at least 8 chunks");
  static_assert(Br % 32 == 0 && Bc % 16 == 0, "warps of 32 rows; 16 x 16 mma tiles");
  static constexpr int rows_per_warp = 32;
  static constexpr int m_tiles = rows_per_warp / 16;
  static constexpr int warps = Br / rows_per_warp;
  static constexpr int threads = warps * 32;
  static constexpr int min_ctas = 2;  // per SM, for the register budget
  static constexpr int q_elems = Br * D;
  static constexpr int kv_elems = Bc * D;
  static constexpr int smem_bytes = (q_elems + 4 * kv_elems) * 2;  // Q, 2 x K, 2 x V
  static constexpr int n_tiles_s = Bc / 8;
  static constexpr int n_tiles_o = D / 8;
  static constexpr int k_steps_q = D / 16;
  static constexpr int k_steps_p = Bc / 16;
};

template <int D, int Br, int Bc>
__global__ void __launch_bounds__(FlashShapeV2<D, Br, Bc>::threads, FlashShapeV2<D, Br, Bc>::min_ctas)
    flash_forward_v2_kernel(const FlashParams p) {
  using Sh = FlashShapeV2<D, Br, Bc>;
  constexpr int MT = Sh::m_tiles;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  __nv_bfloat16* s_q = reinterpret_cast<__nv_bfloat16*>(smem_raw);
  __nv_bfloat16* s_k = s_q + Sh::q_elems;      // stage 0, stage 1
  __nv_bfloat16* s_v = s_k + 2 * Sh::kv_elems; // stage 0, stage 1

  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const bool causal = p.causal != 0;
  const int q0 = v2_query_block(static_cast<int>(blockIdx.x), static_cast<int>(gridDim.x), causal) * Br;
  const int head = static_cast<int>(blockIdx.y);
  const int batch = static_cast<int>(blockIdx.z);
  const int kv_head = head / (p.heads / p.kv_heads);

  const std::size_t q_head = (static_cast<std::size_t>(batch) * p.heads + head) * p.seq_q;
  const std::size_t kv_head_row = (static_cast<std::size_t>(batch) * p.kv_heads + kv_head) * p.seq_kv;
  const __nv_bfloat16* q = p.q + q_head * D;
  // One offset for K and V (their bases stay in the parameter bank); the key
  // loop reads it afresh (fresh_kv_offset) rather than holding it.
  const std::size_t kv_off = kv_head_row * D;

  // Key blocks outside the mask's band (before a window, after the causal
  // diagonal) are never loaded. Stages go by the block's parity.
  const KeySpan blocks = key_block_range(q0, Br, Bc, p.seq_q, key_mask(p));

  // Group 0: Q and K[first block].
  load_tile_v2<Br, D, Sh::threads>(s_q, q, q0, p.seq_q);
  if (blocks.begin < blocks.end)
    load_tile_v2<Bc, D, Sh::threads>(s_k + (blocks.begin & 1) * Sh::kv_elems, p.k + kv_off, blocks.begin * Bc,
                                     p.seq_kv);
  cp_async_commit();

  float o_acc[MT][Sh::n_tiles_o][4];
#pragma unroll
  for (int m = 0; m < MT; ++m)
#pragma unroll
    for (int t = 0; t < Sh::n_tiles_o; ++t)
#pragma unroll
      for (int e = 0; e < 4; ++e) o_acc[m][t][e] = 0.f;
  // Rows of this lane: warp * 32 + m * 16 + lane / 4 + 8 * r.
  float row_max[MT][2], row_sum[MT][2];
#pragma unroll
  for (int m = 0; m < MT; ++m)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      row_max[m][r] = -INFINITY;
      row_sum[m][r] = 0.f;
    }
  const RowCol qa = ldmatrix_a_address(lane);
  const RowCol ka = ldmatrix_k_address(lane);
  const RowCol va = ldmatrix_v_address(lane);
  const std::uint32_t q_base = smem_u32(s_q);
  // m-tile m adds 16 rows: 16 * D * 2 bytes, which the swizzle leaves alone.
  const int q_lane = lane_bytes(warp * Sh::rows_per_warp + qa.row, qa.col, D);
  const int k_lane = lane_bytes(ka.row, ka.col, D);
  const int v_lane = lane_bytes(va.row, va.col, D);

  for (int j = blocks.begin; j < blocks.end; ++j) {
    const int stage = j & 1;
    // V[j] into its stage: last read by P V[j-2], which every warp finished
    // before the previous iteration's first barrier.
    load_tile_v2<Bc, D, Sh::threads>(s_v + stage * Sh::kv_elems, p.v + fresh_kv_offset(p, D), j * Bc, p.seq_kv);
    cp_async_commit();
    cp_async_wait<1>();  // all but V[j]: Q and K[j] have landed
    __syncthreads();

    const std::uint32_t tile_k = smem_u32(s_k + stage * Sh::kv_elems);
    const std::uint32_t tile_v = smem_u32(s_v + stage * Sh::kv_elems);

    float s[MT][Sh::n_tiles_s][4];
#pragma unroll
    for (int m = 0; m < MT; ++m)
#pragma unroll
      for (int t = 0; t < Sh::n_tiles_s; ++t)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[m][t][e] = 0.f;
#pragma unroll
    for (int ks = 0; ks < Sh::k_steps_q; ++ks) {
      std::uint32_t a[MT][4];
#pragma unroll
      for (int m = 0; m < MT; ++m) ldmatrix_x4(a[m], q_base + step_bytes(q_lane + m * 16 * D * 2, ks));
#pragma unroll
      for (int np = 0; np < Sh::n_tiles_s / 2; ++np) {
        std::uint32_t b[4];
        ldmatrix_x4(b, tile_k + step_bytes(k_lane + np * 16 * D * 2, ks));
#pragma unroll
        for (int m = 0; m < MT; ++m) {
          mma_bf16(s[m][2 * np], a[m], b[0], b[1]);
          mma_bf16(s[m][2 * np + 1], a[m], b[2], b[3]);
        }
      }
    }

    // K[j+1] into the other stage: last read by Q K[j-1]^T, which every warp
    // finished before the barrier above; it overlaps the softmax and P V.
    // Always a group (empty on the last block) so that the wait before P V
    // counts the same every time.
    if (j + 1 < blocks.end)
      load_tile_v2<Bc, D, Sh::threads>(s_k + (stage ^ 1) * Sh::kv_elems, p.k + fresh_kv_offset(p, D), (j + 1) * Bc,
                                       p.seq_kv);
    cp_async_commit();

    // Keys past the sequence and outside each row's span (after the causal
    // diagonal, before the window): only the band's edge blocks. The query
    // block is read afresh: the test's loop-invariant parts (the first and
    // last rows' spans) would otherwise be hoisted, held through the loop, and
    // spill.
    const int mq0 = v2_query_block(fresh_sreg_ctaid(0), fresh_sreg_nctaid_x(), p.causal != 0) * Br;
    if (block_needs_mask(mq0, j, Br, Bc, p.seq_q, key_mask(p))) {
      const int m_lane = fresh_sreg_tid() % 32;
      const int row0 = mq0 + fresh_sreg_tid() / 32 * Sh::rows_per_warp;
#pragma unroll
      for (int m = 0; m < MT; ++m)
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          const KeySpan span = row_keys(row0 + m * 16 + c_fragment(m_lane, 2 * r).row, key_mask(p));
#pragma unroll
          for (int t = 0; t < Sh::n_tiles_s; ++t)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
              const int key = j * Bc + t * 8 + c_fragment(m_lane, 2 * r + h).col;
              if (key < span.begin || key >= span.end) s[m][t][2 * r + h] = -INFINITY;
            }
        }
    }

#pragma unroll
    for (int m = 0; m < MT; ++m) online_softmax_step(s[m], o_acc[m], row_max[m], row_sum[m], p.scale_log2);

    cp_async_wait<1>();  // all but K[j+1]: V[j] has landed
    __syncthreads();

    // O += P V: S tiles 2kk, 2kk+1 as bf16 pairs are the A fragment of k step kk.
#pragma unroll
    for (int kk = 0; kk < Sh::k_steps_p; ++kk) {
      std::uint32_t pa[MT][4];
#pragma unroll
      for (int m = 0; m < MT; ++m) p_fragment(s[m], kk, pa[m]);
#pragma unroll
      for (int dp = 0; dp < Sh::n_tiles_o / 2; ++dp) {
        std::uint32_t b[4];
        ldmatrix_x4_trans(b, tile_v + step_bytes(v_lane + kk * 16 * D * 2, dp));
#pragma unroll
        for (int m = 0; m < MT; ++m) {
          mma_bf16(o_acc[m][2 * dp], pa[m], b[0], b[1]);
          mma_bf16(o_acc[m][2 * dp + 1], pa[m], b[2], b[3]);
        }
      }
    }
  }
  // Every thread's share of the Q copy has landed before any warp reuses its
  // rows of the Q tile below (with a block visited the loop's barriers did this).
  if (blocks.begin >= blocks.end) {
    cp_async_wait<0>();
    __syncthreads();
  }

  // The epilogue's indices, recomputed rather than kept live through the loop.
  const int e_tid = fresh_sreg_tid();
  const int e_warp = e_tid / 32, e_lane = e_tid % 32;
  const int e_q0 = v2_query_block(fresh_sreg_ctaid(0), fresh_sreg_nctaid_x(), p.causal != 0) * Br;
  const std::size_t e_q_head =
      (static_cast<std::size_t>(fresh_sreg_ctaid(2)) * p.heads + fresh_sreg_ctaid(1)) * p.seq_q;

  float inv[MT][2];
#pragma unroll
  for (int m = 0; m < MT; ++m)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float l = row_sum[m][r];
      l += __shfl_xor_sync(0xffffffffu, l, 1);
      l += __shfl_xor_sync(0xffffffffu, l, 2);
      row_sum[m][r] = l;
      inv[m][r] = l > 0.f ? 1.f / l : 0.f;
    }

  // Stage the warp's 32 rows of O in its own rows of the Q tile (no other
  // warp reads them), then store 16-byte chunks.
#pragma unroll
  for (int m = 0; m < MT; ++m)
#pragma unroll
    for (int t = 0; t < Sh::n_tiles_o; ++t)
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const RowCol rc = c_fragment(e_lane, 2 * r);
        const int row = e_warp * Sh::rows_per_warp + m * 16 + rc.row;
        *reinterpret_cast<std::uint32_t*>(s_q + swizzled_offset(row, t * 8 + rc.col, D)) =
            pack_bf16x2(o_acc[m][t][2 * r] * inv[m][r], o_acc[m][t][2 * r + 1] * inv[m][r]);
      }
  __syncwarp();
  constexpr int chunks_per_row = D / 8;
#pragma unroll
  for (int i = e_lane; i < Sh::rows_per_warp * chunks_per_row; i += 32) {
    const int row = e_warp * Sh::rows_per_warp + i / chunks_per_row;
    const int col = (i % chunks_per_row) * 8;
    const int g = e_q0 + row;
    if (g < p.seq_q) {
      const uint4 val = *reinterpret_cast<const uint4*>(s_q + swizzled_offset(row, col, D));
      *reinterpret_cast<uint4*>(p.o + (e_q_head + g) * D + col) = val;
    }
  }
  if (e_lane % 4 == 0) {
#pragma unroll
    for (int m = 0; m < MT; ++m)
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int g = e_q0 + e_warp * Sh::rows_per_warp + m * 16 + e_lane / 4 + 8 * r;
        if (g < p.seq_q)
          p.lse[e_q_head + g] = row_sum[m][r] > 0.f ? row_max[m][r] * p.scale + logf(row_sum[m][r]) : -INFINITY;
      }
  }
}

}  // namespace hbmscope::flash
