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

// --- division by a divisor fixed for the launch --------------------------------
// floor(n / d) for 0 <= n < 2^31 with a multiply-high and a shift instead of a
// divide (the kernels' registers go to the tiles; a divide's temporaries in the
// key loop spilled): for d >= 2, l = ceil(log2 d), mul = ceil(2^(31 + l) / d) <
// 2^32 and shift = l - 1; exact because mul * d - 2^(31 + l) < d <= 2^l
// (Granlund and Montgomery, "Division by invariant integers using
// multiplication", PLDI 1994, Theorem 4.2). d = 1: mul = 0, the identity.
struct FastDiv {
  unsigned mul = 0;
  int shift = 0;
};
HBMSCOPE_HD constexpr FastDiv fast_div(int d) {
  if (d <= 1) return {};
  int l = 1;
  while (l < 31 && (1u << l) < static_cast<unsigned>(d)) ++l;
  return {static_cast<unsigned>(((1ull << (31 + l)) + static_cast<unsigned long long>(d) - 1) /
                                static_cast<unsigned long long>(d)),
          l - 1};
}
HBMSCOPE_HD constexpr int fast_quotient(int n, const FastDiv& f) {
  return f.mul == 0 ? n
                    : static_cast<int>(static_cast<unsigned>((static_cast<unsigned long long>(n) * f.mul) >> 32) >>
                                       f.shift);
}

// --- masks (causal, sliding window, chunk) and ragged lengths -------------------
// mask.hpp's masks in the kernels' int arithmetic (tests/test_flash_layout.cpp
// holds the two equal): query row r of seq_q rows against seq_kv keys sits at
// position p = r + offset (offset = seq_kv - seq_q, bottom-right aligned).
// Without the causal mask it sees every key; with it, keys c <= p, and with a
// window W > 0 only c > p - W, with a chunk C > 0 only c >= floor(p / C) * C.
//
struct KeyMask {
  int seq_kv = 0;
  bool causal = false;
  int offset = 0;  // seq_kv - seq_q
  int window = 0;  // 0: none
  int chunk = 0;   // 0: none
};
// The mask of a seq_q x seq_kv problem as the kernels take it (window and
// chunk 0: none); a window or a chunk of at least seq_kv keys hides nothing
// and is dropped (so that it fits an int).
HBMSCOPE_HD constexpr KeyMask make_key_mask(int seq_q, int seq_kv, bool causal, long long window, long long chunk) {
  KeyMask m{seq_kv, causal, seq_kv - seq_q, 0, 0};
  if (!causal) return m;
  if (window > 0 && window < seq_kv) m.window = static_cast<int>(window);
  if (chunk > 0 && chunk < seq_kv) m.chunk = static_cast<int>(chunk);
  return m;
}

// Keys [begin, end) one row or one block sees; empty when end <= begin.
struct KeySpan {
  int begin = 0;
  int end = 0;
  friend constexpr bool operator==(const KeySpan&, const KeySpan&) = default;
};

// The keys row `row` sees (mask.hpp's visible_keys). Empty when p < 0.
HBMSCOPE_HD constexpr KeySpan row_keys(int row, const KeyMask& m) {
  if (!m.causal) return {0, m.seq_kv};
  const int p = row + m.offset;
  KeySpan r{0, p + 1 < m.seq_kv ? p + 1 : m.seq_kv};
  if (m.window > 0 && p + 1 - m.window > r.begin) r.begin = p + 1 - m.window;
  if (m.chunk > 0 && p >= 0 && p / m.chunk * m.chunk > r.begin) r.begin = p / m.chunk * m.chunk;
  return r;
}
HBMSCOPE_HD constexpr bool key_visible(int row, int key, const KeyMask& m) {
  const KeySpan r = row_keys(row, m);
  return r.begin <= key && key < r.end;
}
// Key blocks [begin, end) the query block of rows [q0, q0 + block_rows) visits
// (mask.hpp's visible_key_blocks): from the block of its first row's first
// visible key (rows' spans only move right as the row grows; a first row that
// sees nothing sits before key 0) to the block of its last real row's last
// visible key. Empty when no row sees a key.
HBMSCOPE_HD constexpr KeySpan key_block_range(int q0, int block_rows, int block_cols, int seq_q, const KeyMask& m) {
  const int last_row = (q0 + block_rows < seq_q ? q0 + block_rows : seq_q) - 1;
  const KeySpan hi = row_keys(last_row, m);
  if (hi.end <= hi.begin) return {0, 0};
  const KeySpan lo = row_keys(q0, m);
  const int begin = lo.end > lo.begin ? lo.begin : 0;
  return {begin / block_cols, (hi.end + block_cols - 1) / block_cols};
}
// Key blocks [begin, end) that every row of the query block sees whole: past
// the last real row's first visible key and before the first row's last one
// (and inside the sequence). The visited blocks outside it are the band's
// edges, masked element by element.
HBMSCOPE_HD constexpr KeySpan unmasked_blocks(int q0, int block_rows, int block_cols, int seq_q, const KeyMask& m) {
  if (!m.causal) return {0, m.seq_kv / block_cols};
  const KeySpan first = row_keys(q0, m);
  if (first.end <= first.begin) return {0, 0};
  const int last_row = (q0 + block_rows < seq_q ? q0 + block_rows : seq_q) - 1;
  const int begin = (row_keys(last_row, m).begin + block_cols - 1) / block_cols;
  const int end = first.end / block_cols;
  return {begin, end > begin ? end : begin};
}
// Whether key block j needs per-element masking: it runs past the sequence,
// or some row of the query block does not see all of it (mask.hpp's
// tile_needs_mask: the first row's span ends first, the last real row's span
// begins last). Otherwise every key of it is visible to every row.
HBMSCOPE_HD constexpr bool block_needs_mask(int q0, int j, int block_rows, int block_cols, int seq_q,
                                            const KeyMask& m) {
  const int key0 = j * block_cols, key_end = key0 + block_cols;
  if (key_end > m.seq_kv) return true;
  if (!m.causal) return false;
  const KeySpan first = row_keys(q0, m);
  const int last_row = (q0 + block_rows < seq_q ? q0 + block_rows : seq_q) - 1;
  return first.end <= first.begin || first.end < key_end || row_keys(last_row, m).begin > key0;
}

// The query block CTA blockIdx.x takes in the v2 kernel: causal grids run the
// last (heaviest: they see the most keys) first, so that the launch's tail is
// made of short blocks. A window or a chunk narrows a causal mask: with a
// window a row sees min(p + 1, W) keys, so the last blocks are still the
// heaviest (blocks past the first W rows differ by at most one key block);
// with chunks every block sees at most a chunk and a block of keys
// (tests/test_flash_layout.cpp checks both orders).
HBMSCOPE_HD constexpr int v2_query_block(int block_x, int grid_x, bool causal) {
  return causal ? grid_x - 1 - block_x : block_x;
}

}  // namespace hbmscope::flash
