// The flash kernel's index maps (src/cuda/flash_layout.hpp), checked on the
// CPU: no GPU has run the kernel, so these are the evidence that its shared
// memory layout, ldmatrix addressing and mma fragment bookkeeping agree.
// ldmatrix is emulated from the PTX ISA's description: lanes 8i..8i+7 address
// the eight 16-byte rows of matrix i; register i of lane t receives elements
// (t/4, 2(t%4)) and (t/4, 2(t%4)+1) of matrix i, or transposed with .trans.
// Fragment layouts: PTX ISA 9.7.14.5.8 (mma.m16n8k16, .bf16 A/B, .f32 C/D).
#include <catch2/catch.hpp>
#include <set>
#include <vector>

#include "flash_layout.hpp"
#include "hbmscope/launch_plan.hpp"
#include "hbmscope/mask.hpp"
#include "hbmscope/tile_walk.hpp"

using namespace hbmscope;
using namespace hbmscope::flash;

namespace {

// A tile of `rows` x `d` whose stored element at swizzled_offset(r, c) records (r, c).
struct Tile {
  int rows, d;
  std::vector<RowCol> at;  // indexed by element offset
  Tile(int rows_, int d_) : rows(rows_), d(d_), at(static_cast<std::size_t>(rows_ * d_), RowCol{-1, -1}) {
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < d; ++c) at[static_cast<std::size_t>(swizzled_offset(r, c, d))] = {r, c};
  }
};

// What register `reg`, half `half` of lane `lane` receives from ldmatrix.x4
// when lane l supplies element offset addr[l].
RowCol ldmatrix(const Tile& t, const int (&addr)[32], int lane, int reg, int half, bool trans) {
  const RowCol e = ldmatrix_element(lane, half, trans);  // (row, col) inside the 8x8 matrix
  const int row_addr = addr[reg * 8 + e.row];
  return t.at[static_cast<std::size_t>(row_addr + e.col)];
}

constexpr int head_dims[] = {64, 128};

}  // namespace

TEST_CASE("swizzle is a bijection that keeps 16-byte chunks whole", "[flash][layout]") {
  for (int d : head_dims)
    for (int rows : {16, 64, 128}) {
      std::set<int> seen;
      for (int r = 0; r < rows; ++r)
        for (int c = 0; c < d; ++c) {
          const int off = swizzled_offset(r, c, d);
          CHECK(off >= r * d);
          CHECK(off < (r + 1) * d);    // stays in its row
          CHECK(off % 8 == c % 8);     // inside a chunk, order kept
          seen.insert(off);
        }
      CHECK(seen.size() == static_cast<std::size_t>(rows * d));
    }
}

TEST_CASE("per-lane byte offsets XOR a step equal the swizzled offset", "[flash][layout]") {
  for (int d : head_dims)
    for (int row = 0; row < 16; ++row)
      for (int lane_col : {0, 8})
        for (int step = 0; step < d / 16; ++step)
          for (int extra = 0; extra < 8; ++extra) {  // 16-row blocks added later
            const int r = row + 16 * extra;
            CHECK(step_bytes(lane_bytes(row, lane_col, d) + extra * 16 * d * 2, step) ==
                  2 * swizzled_offset(r, 16 * step + lane_col, d));
          }
}

TEST_CASE("cp.async tile loads cover every chunk once", "[flash][layout]") {
  for (const FlashConfig& c : flash_configs()) {
    const int threads = flash_threads(c);
    for (int rows : {c.block_rows, c.block_cols}) {
      const int chunks = rows * c.head_dim / 8;
      REQUIRE(chunks % threads == 0);
      std::set<std::pair<int, int>> seen;
      for (int step = 0; step < chunks / threads; ++step)
        for (int tid = 0; tid < threads; ++tid) {
          const RowCol rc = load_chunk(tid, step, threads, c.head_dim);
          CHECK(rc.col % 8 == 0);
          CHECK(rc.row < rows);
          seen.insert({rc.row, rc.col});
        }
      CHECK(seen.size() == static_cast<std::size_t>(chunks));
    }
  }
}

