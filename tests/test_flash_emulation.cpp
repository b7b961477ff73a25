// A lane-by-lane CPU emulation of flash_forward_kernel (src/cuda/flash_attention.cuh),
// step for step: swizzled tiles filled as load_tile does (zero rows past the
// sequence), ldmatrix and mma.m16n8k16 emulated from the PTX ISA's fragment
// layouts (flash_layout.hpp), quad shuffles as reductions over lanes 4g..4g+3,
// the same key-block count, mask decisions, -inf guards, P repacked to bf16 as
// the A operand, O staged through the swizzled Q tile. It is a second copy of
// the kernel's algorithm, not the kernel: it checks that the algorithm and the
// index maps compose into attention (against attention_naive), which is as
// close as a machine without a GPU gets.
#include <catch2/catch.hpp>
#include <array>
#include <cmath>
#include <limits>
#include <vector>

#include "flash_layout.hpp"
#include "hbmscope/launch_plan.hpp"
#include "hbmscope/mask.hpp"
#include "hbmscope/reference.hpp"

using namespace hbmscope;
using namespace hbmscope::flash;

namespace {

constexpr float neg_inf = -std::numeric_limits<float>::infinity();

float bf16(float x) { return round_to_dtype(x, Dtype::bf16); }

// One CTA of the kernel for (batch b, head h, query block starting at q0).
// Version 1: warps of 16 rows (one m-tile); version 2 (flash_forward_v2_kernel):
// warps of 32 rows, two m-tiles sharing every K and V fragment.
class CtaEmulator {
 public:
  explicit CtaEmulator(const FlashConfig& c)
      : d_(c.head_dim), br_(c.block_rows), bc_(c.block_cols), mt_(c.version == 2 ? 2 : 1),
        threads_(flash_threads(c)) {}

