// Decode attention (decode.hpp): hand counts, FlashAttention's split heuristic,
// a tile-by-tile walk on random shapes, the L2 simulation's invariants, and the
// published decode figures as roofline predictions.
#include <catch2/catch.hpp>

#include <algorithm>
#include <random>
#include <set>

#include "hbmscope/animations.hpp"
#include "hbmscope/decode.hpp"
#include "hbmscope/decode_walk.hpp"
#include "hbmscope/device_config.hpp"
#include "hbmscope/error.hpp"
#include "hbmscope/json_report.hpp"
#include "hbmscope/l2_sim.hpp"
#include "hbmscope/plot.hpp"
#include "hbmscope/roofline.hpp"
#include "hbmscope/sweep.hpp"
#include "hbmscope/sweep_config.hpp"

using namespace hbmscope;

namespace {

Shape decode_shape(std::uint64_t batch, std::uint64_t h, std::uint64_t hkv, std::uint64_t l, std::uint64_t d = 128) {
  Shape s;
  s.decode = true;
  s.batch = batch;
  s.heads = h;
  s.kv_heads = hkv;
  s.seq_q = 1;
  s.seq_kv = l;
  s.head_dim = d;
  return s;
}

// Whether one of sequence b's new tokens sees key k, from the definitions:
// token r (0-based, of Nq) sits at position p = L - Nq + r; causal: k <= p;
// window W: p - W < k; chunk C: floor(k / C) == floor(p / C).
bool seen_by_a_new_token(const Shape& s, std::uint64_t len, std::uint64_t k) {
  for (std::uint64_t r = 0; r < s.seq_q; ++r) {
    const std::uint64_t p = len - s.seq_q + r;
    if (!s.causal) return true;
    if (k > p) continue;
    if (s.window != 0 && k + s.window <= p) continue;
    if (s.chunk != 0 && k / s.chunk != p / s.chunk) continue;
    return true;
  }
  return false;
}

// The walk: every CTA of the split kernel and every key or page it reads,
// counted one by one from the definitions (docs/model.md), with no closed form
// and no helper of decode.hpp but context_length. Q of d, O and the partials of
// DV in dtype; each cached token d + DV values (d for a latent KV) in kv_dtype.
DecodeBytes walk(const Shape& s, DecodeVariant v, std::uint64_t splits) {
  const std::uint64_t e = elem_bytes(s.dtype), d = s.head_dim, G = s.heads / s.kv_heads;
  const std::uint64_t dv = s.head_dim_v ? s.head_dim_v : d;
  const std::uint64_t token = (s.latent_kv ? d : d + dv) * elem_bytes(s.kv_dtype.value_or(s.dtype));
  DecodeBytes r;
  r.o = s.batch * s.heads * s.seq_q * dv * e;
  if (v == DecodeVariant::floor) {
    for (std::uint64_t b = 0; b < s.batch; ++b)
      for (std::uint64_t k = 0; k < context_length(s, b); ++k)
        if (seen_by_a_new_token(s, context_length(s, b), k)) r.kv += s.kv_heads * token;
    r.q = s.batch * s.heads * s.seq_q * d * e;
    r.total = r.kv + r.q + r.o;
    return r;
  }
  const bool packed = v != DecodeVariant::split_unpacked;
  const std::uint64_t grid_heads = packed ? s.kv_heads : s.heads;
  const std::uint64_t rows_per_head = packed ? s.seq_q * G : s.seq_q;
  std::uint64_t longest = 0;
  for (std::uint64_t b = 0; b < s.batch; ++b) longest = std::max(longest, context_length(s, b));
  std::uint64_t key_blocks = 0;
  for (std::uint64_t k = 0; k < longest; k += s.block_cols) ++key_blocks;
  std::uint64_t per_split = 0;  // the fewest blocks that give every split its share
  while (per_split * splits < key_blocks) ++per_split;
  for (std::uint64_t b = 0; b < s.batch; ++b)
    for (std::uint64_t hh = 0; hh < grid_heads; ++hh)
      for (std::uint64_t row0 = 0; row0 < rows_per_head; row0 += 64)
        for (std::uint64_t j = 0; j < splits; ++j) {
          const std::uint64_t rows = std::min<std::uint64_t>(64, rows_per_head - row0);
          const std::uint64_t len = context_length(s, b);
          const std::uint64_t begin = j * per_split * s.block_cols;
          const std::uint64_t end = std::min(len, (j + 1) * per_split * s.block_cols);
          if (splits > 1) r.partials += 2 * rows * (4 * dv + 4);  // written, then read by the combine
          std::set<std::uint64_t> pages;
          std::uint64_t keys = 0;
          for (std::uint64_t k = begin; k < end; ++k) {
            if (!seen_by_a_new_token(s, len, k)) continue;  // outside the window or chunk: skipped
            ++keys;
            if (v == DecodeVariant::paged) pages.insert(k / s.page_size);
            else r.kv += token;  // this key's K and V row
          }
          if (keys == 0) continue;
          r.q += rows * d * e;
          r.kv += pages.size() * s.page_size * token;
          r.block_table += pages.size() * 4;
        }
  r.total = r.kv + r.q + r.o + r.partials + r.block_table;
  return r;
}

void require_same(const DecodeBytes& a, const DecodeBytes& b) {
  CHECK(a.kv == b.kv);
  CHECK(a.q == b.q);
  CHECK(a.o == b.o);
  CHECK(a.partials == b.partials);
  CHECK(a.block_table == b.block_table);
  REQUIRE(a.total == b.total);
}

}  // namespace