TEST_CASE("v2's loader (base address + constant steps) is v1's chunk map", "[flash][layout]") {
  for (const FlashConfig& c : flash_configs()) {
    if (c.version != 2) continue;
    const int threads = flash_threads(c);
    REQUIRE(threads % (c.head_dim / 8) == 0);  // whole rows per step
    for (int rows : {c.block_rows, c.block_cols}) {
      const int steps = rows * c.head_dim / 8 / threads;
      for (int step = 0; step < steps; ++step)
        for (int tid = 0; tid < threads; ++tid) {
          INFO(describe(c) << " tid " << tid << " step " << step);
          CHECK(load_chunk_v2(tid, step, threads, c.head_dim) == load_chunk(tid, step, threads, c.head_dim));
          // The row moves by a constant per step: one base pointer suffices.
          CHECK(load_chunk_v2(tid, step, threads, c.head_dim).row - load_chunk_v2(tid, 0, threads, c.head_dim).row ==
                step * threads / (c.head_dim / 8));
        }
    }
  }
}

TEST_CASE("v2: causal grids run the last query block first, each block once", "[flash][layout]") {
  for (int grid : {1, 2, 7, 64}) {
    std::set<int> seen;
    for (int bx = 0; bx < grid; ++bx) seen.insert(v2_query_block(bx, grid, true));
    CHECK(seen.size() == static_cast<std::size_t>(grid));
    CHECK(*seen.begin() == 0);
    CHECK(v2_query_block(0, grid, true) == grid - 1);
    CHECK(v2_query_block(0, grid, false) == 0);
  }
}

TEST_CASE("v2 O staging: two m-tiles and 32-row stores cover the warp's rows once", "[flash][layout]") {
  for (int d : head_dims)
    for (int warp : {0, 1, 3}) {
      std::set<int> written, read;
      for (int m = 0; m < 2; ++m)
        for (int lane = 0; lane < 32; ++lane)
          for (int t = 0; t < d / 8; ++t)
            for (int r = 0; r < 2; ++r) {
              const RowCol rc = c_fragment(lane, 2 * r);
              const int off = swizzled_offset(warp * 32 + m * 16 + rc.row, t * 8 + rc.col, d);
              written.insert(off);
              written.insert(off + 1);
            }
      for (int lane = 0; lane < 32; ++lane)
        for (int i = lane; i < 32 * d / 8; i += 32)
          for (int e = 0; e < 8; ++e) read.insert(swizzled_offset(warp * 32 + i / (d / 8), (i % (d / 8)) * 8, d) + e);
      CHECK(written.size() == static_cast<std::size_t>(32 * d));
      CHECK(written == read);
      CHECK(*written.begin() == warp * 32 * d);  // the warp's own rows only
      CHECK(*written.rbegin() == (warp + 1) * 32 * d - 1);
    }
}

TEST_CASE("mma m16n8k16 fragments cover their tiles exactly once", "[flash][layout]") {
  std::set<std::pair<int, int>> a, b, c;
  for (int lane = 0; lane < 32; ++lane) {
    for (int reg = 0; reg < 4; ++reg)
      for (int h = 0; h < 2; ++h) {
        const RowCol x = a_fragment(lane, reg, h);
        CHECK((x.row >= 0 && x.row < 16 && x.col >= 0 && x.col < 16));
        a.insert({x.row, x.col});
      }
    for (int reg = 0; reg < 2; ++reg)
      for (int h = 0; h < 2; ++h) {
        const RowCol x = b_fragment(lane, reg, h);
        CHECK((x.row >= 0 && x.row < 16 && x.col >= 0 && x.col < 8));
        b.insert({x.row, x.col});
      }
    for (int e = 0; e < 4; ++e) {
      const RowCol x = c_fragment(lane, e);
      CHECK((x.row >= 0 && x.row < 16 && x.col >= 0 && x.col < 8));
      c.insert({x.row, x.col});
    }
  }
  CHECK(a.size() == 256);
  CHECK(b.size() == 128);
  CHECK(c.size() == 128);
}

TEST_CASE("two accumulator n-tiles are the A fragment of the next mma", "[flash][layout]") {
  // The kernel packs a[reg] = (s[2kk + reg/2][2(reg%2)], s[2kk + reg/2][2(reg%2)+1]).
  for (int lane = 0; lane < 32; ++lane)
    for (int reg = 0; reg < 4; ++reg)
      for (int h = 0; h < 2; ++h) {
        const RowCol acc = c_fragment(lane, 2 * (reg % 2) + h);
        const RowCol want{acc.row, acc.col + 8 * (reg / 2)};
        CHECK(a_fragment(lane, reg, h) == want);
      }
}

