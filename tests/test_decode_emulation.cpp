// The split-KV decode kernels without a GPU: their host plan, their index maps
// (src/cuda/decode_layout.hpp) against the model's split ranges
// (decode.hpp), the CPU decode reference, and a lane-by-lane CPU emulation of
// decode_split_kernel and decode_combine_kernel (src/cuda/decode_attention.cuh)
// step for step: the tile loads through the same address maps (contiguous
// or through the block table, tokens past the split zero-filled and never
// read), ldmatrix and mma.m16n8k16 from the PTX ISA's fragment layouts, each
// warp's key slice and online softmax, the merge of the warps through shared
// memory, partial O/LSE at their offsets, and the combine. It is a second
// copy of the kernels' algorithm, checked against the reference on ragged
// batches, GQA groups of 1 to 16, 1 to 8 new tokens, causal, sliding windows
// and chunks (only the keys some new token sees are read), splits that do
// not divide the length (and empty ones), odd page sizes.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <random>
#include <set>
#include <vector>

#include "decode_layout.hpp"
#include "hbmscope/decode.hpp"
#include "hbmscope/decode_plan.hpp"
#include "hbmscope/decode_reference.hpp"
#include "hbmscope/error.hpp"
#include "hbmscope/reference.hpp"

using namespace hbmscope;
using flash::RowCol;

namespace {

constexpr float neg_inf = -std::numeric_limits<float>::infinity();
float bf16(float x) { return round_to_dtype(x, Dtype::bf16); }
std::size_t z(long long i) { return static_cast<std::size_t>(i); }

Shape decode_shape(std::uint64_t batch, std::uint64_t heads, std::uint64_t kv_heads, std::uint64_t nq,
                   std::vector<std::uint64_t> lengths, std::uint64_t d, bool causal = false) {
  Shape s;
  s.decode = true;
  s.batch = batch;
  s.heads = heads;
  s.kv_heads = kv_heads;
  s.seq_q = nq;
  s.head_dim = d;
  s.causal = causal;
  s.seq_kv = *std::max_element(lengths.begin(), lengths.end());
  if (lengths.size() == batch) s.context_lengths = std::move(lengths);
  return s;
}

// ldmatrix.x4 from element offsets addr[lane]: out[lane][reg][half].
void ldmatrix(const std::vector<float>& tile, const int (&addr)[32], bool trans, float (&out)[32][4][2]) {
  for (int lane = 0; lane < 32; ++lane)
    for (int reg = 0; reg < 4; ++reg)
      for (int h = 0; h < 2; ++h) {
        const RowCol e = flash::ldmatrix_element(lane, h, trans);
        out[lane][reg][h] = tile[z(addr[reg * 8 + e.row] + e.col)];
      }
}

// acc[lane][n*4 + e] += (A * B)[c_fragment(lane, e)], B from registers b_reg0, b_reg0 + 1.
void mma(std::vector<std::vector<float>>& acc, int n, const float (&a)[32][4][2], const float (&b)[32][4][2],
         int b_reg0) {
  float A[16][16], B[16][8];
  for (int lane = 0; lane < 32; ++lane) {
    for (int reg = 0; reg < 4; ++reg)
      for (int h = 0; h < 2; ++h) {
        const RowCol x = flash::a_fragment(lane, reg, h);
        A[x.row][x.col] = a[lane][reg][h];
      }
    for (int reg = 0; reg < 2; ++reg)
      for (int h = 0; h < 2; ++h) {
        const RowCol x = flash::b_fragment(lane, reg, h);
        B[x.row][x.col] = b[lane][b_reg0 + reg][h];
      }
  }
  for (int lane = 0; lane < 32; ++lane)
    for (int e = 0; e < 4; ++e) {
      const RowCol x = flash::c_fragment(lane, e);
      float sum = 0.f;
      for (int kk = 0; kk < 16; ++kk) sum += A[x.row][kk] * B[kk][x.col];
      acc[z(lane)][z(n * 4 + e)] += sum;
    }
}

// The inputs as the kernel sees them: Q, the cache (contiguous or pool), the
// block table; outputs O, LSE and the partials.
struct Problem {
  Shape s;
  DecodePlan plan;
  std::vector<float> q, k, v;
  std::vector<std::int32_t> table;
  std::vector<float> o, lse, o_part, lse_part;
  std::vector<int> reads;  // times each cache row (token of a kv head) was read
};

class DecodeEmulator {
 public:
  explicit DecodeEmulator(Problem& pr) : p_(pr), s_(pr.s), plan_(pr.plan), d_(static_cast<int>(pr.s.head_dim)) {
    // As decode_backend.cpp passes them: a window or chunk of at least the
    // longest context hides nothing.
    window_ = s_.window < s_.seq_kv ? static_cast<int>(s_.window) : 0;
    chunk_ = s_.chunk < s_.seq_kv ? static_cast<int>(s_.chunk) : 0;
    m_tiles_ = static_cast<int>(plan_.m_tiles);
    rows_ = 16 * m_tiles_;
    stages_ = d_ >= 128 ? 3 : 4;
  }

  void run() {
    for (std::uint64_t b = 0; b < s_.batch; ++b)
      for (std::uint64_t y = 0; y < s_.kv_heads * plan_.row_blocks; ++y)
        for (std::uint64_t split = 0; split < plan_.splits; ++split)
          cta(static_cast<int>(split), static_cast<int>(y), static_cast<int>(b));
    if (plan_.splits > 1) combine();
  }