TEST_CASE("decode: hand counts on the flash-decoding shape", "[decode]") {
  // B = 1, L = 65536, 16 query heads on 2 kv heads, d = 128, bf16.
  const Shape s = decode_shape(1, 16, 2, 65536);
  const DecodeBytes f = decode_bytes(s, DecodeVariant::floor, 1);
  CHECK(f.kv == 2ull * 65536 * 2 * 128 * 2);  // 67,108,864
  CHECK(f.q == 16 * 128 * 2);
  CHECK(f.o == 16 * 128 * 2);
  CHECK(f.total == 67'117'056);
  // 108 SMs (the A100): 2 packed CTAs per split, 216 slots, 512 key blocks.
  CHECK(decode_ctas_per_split(s, DecodeVariant::split) == 2);
  REQUIRE(decode_splits(s, DecodeVariant::split, 108) == 103);
  const DecodeBytes sp = decode_bytes(s, DecodeVariant::split, 103);
  CHECK(sp.kv == f.kv);
  CHECK(sp.partials == 2ull * 103 * 16 * (4 * 128 + 4));  // 1,700,736
  CHECK(sp.q == 103ull * 16 * 128 * 2);                     // 5 blocks a split: all 103 read keys
  CHECK(sp.total == 69'235'584);
  // Unpacked: each kv head read by its 8 query heads.
  const DecodeBytes un = decode_bytes(s, DecodeVariant::split_unpacked, 103);
  CHECK(un.kv == 8 * f.kv);
  // Paged, 16 tokens a page: 640-token splits hold whole pages: 4096 pages, 2 kv-head CTAs each.
  const DecodeBytes pg = decode_bytes(s, DecodeVariant::paged, 103);
  CHECK(pg.kv == f.kv);
  CHECK(pg.block_table == 4096ull * 2 * 4);
  CHECK(pg.total == 69'268'352);
  // One split: no partials, no combine.
  CHECK(decode_bytes(s, DecodeVariant::split, 1).total == f.total);
}

