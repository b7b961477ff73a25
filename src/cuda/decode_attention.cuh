#pragma once
// Split-KV decode attention (flash-decoding), BF16 in, FP32 accumulate, for
// sm_80 and later (built for sm_90). A few new query tokens (seq_q 1-8) per
// sequence against a long KV cache, contiguous or paged. Read top to bottom:
//   1. PTX wrappers: cp.async (16 bytes, L2 128-byte prefetch), ldmatrix,
//      mma.sync m16n8k16, ex2.
//   2. Loaders: Q rows, and K/V tiles of 64 tokens from a contiguous cache or
//      through the block table, into swizzled shared memory; tokens past the
//      split zero-filled and never read.
//   3. The split kernel: one CTA per (split, kv head, row block, batch). GQA
//      packed: the group's (query head, token) pairs are the rows of the CTA's
//      m-tiles, so each K/V tile is read once from HBM for all of them. Four
//      warps: each owns one 16-row m-tile and a slice of every key tile, with
//      its own online softmax; a multi-stage cp.async pipeline keeps
//      (stages - 1) tiles in flight. At the end the warps of an m-tile are
//      merged through shared memory and the CTA writes either the final O
//      (bf16) and LSE (one split) or fp32 partial O and LSE (several).
//   4. The combine kernel: one warp per output row merges the splits' partials
//      by their LSEs.
// Index maps come from decode_layout.hpp and flash_layout.hpp, which the CPU
// tests check (tests/test_decode_emulation.cpp emulates this file lane by lane).
#include <cuda_bf16.h>

#include <cstdint>

#include "decode_layout.hpp"
#include "decode_params.hpp"
#include "online_softmax.cuh"
#include "ptx.cuh"

