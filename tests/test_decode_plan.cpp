// The split-KV decode kernels' host side without a GPU: their plan (grid,
// instantiation, shared memory, footprint, block table), the validation
// shape, their index maps (src/cuda/decode_layout.hpp) against the model's
// split ranges (decode.hpp) and the reference's visibility (windows and
// chunks included), the CPU decode reference against the prefill one, and the
// cp.async pipeline's schedule. The kernels themselves are emulated lane by
// lane in test_decode_emulation.cpp.
#include <catch2/catch.hpp>
#include <cmath>
#include <random>
#include <set>
#include <vector>

#include "decode_layout.hpp"
#include "decode_shape.hpp"
#include "hbmscope/decode.hpp"
#include "hbmscope/decode_plan.hpp"
#include "hbmscope/decode_reference.hpp"
#include "hbmscope/error.hpp"
#include "hbmscope/reference.hpp"

using namespace hbmscope;
using testing::decode_shape;

namespace {
float bf16(float x) { return round_to_dtype(x, Dtype::bf16); }
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

TEST_CASE("decode kernel with a window: its splits share the window, the model's cut the context", "[decode][plan]") {
  // docs/cuda.md ("Bytes against the model"): 8 sequences of 32K keys, W = 4096, 32/8 heads,
  // d 128, the heuristic's 4 splits. FlashAttention-2 (the model) cuts 4 splits of 8192 keys
  // over the whole context: only the last holds the window, so Q is read once; the kernel cuts
  // the window's 4096 keys into 4 splits of 1024, each reading Q. Partials are written by every
  // split in both.
  Shape s = decode_shape(8, 32, 8, 1, {32768}, 128, true);
  s.window = 4096;
  const std::uint64_t splits = 4;
  REQUIRE(decode_splits(s, DecodeVariant::split, 132) == splits);
  const DecodeBytes model = decode_bytes(s, DecodeVariant::split, splits);
  const std::uint64_t t = decode_split_tokens(s, splits);
  CHECK(t == 1024);
  const KeyRange read = decode_read_keys(s, s.seq_kv);
  CHECK((read.begin == 28672 && read.end == 32768));
  std::uint64_t kernel_splits_read = 0, model_splits_read = 0;
  for (std::uint64_t j = 0; j < splits; ++j) {
    const decode::Range r = decode::split_range(static_cast<int>(j), static_cast<long long>(t),
                                                static_cast<long long>(read.begin), static_cast<long long>(read.end));
    kernel_splits_read += r.end > r.begin;
    model_splits_read += !split_key_range(s, splits, 0, j).empty();
  }
  CHECK(kernel_splits_read == 4);
  CHECK(model_splits_read == 1);
  const std::uint64_t q_once = 8ull * 32 * 128 * 2;  // every query head's Q of one sequence batch, bf16
  CHECK(model.q == q_once * model_splits_read);
  CHECK(q_once * kernel_splits_read - model.q == 196608);
  CHECK(model.partials == splits * 8 * 32 * (4 * 128 + 4) * 2);  // written and read by every split in both
  CHECK(model.total == 135405568);  // the kernel's 196,608 B more is 0.145 % of it
}
