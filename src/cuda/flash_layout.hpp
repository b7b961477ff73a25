#pragma once
// Index maps of the FlashAttention-2 kernel (flash_attention.cuh): where an
// element of a tile lives in shared memory, which lane addresses which row for
// ldmatrix, and which (row, col) of an mma.sync.m16n8k16 operand a lane holds.
// They are constexpr and compile for host and device, so the CPU tests
// (tests/test_flash_layout.cpp) check the very functions the kernel uses.
// Fragment layouts are those of the PTX ISA for mma.m16n8k16 with 16-bit A/B
// and f32 C, and for ldmatrix.m8n8.x4 (.trans).

#if defined(__CUDACC__)
#define HBMSCOPE_HD __host__ __device__
#else
#define HBMSCOPE_HD
#endif

namespace hbmscope::flash {

struct RowCol {
  int row = 0;
  int col = 0;
  friend constexpr bool operator==(const RowCol&, const RowCol&) = default;
};

// Tiles hold rows of `row_elems` bf16 values (the head dim, 64 or 128) split
// into 16-byte chunks of 8 values. Chunk c of row r is stored at chunk
// position c ^ (r % 8): the 8 rows one ldmatrix phase reads then fall on 8
// different groups of 4 banks. row_elems must be a multiple of 64.
HBMSCOPE_HD constexpr int swizzled_offset(int row, int col, int row_elems) {
  return row * row_elems + (((col / 8) ^ (row % 8)) * 8) + col % 8;
}

// The same offset in bytes, split so that a kernel keeps one value per lane:
// for col = 16 * step + lane_col (lane_col 0 or 8) and any row,
//   2 * swizzled_offset(row, col, row_elems) == lane_bytes(row, lane_col, row_elems) ^ (32 * step)
// because chunk 2*step + lane_col/8 XOR (row % 8) only flips bits below the
// row's size. Adding 16*k rows to `row` adds a multiple of 2 * row_elems * 8,
// which the XOR leaves alone too.
HBMSCOPE_HD constexpr int lane_bytes(int row, int lane_col, int row_elems) {
  return row * row_elems * 2 + (((lane_col / 8) ^ (row % 8)) * 16);
}
HBMSCOPE_HD constexpr int step_bytes(int lane_bytes_value, int step) {
  return lane_bytes_value ^ (32 * step);
}

// cp.async tile load: thread `tid` of `threads` copies, in step `step`, the
// 16-byte chunk (row, first column) below. Steps run 0 .. rows*row_elems/8/threads.
HBMSCOPE_HD constexpr RowCol load_chunk(int tid, int step, int threads, int row_elems) {
  const int i = tid + step * threads;
  const int chunks_per_row = row_elems / 8;
  return {i / chunks_per_row, (i % chunks_per_row) * 8};
}

// The v2 kernel's form of the same map (load_tile_v2): with whole rows per
// step (threads a multiple of row_elems/8), chunk tid + step * threads is row
// tid/(row_elems/8) + step * threads/(row_elems/8), column (tid % (row_elems/8)) * 8,
// so one base address per thread plus a constant per step reaches it.
HBMSCOPE_HD constexpr RowCol load_chunk_v2(int tid, int step, int threads, int row_elems) {
  const int chunks_per_row = row_elems / 8;
  return {tid / chunks_per_row + step * (threads / chunks_per_row), (tid % chunks_per_row) * 8};
}

// --- mma.sync.aligned.m16n8k16, bf16 inputs, f32 accumulators -------------
// A (16 x 16, row-major): 4 registers of 2 bf16; register `reg`, half `half`.
HBMSCOPE_HD constexpr RowCol a_fragment(int lane, int reg, int half) {
  return {lane / 4 + 8 * (reg % 2), 2 * (lane % 4) + half + 8 * (reg / 2)};
}
// B (16 x 8, k x n, "col"): 2 registers of 2 bf16. row = k, col = n.
HBMSCOPE_HD constexpr RowCol b_fragment(int lane, int reg, int half) {
  return {2 * (lane % 4) + half + 8 * reg, lane / 4};
}
// C/D (16 x 8, f32): 4 values per lane, element e = 0..3.
HBMSCOPE_HD constexpr RowCol c_fragment(int lane, int e) {
  return {lane / 4 + 8 * (e / 2), 2 * (lane % 4) + e % 2};
}

// --- ldmatrix.m8n8.x4 ------------------------------------------------------
// Lanes 8i..8i+7 give the addresses of rows 0..7 of matrix i; register i of
// every lane receives from matrix i the pair ldmatrix_element(lane, half)
// (with .trans, the matrix is read transposed).
HBMSCOPE_HD constexpr RowCol ldmatrix_element(int lane, int half, bool trans) {
  return trans ? RowCol{2 * (lane % 4) + half, lane / 4} : RowCol{lane / 4, 2 * (lane % 4) + half};
}

// Q as the A operand of S = Q K^T: the 16 x 16 tile at (row0, col0) of a
// row-major [query][dim] tile. Matrices: (rows 0-7, k 0-7), (rows 8-15, k 0-7),
// (rows 0-7, k 8-15), (rows 8-15, k 8-15) = registers a0..a3.
HBMSCOPE_HD constexpr RowCol ldmatrix_a_address(int lane) {
  return {lane % 16, (lane / 16) * 8};
}
// K as the B operand of S = Q K^T for two n-tiles: K is stored [key][dim], which
// is B (k = dim, n = key) in "col" layout, read without .trans. Matrices:
// (keys 0-7, k 0-7), (keys 0-7, k 8-15), (keys 8-15, k 0-7), (keys 8-15, k 8-15)
// = b0, b1 of n-tile 0, then b0, b1 of n-tile 1. Returns (key, dim) offsets.
HBMSCOPE_HD constexpr RowCol ldmatrix_k_address(int lane) {
  return {(lane / 16) * 8 + lane % 8, ((lane / 8) % 2) * 8};
}
// V as the B operand of O = P V for two n-tiles: V is stored [key][dim], B is
// (k = key, n = dim) row-major, so it is read with .trans. Matrices:
// (keys 0-7, dims 0-7), (keys 8-15, dims 0-7), (keys 0-7, dims 8-15),
// (keys 8-15, dims 8-15) = b0, b1 of n-tile 0, then of n-tile 1.
// Returns (key, dim) offsets.
HBMSCOPE_HD constexpr RowCol ldmatrix_v_address(int lane) {
  return {((lane / 8) % 2) * 8 + lane % 8, (lane / 16) * 8};
}

// --- causal mask and ragged lengths ----------------------------------------------
// Row r sees key c iff c < seq_kv and, when causal, c <= r + offset
// (offset = seq_kv - seq_q).
HBMSCOPE_HD constexpr bool key_visible(int row, int key, int seq_kv, bool causal, int offset) {
  return key < seq_kv && (!causal || key <= row + offset);
}
// Key blocks the query block starting at row q0 visits: all of them, or under
// the causal mask up to its last real row's last visible key (0 if none).
HBMSCOPE_HD constexpr int key_blocks(int q0, int block_rows, int block_cols, int seq_q, int seq_kv, bool causal,
                                     int offset) {
  int end = seq_kv;
  if (causal) {
    const int last_row = (q0 + block_rows < seq_q ? q0 + block_rows : seq_q) - 1;
    end = last_row + offset + 1;
    end = end < 0 ? 0 : (end > seq_kv ? seq_kv : end);
  }
  return (end + block_cols - 1) / block_cols;
}
// Whether key block j needs per-element masking: it runs past the sequence,
// or (causal) past the first row's last visible key. Otherwise every key of it
// is visible to every row of the query block.
HBMSCOPE_HD constexpr bool block_needs_mask(int q0, int j, int block_cols, int seq_kv, bool causal, int offset) {
  const int key_end = (j + 1) * block_cols;
  return key_end > seq_kv || (causal && key_end - 1 > q0 + offset);
}

// The query block CTA blockIdx.x takes in the v2 kernel: causal grids run the
// last (heaviest: they see the most keys) first, so that the launch's tail is
// made of short blocks.
HBMSCOPE_HD constexpr int v2_query_block(int block_x, int grid_x, bool causal) {
  return causal ? grid_x - 1 - block_x : block_x;
}

}  // namespace hbmscope::flash