  // `reads` (one counter per key row of the head, K and V each) counts every
  // key row the CTA's loads copy; a load of a key block outside the tile
  // walk's visited blocks (mask.hpp) fails at once.
  void run(const Shape& s, float scale, const float* q, const float* k, const float* v, float* o, float* lse,
           int q0, std::vector<int>& k_reads, std::vector<int>& v_reads) {
    const int nq = static_cast<int>(s.seq_q), nkv = static_cast<int>(s.seq_kv);
    const KeyMask mask = make_key_mask(nq, nkv, s.causal, static_cast<long long>(s.window), 0);
    const float scale_log2 = scale * 1.4426950408889634f;
    const int rpw = 16 * mt_;  // rows per warp
    std::vector<float> tq(static_cast<std::size_t>(br_ * d_)), tk[2], tv[2];
    for (auto* t : {&tk[0], &tk[1], &tv[0], &tv[1]}) t->assign(static_cast<std::size_t>(bc_ * d_), 0.f);

    const KeySpan blocks = key_block_range(q0, br_, bc_, nq, mask);
    const KeyRange walk = visible_key_blocks(s, static_cast<std::uint64_t>(q0 / br_));
    REQUIRE(static_cast<std::uint64_t>(std::max(blocks.end - blocks.begin, 0)) == walk.size());
    const auto load_kv = [&](std::vector<float>& tile, const float* head, int block, std::vector<int>& reads) {
      REQUIRE(static_cast<std::uint64_t>(block) >= walk.begin);
      REQUIRE(static_cast<std::uint64_t>(block) < walk.end);
      load(tile, bc_, head, block * bc_, nkv, &reads);
    };
    load(tq, br_, q, q0, nq);
    if (blocks.begin < blocks.end) {
      load_kv(tk[blocks.begin & 1], k, blocks.begin, k_reads);
      if (mt_ == 1) load_kv(tv[blocks.begin & 1], v, blocks.begin, v_reads);
    }
    const int warps = br_ / rpw;
    // Registers of every lane of every warp, per m-tile: o_acc[(w * mt + m) * 32 + lane].
    std::vector<std::vector<float>> o_acc(static_cast<std::size_t>(warps * mt_ * 32),
                                          std::vector<float>(static_cast<std::size_t>(d_ / 8 * 4), 0.f));
    std::vector<float> row_max(static_cast<std::size_t>(warps * mt_ * 32 * 2), neg_inf);
    std::vector<float> row_sum(static_cast<std::size_t>(warps * mt_ * 32 * 2), 0.f);

    for (int j = blocks.begin; j < blocks.end; ++j) {
      const int stage = j & 1;
      if (mt_ == 1) {
        if (j + 1 < blocks.end) {
          load_kv(tk[stage ^ 1], k, j + 1, k_reads);
          load_kv(tv[stage ^ 1], v, j + 1, v_reads);
        }
      } else {
        // v2: V[j] at the top of the iteration, K[j+1] after Q K[j]^T (the
        // emulation runs warps one after another, so "after" is the end of
        // the warps' S step: see below).
        load_kv(tv[stage], v, j, v_reads);
      }
      std::vector<std::vector<std::vector<float>>> sacc_all(static_cast<std::size_t>(warps));
      for (int w = 0; w < warps; ++w) {
        // S = Q K^T: per m-tile, per lane s[t][e]; each K fragment feeds every m-tile.
        auto& sacc = sacc_all[static_cast<std::size_t>(w)];
        sacc.assign(static_cast<std::size_t>(mt_ * 32), std::vector<float>(static_cast<std::size_t>(bc_ / 8 * 4), 0.f));
        for (int ks = 0; ks < d_ / 16; ++ks) {
          std::vector<std::array<std::array<std::array<float, 2>, 4>, 32>> a(static_cast<std::size_t>(mt_));
          for (int m = 0; m < mt_; ++m) {
            for (int lane = 0; lane < 32; ++lane) {
              const RowCol qa = ldmatrix_a_address(lane);
              addr_[lane] = step_bytes(lane_bytes(w * rpw + qa.row, qa.col, d_) + m * 16 * d_ * 2, ks) / 2;
            }
            ldmatrix(tq, addr_, false, a[static_cast<std::size_t>(m)]);
          }
          for (int np = 0; np < bc_ / 16; ++np) {
            Frag b;
            for (int lane = 0; lane < 32; ++lane) {
              const RowCol ka = ldmatrix_k_address(lane);
              addr_[lane] = step_bytes(lane_bytes(ka.row, ka.col, d_) + np * 16 * d_ * 2, ks) / 2;
            }
            ldmatrix(tk[stage], addr_, false, b);
            for (int m = 0; m < mt_; ++m) {
              mma(sacc, m * 32, 2 * np, a[static_cast<std::size_t>(m)], b, 0);
              mma(sacc, m * 32, 2 * np + 1, a[static_cast<std::size_t>(m)], b, 2);
            }
          }
        }
      }
      // v2: K[j+1] lands in the other stage once every warp is past Q K[j]^T.
      if (mt_ == 2 && j + 1 < blocks.end) load_kv(tk[stage ^ 1], k, j + 1, k_reads);
      // Every block the kernel leaves unmasked has every key visible to every
      // row (mask.hpp's tile_needs_mask, plus the keys past the sequence).
      const bool needs_mask = block_needs_mask(q0, j, br_, bc_, nq, mask);
      CHECK(needs_mask == (tile_needs_mask(s, static_cast<std::uint64_t>(q0 / br_), static_cast<std::uint64_t>(j)) ||
                           (j + 1) * bc_ > nkv));
      for (int w = 0; w < warps; ++w) {
        auto& sacc = sacc_all[static_cast<std::size_t>(w)];
        if (needs_mask)
          for (int m = 0; m < mt_; ++m)
            for (int lane = 0; lane < 32; ++lane)
              for (int r = 0; r < 2; ++r) {
                const KeySpan span = row_keys(q0 + w * rpw + m * 16 + c_fragment(lane, 2 * r).row, mask);
                for (int t = 0; t < bc_ / 8; ++t)
                  for (int h = 0; h < 2; ++h) {
                    const int key = j * bc_ + t * 8 + c_fragment(lane, 2 * r + h).col;
                    if (key < span.begin || key >= span.end)
                      sacc[static_cast<std::size_t>(m * 32 + lane)][static_cast<std::size_t>(t * 4 + 2 * r + h)] =
                          neg_inf;
                  }
              }
        // Online softmax per row: the quad's max via "shuffles".
        for (int m = 0; m < mt_; ++m)
          for (int r = 0; r < 2; ++r) {
            float local[32];
            for (int lane = 0; lane < 32; ++lane) {
              float mx = row_max[idx(w, m, lane, r)];
              const auto& sl = sacc[static_cast<std::size_t>(m * 32 + lane)];
              for (int t = 0; t < bc_ / 8; ++t)
                mx = std::fmax(mx, std::fmax(sl[static_cast<std::size_t>(t * 4 + 2 * r)],
                                             sl[static_cast<std::size_t>(t * 4 + 2 * r + 1)]));
              local[lane] = mx;
            }
            for (int lane = 0; lane < 32; ++lane) {
              const int g = lane & ~3;
              const float mx = std::fmax(std::fmax(local[g], local[g + 1]), std::fmax(local[g + 2], local[g + 3]));
              const float m_scaled = mx == neg_inf ? 0.f : mx * scale_log2;
              const float alpha = std::exp2(row_max[idx(w, m, lane, r)] * scale_log2 - m_scaled);
              row_max[idx(w, m, lane, r)] = mx;
              float sum = 0.f;
              auto& sl = sacc[static_cast<std::size_t>(m * 32 + lane)];
              for (int t = 0; t < bc_ / 8; ++t)
                for (int h = 0; h < 2; ++h) {
                  float& x = sl[static_cast<std::size_t>(t * 4 + 2 * r + h)];
                  x = std::exp2(std::fma(x, scale_log2, -m_scaled));
                  sum += x;
                }
              row_sum[idx(w, m, lane, r)] = row_sum[idx(w, m, lane, r)] * alpha + sum;
              auto& oa = o_acc[acc(w, m, lane)];
              for (int t = 0; t < d_ / 8; ++t) {
                oa[static_cast<std::size_t>(t * 4 + 2 * r)] *= alpha;
                oa[static_cast<std::size_t>(t * 4 + 2 * r + 1)] *= alpha;
              }
            }
          }
        // O += P V with P repacked (bf16) as the A fragment; each V fragment
        // feeds every m-tile.
        for (int kk = 0; kk < bc_ / 16; ++kk) {
          std::vector<Frag> a(static_cast<std::size_t>(mt_));
          for (int m = 0; m < mt_; ++m)
            for (int lane = 0; lane < 32; ++lane)
              for (int reg = 0; reg < 4; ++reg)
                for (int h = 0; h < 2; ++h)
                  a[static_cast<std::size_t>(m)][static_cast<std::size_t>(lane)][static_cast<std::size_t>(reg)]
                   [static_cast<std::size_t>(h)] = bf16(sacc[static_cast<std::size_t>(m * 32 + lane)][static_cast<std::size_t>(
                      (2 * kk + reg / 2) * 4 + 2 * (reg % 2) + h)]);
          for (int dp = 0; dp < d_ / 16; ++dp) {
            Frag b;
            for (int lane = 0; lane < 32; ++lane) {
              const RowCol va = ldmatrix_v_address(lane);
              addr_[lane] = step_bytes(lane_bytes(va.row, va.col, d_) + kk * 16 * d_ * 2, dp) / 2;
            }
            ldmatrix(tv[stage], addr_, true, b);
            for (int m = 0; m < mt_; ++m) {
              std::vector<std::vector<float>> tmp(32);
              for (int lane = 0; lane < 32; ++lane) tmp[static_cast<std::size_t>(lane)] = o_acc[acc(w, m, lane)];
              mma(tmp, 0, 2 * dp, a[static_cast<std::size_t>(m)], b, 0);
              mma(tmp, 0, 2 * dp + 1, a[static_cast<std::size_t>(m)], b, 2);
              for (int lane = 0; lane < 32; ++lane) o_acc[acc(w, m, lane)] = tmp[static_cast<std::size_t>(lane)];
            }
          }
        }
      }
    }

    // Normalise, stage in the warp's rows of the Q tile, store rows < Nq; lse.
    for (int w = 0; w < warps; ++w) {
      for (int m = 0; m < mt_; ++m) {
        float inv[32][2];
        for (int r = 0; r < 2; ++r) {
          float l_all[32];
          for (int lane = 0; lane < 32; ++lane) l_all[lane] = row_sum[idx(w, m, lane, r)];
          for (int lane = 0; lane < 32; ++lane) {
            const int g = lane & ~3;
            const float l = l_all[g] + l_all[g + 1] + l_all[g + 2] + l_all[g + 3];
            row_sum[idx(w, m, lane, r)] = l;
            inv[lane][r] = l > 0.f ? 1.f / l : 0.f;
          }
        }
        for (int lane = 0; lane < 32; ++lane)
          for (int t = 0; t < d_ / 8; ++t)
            for (int r = 0; r < 2; ++r) {
              const RowCol rc = c_fragment(lane, 2 * r);
              const int off = swizzled_offset(w * rpw + m * 16 + rc.row, t * 8 + rc.col, d_);
              const auto& oa = o_acc[acc(w, m, lane)];
              tq[static_cast<std::size_t>(off)] = bf16(oa[static_cast<std::size_t>(t * 4 + 2 * r)] * inv[lane][r]);
              tq[static_cast<std::size_t>(off + 1)] =
                  bf16(oa[static_cast<std::size_t>(t * 4 + 2 * r + 1)] * inv[lane][r]);
            }
      }
      const int chunks_per_row = d_ / 8;
      for (int lane = 0; lane < 32; ++lane)
        for (int i = lane; i < rpw * chunks_per_row; i += 32) {
          const int row = w * rpw + i / chunks_per_row, col = (i % chunks_per_row) * 8;
          const int g = q0 + row;
          if (g < nq)
            for (int e = 0; e < 8; ++e)
              o[static_cast<std::size_t>(g * d_ + col + e)] =
                  tq[static_cast<std::size_t>(swizzled_offset(row, col, d_) + e)];
        }
      for (int m = 0; m < mt_; ++m)
        for (int lane = 0; lane < 32; lane += 4)
          for (int r = 0; r < 2; ++r) {
            const int g = q0 + w * rpw + m * 16 + lane / 4 + 8 * r;
            const float l = row_sum[idx(w, m, lane, r)];
            if (g < nq) lse[g] = l > 0.f ? row_max[idx(w, m, lane, r)] * scale + std::log(l) : neg_inf;
          }
    }
  }