TEST_CASE("decode: odd page sizes and splits that do not divide the length", "[decode]") {
  Shape s = decode_shape(1, 4, 4, 1000);
  s.page_size = 7;
  // 8 key blocks of 128 in 3 splits of 3 blocks: [0,384) [384,768) [768,1000).
  CHECK(blocks_per_split(s, 3) == 3);
  CHECK(split_key_range(s, 3, 0, 2).begin == 768);
  CHECK(split_key_range(s, 3, 0, 2).end == 1000);
  // Pages 0..54 (55), 54..109 (56), 109..142 (34): pages 54 and 109 read twice.
  const DecodeBytes pg = decode_bytes(s, DecodeVariant::paged, 3);
  CHECK(pg.kv == 145ull * 7 * 2 * 4 * 128 * 2);
  CHECK(pg.block_table == 145ull * 4 * 4);
  // 6 splits of 2 blocks: the last two have no keys but still write partials.
  CHECK(split_key_range(s, 6, 0, 4).empty());
  const DecodeBytes sp = decode_bytes(s, DecodeVariant::split, 6);
  CHECK(sp.q == 4ull * 4 * 128 * 2);
  CHECK(sp.partials == 2ull * 6 * 4 * (4 * 128 + 4));
}

TEST_CASE("decode: ragged batches are summed exactly", "[decode]") {
  Shape s = decode_shape(3, 32, 8, 131072);
  s.context_lengths = {512, 4096, 131072};
  validate(s);
  CHECK(total_context(s) == 135680);
  CHECK(ragged(s));
  CHECK(decode_bytes(s, DecodeVariant::floor, 1).kv == 135680ull * 2 * 8 * 128 * 2);
  CHECK(decode_flops(s) == 4ull * 32 * 128 * 135680);
  s.causal = true;
  s.seq_q = 4;
  CHECK(decode_flops(s) == 4ull * 32 * 128 * (4 * 135680 - 3 * 6));  // 6 pairs masked a sequence
}

TEST_CASE("decode: windows, chunks, a KV cache in fp8 and MLA, hand counts", "[decode][shapes]") {
  // Mistral-like: 32 query heads on 8 kv heads, d 128, one token against 10000
  // keys. A window of 4096 reads the last 4096 keys; a chunk of 8192 the 1808 of
  // the current chunk (8192..9999); without either, all 10000.
  Shape s = decode_shape(1, 32, 8, 10000);
  s.causal = true;
  const std::uint64_t token = 2 * 8 * 128 * 2;  // K and V of 8 kv heads, bf16
  CHECK(decode_bytes(s, DecodeVariant::floor, 1).kv == 10000 * token);
  s.window = 4096;
  CHECK(decode_bytes(s, DecodeVariant::floor, 1).kv == 4096 * token);
  CHECK(decode_flops(s) == 4ull * 32 * 128 * 4096);
  // 79 key blocks in 8 splits of 10 blocks (1280 keys): the window 5904..9999
  // starts in split 4: splits 0..3 read nothing (no Q) but write partials.
  const DecodeBytes sp = decode_bytes(s, DecodeVariant::split, 8);
  CHECK(sp.kv == 4096 * token);
  CHECK(sp.q == 4ull * 32 * 128 * 2);
  CHECK(sp.partials == 2ull * 8 * 32 * (4 * 128 + 4));
  CHECK(split_key_range(s, 8, 0, 3).empty());
  CHECK(split_key_range(s, 8, 0, 4) == KeyRange{5904, 6400});
  // Pages of 16: the window's keys 5904..9999 touch pages 369..624; the split
  // boundaries (6400, 7680, 8960) are page starts, so no page is read twice: 256.
  CHECK(decode_bytes(s, DecodeVariant::paged, 8).block_table == 256ull * 8 * 4);
  s.window = 0;
  s.chunk = 8192;
  CHECK(decode_bytes(s, DecodeVariant::floor, 1).kv == 1808 * token);
  CHECK(decode_flops(s) == 4ull * 32 * 128 * 1808);
  // A cache in fp8 under bf16 Q and O: the KV bytes halve, Q and O do not.
  Shape k = decode_shape(4, 32, 8, 4096);
  k.kv_dtype = Dtype::fp8;
  const DecodeBytes kf = decode_bytes(k, DecodeVariant::floor, 1);
  CHECK(kf.kv == 4ull * 4096 * 2 * 8 * 128);
  CHECK(kf.q == 4ull * 32 * 128 * 2);
  CHECK(kf.o == kf.q);
  // DeepSeek-V3's absorbed MLA (FlashMLA): 128 query heads over one latent head
  // of 512 + 64 values, V its first 512; 32K context. The floor reads the latent
  // once; the packed kernel's 128 query rows are two blocks of 64, each reading it.
  Shape m = decode_shape(1, 128, 1, 32768, 576);
  m.head_dim_v = 512;
  m.latent_kv = true;
  validate(m);
  const DecodeBytes mf = decode_bytes(m, DecodeVariant::floor, 1);
  CHECK(mf.kv == 32768ull * 576 * 2);  // 37,748,736
  CHECK(mf.q == 128ull * 576 * 2);
  CHECK(mf.o == 128ull * 512 * 2);
  CHECK(decode_bytes(m, DecodeVariant::split, 1).kv == 2 * mf.kv);
  CHECK(decode_bytes(m, DecodeVariant::split_unpacked, 1).kv == 128 * mf.kv);
  CHECK(decode_flops(m) == 128ull * (2 * 576 + 2 * 512) * 32768);
  CHECK(decode_bytes(m, DecodeVariant::split, 4).partials == 2ull * 4 * 128 * (4 * 512 + 4));
}