 private:
  // K/V tile of tokens [k0, k0 + 64) as load_kv_tile fills it.
  void load_kv(std::vector<float>& tk, std::vector<float>& tv, int batch, int kv_head, long long k0, long long end) {
    const int steps = decode::tile_keys * d_ / 8 / decode::threads;
    for (int step = 0; step < steps; ++step)
      for (int tid = 0; tid < decode::threads; ++tid) {
        const RowCol rc = flash::load_chunk(tid, step, decode::threads, d_);
        const long long token = k0 + rc.row;
        const bool inside = token < end;
        long long row = 0;
        if (inside) {
          if (plan_.paged) {
            const long long slot = static_cast<long long>(batch) * static_cast<long long>(plan_.max_pages) +
                                   decode::page_of(token, static_cast<int>(plan_.page_size));
            const int page = p_.table.at(z(slot));
            REQUIRE(page >= 0);  // never a slot past the sequence's pages
            row = decode::paged_row(page, kv_head, token, static_cast<int>(s_.kv_heads),
                                    static_cast<int>(plan_.page_size), d_);
          } else {
            row = decode::contiguous_row(batch, kv_head, token, static_cast<int>(s_.kv_heads),
                                         static_cast<long long>(plan_.kv_stride), d_);
          }
          if (rc.col == 0) ++p_.reads.at(z(row / d_));
        }
        const int off = flash::swizzled_offset(rc.row, rc.col, d_);
        for (int e = 0; e < 8; ++e) {
          tk[z(off + e)] = inside ? p_.k.at(z(row + rc.col + e)) : 0.f;
          tv[z(off + e)] = inside ? p_.v.at(z(row + rc.col + e)) : 0.f;
        }
      }
  }

