// A lane-by-lane CPU emulation of decode_split_kernel and
// decode_combine_kernel (src/cuda/decode_attention.cuh) step for step: the
// tile loads through the same address maps (src/cuda/decode_layout.hpp;
// contiguous or through the block table, tokens past the split zero-filled and
// never read), ldmatrix and mma.m16n8k16 from the PTX ISA's fragment layouts,
// each warp's key slice and online softmax, the merge of the warps through
// shared memory, partial O/LSE at their offsets, and the combine. It is a
// second copy of the kernels' algorithm, checked against the CPU reference on
// ragged batches, GQA groups of 1 to 16, 1 to 8 new tokens, causal, sliding
// windows and chunks (only the keys some new token sees are read), splits that
// do not divide the length (and empty ones), odd page sizes. The host side
// (plan, index maps, reference, pipeline) is test_decode_plan.cpp's.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "decode_layout.hpp"
#include "decode_shape.hpp"
#include "hbmscope/decode.hpp"
#include "hbmscope/decode_plan.hpp"
#include "hbmscope/decode_reference.hpp"
#include "hbmscope/reference.hpp"

using namespace hbmscope;
using testing::decode_shape;
using flash::RowCol;

namespace {

constexpr float neg_inf = -std::numeric_limits<float>::infinity();
float bf16(float x) { return round_to_dtype(x, Dtype::bf16); }
std::size_t z(long long i) { return static_cast<std::size_t>(i); }

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
            const decode::PageSlot ps = decode::page_slot(token, static_cast<int>(plan_.page_size));
            const long long slot = static_cast<long long>(batch) * static_cast<long long>(plan_.max_pages) +
                                   ps.page_index;
            const int page = p_.table.at(z(slot));
            REQUIRE(page >= 0);  // never a slot past the sequence's pages
            row = decode::paged_slot_row(page, kv_head, ps.slot, static_cast<int>(s_.kv_heads),
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

TEST_CASE("a token's page and slot from one division, and stepped on, equal page_of and paged_row, past 2^31 too", "[decode]") {
  std::mt19937_64 rng(7);
  for (int page_size : {1, 7, 16, 64, 256, 1000}) {
    std::vector<long long> tokens = {0, 1, page_size - 1LL, page_size, 0x7fffffffLL, 0x80000000LL, (1LL << 40) + 3};
    for (int i = 0; i < 200; ++i) tokens.push_back(static_cast<long long>(rng() % (1ull << 34)));
    for (long long t : tokens) {
      const decode::PageSlot ps = decode::page_slot(t, page_size);
      CHECK(ps.page_index == decode::page_of(t, page_size));
      CHECK(ps.slot == t % page_size);
      CHECK(decode::paged_slot_row(5, 3, ps.slot, 8, page_size, 128) == decode::paged_row(5, 3, t, 8, page_size, 128));
      // The kernel's stepping from a tile's first token to its next rows (8 or 16 apart).
      for (int by : {8, 16}) {
        const decode::PageSlot next = decode::advance(ps, by, page_size);
        CHECK(next.page_index == decode::page_of(t + by, page_size));
        CHECK(next.slot == (t + by) % page_size);
      }
    }
  }
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