TEST_CASE("decode: FlashAttention's split heuristic", "[decode]") {
  CHECK(num_splits_heuristic(212, 264, 1000, 128) == 1);  // 212 >= 0.8 * 264: no split
  CHECK(num_splits_heuristic(211, 264, 1000, 128) > 1);
  CHECK(num_splits_heuristic(2, 216, 512, 128) == 103);
  // 8 CTAs on 264 slots, 64 blocks: 32 splits (0.97 efficiency; 22 gives 0.67,
  // 33 gives the same blocks per split as 32 and is not eligible).
  CHECK(num_splits_heuristic(8, 264, 64, 128) == 32);
  CHECK(num_splits_heuristic(8, 264, 1, 128) == 1);
  // The cap: never more than 128, the slots or the blocks.
  CHECK(num_splits_heuristic(1, 100000, 100000, 128) <= 128);
  // decode_splits: --splits wins; the SM count is doubled (two CTAs an SM).
  Shape s = decode_shape(1, 32, 8, 8192);
  CHECK(decode_splits(s, DecodeVariant::split, 132) ==
        num_splits_heuristic(8, 264, 64, 128));
  CHECK(decode_splits(s, DecodeVariant::split_unpacked, 132) == num_splits_heuristic(32, 264, 64, 128));
  s.splits = 5;
  CHECK(decode_splits(s, DecodeVariant::split, 132) == 5);
  CHECK(decode_splits(s, DecodeVariant::floor, 132) == 1);
  CHECK_THROWS_AS(decode_splits(decode_shape(1, 1, 1, 10), DecodeVariant::split, 0), Error);
}