  void cta(int split, int y, int batch) {
    const int heads = static_cast<int>(s_.heads), kv_heads = static_cast<int>(s_.kv_heads);
    const int seq_q = static_cast<int>(s_.seq_q);
    const int kv_head = y / static_cast<int>(plan_.row_blocks);
    const int row_block = y % static_cast<int>(plan_.row_blocks);
    const int group = heads / kv_heads;
    const int row0 = row_block * rows_;
    const int rows = std::min(rows_, group * seq_q - row0);
    const long long len = static_cast<long long>(context_length(s_, static_cast<std::uint64_t>(batch)));
    const flash::KeyMask mask = decode::sequence_mask(len, seq_q, s_.causal, window_, chunk_);
    const decode::Range range = decode::split_range(split, static_cast<long long>(plan_.split_tokens),
                                                    decode::first_visible_key(mask), len);
    const int n_tiles = decode::range_tiles(range);
    const long long out_row0 = decode::first_group_row(batch, kv_head, heads, group, seq_q) + row0;
    const float scale = default_scale(s_), scale_log2 = scale * 1.4426950408889634f;

    std::vector<float> tq(z(rows_ * d_), 0.f);
    if (n_tiles > 0)
      for (int i = 0; i < rows_ * d_ / 8; ++i) {
        const RowCol rc = flash::load_chunk(i % decode::threads, i / decode::threads, decode::threads, d_);
        for (int e = 0; e < 8; ++e)
          tq[z(flash::swizzled_offset(rc.row, rc.col, d_) + e)] =
              rc.row < rows ? p_.q[z((out_row0 + rc.row) * d_ + rc.col + e)] : 0.f;
      }
    const int kw_count = decode::key_warps(m_tiles_), slice = decode::warp_keys(m_tiles_);
    const int n_tiles_s = slice / 8, n_tiles_o = d_ / 8;
    // Per warp, per lane registers.
    std::vector<std::vector<std::vector<float>>> o_acc(
        decode::warps, std::vector<std::vector<float>>(32, std::vector<float>(z(n_tiles_o * 4), 0.f)));
    std::vector<float> row_max(decode::warps * 32 * 2, neg_inf), row_sum(decode::warps * 32 * 2, 0.f);
    const auto at = [](int w, int lane, int r) { return z((w * 32 + lane) * 2 + r); };

    std::vector<float> tk(z(decode::tile_keys * d_)), tv(tk.size());
    for (int j = 0; j < n_tiles; ++j) {
      const long long k0 = range.begin + static_cast<long long>(j) * decode::tile_keys;
      load_kv(tk, tv, batch, kv_head, k0, range.end);
      for (int w = 0; w < decode::warps; ++w) {
        const decode::WarpRole role = decode::warp_role(w, m_tiles_);
        const int first_key = role.key_warp * slice;
        std::vector<std::vector<float>> sacc(32, std::vector<float>(z(n_tiles_s * 4), 0.f));
        int addr[32];
        for (int ks = 0; ks < d_ / 16; ++ks) {
          float a[32][4][2];
          for (int lane = 0; lane < 32; ++lane) {
            const RowCol qa = flash::ldmatrix_a_address(lane);
            addr[lane] = flash::step_bytes(flash::lane_bytes(role.m_tile * 16 + qa.row, qa.col, d_), ks) / 2;
          }
          ldmatrix(tq, addr, false, a);
          for (int np = 0; np < n_tiles_s / 2; ++np) {
            float b[32][4][2];
            for (int lane = 0; lane < 32; ++lane) {
              const RowCol ka = flash::ldmatrix_k_address(lane);
              addr[lane] =
                  flash::step_bytes(flash::lane_bytes(first_key + ka.row, ka.col, d_) + np * 16 * d_ * 2, ks) / 2;
            }
            ldmatrix(tk, addr, false, b);
            mma(sacc, 2 * np, a, b, 0);
            mma(sacc, 2 * np + 1, a, b, 2);
          }
        }
        if (decode::tile_needs_mask(k0, range.end, seq_q, mask))
          for (int lane = 0; lane < 32; ++lane)
            for (int r = 0; r < 2; ++r) {
              const int token =
                  decode::packed_row(row0 + role.m_tile * 16 + flash::c_fragment(lane, 2 * r).row, seq_q).token;
              const flash::KeySpan span = flash::row_keys(token, mask);
              const long long end = span.end < range.end ? span.end : range.end;
              for (int t = 0; t < n_tiles_s; ++t)
                for (int h = 0; h < 2; ++h) {
                  const long long key = k0 + first_key + t * 8 + flash::c_fragment(lane, 2 * r + h).col;
                  if (key < span.begin || key >= end) sacc[z(lane)][z(t * 4 + 2 * r + h)] = neg_inf;
                }
            }
        else {  // every real row sees every key of the tile
          bool all = true;
          for (int lane = 0; lane < 32; ++lane)
            for (int t = 0; t < n_tiles_s; ++t)
              for (int e = 0; e < 4; ++e) {
                const RowCol rc = flash::c_fragment(lane, e);
                const int token = decode::packed_row(row0 + role.m_tile * 16 + rc.row, seq_q).token;
                if (role.m_tile * 16 + rc.row < rows)
                  all &= decode::key_visible(k0 + first_key + t * 8 + rc.col, range.end, token, mask);
              }
          CHECK(all);
        }
        for (int r = 0; r < 2; ++r) {
          float local[32];
          for (int lane = 0; lane < 32; ++lane) {
            float mx = row_max[at(w, lane, r)];
            for (int t = 0; t < n_tiles_s; ++t)
              mx = std::fmax(mx, std::fmax(sacc[z(lane)][z(t * 4 + 2 * r)], sacc[z(lane)][z(t * 4 + 2 * r + 1)]));
            local[lane] = mx;
          }
          for (int lane = 0; lane < 32; ++lane) {
            const int g = lane & ~3;
            const float mx = std::fmax(std::fmax(local[g], local[g + 1]), std::fmax(local[g + 2], local[g + 3]));
            const float m_scaled = mx == neg_inf ? 0.f : mx * scale_log2;
            const float alpha = std::exp2(row_max[at(w, lane, r)] * scale_log2 - m_scaled);
            row_max[at(w, lane, r)] = mx;
            float sum = 0.f;
            for (int t = 0; t < n_tiles_s; ++t)
              for (int h = 0; h < 2; ++h) {
                float& x = sacc[z(lane)][z(t * 4 + 2 * r + h)];
                x = std::exp2(std::fma(x, scale_log2, -m_scaled));
                sum += x;
              }
            row_sum[at(w, lane, r)] = row_sum[at(w, lane, r)] * alpha + sum;
            for (int t = 0; t < n_tiles_o; ++t) {
              o_acc[z(w)][z(lane)][z(t * 4 + 2 * r)] *= alpha;
              o_acc[z(w)][z(lane)][z(t * 4 + 2 * r + 1)] *= alpha;
            }
          }
        }
        for (int kk = 0; kk < slice / 16; ++kk) {
          float a[32][4][2];
          for (int lane = 0; lane < 32; ++lane)
            for (int reg = 0; reg < 4; ++reg)
              for (int h = 0; h < 2; ++h)
                a[lane][reg][h] = bf16(sacc[z(lane)][z((2 * kk + reg / 2) * 4 + 2 * (reg % 2) + h)]);
          for (int dp = 0; dp < d_ / 16; ++dp) {
            float b[32][4][2];
            for (int lane = 0; lane < 32; ++lane) {
              const RowCol va = flash::ldmatrix_v_address(lane);
              addr[lane] =
                  flash::step_bytes(flash::lane_bytes(first_key + va.row, va.col, d_) + kk * 16 * d_ * 2, dp) / 2;
            }
            ldmatrix(tv, addr, true, b);
            mma(o_acc[z(w)], 2 * dp, a, b, 0);
            mma(o_acc[z(w)], 2 * dp + 1, a, b, 2);
          }
        }
      }
    }

    // Merge through "shared memory".
    const int ld = d_ + 4;
    std::vector<float> scratch(z(decode::warps * 16 * ld), std::nanf("")), s_m(decode::warps * 16), s_l(decode::warps * 16);
    for (int w = 0; w < decode::warps; ++w)
      for (int r = 0; r < 2; ++r)
        for (int lane = 0; lane < 32; lane += 4) {
          float l = 0.f;
          for (int q = 0; q < 4; ++q) l += row_sum[at(w, lane + q, r)];
          s_m[z(w * 16 + lane / 4 + 8 * r)] = row_max[at(w, lane, r)];
          s_l[z(w * 16 + lane / 4 + 8 * r)] = l;
        }
    const auto merged = [&](int mt, int r16, float& m_scaled, float& l) {
      float mx = neg_inf;
      for (int kw = 0; kw < kw_count; ++kw) mx = std::fmax(mx, s_m[z((mt * kw_count + kw) * 16 + r16)]);
      m_scaled = mx == neg_inf ? 0.f : mx * scale_log2;
      l = 0.f;
      for (int kw = 0; kw < kw_count; ++kw) {
        const int w = mt * kw_count + kw;
        l += s_l[z(w * 16 + r16)] * std::exp2(s_m[z(w * 16 + r16)] * scale_log2 - m_scaled);
      }
      return mx;
    };
    for (int w = 0; w < decode::warps; ++w) {
      const decode::WarpRole role = decode::warp_role(w, m_tiles_);
      for (int lane = 0; lane < 32; ++lane)
        for (int r = 0; r < 2; ++r) {
          float m_scaled, l;
          merged(role.m_tile, lane / 4 + 8 * r, m_scaled, l);
          const float factor = l > 0.f ? std::exp2(row_max[at(w, lane, r)] * scale_log2 - m_scaled) / l : 0.f;
          for (int t = 0; t < n_tiles_o; ++t) {
            const RowCol rc = flash::c_fragment(lane, 2 * r);
            for (int h = 0; h < 2; ++h)
              scratch[z((w * 16 + rc.row) * ld + t * 8 + rc.col + h)] = o_acc[z(w)][z(lane)][z(t * 4 + 2 * r + h)] * factor;
          }
        }
    }
    const int splits = static_cast<int>(plan_.splits);
    for (int row = 0; row < rows; ++row) {
      const int mt = row / 16, r16 = row % 16;
      const long long out_row = out_row0 + row;
      for (int col = 0; col < d_; ++col) {
        float acc = 0.f;
        for (int kw = 0; kw < kw_count; ++kw) acc += scratch[z(((mt * kw_count + kw) * 16 + r16) * ld + col)];
        if (splits == 1) p_.o[z(out_row * d_ + col)] = bf16(acc);
        else p_.o_part[z(decode::partial_o(out_row, split, splits, d_) + col)] = acc;
      }
      float m_scaled, l;
      const float mx = merged(mt, r16, m_scaled, l);
      const float lse = l > 0.f ? mx * scale + std::log(l) : neg_inf;
      if (splits == 1) p_.lse[z(out_row)] = lse;
      else p_.lse_part[z(decode::partial_lse(out_row, split, splits))] = lse;
    }
  }