namespace hbmscope::decode {

using flash::RowCol;

// --- 1. PTX wrappers (ptx.cuh) ------------------------------------------------
using ptx::cp_async_16_l2_128;
using ptx::cp_async_commit;
using ptx::cp_async_wait;
using ptx::exp2_approx;
using ptx::ldmatrix_x4;
using ptx::ldmatrix_x4_trans;
using ptx::mma_bf16;
using ptx::pack_bf16x2;
using ptx::smem_u32;

// --- 2. Loaders ------------------------------------------------------------------

// Rows [0, Rows) of the CTA's packed Q rows (contiguous in Q); rows at or past
// `rows` are zero-filled.
template <int D, int Rows>
__device__ __forceinline__ void load_q(__nv_bfloat16* tile, const __nv_bfloat16* q, int rows) {
  static_assert(Rows * D / 8 % threads == 0, "Q chunks must divide among the threads");
#pragma unroll
  for (int step = 0; step < Rows * D / 8 / threads; ++step) {
    const RowCol rc = flash::load_chunk(static_cast<int>(threadIdx.x), step, threads, D);
    const bool inside = rc.row < rows;
    cp_async_16_l2_128(tile + flash::swizzled_offset(rc.row, rc.col, D),
                q + static_cast<long long>(inside ? rc.row : 0) * D + rc.col, inside ? 16 : 0);
  }
}

template <int D>
inline constexpr int kv_steps = tile_keys * D / 8 / threads;  // 16-byte chunks per thread per K (or V) tile

// Where each of the thread's chunks of the tile of tokens [k0, k0 + tile_keys)
// comes from: the element offset of its token's K/V row, or -1 for tokens at
// or past `end` (zero-filled, their page never looked up). Each thread copies
// the same chunks of K and of V (one address, one block-table read for both).
template <int D, bool Paged>
__device__ __forceinline__ void kv_tile_rows(long long (&rows)[kv_steps<D>], const DecodeParams& p, int batch,
                                             int kv_head, long long k0, long long end) {
  static_assert(threads % (D / 8) == 0, "whole rows per step: a thread's rows are `rows_per_step` apart");
  constexpr int rows_per_step = threads / (D / 8);
  long long token = k0 + flash::load_chunk(static_cast<int>(threadIdx.x), 0, threads, D).row;
  if constexpr (Paged) {
    // One division for the first token, then slots stepped on; the block
    // table read once per page, and the page's offset kept: at low occupancy
    // the paged kernel is held up by this integer work, not by the table.
    const int* table = p.block_table + static_cast<long long>(batch) * p.max_pages;
    PageSlot ps = page_slot(token, p.page_size);
    long long page_index = -1, page_base = 0;
#pragma unroll
    for (int step = 0; step < kv_steps<D>; ++step) {
      rows[step] = -1;
      if (token < end) {
        if (ps.page_index != page_index) {
          page_index = ps.page_index;
          page_base = paged_slot_row(__ldg(table + page_index), kv_head, 0, p.kv_heads, p.page_size, D);
        }
        rows[step] = page_base + static_cast<long long>(ps.slot) * D;
      }
      token += rows_per_step;
      ps = advance(ps, rows_per_step, p.page_size);
    }
  } else {
#pragma unroll
    for (int step = 0; step < kv_steps<D>; ++step, token += rows_per_step)
      rows[step] = token < end ? contiguous_row(batch, kv_head, token, p.kv_heads, p.kv_stride, D) : -1;
  }
}

template <int D>
__device__ __forceinline__ void copy_kv_tile(__nv_bfloat16* tile_k, __nv_bfloat16* tile_v, const DecodeParams& p,
                                             const long long (&rows)[kv_steps<D>]) {
#pragma unroll
  for (int step = 0; step < kv_steps<D>; ++step) {
    const RowCol rc = flash::load_chunk(static_cast<int>(threadIdx.x), step, threads, D);
    const bool inside = rows[step] >= 0;
    const long long row = inside ? rows[step] : 0;
    const int off = flash::swizzled_offset(rc.row, rc.col, D);
    cp_async_16_l2_128(tile_k + off, p.k + row + rc.col, inside ? 16 : 0);
    cp_async_16_l2_128(tile_v + off, p.v + row + rc.col, inside ? 16 : 0);
  }
}

// The K and V tile of tokens [k0, k0 + tile_keys), rows found and copies issued at once.
template <int D, bool Paged>
__device__ __forceinline__ void load_kv_tile(__nv_bfloat16* tile_k, __nv_bfloat16* tile_v, const DecodeParams& p,
                                             int batch, int kv_head, long long k0, long long end) {
  long long rows[kv_steps<D>];
  kv_tile_rows<D, Paged>(rows, p, batch, kv_head, k0, end);
  copy_kv_tile<D>(tile_k, tile_v, p, rows);
}

// --- 3. The split kernel -------------------------------------------------------

template <int D, int MTiles>
struct DecodeShape {
  static_assert(D % 64 == 0, "the swizzle needs rows of at least 8 chunks");
  static_assert(MTiles == 1 || MTiles == 2 || MTiles == 4, "4 warps share out 1, 2 or 4 m-tiles");
  static constexpr int rows = 16 * MTiles;                  // packed rows per CTA
  static constexpr int stages = D >= 128 ? 3 : 4;           // 32 KiB (d 128) or 16 KiB per stage
  static constexpr int q_elems = rows * D;
  static constexpr int kv_elems = tile_keys * D;
  static constexpr int smem_bytes = (q_elems + 2 * stages * kv_elems) * 2;
  static constexpr int slice = warp_keys(MTiles);            // keys per warp per tile
  static constexpr int n_tiles_s = slice / 8;                // 16x8 S tiles per warp
  static constexpr int k_steps_q = D / 16;
  static constexpr int k_steps_p = slice / 16;
  static constexpr int n_tiles_o = D / 8;
  static constexpr int scratch_ld = D + 4;                   // fp32 merge rows, padded
  static constexpr int scratch_floats = warps * 16 * scratch_ld + 2 * warps * 16;
  static_assert(scratch_floats * 4 <= 2 * stages * kv_elems * 2, "the merge reuses the K/V stages");
};

template <int D, int MTiles, bool Paged>
__global__ void __launch_bounds__(threads, 2) decode_split_kernel(const DecodeParams p) {
  using Sh = DecodeShape<D, MTiles>;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  __nv_bfloat16* s_q = reinterpret_cast<__nv_bfloat16*>(smem_raw);
  __nv_bfloat16* s_k = s_q + Sh::q_elems;               // stages 0 .. stages-1
  __nv_bfloat16* s_v = s_k + Sh::stages * Sh::kv_elems;

  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const WarpRole role = warp_role(warp, MTiles);
  const int split = static_cast<int>(blockIdx.x);
  const int kv_head = static_cast<int>(blockIdx.y) / p.row_blocks;
  const int row_block = static_cast<int>(blockIdx.y) % p.row_blocks;
  const int batch = static_cast<int>(blockIdx.z);
  const int group = p.heads / p.kv_heads;
  const int row0 = row_block * Sh::rows;
  const int rows = min(Sh::rows, group * p.seq_q - row0);
  const long long len = p.seq_lens ? p.seq_lens[batch] : p.seq_kv;
  // With a window or a chunk the splits share out only the keys some new
  // token sees; none before them is read.
  const Range range = split_range(split, p.split_tokens,
                                  first_visible_key(sequence_mask(len, p.seq_q, p.causal != 0, p.window, p.chunk)), len);
  const int n_tiles = range_tiles(range);
  const long long out_row0 = first_group_row(batch, kv_head, p.heads, group, p.seq_q) + row0;
  const bool causal = p.causal != 0;

  // Q in its own group, then stages - 1 tiles (empty groups past the split
  // keep the wait counts uniform). An empty split reads nothing, not even Q.
  if (n_tiles > 0) load_q<D, Sh::rows>(s_q, p.q + out_row0 * D, rows);
  cp_async_commit();
#pragma unroll
  for (int s = 0; s < Sh::stages - 1; ++s) {
    if (s < n_tiles)
      load_kv_tile<D, Paged>(s_k + s * Sh::kv_elems, s_v + s * Sh::kv_elems, p, batch, kv_head,
                             range.begin + static_cast<long long>(s) * tile_keys, range.end);
    cp_async_commit();
  }
  cp_async_wait<Sh::stages - 1>();  // Q has landed
  __syncthreads();

  // The warp's Q fragments stay in registers for the whole split.
  std::uint32_t qf[Sh::k_steps_q][4] = {};
  if (n_tiles > 0) {
    const RowCol qa = flash::ldmatrix_a_address(lane);
    const int q_lane = flash::lane_bytes(role.m_tile * 16 + qa.row, qa.col, D);
#pragma unroll
    for (int ks = 0; ks < Sh::k_steps_q; ++ks) ldmatrix_x4(qf[ks], smem_u32(s_q) + flash::step_bytes(q_lane, ks));
  }

  float o_acc[Sh::n_tiles_o][4];
#pragma unroll
  for (int t = 0; t < Sh::n_tiles_o; ++t)
#pragma unroll
    for (int e = 0; e < 4; ++e) o_acc[t][e] = 0.f;
  float row_max[2] = {-INFINITY, -INFINITY};  // this lane's rows lane/4 and lane/4 + 8 of the m-tile
  float row_sum[2] = {0.f, 0.f};              // partial sums; the quad adds them at the end
  // The warp's key slice starts `first_key` rows into every tile (a multiple
  // of 16 rows, which the swizzle's XOR leaves alone).
  const int first_key = role.key_warp * Sh::slice;
  const RowCol ka = flash::ldmatrix_k_address(lane);
  const RowCol va = flash::ldmatrix_v_address(lane);
  const int k_lane = flash::lane_bytes(first_key + ka.row, ka.col, D);
  const int v_lane = flash::lane_bytes(first_key + va.row, va.col, D);

  for (int j = 0; j < n_tiles; ++j) {
    cp_async_wait<Sh::stages - 2>();  // tile j has landed
    __syncthreads();                  // ... for every thread, and tile j - 1's stage is free
    const int next = j + Sh::stages - 1;
    if (next < n_tiles)
      load_kv_tile<D, Paged>(s_k + (next % Sh::stages) * Sh::kv_elems, s_v + (next % Sh::stages) * Sh::kv_elems, p,
                             batch, kv_head, range.begin + static_cast<long long>(next) * tile_keys, range.end);
    cp_async_commit();

    const int stage = j % Sh::stages;
    const std::uint32_t tile_k = smem_u32(s_k + stage * Sh::kv_elems);
    const std::uint32_t tile_v = smem_u32(s_v + stage * Sh::kv_elems);

    // S = Q K^T for the m-tile's 16 rows x the warp's keys (unscaled).
    float s[Sh::n_tiles_s][4];
#pragma unroll
    for (int t = 0; t < Sh::n_tiles_s; ++t)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[t][e] = 0.f;
#pragma unroll
    for (int ks = 0; ks < Sh::k_steps_q; ++ks)
#pragma unroll
      for (int np = 0; np < Sh::n_tiles_s / 2; ++np) {
        std::uint32_t b[4];
        ldmatrix_x4(b, tile_k + flash::step_bytes(k_lane + np * 16 * D * 2, ks));
        mma_bf16(s[2 * np], qf[ks], b[0], b[1]);
        mma_bf16(s[2 * np + 1], qf[ks], b[2], b[3]);
      }

    const long long k0 = range.begin + static_cast<long long>(j) * tile_keys;
    const flash::KeyMask mask = sequence_mask(len, p.seq_q, causal, p.window, p.chunk);
    if (tile_needs_mask(k0, range.end, p.seq_q, mask)) {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        // This lane's row r: its token's visible keys, cut at the split's end.
        const int token = packed_row(row0 + role.m_tile * 16 + flash::c_fragment(lane, 2 * r).row, p.seq_q).token;
        const flash::KeySpan span = flash::row_keys(token, mask);
        const long long end = span.end < range.end ? span.end : range.end;
#pragma unroll
        for (int t = 0; t < Sh::n_tiles_s; ++t)
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const long long key = k0 + first_key + t * 8 + flash::c_fragment(lane, 2 * r + h).col;
            if (key < span.begin || key >= end) s[t][2 * r + h] = -INFINITY;
          }
      }
    }