TEST_CASE("decode: the closed forms equal a key-by-key walk on random shapes", "[decode]") {
  std::mt19937_64 rng(13);
  auto pick = [&](std::uint64_t lo, std::uint64_t hi) { return std::uniform_int_distribution<std::uint64_t>(lo, hi)(rng); };
  int shapes = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const std::uint64_t hkv = pick(1, 3), group = std::vector<std::uint64_t>{1, 2, 4, 8, 16}[pick(0, 4)];
    Shape s = decode_shape(pick(1, 4), hkv * group, hkv, 1, std::vector<std::uint64_t>{64, 96, 128}[pick(0, 2)]);
    s.seq_q = pick(1, 8);
    s.block_cols = std::vector<std::uint64_t>{16, 32, 64, 100, 128}[pick(0, 4)];
    s.page_size = std::vector<std::uint64_t>{1, 3, 7, 16, 33, 128, 256}[pick(0, 6)];
    s.dtype = pick(0, 1) ? Dtype::bf16 : Dtype::fp8;
    if (pick(0, 1)) {
      std::vector<std::uint64_t> lengths;
      for (std::uint64_t b = 0; b < s.batch; ++b) lengths.push_back(pick(s.seq_q, 3000));
      s.context_lengths = lengths;
      s.seq_kv = s.context_lengths.max_kv();
    } else {
      s.seq_kv = pick(s.seq_q, 3000);
    }
    s.causal = pick(0, 1) == 1;
    if (s.causal && pick(0, 1)) (pick(0, 1) ? s.window : s.chunk) = pick(1, 1500);
    if (pick(0, 2) == 0) s.kv_dtype = static_cast<Dtype>(pick(0, 3));
    if (pick(0, 2) == 0) s.head_dim_v = pick(1, 160);
    if (pick(0, 3) == 0) {  // a latent KV (MLA absorbed): one kv head of d values, V its first DV
      s.kv_heads = 1;
      s.heads = std::vector<std::uint64_t>{1, 16, 64, 128}[pick(0, 3)];
      s.latent_kv = true;
      s.head_dim_v = pick(1, s.head_dim);
    }
    validate(s);
    ++shapes;
    const std::uint64_t splits = pick(0, 2) == 0 ? decode_splits(s, DecodeVariant::split, pick(1, 140)) : pick(1, 40);
    INFO(describe(s) << ", " << splits << " splits");
    for (DecodeVariant v : all_decode_variants) {
      INFO(decode_variant_id(v));
      require_same(decode_bytes(s, v, splits), walk(s, v, splits));
    }
    // The L2 simulation: no L2 is the variant's own count; an L2 never goes
    // below the floor nor above no L2, and more L2 never costs more. (Operand
    // shapes other than d, dtype are the simulation's own issue 20.)
    if (s.kv_dtype || s.head_dim_v != 0 || s.latent_kv) continue;
    L2SimConfig c;
    c.sm_count = static_cast<std::uint32_t>(pick(1, 16));
    c.ctas_per_sm = static_cast<std::uint32_t>(pick(1, 2));
    const std::uint64_t floor = decode_bytes(s, DecodeVariant::floor, 1).total;
    for (DecodeVariant v : {DecodeVariant::split, DecodeVariant::split_unpacked, DecodeVariant::paged}) {
      INFO(decode_variant_id(v));
      const std::uint64_t no_l2 = decode_bytes(s, v, splits).total;
      c.l2_bytes = 0;
      CHECK(decode_l2_sim(s, v, splits, c).dram_bytes == no_l2);
      const std::vector<std::uint64_t> caps{0, 1 << 10, 1 << 14, 1 << 17, 1 << 20, 1 << 24, 1ull << 40};
      const auto curve = decode_l2_curve(s, v, splits, c, caps);
      CHECK(curve.front() == no_l2);
      for (std::size_t i = 1; i < curve.size(); ++i) CHECK(curve[i] <= curve[i - 1]);
      CHECK(curve.back() >= floor);
      c.l2_bytes = 1 << 20;
      const auto r = decode_l2_sim(s, v, splits, c);
      CHECK(r.dram_bytes == curve[4]);
      CHECK(r.dram_bytes >= floor);
      CHECK(r.dram_bytes <= no_l2);
      CHECK(r.dram_bytes >= r.min_dram_bytes);
      CHECK(decode_l2_sim_accesses(s, v, splits) >= [&] {
        std::uint64_t n = 0;
        for_each_decode_l2_access(s, v, splits, c, [&](const L2Access& a) { n += a.kind != L2Access::Kind::forget; });
        return n;
      }());
    }
  }
  CHECK(shapes == 300);  // each against the walk in all four variants
}