 private:
  using Frag = std::array<std::array<std::array<float, 2>, 4>, 32>;  // [lane][reg][half]
  std::size_t acc(int w, int m, int lane) const { return static_cast<std::size_t>((w * mt_ + m) * 32 + lane); }
  std::size_t idx(int w, int m, int lane, int r) const { return acc(w, m, lane) * 2 + static_cast<std::size_t>(r); }

  // load_tile: every chunk by (tid, step), zero-filled past `seq`; counts
  // each row copied from memory in `reads`.
  void load(std::vector<float>& tile, int rows, const float* head, int row0, int seq,
            std::vector<int>* reads = nullptr) const {
    const int steps = rows * d_ / 8 / threads_;
    for (int step = 0; step < steps; ++step)
      for (int tid = 0; tid < threads_; ++tid) {
        const RowCol rc = load_chunk(tid, step, threads_, d_);
        const int g = row0 + rc.row;
        if (reads && g < seq && rc.col == 0) ++reads->at(static_cast<std::size_t>(g));
        for (int e = 0; e < 8; ++e)
          tile[static_cast<std::size_t>(swizzled_offset(rc.row, rc.col, d_) + e)] =
              g < seq ? head[static_cast<std::size_t>(g * d_ + rc.col + e)] : 0.f;
      }
  }