TEST_CASE("ldmatrix of Q yields the A fragment", "[flash][layout]") {
  for (int d : head_dims) {
    const Tile t(128, d);
    for (int warp = 0; warp < 8; ++warp)
      for (int ks = 0; ks < d / 16; ++ks) {
        int addr[32];
        for (int l = 0; l < 32; ++l) {
          const RowCol a = ldmatrix_a_address(l);
          addr[l] = step_bytes(lane_bytes(warp * 16 + a.row, a.col, d), ks) / 2;  // as the kernel
          REQUIRE(addr[l] % 8 == 0);                                              // 16-byte aligned
        }
        for (int lane = 0; lane < 32; ++lane)
          for (int reg = 0; reg < 4; ++reg)
            for (int h = 0; h < 2; ++h) {
              const RowCol f = a_fragment(lane, reg, h);
              CHECK(ldmatrix(t, addr, lane, reg, h, false) == RowCol{warp * 16 + f.row, ks * 16 + f.col});
            }
      }
  }
}

TEST_CASE("ldmatrix of K yields the B fragments of two n-tiles", "[flash][layout]") {
  for (int d : head_dims) {
    const Tile t(128, d);
    for (int np = 0; np < 8; ++np)
      for (int ks = 0; ks < d / 16; ++ks) {
        int addr[32];
        for (int l = 0; l < 32; ++l) {
          const RowCol a = ldmatrix_k_address(l);
          addr[l] = step_bytes(lane_bytes(a.row, a.col, d) + np * 16 * d * 2, ks) / 2;
          REQUIRE(addr[l] % 8 == 0);
        }
        for (int lane = 0; lane < 32; ++lane)
          for (int reg = 0; reg < 4; ++reg)
            for (int h = 0; h < 2; ++h) {
              const RowCol f = b_fragment(lane, reg % 2, h);  // row = k (dim), col = n (key)
              const RowCol want{np * 16 + 8 * (reg / 2) + f.col, ks * 16 + f.row};
              CHECK(ldmatrix(t, addr, lane, reg, h, false) == want);
            }
      }
  }
}

TEST_CASE("ldmatrix.trans of V yields the B fragments of two n-tiles", "[flash][layout]") {
  for (int d : head_dims) {
    const Tile t(128, d);
    for (int kk = 0; kk < 8; ++kk)
      for (int dp = 0; dp < d / 16; ++dp) {
        int addr[32];
        for (int l = 0; l < 32; ++l) {
          const RowCol a = ldmatrix_v_address(l);
          addr[l] = step_bytes(lane_bytes(a.row, a.col, d) + kk * 16 * d * 2, dp) / 2;
          REQUIRE(addr[l] % 8 == 0);
        }
        for (int lane = 0; lane < 32; ++lane)
          for (int reg = 0; reg < 4; ++reg)
            for (int h = 0; h < 2; ++h) {
              const RowCol f = b_fragment(lane, reg % 2, h);  // row = k (key), col = n (dim)
              const RowCol want{kk * 16 + f.row, dp * 16 + 8 * (reg / 2) + f.col};
              CHECK(ldmatrix(t, addr, lane, reg, h, true) == want);
            }
      }
  }
}

TEST_CASE("each ldmatrix phase hits 8 different bank groups", "[flash][layout]") {
  // A phase is 8 lanes reading 8 rows of 16 bytes: conflict-free iff the rows
  // fall on different 16-byte columns of the 128-byte bank window.
  for (int d : head_dims)
    for (int step = 0; step < d / 16; ++step)
      for (int which = 0; which < 3; ++which)
        for (int phase = 0; phase < 4; ++phase) {
          std::set<int> groups;
          for (int l = phase * 8; l < phase * 8 + 8; ++l) {
            const RowCol a = which == 0   ? ldmatrix_a_address(l)
                             : which == 1 ? ldmatrix_k_address(l)
                                          : ldmatrix_v_address(l);
            groups.insert((step_bytes(lane_bytes(a.row, a.col, d), step) / 16) % 8);
          }
          CHECK(groups.size() == 8);
        }
}