TEST_CASE("decode: shapes the model refuses", "[decode]") {
  Shape s = decode_shape(2, 8, 8, 100);
  s.seq_q = 9;
  CHECK_THROWS_WITH(validate(s), Catch::Contains("1 to 8 new tokens"));
  s.seq_q = 1;
  s.context_lengths = {100};
  CHECK_THROWS_WITH(validate(s), Catch::Contains("1 lengths for batch 2"));
  s.context_lengths = {100, 50};
  s.seq_kv = 99;
  CHECK_THROWS_WITH(validate(s), Catch::Contains("longest context length"));
  s.seq_kv = 100;
  validate(s);
  s.causal = true;
  s.seq_q = 60;
  CHECK_THROWS(validate(s));
  s = decode_shape(1, 8, 8, 100);
  s.page_size = 0;
  CHECK_THROWS_WITH(validate(s), Catch::Contains("page-size"));
  Shape p;
  p.splits = 4;
  CHECK_THROWS_WITH(validate(p), Catch::Contains("decode rows only"));
  // A count past 2^64 is refused, never wrapped.
  Shape big = decode_shape(1ull << 40, 128, 8, 1ull << 40);
  CHECK_THROWS_WITH(decode_bytes(big, DecodeVariant::floor, 1), Catch::Contains("overflow"));
}

TEST_CASE("decode: rows, sweeps and JSON", "[decode][report]") {
  SweepAxes a;
  a.decode = true;
  a.seq = {1};
  a.head_dim = {128};
  a.heads = {32};
  a.kv_heads = {8};
  a.context_lengths = {{512, 4096, 131072}, {4096, 4096}};
  a.splits = {0, 7};
  a.page_size = {16, 7};
  const auto shapes = expand(a);
  REQUIRE(shapes.size() == 8);
  CHECK(shapes[0].batch == 3);
  CHECK(shapes[0].seq_kv == 131072);
  CHECK(shapes[4].context_lengths.empty());  // equal lengths: a dense batch
  CHECK(shapes[4].batch == 2);
  ModelOptions mo;
  mo.sm_count = 108;
  Report rep;
  rep.rows = model_rows(shapes, mo, {});
  const Row& r = rep.rows[0];
  REQUIRE(r.variants.size() == 4);
  CHECK(r.variants[1].id == "decode_split");
  CHECK(r.variants[1].splits == decode_splits(shapes[0], DecodeVariant::split, 108));
  CHECK(r.decode_sm_count == 108);
  // Through JSON and back: shapes, splits and the bytes by operand.
  const Report back = report_from_json(report_to_json(rep), "test");
  REQUIRE(back.rows.size() == rep.rows.size());
  for (std::size_t i = 0; i < rep.rows.size(); ++i) {
    CHECK(back.rows[i].shape == rep.rows[i].shape);
    for (std::size_t k = 0; k < rep.rows[i].variants.size(); ++k) {
      CHECK(back.rows[i].variants[k].id == rep.rows[i].variants[k].id);
      CHECK(back.rows[i].variants[k].splits == rep.rows[i].variants[k].splits);
      REQUIRE(back.rows[i].variants[k].decode);
      CHECK(back.rows[i].variants[k].decode->kv == rep.rows[i].variants[k].decode->kv);
    }
  }
  // A prefill shape keeps its numbers and its JSON.
  Shape prefill;
  CHECK(report_to_json(Report{"model", {model_row(prefill)}, {}, {}, {}})["rows"][0]["shape"].count("decode") == 0);
  SweepAxes bad;
  bad.splits = {4};
  CHECK_THROWS_WITH(expand(bad), Catch::Contains("decode rows only"));
}