  // ldmatrix.x4 from element offsets addr[lane]: out[lane][reg][half].
  static void ldmatrix(const std::vector<float>& tile, const int (&addr)[32], bool trans, Frag& out) {
    for (int lane = 0; lane < 32; ++lane)
      for (int reg = 0; reg < 4; ++reg)
        for (int h = 0; h < 2; ++h) {
          const RowCol e = ldmatrix_element(lane, h, trans);
          out[static_cast<std::size_t>(lane)][static_cast<std::size_t>(reg)][static_cast<std::size_t>(h)] =
              tile[static_cast<std::size_t>(addr[reg * 8 + e.row] + e.col)];
        }
  }

  // D(tile n) += A * B, B from registers b_reg0, b_reg0 + 1 of every lane;
  // lane l's accumulators are acc[lane0 + l].
  static void mma(std::vector<std::vector<float>>& acc, int lane0, int n, const Frag& a, const Frag& b,
                  int b_reg0) {
    float A[16][16], B[16][8];
    for (int lane = 0; lane < 32; ++lane) {
      for (int reg = 0; reg < 4; ++reg)
        for (int h = 0; h < 2; ++h) {
          const RowCol x = a_fragment(lane, reg, h);
          A[x.row][x.col] = a[static_cast<std::size_t>(lane)][static_cast<std::size_t>(reg)][static_cast<std::size_t>(h)];
        }
      for (int reg = 0; reg < 2; ++reg)
        for (int h = 0; h < 2; ++h) {
          const RowCol x = b_fragment(lane, reg, h);
          B[x.row][x.col] =
              b[static_cast<std::size_t>(lane)][static_cast<std::size_t>(b_reg0 + reg)][static_cast<std::size_t>(h)];
        }
    }
    for (int lane = 0; lane < 32; ++lane)
      for (int e = 0; e < 4; ++e) {
        const RowCol x = c_fragment(lane, e);
        float sum = 0.f;
        for (int kk = 0; kk < 16; ++kk) sum += A[x.row][kk] * B[kk][x.col];
        acc[static_cast<std::size_t>(lane0 + lane)][static_cast<std::size_t>(n * 4 + e)] += sum;
      }
  }