  // decode_combine_kernel, one row at a time.
  void combine() {
    const int splits = static_cast<int>(plan_.splits);
    for (long long row = 0; row < static_cast<long long>(plan_.rows); ++row) {
      const float* lse = p_.lse_part.data() + decode::partial_lse(row, 0, splits);
      float mx = neg_inf;
      for (int i = 0; i < splits; ++i) mx = std::fmax(mx, lse[i]);
      std::vector<float> acc(z(d_), 0.f);
      float row_lse = neg_inf;
      if (mx != neg_inf) {
        float sum = 0.f;
        for (int i = 0; i < splits; ++i) sum += std::exp(lse[i] - mx);
        row_lse = mx + std::log(sum);
        for (int i = 0; i < splits; ++i) {
          const float w = std::exp(lse[i] - mx) / sum;
          for (int c = 0; c < d_; ++c) acc[z(c)] += w * p_.o_part[z(decode::partial_o(row, i, splits, d_) + c)];
        }
      }
      for (int c = 0; c < d_; ++c) p_.o[z(row * d_ + c)] = bf16(acc[z(c)]);
      p_.lse[z(row)] = row_lse;
    }
  }

  Problem& p_;
  const Shape& s_;
  const DecodePlan& plan_;
  int d_, m_tiles_ = 1, rows_ = 16, stages_ = 3, window_ = 0, chunk_ = 0;
};

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

// Reads of each cache row (K and V alike) the kernel must make: row_blocks for
// every key some new token of its sequence sees (decode_read_keys), 0 for
// every other row.
std::vector<int> expected_reads(const Problem& pr) {
  const Shape& s = pr.s;
  std::vector<int> r(pr.k.size() / s.head_dim, 0);
  for (std::uint64_t b = 0; b < s.batch; ++b) {
    const KeyRange read = decode_read_keys(s, context_length(s, b));
    for (std::uint64_t kvh = 0; kvh < s.kv_heads; ++kvh)
      for (std::uint64_t t = read.begin; t < read.end; ++t) {
        std::uint64_t row = 0;
        if (pr.plan.paged) {
          const auto page = static_cast<std::uint64_t>(pr.table.at(b * pr.plan.max_pages + t / pr.plan.page_size));
          row = (page * s.kv_heads + kvh) * pr.plan.page_size + t % pr.plan.page_size;
        } else {
          row = (b * s.kv_heads + kvh) * pr.plan.kv_stride + t;
        }
        r.at(row) = static_cast<int>(pr.plan.row_blocks);
      }
  }
  return r;
}

Problem make_problem(const Shape& s, bool paged, std::uint64_t splits, std::uint64_t seed) {
  Problem pr;
  pr.s = s;
  pr.plan = decode_plan(s, paged, splits);
  const AttentionBuffers in = random_inputs(s, seed);
  pr.q = in.q;
  if (paged) {
    std::mt19937_64 rng(seed + 99);
    std::uniform_real_distribution<float> dist(-1.f, 1.f);
    pr.k.resize(pr.plan.pages * s.kv_heads * pr.plan.page_size * s.head_dim);
    pr.v.resize(pr.k.size());
    for (auto* x : {&pr.k, &pr.v})
      for (float& e : *x) e = bf16(dist(rng));
    pr.table = decode_block_table(s, pr.plan, seed);
  } else {
    pr.k = in.k;
    pr.v = in.v;
  }
  pr.o.assign(q_elements(s), std::nanf(""));
  pr.lse.assign(lse_elements(s), std::nanf(""));
  pr.o_part.assign(pr.plan.rows * splits * s.head_dim, std::nanf(""));
  pr.lse_part.assign(pr.plan.rows * splits, std::nanf(""));
  pr.reads.assign(pr.k.size() / s.head_dim, 0);
  return pr;
}

}  // namespace