TEST_CASE("decode: published figures as roofline predictions", "[decode][roofline]") {
  // Each published point: its shape, device, time (s) and the KV bandwidth it
  // quotes (bytes/s). Our KV bytes over the time must give that bandwidth (the
  // byte count agrees with theirs), and no point may beat the roofline.
  struct Point {
    const char* device;
    std::uint64_t batch, heads, kv_heads, len, page;
    double seconds, quoted_bw;
  };
  const Point points[] = {
      {"a100-80gb-sxm", 1, 16, 2, 65536, 0, 64.4e-6, 1.04e12},     // flash-decoding
      {"a100-80gb-sxm", 1, 16, 2, 131072, 0, 106.6e-6, 1.26e12},   // flash-decoding
      {"h100-sxm", 16, 32, 32, 4000, 8, 567e-6, 1.85e12},          // FA3 paged, page 8
      {"h200", 32, 32, 8, 4096, 0, 135e-6, 3.99e12},               // GQA decode
      {"h200", 8, 32, 8, 32768, 0, 257e-6, 4.19e12},               // GQA decode
  };
  for (const Point& p : points) {
    Shape s = decode_shape(p.batch, p.heads, p.kv_heads, p.len);
    if (p.page) s.page_size = p.page;
    const DeviceSpec dev = find_device(p.device);
    Report rep;
    ModelOptions mo;
    mo.sm_count = dev.sm_count;
    rep.rows = {model_row(s, mo)};
    add_predictions(rep, dev, 1.0);
    const Row& r = rep.rows[0];
    const auto& floor = *r.variant("decode_floor");
    const auto& kernel = *r.variant(p.page ? "decode_paged" : "decode_split");
    INFO(describe(s) << " on " << dev.name);
    CHECK(static_cast<double>(floor.decode->kv) / p.seconds == Approx(p.quoted_bw).epsilon(0.01));
    const double kv_time = static_cast<double>(floor.decode->kv) / dev.bandwidth;
    CHECK(p.seconds >= kv_time);
    CHECK(p.seconds >= kernel.prediction->seconds);
    CHECK(kernel.prediction->bound == Bound::memory);
    CHECK(floor.intensity < r.ridge_point / 15);  // decode sits far below the ridge
  }
  // FlashAttention 2.0.9, no split, L = 65536: 2.3 ms, 70x the roofline: one
  // split gives 2 CTAs for 108 SMs, which a bandwidth roofline cannot see.
  Shape s = decode_shape(1, 16, 2, 65536);
  s.splits = 1;
  CHECK(static_cast<double>(decode_bytes(s, DecodeVariant::split, 1).total) / find_device("a100-80gb-sxm").bandwidth < 2.3e-3 / 50);
}

TEST_CASE("decode: walk --decode reaches the closed forms", "[decode][animations]") {
  std::mt19937_64 rng(7);
  auto pick = [&](std::uint64_t lo, std::uint64_t hi) { return std::uniform_int_distribution<std::uint64_t>(lo, hi)(rng); };
  for (int trial = 0; trial < 60; ++trial) {
    const std::uint64_t hkv = pick(1, 4);
    Shape s = decode_shape(pick(1, 5), hkv * pick(1, 16), hkv, 1);  // G up to 16: two row blocks
    s.seq_q = pick(1, 8);
    s.block_cols = std::vector<std::uint64_t>{32, 64, 128}[pick(0, 2)];
    s.page_size = pick(1, 300);
    std::vector<std::uint64_t> lengths;
    for (std::uint64_t b = 0; b < s.batch; ++b) lengths.push_back(pick(8, 20000));
    s.context_lengths = lengths;
    s.seq_kv = s.context_lengths.max_kv();
    if (pick(0, 1)) {
      s.causal = true;
      (pick(0, 1) ? s.window : s.chunk) = pick(1, 5000);
    }
    if (pick(0, 2) == 0) s.kv_dtype = Dtype::fp8;
    if (pick(0, 2) == 0) s.head_dim_v = 64;
    const std::uint64_t splits = pick(1, 50);
    for (DecodeVariant v : {DecodeVariant::split, DecodeVariant::split_unpacked, DecodeVariant::paged}) {
      INFO(describe(s) << ", " << decode_variant_id(v) << ", " << splits << " splits");
      std::uint64_t frames = 0, last_total = 0;
      DecodeWalkFrame final_frame;
      decode_walk_frames(s, v, splits, true, [&](const DecodeWalkFrame& f) {
        ++frames;
        CHECK(f.moved.total >= last_total);  // counters only grow
        last_total = f.moved.total;
        if (f.final) final_frame = f;
      });
      CHECK(frames == blocks_per_split(s, splits) + (splits > 1 ? 1 : 0));
      REQUIRE(final_frame.final);
      require_same(final_frame.moved, decode_bytes(s, v, splits));
      CHECK(final_frame.floor_total == decode_bytes(s, DecodeVariant::floor, 1).total);
      const std::string text = render_decode_walk_frame(final_frame, TermStyle{});
      CHECK(text.find("Total (" + std::string(decode_variant_id(v)) + ")") != std::string::npos);
      CHECK(text.find('\x1b') == std::string::npos);
    }
  }
  CHECK_THROWS_AS(decode_walk_frames(decode_shape(1, 1, 1, 10), DecodeVariant::floor, 1, false,
                                     [](const DecodeWalkFrame&) {}),
                  Error);
}