  int d_, br_, bc_, mt_, threads_;
  int addr_[32] = {};
};

// Every CTA of the grid. `head_reads` gets, per query head, how many times
// each key row of its K and of its V was copied (all CTAs of the head together).
struct HeadReads {
  std::vector<int> k, v;
};
void emulate(const Shape& s, const FlashConfig& c, const AttentionBuffers& in, std::vector<float>& o,
             std::vector<float>& lse, std::vector<HeadReads>& head_reads) {
  const float scale = default_scale(s);
  const std::size_t d = s.head_dim;
  const std::uint64_t group = s.heads / s.kv_heads;
  CtaEmulator cta(c);
  const LaunchGeometry g = flash_geometry(s, c);
  head_reads.assign(s.batch * s.heads, {std::vector<int>(s.seq_kv, 0), std::vector<int>(s.seq_kv, 0)});
  for (std::uint64_t b = 0; b < s.batch; ++b)
    for (std::uint64_t h = 0; h < s.heads; ++h) {
      const std::size_t qh = (b * s.heads + h) * s.seq_q, kvh = (b * s.kv_heads + h / group) * s.seq_kv;
      HeadReads& reads = head_reads[b * s.heads + h];
      // blockIdx.x -> query block as each kernel maps it (v2: causal grids reversed).
      for (std::uint32_t bx = 0; bx < g.grid_x; ++bx) {
        const int qb = c.version == 2 ? v2_query_block(static_cast<int>(bx), static_cast<int>(g.grid_x), s.causal)
                                      : static_cast<int>(bx);
        cta.run(s, scale, in.q.data() + qh * d, in.k.data() + kvh * d, in.v.data() + kvh * d, o.data() + qh * d,
                lse.data() + qh, qb * c.block_rows, reads.k, reads.v);
      }
    }
}

// How many query blocks' visited key blocks (mask.hpp) hold key c: the reads
// of key c the kernel may make per query head, once per such block.
std::vector<int> expected_key_reads(const Shape& s) {
  std::vector<int> r(s.seq_kv, 0);
  for (std::uint64_t qb = 0; qb < query_blocks(s); ++qb) {
    const KeyRange blocks = visible_key_blocks(s, qb);
    for (std::uint64_t c = blocks.begin * s.block_cols; c < std::min(blocks.end * s.block_cols, s.seq_kv); ++c) ++r[c];
  }
  return r;
}

double lse_error(const std::vector<float>& out, const std::vector<float>& ref) {
  std::vector<float> a, b;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    if (std::isinf(ref[i])) {
      if (!(std::isinf(out[i]) && out[i] < 0)) return std::numeric_limits<double>::quiet_NaN();
      continue;
    }
    a.push_back(out[i]);
    b.push_back(ref[i]);
  }
  return relative_l2_error(a, b);
}

}  // namespace