    // Online softmax over this block: m, l and O rescaled, S turned into P.
    online_softmax_step(s, o_acc, row_max, row_sum, p.scale_log2);

    // O += P V, P repacked from the S accumulators as the A fragment.
#pragma unroll
    for (int kk = 0; kk < Sh::k_steps_p; ++kk) {
      std::uint32_t a[4];
      p_fragment(s, kk, a);
#pragma unroll
      for (int dp = 0; dp < Sh::n_tiles_o / 2; ++dp) {
        std::uint32_t b[4];
        ldmatrix_x4_trans(b, tile_v + flash::step_bytes(v_lane + kk * 16 * D * 2, dp));
        mma_bf16(o_acc[2 * dp], a, b[0], b[1]);
        mma_bf16(o_acc[2 * dp + 1], a, b[2], b[3]);
      }
    }
  }
  cp_async_wait<0>();
  __syncthreads();  // every warp is done with the stages: the merge reuses them

  // Merge the key warps of each m-tile: every warp publishes its rows' max and
  // sum, rescales its O to the common max, and the CTA adds the warps up.
  float* scratch = reinterpret_cast<float*>(s_k);  // [warps][16][scratch_ld]
  float* s_m = scratch + warps * 16 * Sh::scratch_ld;  // [warps][16]
  float* s_l = s_m + warps * 16;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float l = row_sum[r];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    if (lane % 4 == 0) {
      s_m[warp * 16 + lane / 4 + 8 * r] = row_max[r];
      s_l[warp * 16 + lane / 4 + 8 * r] = l;
    }
  }
  __syncthreads();
  // Merged max and sum of row `r16` of m-tile `mt`, the max in log2 units.
  const auto merged = [&](int mt, int r16, float& m_scaled, float& l) {
    float mx = -INFINITY;
#pragma unroll
    for (int kw = 0; kw < key_warps(MTiles); ++kw) mx = fmaxf(mx, s_m[(mt * key_warps(MTiles) + kw) * 16 + r16]);
    m_scaled = mx == -INFINITY ? 0.f : mx * p.scale_log2;
    l = 0.f;
#pragma unroll
    for (int kw = 0; kw < key_warps(MTiles); ++kw) {
      const int w = mt * key_warps(MTiles) + kw;
      l += s_l[w * 16 + r16] * exp2_approx(s_m[w * 16 + r16] * p.scale_log2 - m_scaled);
    }
    return mx;
  };
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float m_scaled, l;
    merged(role.m_tile, lane / 4 + 8 * r, m_scaled, l);
    const float factor = l > 0.f ? exp2_approx(row_max[r] * p.scale_log2 - m_scaled) / l : 0.f;