TEST_CASE("decode: configs/sweeps/decode.json", "[decode][sweep_config]") {
  const SweepConfig c = find_sweep_config("decode");
  const LabelledShapes all = expand(c);
  REQUIRE(all.shapes.size() == 2 * 5 * 8);  // 2 models x batch 1..256 (x4) x context 1K..128K (x2)
  CHECK(all.labels.front() == "Llama-3 8B");
  CHECK(all.labels.back() == "Llama-3 70B");
  for (const Shape& s : all.shapes) {
    CHECK(s.decode);
    CHECK(s.seq_q == 1);
    CHECK(s.head_dim == 128);
    CHECK(s.kv_heads == 8);
    CHECK(s.page_size == 16);
  }
  CHECK(all.shapes.front().batch == 1);
  CHECK(all.shapes.front().seq_kv == 1024);
  CHECK(all.shapes.back().batch == 256);
  CHECK(all.shapes.back().seq_kv == 131072);
  // Config errors name the key.
  CHECK_THROWS_WITH(sweep_config_from_json(nlohmann::json::parse(R"({"axes": {"seq": 1, "head_dim": 128, "splits": 4}})"), "t"),
                    Catch::Contains("need \"decode\": true"));
  CHECK_THROWS_WITH(sweep_config_from_json(nlohmann::json::parse(R"({"axes": {"decode": true, "seq": 1, "head_dim": 128, "context_lengths": [[]]}})"), "t"),
                    Catch::Contains("context_lengths[0]"));
  const SweepConfig ragged = sweep_config_from_json(
      nlohmann::json::parse(R"({"axes": {"decode": true, "seq": 1, "head_dim": 128, "context_lengths": [[512, "4K"], [7, 7]]}})"), "t");
  const auto rs = expand(ragged).shapes;
  REQUIRE(rs.size() == 2);
  CHECK(rs[0].context_lengths == std::vector<std::uint64_t>{512, 4096});
  CHECK(rs[1].context_lengths.empty());
  CHECK(rs[1].batch == 2);
}

TEST_CASE("decode: charts plot decode rows against their context", "[decode][plot]") {
  std::vector<Shape> shapes;
  for (std::uint64_t l : {1024, 4096, 16384}) shapes.push_back(decode_shape(1, 32, 8, l));
  Report rep;
  rep.rows = model_rows(shapes, ModelOptions{}, {});
  const std::string script = gnuplot_script(rep, PlotTerminal::dumb);
  CHECK(script.find("context length Nkv") != std::string::npos);
  CHECK(script.find("per decode step") != std::string::npos);
  // One series: the three rows, by context length.
  CHECK(script.find("\n1024 ") != std::string::npos);
  CHECK(script.find("\n16384 ") != std::string::npos);
  CHECK(script.find("$s1") == std::string::npos);
}