TEST_CASE("emulated flash kernel equals the reference", "[flash][emulation]") {
  struct Case {
    std::uint64_t batch, heads, kv_heads, nq, nkv;
    bool causal;
    std::uint64_t window;
  };
  // Ragged, causal with Nq > Nkv (leading rows see nothing), Nq < Nkv, GQA,
  // one token; sliding windows (causal) narrower than a block, of one key,
  // not dividing the blocks, spanning several blocks, with Nq < Nkv (keys no
  // query sees), Nq > Nkv (rows that see nothing), GQA, and one as wide as
  // the keys (no key hidden).
  const Case cases[] = {
      {1, 1, 1, 1, 1, false, 0},    {1, 2, 1, 77, 77, true, 0},    {1, 2, 2, 200, 130, true, 0},
      {2, 2, 1, 130, 200, true, 0}, {1, 3, 1, 100, 257, false, 0}, {1, 1, 1, 129, 129, false, 0},
      {1, 2, 1, 300, 300, true, 37}, {1, 1, 1, 150, 150, true, 1},  {2, 4, 2, 257, 400, true, 100},
      {1, 2, 2, 333, 200, true, 150}, {1, 3, 1, 64, 700, true, 129}, {1, 1, 1, 200, 200, true, 200},
  };
  std::uint64_t seed = 5;
  for (const FlashConfig& c : flash_configs())
    for (const Case& k : cases) {
      Shape s;
      s.batch = k.batch;
      s.heads = k.heads;
      s.kv_heads = k.kv_heads;
      s.seq_q = k.nq;
      s.seq_kv = k.nkv;
      s.head_dim = static_cast<std::uint64_t>(c.head_dim);
      s.block_rows = static_cast<std::uint64_t>(c.block_rows);
      s.block_cols = static_cast<std::uint64_t>(c.block_cols);
      s.causal = k.causal;
      s.window = k.window;
      validate(s);
      INFO(describe(c) << " on " << describe(s));
      AttentionBuffers in = random_inputs(s, seed++);
      std::vector<float> ref(q_elements(s)), ref_lse(lse_elements(s));
      attention_naive(s, default_scale(s), in.q, in.k, in.v, ref, ref_lse);
      // Keys that no query block's visited blocks hold become NaN: read by
      // any CTA, they would reach O (0 * NaN is NaN).
      const std::vector<int> expected = expected_key_reads(s);
      std::size_t poisoned = 0;
      for (std::size_t kv_row = 0; kv_row < s.batch * s.kv_heads * s.seq_kv; ++kv_row)
        if (expected[kv_row % s.seq_kv] == 0) {
          ++poisoned;
          for (std::size_t x = 0; x < s.head_dim; ++x) {
            in.k[kv_row * s.head_dim + x] = std::nanf("");
            in.v[kv_row * s.head_dim + x] = std::nanf("");
          }
        }
      // A whole block of keys before the first row's window: some poisoned.
      if (k.window != 0 && k.nkv + 1 >= k.nq + k.window + 128) CHECK(poisoned > 0);
      std::vector<float> o(q_elements(s), std::nanf("")), lse(lse_elements(s), std::nanf(""));
      std::vector<HeadReads> reads;
      emulate(s, c, in, o, lse, reads);
      const double err = relative_l2_error(o, ref);
      CHECK(err < 1e-2);
      CHECK(lse_error(lse, ref_lse) < 1e-3);
      // Each key row copied once per query block whose visited blocks hold
      // it, K and V alike; keys outside every band never.
      for (const HeadReads& r : reads) {
        CHECK(r.k == expected);
        CHECK(r.v == expected);
      }
    }
}