TEST_CASE("decode plan: instantiation, grid, shared memory, footprint", "[decode][plan]") {
  // Llama-3 8B: 32/8 heads, one token: 4 packed rows, one m-tile, one CTA per kv head.
  Shape s = decode_shape(32, 32, 8, 1, {4096}, 128);
  DecodePlan p = decode_plan(s, false, 1);
  CHECK(p.m_tiles == 1);
  CHECK(p.row_blocks == 1);
  CHECK(p.split.grid_x == 1);
  CHECK(p.split.grid_y == 8);
  CHECK(p.split.grid_z == 32);
  CHECK(p.split_tokens == 4096);
  CHECK(p.rows == 32 * 32);
  // Two CTAs fit an H200 SM (228 KiB, 1 KiB reserved per CTA; at most 227 KiB per CTA).
  for (std::uint64_t d : {64u, 128u})
    for (std::uint64_t m : {1u, 2u, 4u}) {
      INFO("d " << d << " m-tiles " << m);
      CHECK(2 * (decode_smem_bytes(d, m) + 1024) <= 228u * 1024);
    }
  CHECK(decode_smem_bytes(128, 1) == (16 * 128 + 2 * 3 * 64 * 128) * 2);
  // 70B: 64/8 heads, 8 tokens: 64 rows, four m-tiles; 16-wide groups of 8 tokens: two row blocks.
  s = decode_shape(2, 64, 8, 8, {1000}, 128);
  CHECK(decode_plan(s, false, 3).m_tiles == 4);
  CHECK(decode_plan(s, false, 3).row_blocks == 1);
  s = decode_shape(2, 32, 2, 8, {1000}, 64);
  CHECK(decode_plan(s, false, 3).m_tiles == 4);
  CHECK(decode_plan(s, false, 3).row_blocks == 2);
  s = decode_shape(2, 6, 2, 8, {1000}, 64);  // 24 rows
  CHECK(decode_plan(s, false, 3).m_tiles == 2);
  // Splits cut as the model cuts them: blocks_per_split * Bc tokens.
  s = decode_shape(1, 8, 1, 1, {1000}, 128);
  s.block_cols = 128;
  p = decode_plan(s, false, 3);
  CHECK(p.split_tokens == 3 * 128);  // ceil(ceil(1000/128)/3) = 3 blocks
  CHECK(p.combine.grid_x == 2);      // 8 rows, 4 per CTA
  // Paged: pages per sequence, the block table a permutation of the pool.
  s = decode_shape(3, 4, 2, 2, {100, 7, 33}, 64);
  s.page_size = 7;
  p = decode_plan(s, true, 2);
  CHECK(p.max_pages == 15);
  CHECK(p.pages == 15 + 1 + 5);
  const auto table = decode_block_table(s, p, 3);
  REQUIRE(table.size() == 3 * 15);
  std::set<std::int32_t> used;
  for (std::uint64_t b = 0; b < 3; ++b)
    for (std::uint64_t j = 0; j < 15; ++j) {
      const std::int32_t e = table[b * 15 + j];
      if (j < context_pages(s, b)) {
        CHECK(e >= 0);
        CHECK(used.insert(e).second);
      } else {
        CHECK(e == -1);
      }
    }
  CHECK(used.size() == p.pages);
  CHECK(*used.rbegin() == static_cast<std::int32_t>(p.pages) - 1);
  // Footprint: Q, O, the pool, LSE, lengths, table, partials.
  const std::uint64_t rows = 3 * 4 * 2;
  CHECK(decode_footprint(s, p) == 2 * rows * 64 * 2 + 2 * p.pages * 7 * 2 * 64 * 2 + rows * 4 + 3 * 4 + 3 * 15 * 4 +
                                      rows * 2 * 65 * 4);
  // Refusals.
  s.head_dim = 96;
  CHECK(decode_unsupported_reason(s).has_value());
  CHECK_THROWS_AS(decode_plan(s, true, 2), Error);
  s.head_dim = 64;
  s.decode = false;
  s.context_lengths.clear();
  CHECK(decode_unsupported_reason(s).has_value());
  CHECK(unsupported_reason(decode_shape(1, 1, 1, 1, {10}, 64), KernelKind::flash).has_value());
  CHECK_FALSE(unsupported_reason(decode_shape(1, 1, 1, 1, {10}, 64), KernelKind::decode_paged).has_value());
}

TEST_CASE("decode validation shape keeps the group, tokens, splits and pages", "[decode][plan]") {
  Shape s = decode_shape(8, 32, 8, 1, {4096}, 128);
  s.splits = 1;
  CHECK(decode_validation_shape(s) == s);  // 8*4096*32*128 = 2^27: cheap enough
  s.batch = 32;
  Shape v = decode_validation_shape(s);  // 2^29: 2 sequences, 2 kv heads, whole contexts
  CHECK(v.batch == 2);
  CHECK(v.kv_heads == 2);
  CHECK(v.heads == 8);
  CHECK(v.seq_kv == 4096);
  s = decode_shape(8, 64, 8, 8, {32768}, 128);
  s.splits = 5;
  v = decode_validation_shape(s);
  CHECK(v.batch == 2);
  CHECK(v.kv_heads == 2);
  CHECK(group_size(v) == 8);
  CHECK(v.seq_q == 8);
  CHECK(v.splits == 5);
  CHECK(v.seq_kv == 1768);  // 2 * 32768 * 16 * 8 * 128 = 2^30 still: cut to 1000 + 32768 mod 1000
  s = decode_shape(4, 64, 8, 8, {1 << 20, 1000, 5000, 3 << 18}, 128);
  s.splits = 7;
  s.page_size = 5;
  v = decode_validation_shape(s);
  validate(v);
  CHECK(v.context_lengths == std::vector<std::uint64_t>{1000 + (1 << 20) % 1000, 1000});
  CHECK(v.page_size == 5);
  CHECK(v.splits == 7);
}