#pragma unroll
    for (int t = 0; t < Sh::n_tiles_o; ++t) {
      const RowCol rc = flash::c_fragment(lane, 2 * r);
      *reinterpret_cast<float2*>(scratch + (warp * 16 + rc.row) * Sh::scratch_ld + t * 8 + rc.col) =
          make_float2(o_acc[t][2 * r] * factor, o_acc[t][2 * r + 1] * factor);
    }
  }
  __syncthreads();

  const bool final_output = p.splits == 1;
  constexpr int chunks = D / 8;
  for (int i = static_cast<int>(threadIdx.x); i < rows * chunks; i += threads) {
    const int row = i / chunks, col = (i % chunks) * 8;
    const int mt = row / 16, r16 = row % 16;
    float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
#pragma unroll
    for (int kw = 0; kw < key_warps(MTiles); ++kw) {
      const float* src = scratch + ((mt * key_warps(MTiles) + kw) * 16 + r16) * Sh::scratch_ld + col;
      const float4 lo = *reinterpret_cast<const float4*>(src);
      const float4 hi = *reinterpret_cast<const float4*>(src + 4);
      acc[0] += lo.x, acc[1] += lo.y, acc[2] += lo.z, acc[3] += lo.w;
      acc[4] += hi.x, acc[5] += hi.y, acc[6] += hi.z, acc[7] += hi.w;
    }
    const long long out_row = out_row0 + row;
    if (final_output) {
      const uint4 v = make_uint4(pack_bf16x2(acc[0], acc[1]), pack_bf16x2(acc[2], acc[3]),
                                 pack_bf16x2(acc[4], acc[5]), pack_bf16x2(acc[6], acc[7]));
      *reinterpret_cast<uint4*>(p.o + out_row * D + col) = v;
    } else {
      float* dst = p.o_part + partial_o(out_row, split, p.splits, D) + col;
      *reinterpret_cast<float4*>(dst) = make_float4(acc[0], acc[1], acc[2], acc[3]);
      *reinterpret_cast<float4*>(dst + 4) = make_float4(acc[4], acc[5], acc[6], acc[7]);
    }
  }
  if (static_cast<int>(threadIdx.x) < rows) {
    const int row = static_cast<int>(threadIdx.x);
    float m_scaled, l;
    const float mx = merged(row / 16, row % 16, m_scaled, l);
    const float lse = l > 0.f ? mx * p.scale + logf(l) : -INFINITY;
    const long long out_row = out_row0 + row;
    if (final_output) p.lse[out_row] = lse;
    else p.lse_part[partial_lse(out_row, split, p.splits)] = lse;
  }
}