TEST_CASE("O staging: fragment writes and 16-byte reads cover the warp's rows once", "[flash][layout]") {
  for (int d : head_dims) {
    std::set<int> written, read;
    for (int lane = 0; lane < 32; ++lane)
      for (int t = 0; t < d / 8; ++t)
        for (int r = 0; r < 2; ++r) {
          const RowCol rc = c_fragment(lane, 2 * r);
          const int off = swizzled_offset(rc.row, t * 8 + rc.col, d);
          CHECK(off % 2 == 0);  // 4-byte aligned bf16 pair
          written.insert(off);
          written.insert(off + 1);
        }
    for (int lane = 0; lane < 32; ++lane)
      for (int i = lane; i < 16 * d / 8; i += 32)
        for (int e = 0; e < 8; ++e) read.insert(swizzled_offset(i / (d / 8), (i % (d / 8)) * 8, d) + e);
    CHECK(written.size() == static_cast<std::size_t>(16 * d));
    CHECK(written == read);
  }
}

namespace {

Shape mask_shape(int nq, int nkv, int br, int bc, bool causal, int window, int chunk) {
  Shape s;
  s.seq_q = static_cast<std::uint64_t>(nq);
  s.seq_kv = static_cast<std::uint64_t>(nkv);
  s.block_rows = static_cast<std::uint64_t>(br);
  s.block_cols = static_cast<std::uint64_t>(bc);
  s.causal = causal;
  s.window = static_cast<std::uint64_t>(window);
  s.chunk = static_cast<std::uint64_t>(chunk);
  return s;
}

// (causal, window, chunk) masks of every kind the shapes may carry.
struct MaskKind {
  bool causal;
  int window, chunk;
};
constexpr MaskKind mask_kinds[] = {{false, 0, 0}, {true, 0, 0},  {true, 1, 0},   {true, 37, 0}, {true, 64, 0},
                                   {true, 200, 0}, {true, 2000, 0}, {true, 0, 1}, {true, 0, 50}, {true, 0, 128}};

}  // namespace

TEST_CASE("the kernels' row spans equal mask.hpp's visible keys", "[flash][mask]") {
  for (const MaskKind& mk : mask_kinds)
    for (int nq : {1, 63, 200, 1000})
      for (int nkv : {1, 100, 129, 1000}) {
        const Shape s = mask_shape(nq, nkv, 64, 64, mk.causal, mk.window, mk.chunk);
        const KeyMask m = make_key_mask(nq, nkv, mk.causal, mk.window, mk.chunk);
        INFO(describe(s));
        for (int r = 0; r < nq; ++r) {
          const KeyRange want = visible_keys(s, static_cast<std::uint64_t>(r));
          const KeySpan got = row_keys(r, m);
          if (want.empty()) {
            CHECK(got.end <= got.begin);
          } else {
            CHECK(static_cast<std::uint64_t>(got.begin) == want.begin);
            CHECK(static_cast<std::uint64_t>(got.end) == want.end);
          }
        }
      }
}

TEST_CASE("the kernel's key-block range equals the tile walk's", "[flash][mask]") {
  for (int br : {64, 128})
    for (int bc : {64, 128})
      for (int nq : {1, 63, 64, 65, 200, 1000})
        for (int nkv : {1, 64, 100, 129, 1000, 1024})
          for (const MaskKind& mk : mask_kinds) {
            const Shape s = mask_shape(nq, nkv, br, bc, mk.causal, mk.window, mk.chunk);
            const KeyMask m = make_key_mask(nq, nkv, mk.causal, mk.window, mk.chunk);
            for (int qb = 0; qb * br < nq; ++qb) {
              const KeySpan got = key_block_range(qb * br, br, bc, nq, m);
              const KeyRange want = visible_key_blocks(s, static_cast<std::uint64_t>(qb));
              INFO(describe(s) << " query block " << qb);
              CHECK(static_cast<std::uint64_t>(std::max(got.end - got.begin, 0)) == want.size());
              if (!want.empty()) CHECK(static_cast<std::uint64_t>(got.begin) == want.begin);
            }
          }
}