TEST_CASE("decode index maps: splits as the model cuts them, rows, pages", "[decode][layout]") {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    const std::uint64_t batch = 1 + rng() % 4;
    std::vector<std::uint64_t> lengths;
    for (std::uint64_t b = 0; b < batch; ++b) lengths.push_back(1 + rng() % 3000);
    Shape s = decode_shape(batch, 4, 2, 1 + rng() % 8, lengths, 64);
    s.block_cols = 64u << (rng() % 3);
    const std::uint64_t splits = 1 + rng() % 40;
    const DecodePlan p = decode_plan(s, false, splits);
    for (std::uint64_t b = 0; b < batch; ++b) {
      long long covered = 0;
      for (std::uint64_t j = 0; j < splits; ++j) {
        const KeyRange m = split_key_range(s, splits, b, j);
        const decode::Range k = decode::split_range(static_cast<int>(j), static_cast<long long>(p.split_tokens), 0,
                                                    static_cast<long long>(context_length(s, b)));
        INFO(describe(s) << " splits " << splits << " b " << b << " j " << j);
        CHECK(static_cast<std::uint64_t>(std::max(0LL, k.end - k.begin)) == m.size());
        if (!m.empty()) CHECK(static_cast<std::uint64_t>(k.begin) == m.begin);
        covered += std::max(0LL, k.end - k.begin);
      }
      CHECK(static_cast<std::uint64_t>(covered) == context_length(s, b));
    }
  }
  // Windows and chunks: the splits cut only the keys some new token sees,
  // from the first of them, in whole key blocks of the longest such span.
  for (int trial = 0; trial < 300; ++trial) {
    const std::uint64_t batch = 1 + rng() % 4, nq = 1 + rng() % 8;
    std::vector<std::uint64_t> lengths;
    for (std::uint64_t b = 0; b < batch; ++b) lengths.push_back(nq + rng() % 3000);
    Shape s = decode_shape(batch, 4, 2, nq, lengths, 64, true);
    if (trial % 3 == 0) s.chunk = 1 + rng() % 1500;
    else s.window = 1 + rng() % (trial % 3 == 1 ? 200 : 3000);
    s.block_cols = 64u << (rng() % 3);
    validate(s);
    const std::uint64_t splits = 1 + rng() % 40;
    const DecodePlan p = decode_plan(s, false, splits);
    std::uint64_t longest = 0;
    for (std::uint64_t b = 0; b < batch; ++b) longest = std::max(longest, decode_read_keys(s, context_length(s, b)).size());
    CHECK(p.split_tokens == std::max<std::uint64_t>(1, (longest + s.block_cols - 1) / s.block_cols + splits - 1) / splits * s.block_cols);
    for (std::uint64_t b = 0; b < batch; ++b) {
      const long long len = static_cast<long long>(context_length(s, b));
      const flash::KeyMask mask = decode::sequence_mask(len, static_cast<int>(nq), true,
                                                        s.window < s.seq_kv ? static_cast<int>(s.window) : 0,
                                                        s.chunk < s.seq_kv ? static_cast<int>(s.chunk) : 0);
      const KeyRange read = decode_read_keys(s, static_cast<std::uint64_t>(len));
      INFO(describe(s) << " splits " << splits << " b " << b);
      CHECK(static_cast<std::uint64_t>(decode::first_visible_key(mask)) == read.begin);
      // read = the union of what the new tokens see (mask.hpp).
      std::uint64_t lo = static_cast<std::uint64_t>(len);
      for (std::uint64_t t = 0; t < nq; ++t) lo = std::min(lo, decode_visible_range(s, b, t).begin);
      CHECK(read.begin == lo);
      CHECK(read.end == static_cast<std::uint64_t>(len));
      long long next = decode::first_visible_key(mask);
      for (std::uint64_t j = 0; j < splits; ++j) {
        const decode::Range k = decode::split_range(static_cast<int>(j), static_cast<long long>(p.split_tokens),
                                                    decode::first_visible_key(mask), len);
        if (k.end <= k.begin) continue;
        CHECK(k.begin == next);  // consecutive, disjoint
        next = k.end;
      }
      CHECK(static_cast<std::uint64_t>(next) == read.end);
      // The kernel's per-token visibility is the reference's.
      for (int t = 0; t < static_cast<int>(nq); ++t) {
        const KeyRange want = decode_visible_range(s, b, static_cast<std::uint64_t>(t));
        const flash::KeySpan got = flash::row_keys(t, mask);
        CHECK(static_cast<std::uint64_t>(got.begin) == want.begin);
        CHECK(static_cast<std::uint64_t>(got.end) == want.end);
      }
    }
  }
  // Packed rows: every (head, token) of the group once, in Q's order.
  for (int seq_q = 1; seq_q <= 8; ++seq_q)
    for (int row = 0; row < 8 * seq_q; ++row) {
      const decode::HeadToken ht = decode::packed_row(row, seq_q);
      CHECK(ht.head_in_group * seq_q + ht.token == row);
      CHECK(ht.token < seq_q);
    }
  // Causal (with a window, with a chunk) visibility equals the reference's.
  for (int w : {0, 1, 4, 7})
    for (int c : {0, 3, 8}) {
      if (w != 0 && c != 0) continue;
      Shape s = decode_shape(2, 2, 1, 5, {9, 30}, 64, true);
      s.window = static_cast<std::uint64_t>(w);
      s.chunk = static_cast<std::uint64_t>(c);
      for (std::uint64_t b = 0; b < 2; ++b)
        for (int t = 0; t < 5; ++t) {
          const long long len = static_cast<long long>(context_length(s, b));
          const flash::KeyMask mask = decode::sequence_mask(len, 5, true, w, c);
          long long vis = 0;
          for (long long key = 0; key < len; ++key) vis += decode::key_visible(key, len, t, mask);
          CHECK(static_cast<std::uint64_t>(vis) == decode_visible_keys(s, b, static_cast<std::uint64_t>(t)));
        }
    }
  // Warp roles tile the CTA: every (m-tile, key-warp) once.
  for (int m : {1, 2, 4}) {
    std::set<std::pair<int, int>> seen;
    for (int w = 0; w < decode::warps; ++w) seen.insert({decode::warp_role(w, m).m_tile, decode::warp_role(w, m).key_warp});
    CHECK(seen.size() == 4);
    CHECK(decode::key_warps(m) * decode::warp_keys(m) == decode::tile_keys);
  }
}