// --- 4. The combine kernel -------------------------------------------------------

// One warp per output row: lse = log sum_i e^{lse_i}, O = sum_i e^{lse_i - lse} O_i.
// A split that saw no key has lse_i = -inf and O_i = 0 (weight 0); a row no
// split saw gets O = 0 and lse = -inf.
template <int D>
__global__ void __launch_bounds__(threads) decode_combine_kernel(const DecodeParams p, long long n_rows) {
  constexpr int per_lane = D / 32;  // 4 (d 128) or 2 (d 64) values
  static_assert(per_lane == 2 || per_lane == 4, "combine compiled for d = 64 and 128");
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const long long row = static_cast<long long>(blockIdx.x) * warps + static_cast<int>(threadIdx.x) / 32;
  if (row >= n_rows) return;
  const float* lse = p.lse_part + partial_lse(row, 0, p.splits);
  float mx = -INFINITY;
  for (int i = lane; i < p.splits; i += 32) mx = fmaxf(mx, lse[i]);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
  float acc[per_lane];
#pragma unroll
  for (int e = 0; e < per_lane; ++e) acc[e] = 0.f;
  float row_lse = -INFINITY;
  if (mx != -INFINITY) {
    float sum = 0.f;
    for (int i = lane; i < p.splits; i += 32) sum += __expf(lse[i] - mx);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    row_lse = mx + logf(sum);
    const float inv = 1.f / sum;
    const float* src = p.o_part + partial_o(row, 0, p.splits, D) + lane * per_lane;
#pragma unroll 4
    for (int i = 0; i < p.splits; ++i) {
      const float w = __expf(lse[i] - mx) * inv;
      if constexpr (per_lane == 4) {
        const float4 x = *reinterpret_cast<const float4*>(src + static_cast<long long>(i) * D);
        acc[0] += w * x.x, acc[1] += w * x.y, acc[2] += w * x.z, acc[3] += w * x.w;
      } else {
        const float2 x = *reinterpret_cast<const float2*>(src + static_cast<long long>(i) * D);
        acc[0] += w * x.x, acc[1] += w * x.y;
      }
    }
  }
  __nv_bfloat16* dst = p.o + row * D + lane * per_lane;
  if constexpr (per_lane == 4) {
    *reinterpret_cast<uint2*>(dst) = make_uint2(pack_bf16x2(acc[0], acc[1]), pack_bf16x2(acc[2], acc[3]));
  } else {
    *reinterpret_cast<std::uint32_t*>(dst) = pack_bf16x2(acc[0], acc[1]);
  }
  if (lane == 0) p.lse[row] = row_lse;
}

}  // namespace hbmscope::decode