TEST_CASE("blocks that skip masking have every key visible to every row", "[flash][mask]") {
  for (int br : {64, 128})
    for (int bc : {64, 128})
      for (int nq : {1, 77, 128, 300})
        for (int nkv : {1, 77, 128, 300, 513})
          for (const MaskKind& mk : mask_kinds) {
            const Shape s = mask_shape(nq, nkv, br, bc, mk.causal, mk.window, mk.chunk);
            const KeyMask m = make_key_mask(nq, nkv, mk.causal, mk.window, mk.chunk);
            INFO(describe(s));
            for (int q0 = 0; q0 < nq; q0 += br) {
              const KeySpan blocks = key_block_range(q0, br, bc, nq, m);
              const KeySpan whole = unmasked_blocks(q0, br, bc, nq, m);
              for (int j = blocks.begin; j < blocks.end; ++j) {
                const bool needs = block_needs_mask(q0, j, br, bc, nq, m);
                // mask.hpp decides which tiles are edges; the kernel adds the
                // keys past the sequence; unmasked_blocks is the same set.
                CHECK(needs == (tile_needs_mask(s, static_cast<std::uint64_t>(q0 / br), static_cast<std::uint64_t>(j)) ||
                                (j + 1) * bc > nkv));
                CHECK(needs == !(whole.begin <= j && j < whole.end));
                if (needs) continue;
                bool all = true;
                for (int r = q0; r < std::min(q0 + br, nq); ++r)
                  for (int c = j * bc; c < (j + 1) * bc; ++c) all &= key_visible(r, c, m);
                CHECK(all);
              }
              // No visible key lies outside the visited blocks.
              bool outside = false;
              for (int r = q0; r < std::min(q0 + br, nq); ++r)
                for (int c = 0; c < nkv; ++c)
                  if (c < blocks.begin * bc || c >= blocks.end * bc) outside |= key_visible(r, c, m);
              CHECK_FALSE(outside);
            }
          }
}

TEST_CASE("division by a launch constant: multiply-high and shift", "[flash][layout]") {
  // Every divisor up to 2^12 on the numbers around its multiples, then
  // powers of two and their neighbours on the whole 31-bit range.
  const auto check = [](int d, long long n) {
    if (n < 0 || n > 0x7fffffffLL) return;
    const int got = fast_quotient(static_cast<int>(n), fast_div(d));
    if (got != static_cast<int>(n / d)) FAIL("d " << d << " n " << n << ": " << got);
  };
  for (int d = 1; d <= 4096; ++d)
    for (long long q : {0LL, 1LL, 2LL, 7LL, 1000LL, 0x7fffffffLL / d - 1, 0x7fffffffLL / d})
      for (long long e : {-1LL, 0LL, 1LL}) check(d, q * d + e);
  for (int k = 0; k < 31; ++k)
    for (long long d : {(1LL << k) - 1, 1LL << k, (1LL << k) + 1})
      if (d >= 1 && d <= 0x7fffffffLL)
        for (long long n : {0LL, d - 1, d, d + 1, 0x7fffffffLL - 1, 0x7fffffffLL, 0x7fffffffLL / 3, 12345678LL})
          check(static_cast<int>(d), n);
  CHECK(fast_div(1).mul == 0);  // the identity
  CHECK(fast_quotient(0x7fffffff, fast_div(1)) == 0x7fffffff);
}

TEST_CASE("v2 launch order: heaviest query blocks first under causal masks and windows", "[flash][mask]") {
  // Key blocks each query block visits, in the order the CTAs start. Causal:
  // never more than the block before. With a window: past the first blocks
  // every block visits about as many (within one key block of any later one).
  for (int br : {64, 128})
    for (int bc : {64, 128})
      for (int n : {100, 1000, 4096})
        for (int window : {0, 1, 100, 1000, 3000}) {
          const KeyMask m = make_key_mask(n, n, true, window, 0);
          const int grid = (n + br - 1) / br;
          int fewest = 1 << 30;
          for (int bx = 0; bx < grid; ++bx) {
            const KeySpan b = key_block_range(v2_query_block(bx, grid, true) * br, br, bc, n, m);
            const int visits = b.end - b.begin;
            INFO("n " << n << " window " << window << " Br " << br << " Bc " << bc << " CTA " << bx);
            if (window == 0) CHECK(visits <= fewest);
            else CHECK(visits <= fewest + 1);
            fewest = std::min(fewest, visits);
          }
        }
}