TEST_CASE("decode reference: prefill reference, ragged batches, paged cache", "[decode][reference]") {
  // Not ragged: the prefill reference with seq_q queries against seq_kv keys.
  for (bool causal : {false, true}) {
    Shape s = decode_shape(2, 4, 2, 3, {77}, 64, causal);
    const AttentionBuffers in = random_inputs(s, 3);
    std::vector<float> o(q_elements(s)), lse(lse_elements(s)), ro(o.size()), rlse(lse.size());
    decode_attention_reference(s, default_scale(s), in.q, in.k, in.v, o, lse);
    Shape prefill = s;
    prefill.decode = false;
    attention_naive(prefill, default_scale(s), in.q, in.k, in.v, ro, rlse);
    CHECK(relative_l2_error(o, ro) < 1e-5);
    CHECK(relative_l2_error(lse, rlse) < 1e-5);
  }
  // Ragged: sequence b alone, as a batch of one of its own length.
  Shape s = decode_shape(3, 2, 1, 2, {50, 5, 129}, 64, true);
  const AttentionBuffers in = random_inputs(s, 4);
  std::vector<float> o(q_elements(s)), lse(lse_elements(s));
  decode_attention_reference(s, default_scale(s), in.q, in.k, in.v, o, lse);
  for (std::uint64_t b = 0; b < 3; ++b) {
    Shape one = decode_shape(1, 2, 1, 2, {context_length(s, b)}, 64, true);
    const std::size_t q1 = q_elements(one), kv1 = one.seq_kv * 64;
    std::vector<float> k1(in.k.begin() + static_cast<long>(b * s.seq_kv * 64),
                          in.k.begin() + static_cast<long>(b * s.seq_kv * 64 + kv1));
    std::vector<float> v1(in.v.begin() + static_cast<long>(b * s.seq_kv * 64),
                          in.v.begin() + static_cast<long>(b * s.seq_kv * 64 + kv1));
    std::vector<float> q(in.q.begin() + static_cast<long>(b * q1), in.q.begin() + static_cast<long>((b + 1) * q1));
    std::vector<float> o1(q1), l1(lse_elements(one));
    decode_attention_reference(one, default_scale(one), q, k1, v1, o1, l1);
    CHECK(std::equal(o1.begin(), o1.end(), o.begin() + static_cast<long>(b * q1)));
  }
  // Paged: the contiguous reference on the gathered cache.
  s.page_size = 3;
  const DecodePlan p = decode_plan(s, true, 1);
  const auto table = decode_block_table(s, p, 5);
  std::vector<float> pool_k(p.pages * 3 * 64), pool_v(pool_k.size());
  std::mt19937_64 rng(1);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  for (auto* x : {&pool_k, &pool_v})
    for (float& e : *x) e = bf16(dist(rng));
  std::vector<float> po(q_elements(s)), plse(lse_elements(s)), co(po.size()), clse(plse.size());
  decode_attention_paged_reference(s, default_scale(s), in.q, pool_k, pool_v, table, p.max_pages, po, plse);
  const auto gk = gather_pages(s, pool_k, table, p.max_pages), gv = gather_pages(s, pool_v, table, p.max_pages);
  decode_attention_reference(s, default_scale(s), in.q, gk, gv, co, clse);
  CHECK(po == co);
  CHECK(plse == clse);
  // Windows and chunks: per sequence, the prefill reference (mask.hpp's
  // masks, bottom-right aligned) on the sequence's own keys.
  for (int kind = 0; kind < 4; ++kind) {
    Shape w = decode_shape(3, 4, 2, 3, {50, 5, 129}, 64, true);
    if (kind == 0) w.window = 1;
    if (kind == 1) w.window = 17;
    if (kind == 2) w.chunk = 16;
    if (kind == 3) w.chunk = 100;
    const AttentionBuffers win = random_inputs(w, 9);
    std::vector<float> wo(q_elements(w)), wl(lse_elements(w));
    decode_attention_reference(w, default_scale(w), win.q, win.k, win.v, wo, wl);
    for (std::uint64_t b = 0; b < 3; ++b) {
      Shape one = w;
      one.decode = false;
      one.batch = 1;
      one.context_lengths.clear();
      one.seq_kv = context_length(w, b);
      const std::size_t q1 = q_elements(one), kv_stride = w.seq_kv * 64;
      std::vector<float> q(win.q.begin() + static_cast<long>(b * q1), win.q.begin() + static_cast<long>((b + 1) * q1));
      std::vector<float> k1, v1;
      for (std::uint64_t kvh = 0; kvh < 2; ++kvh) {
        const auto at = static_cast<long>((b * 2 + kvh) * kv_stride);
        k1.insert(k1.end(), win.k.begin() + at, win.k.begin() + at + static_cast<long>(one.seq_kv * 64));
        v1.insert(v1.end(), win.v.begin() + at, win.v.begin() + at + static_cast<long>(one.seq_kv * 64));
      }
      std::vector<float> o1(q1), l1(lse_elements(one));
      attention_naive(one, default_scale(one), q, k1, v1, o1, l1);
      INFO(describe(w) << " sequence " << b);
      CHECK(relative_l2_error(std::vector<float>(wo.begin() + static_cast<long>(b * q1),
                                                 wo.begin() + static_cast<long>((b + 1) * q1)),
                              o1) < 1e-5);
    }
  }
  // A table entry outside the pool is refused, not read.
  auto bad = table;
  bad[0] = static_cast<std::int32_t>(p.pages);
  CHECK_THROWS_WITH(decode_attention_paged_reference(s, 1.f, in.q, pool_k, pool_v, bad, p.max_pages, po, plse),
                    Catch::Contains("not a page of the pool"));
}

TEST_CASE("emulated decode kernels equal the reference", "[decode][emulation]") {
  struct Case {
    std::uint64_t batch, heads, kv_heads, nq;
    std::vector<std::uint64_t> lengths;
    std::uint64_t d;
    bool causal;
    std::uint64_t splits, page_size, block_cols;
    std::uint64_t window = 0, chunk = 0;
  };
  // GQA groups 1, 4, 8, 16 (two row blocks); 1, 2, 5, 8 tokens; ragged batches
  // with a sequence shorter than one tile; splits that do not divide the
  // length and trailing empty splits; page sizes 1, 7, 16, 64; causal.
  // Sliding windows (a decode step reads the last min(L, W + Nq - 1) keys):
  // of one key, narrower than a tile, not dividing the tiles, splits that do
  // and do not divide the window's keys, ragged batches with sequences
  // shorter than the window, several tokens, GQA, paged with odd pages; and
  // chunks (the current chunk only), one of them longer than every sequence.
  const Case cases[] = {
      {1, 1, 1, 1, {1}, 64, false, 1, 16, 128},
      {2, 8, 2, 1, {200, 200}, 128, false, 1, 16, 128},
      {2, 8, 2, 1, {300, 37}, 128, false, 3, 7, 64},
      {3, 4, 4, 2, {130, 64, 5}, 64, true, 4, 1, 64},
      {1, 16, 2, 8, {333}, 64, true, 5, 16, 64},
      {2, 32, 2, 8, {150, 90}, 64, false, 2, 64, 128},
      {1, 8, 1, 5, {257}, 128, true, 9, 16, 64},
      {2, 6, 2, 3, {129, 700}, 64, false, 16, 5, 128},
      {2, 8, 2, 1, {300, 1000}, 128, true, 1, 16, 64, 1},
      {3, 4, 4, 2, {500, 64, 5}, 64, true, 3, 7, 64, 37},
      {1, 16, 2, 8, {1333}, 64, true, 4, 16, 64, 256},
      {2, 32, 2, 8, {150, 900}, 64, true, 5, 5, 128, 100},
      {1, 8, 1, 5, {2000}, 128, true, 9, 64, 64, 300},
      {2, 6, 2, 3, {129, 700}, 128, true, 2, 1, 128, 0, 256},
      {3, 8, 2, 4, {1000, 77, 513}, 64, true, 3, 16, 64, 0, 100},
      {1, 4, 1, 1, {999}, 128, true, 4, 7, 64, 0, 5000},
  };
  std::uint64_t seed = 21;
  for (const Case& c : cases)
    for (bool paged : {false, true}) {
      Shape s = decode_shape(c.batch, c.heads, c.kv_heads, c.nq, c.lengths, c.d, c.causal);
      s.page_size = c.page_size;
      s.block_cols = c.block_cols;
      s.splits = c.splits;
      s.window = c.window;
      s.chunk = c.chunk;
      validate(s);
      Problem pr = make_problem(s, paged, c.splits, seed++);
      // Cache rows no split may read (outside what the new tokens see, past a
      // sequence) become NaN: a read of one would reach O.
      const std::vector<int> expected = expected_reads(pr);
      for (std::size_t row = 0; row < expected.size(); ++row)
        if (expected[row] == 0)
          for (std::size_t x = 0; x < s.head_dim; ++x) {
            pr.k[row * s.head_dim + x] = std::nanf("");
            pr.v[row * s.head_dim + x] = std::nanf("");
          }
      DecodeEmulator(pr).run();
      std::vector<float> ref(q_elements(s)), ref_lse(lse_elements(s));
      if (paged)
        decode_attention_paged_reference(s, default_scale(s), pr.q, pr.k, pr.v, pr.table, pr.plan.max_pages, ref,
                                         ref_lse);
      else
        decode_attention_reference(s, default_scale(s), pr.q, pr.k, pr.v, ref, ref_lse);
      INFO(describe(s) << (paged ? " paged" : " contiguous") << ", " << c.splits << " splits, m-tiles "
                       << pr.plan.m_tiles << ", row blocks " << pr.plan.row_blocks);
      CHECK(relative_l2_error(pr.o, ref) < 1e-2);
      CHECK(lse_error(pr.lse, ref_lse) < 1e-3);
      // Each token some new token sees read once per row block and kv head,
      // every other cache row never (past a sequence, before its window or chunk).
      CHECK(pr.reads == expected);
      std::uint64_t total = 0, visible = 0;
      for (int r : pr.reads) total += static_cast<std::uint64_t>(r);
      for (std::uint64_t b = 0; b < s.batch; ++b)
        visible += decode_read_keys(s, context_length(s, b)).size() * s.kv_heads * pr.plan.row_blocks;
      CHECK(total == visible);
    }
}

TEST_CASE("decode pipeline: a tile has landed when read, no stage refilled while in use", "[decode][layout]") {
  // The split kernel's cp.async schedule: a Q group, stages - 1 prologue groups
  // (empty past the split), then per iteration j: wait_group<stages - 2>, a
  // barrier, tile j + stages - 1 into stage (j + stages - 1) % stages, commit,
  // compute tile j from stage j % stages.
  for (int stages : {3, 4})
    for (int n_tiles = 0; n_tiles <= 11; ++n_tiles) {
      INFO(stages << " stages, " << n_tiles << " tiles");
      std::vector<int> groups;                  // tile per commit group (-1: Q, -2: empty)
      std::vector<bool> done;
      std::vector<int> stage_holds(static_cast<std::size_t>(stages), -3);  // tile a stage holds (or is filling)
      const auto commit = [&](int tile) {
        groups.push_back(tile);
        done.push_back(false);
      };
      const auto wait = [&](int pending) {  // cp.async.wait_group: all but the newest `pending` complete
        for (std::size_t g = 0; g + static_cast<std::size_t>(pending) < groups.size(); ++g) done[g] = true;
      };
      const auto landed = [&](int tile) {
        for (std::size_t g = 0; g < groups.size(); ++g)
          if (groups[g] == tile) return static_cast<bool>(done[g]);
        return false;
      };
      commit(-1);
      for (int s = 0; s < stages - 1; ++s) {
        if (s < n_tiles) stage_holds[static_cast<std::size_t>(s)] = s;
        commit(s < n_tiles ? s : -2);
      }
      wait(stages - 1);
      CHECK(landed(-1));
      for (int j = 0; j < n_tiles; ++j) {
        wait(stages - 2);
        CHECK(landed(j));
        const int next = j + stages - 1;
        if (next < n_tiles) {
          const int held = stage_holds[static_cast<std::size_t>(next % stages)];
          CHECK(held < j);  // only a tile already computed (before this iteration's barrier) is overwritten
          stage_holds[static_cast<std::size_t>(next % stages)] = next;
        }
        commit(next < n_tiles ? next : -2);
        CHECK(stage_holds[static_cast<std::size_t>(j % stages)] == j);
      }
    }
}
