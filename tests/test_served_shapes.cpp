// Attention as served (issue 19): windows, chunks, DV != d, a KV cache in its
// own dtype, a latent KV (MLA) and ragged prefill batches, counted by every
// variant. Hand counts for each feature; the mask's closed forms against counts
// by definition; the tile walk in both loop orders against every closed form on
// random shapes; the backward pass itemised.
#include <catch2/catch.hpp>

#include <random>

#include "hbmscope/compare.hpp"
#include "hbmscope/error.hpp"
#include "hbmscope/json_report.hpp"
#include "hbmscope/mask.hpp"
#include "hbmscope/printers.hpp"
#include "hbmscope/sweep_config.hpp"
#include "hbmscope/model.hpp"
#include "hbmscope/sweep.hpp"
#include "hbmscope/tile_walk.hpp"

using namespace hbmscope;

namespace {

Shape square(std::uint64_t n, std::uint64_t d = 64) {
  Shape s;
  s.seq_q = s.seq_kv = n;
  s.head_dim = d;
  return s;
}

// Keys [begin, end) position p sees, straight from the definitions (not mask.hpp).
std::pair<std::int64_t, std::int64_t> sees(const Shape& s, std::int64_t p, std::int64_t nkv) {
  if (!s.causal) return {0, nkv};
  if (p < 0) return {0, 0};
  std::int64_t b = 0;
  if (s.window != 0) b = std::max<std::int64_t>(0, p - static_cast<std::int64_t>(s.window) + 1);
  if (s.chunk != 0) b = p / static_cast<std::int64_t>(s.chunk) * static_cast<std::int64_t>(s.chunk);
  return {b, p + 1};
}

// Every count of mask.hpp for one sequence, by definition: row by row, key by key.
struct Def {
  std::uint64_t pairs = 0, tiles = 0, columns = 0, rows = 0, first_seen = 0, visited_columns = 0;
};

Def by_definition(const Shape& s, std::uint64_t nq, std::uint64_t nkv) {
  Def r;
  const auto Nq = static_cast<std::int64_t>(nq), Nkv = static_cast<std::int64_t>(nkv);
  const auto Br = static_cast<std::int64_t>(s.block_rows), Bc = static_cast<std::int64_t>(s.block_cols);
  const std::int64_t nkb = (Nkv + Bc - 1) / Bc;
  std::vector<bool> key_seen(nkv), block_visited(static_cast<std::size_t>(nkb));
  for (std::int64_t i = 0; i * Br < Nq; ++i) {
    const std::int64_t r0 = i * Br, r1 = std::min(r0 + Br, Nq);
    std::vector<bool> visit(static_cast<std::size_t>(nkb));
    for (std::int64_t row = r0; row < r1; ++row) {
      const auto [b, e] = sees(s, row + Nkv - Nq, Nkv);
      for (std::int64_t c = b; c < e; ++c) {
        ++r.pairs;
        key_seen[static_cast<std::size_t>(c)] = true;
        visit[static_cast<std::size_t>(c / Bc)] = true;
      }
    }
    for (std::int64_t j = 0; j < nkb; ++j) {
      if (!visit[static_cast<std::size_t>(j)]) continue;
      block_visited[static_cast<std::size_t>(j)] = true;
      ++r.tiles;
      r.columns += static_cast<std::uint64_t>(std::min(Bc, Nkv - j * Bc));
      r.rows += static_cast<std::uint64_t>(r1 - r0);
    }
  }
  while (r.first_seen < nkv && !key_seen[r.first_seen]) ++r.first_seen;
  for (std::int64_t j = 0; j < nkb; ++j)
    if (block_visited[static_cast<std::size_t>(j)]) r.visited_columns += static_cast<std::uint64_t>(std::min(Bc, Nkv - j * Bc));
  // Between the first and the last seen key every key is seen (the rows' ranges touch).
  for (std::uint64_t c = r.first_seen; c < nkv; ++c) REQUIRE(key_seen[c]);
  return r;
}

void check_sums(const Shape& s, std::uint64_t nq, std::uint64_t nkv) {
  INFO(describe(s) << " on " << nq << " x " << nkv);
  const Def d = by_definition(s, nq, nkv);
  CHECK(visible_pairs(s, nq, nkv) == d.pairs);
  CHECK(visited_tiles(s, nq, nkv) == d.tiles);
  CHECK(streamed_key_columns(s, nq, nkv) == d.columns);
  CHECK(streamed_query_rows(s, nq, nkv) == d.rows);
  CHECK(first_seen_key(s, nq, nkv) == d.first_seen);
  CHECK(visited_key_columns(s, nq, nkv) == d.visited_columns);
}

// The backward and forward variants itemised as docs/model.md lists them, with
// the tile counts by definition, summed over the batch's sequences.
struct Itemised {
  std::uint64_t standard = 0, flash = 0, floor = 0, flash1 = 0, standard_bwd = 0, flash_bwd = 0, floor_bwd = 0;
  std::uint64_t flops_pairs = 0;
};

Itemised itemise(const Shape& s) {
  Itemised t;
  const std::uint64_t e = elem_bytes(s.dtype), ek = elem_bytes(key_value_dtype(s)), H = s.heads, Hkv = s.kv_heads,
                      d = s.head_dim, dv = value_head_dim(s), dkv = s.latent_kv ? d : d + dv;
  for (std::uint64_t b = 0; b < s.batch; ++b) {
    const std::uint64_t nq = ragged_prefill(s) ? s.seq_lens[b].q : s.seq_q;
    const std::uint64_t nkv = ragged_prefill(s) ? s.seq_lens[b].kv : s.seq_kv;
    const Def df = by_definition(s, nq, nkv);
    const std::uint64_t seen = nkv - df.first_seen;
    const std::uint64_t gqa = H != Hkv ? ek * (H + Hkv) * nkv * (d + dv) : 0;
    t.standard += e * H * nq * (d + dv) + ek * H * nkv * (d + dv) + 4 * e * H * nq * nkv;
    t.flash += e * H * nq * (d + dv) + ek * H * dkv * df.columns;
    t.floor += e * H * nq * (d + dv) + ek * Hkv * dkv * seen;
    t.flash1 += H * (e * nq * dv + 8 * nq + ek * dkv * df.visited_columns + df.rows * (e * (d + 2 * dv) + 16));
    t.standard_bwd += 7 * e * H * nq * nkv + 2 * e * H * nq * (d + dv) + 2 * ek * H * nkv * (d + dv) + gqa;
    t.flash_bwd += H * (2 * e * nq * dv + 4 * nq + 4 * nq * d) + ek * H * (d + dv) * (df.visited_columns + nkv) +
                   H * df.rows * (e * (d + dv) + 8 + 8 * d) + H * (4 * nq * d + e * nq * d) + gqa;
    t.floor_bwd += 2 * e * H * nq * (d + dv) + ek * Hkv * (d + dv) * (seen + nkv) + 4 * H * nq;
    t.flops_pairs += df.pairs;
  }
  return t;
}

void check_everything(const Shape& s) {
  INFO(describe(s));
  const Itemised t = itemise(s);
  CHECK(standard_bytes(s) == t.standard);
  CHECK(flash_no_l2_bytes(s) == t.flash);
  CHECK(floor_bytes(s) == t.floor);
  CHECK(flash1_no_l2_bytes(s) == t.flash1);
  CHECK(batch_visible_pairs(s) == t.flops_pairs);
  CHECK(attention_flops(s) == t.flops_pairs * (2 * s.head_dim + 2 * value_head_dim(s)) * s.heads);
  const WalkTotals fa2 = walk_totals(s, LoopOrder::fa2);
  const WalkTotals fa1 = walk_totals(s, LoopOrder::fa1);
  CHECK(fa2.moved == t.flash);
  CHECK(fa2.once == t.floor);
  CHECK(fa1.moved == t.flash1);
  CHECK(fa1.once == t.floor);
  CHECK(fa2.tiles == fa1.tiles);
  CHECK(fa2.tiles == s.heads * batch_visited_tiles(s));
  if (s.latent_kv) return;  // an inference form: no backward
  Shape b = s;
  b.pass = Pass::bwd;
  CHECK(standard_bwd_bytes(b) == t.standard_bwd);
  CHECK(flash_bwd_no_l2_bytes(b) == t.flash_bwd);
  CHECK(floor_bwd_bytes(b) == t.floor_bwd);
  CHECK(pass_flops(b) == t.flops_pairs * (6 * s.head_dim + 4 * value_head_dim(s)) * s.heads);
  b.pass = Pass::fwdbwd;
  const ModelBytes m = evaluate(b);
  CHECK(m.flash_no_l2 == t.flash + forward_lse_bytes(b) + t.flash_bwd);
  CHECK(m.flops == t.flops_pairs * (8 * s.head_dim + 6 * value_head_dim(s)) * s.heads);
}

}  // namespace

TEST_CASE("served shapes: a window, hand counts", "[shapes][window]") {
  // 512 x 512, W = 128, blocks of 128: block 0 visits key block 0, block i >= 1
  // visits i - 1 and i (its first row's window starts at 128i - 127): T = 7.
  Shape s = square(512);
  s.causal = true;
  s.window = 128;
  CHECK(visited_tiles(s) == 7);
  CHECK(streamed_key_columns(s) == 896);
  CHECK(streamed_query_rows(s) == 896);
  CHECK(flash_no_l2_bytes(s) == 2 * 512 * 128 + 2 * 128 * 896);  // 360,448
  CHECK(floor_bytes(s) == 262144);                               // every key seen: the causal floor
  // Pairs: min(p + 1, 128) over p = 0..511: 128 x 129 / 2 + 384 x 128 = 57,408.
  CHECK(visible_pairs_per_head(s) == 57408);
  CHECK(attention_flops(s) == 4 * 64 * 57408);
  // 128 queries against 1024 keys, W = 256: positions 896..1023 see keys from
  // 641 on; key block 5 (640..767) onwards: 3 tiles, 384 columns; the floor reads
  // the 383 keys 641..1023, the keys before the first query's window never.
  Shape p = s;
  p.seq_q = 128;
  p.seq_kv = 1024;
  p.window = 256;
  CHECK(visited_tiles(p) == 3);
  CHECK(streamed_key_columns(p) == 384);
  CHECK(first_seen_key(p, 128, 1024) == 641);
  CHECK(floor_bytes(p) == 2 * 128 * 128 + 2 * 128 * 383);   // 130,816
  CHECK(flash_no_l2_bytes(p) == 2 * 128 * 128 + 2 * 128 * 384);  // 131,072
  CHECK(visible_pairs_per_head(p) == 128 * 256);
  // A window as long as the context is the causal mask.
  Shape w = s;
  w.window = 512;
  Shape c = s;
  c.window = 0;
  CHECK(evaluate(w).flash_no_l2 == evaluate(c).flash_no_l2);
  CHECK(evaluate(w).flops == evaluate(c).flops);
}

TEST_CASE("served shapes: a chunk that does not divide the blocks, hand counts", "[shapes][chunk]") {
  // 1000 x 1000, C = 300, blocks of 128. Query block i visits key blocks from
  // its first row's chunk start to its last row: {0}, {0,1}, {0,1,2}, {2,3},
  // {2,3,4}, {4,5}, {4,5,6}, {4..7}: T = 20; the last key block has 104 columns
  // (one visit) and the last query block 104 rows (4 tiles).
  Shape s = square(1000);
  s.causal = true;
  s.chunk = 300;
  CHECK(visited_tiles(s) == 20);
  CHECK(streamed_key_columns(s) == 20 * 128 - 24);
  CHECK(streamed_query_rows(s) == 20 * 128 - 24 * 4);
  // Pairs: (p mod 300) + 1 over three whole chunks and 100 positions of the fourth.
  CHECK(visible_pairs_per_head(s) == 3 * 45150 + 5050);
  check_sums(s, 1000, 1000);
  // The chunk a decode-like tail of 8 queries starts in: keys 900.. of 1000.
  CHECK(first_seen_key(s, 8, 1000) == 900);
}

TEST_CASE("served shapes: DV, kv dtype and a latent KV, hand counts", "[shapes][operands]") {
  // MLA prefill (not absorbed): Q, K of 192, V, O of 128; 256 x 256, bf16.
  Shape s = square(256, 192);
  s.head_dim_v = 128;
  CHECK(standard_bytes(s) == 2 * (256 * 320 + 256 * 320 + 4 * 65536));  // 851,968
  CHECK(flash_no_l2_bytes(s) == 2 * 256 * 320 + 2 * 320 * 512);        // C = 2 x 256
  CHECK(floor_bytes(s) == 2 * 256 * 320 * 2);
  CHECK(attention_flops(s) == (2 * 192 + 2 * 128) * 65536);
  // An fp8 KV under bf16 Q and O: K and V at one byte, the rest at two.
  Shape k = square(256);
  k.kv_dtype = Dtype::fp8;
  CHECK(standard_bytes(k) == 2 * 256 * 128 + 256 * 128 + 4 * 2 * 65536);  // 622,592
  CHECK(flash_no_l2_bytes(k) == 2 * 256 * 128 + 128 * 512);
  CHECK(floor_bytes(k) == 2 * 256 * 128 + 256 * 128);
  // A latent KV (absorbed MLA): one head of 576 values is K, its first 512 V;
  // 16 query heads read it as one tile per key block.
  Shape m = square(256, 576);
  m.head_dim_v = 512;
  m.heads = 16;
  m.kv_heads = 1;
  m.latent_kv = true;
  CHECK(flash_no_l2_bytes(m) == 2 * 16 * 256 * 1088 + 2 * 16 * 576 * 512);  // 18,350,080
  CHECK(floor_bytes(m) == 2 * 16 * 256 * 1088 + 2 * 576 * 256);              // 9,207,808
  // Standard attention's two products read K (576) and V (the first 512) each.
  CHECK(standard_bytes(m) == 2 * (16 * 256 * 1088 + 16 * 256 * 1088 + 4 * 16 * 65536));
  m.pass = Pass::bwd;
  CHECK_THROWS_WITH(validate(m), Catch::Contains("pass fwd only"));
}

TEST_CASE("served shapes: a ragged prefill batch is the sum of its sequences", "[shapes][ragged]") {
  Shape s = square(512);
  s.causal = true;
  s.batch = 3;
  s.seq_lens = SeqList(std::vector<SeqLen>{{256, 256}, {128, 512}, {256, 256}});
  s.seq_q = 256;  // the longest sequence's queries and keys
  validate(s);
  Shape a = square(256);
  a.causal = true;
  a.batch = 2;
  Shape b = a;
  b.batch = 1;
  b.seq_q = 128;
  b.seq_kv = 512;
  for (Pass p : {Pass::fwd, Pass::bwd, Pass::fwdbwd}) {
    s.pass = a.pass = b.pass = p;
    const ModelBytes r = evaluate(s), x = evaluate(a), y = evaluate(b);
    CHECK(r.standard == x.standard + y.standard);
    CHECK(r.flash_no_l2 == x.flash_no_l2 + y.flash_no_l2);
    CHECK(r.floor == x.floor + y.floor);
    CHECK(r.flops == x.flops + y.flops);
    CHECK(standard_resident_bytes(s) == standard_resident_bytes(a) + standard_resident_bytes(b));
  }
  s.pass = a.pass = b.pass = Pass::fwd;
  CHECK(flash1_no_l2_bytes(s) == flash1_no_l2_bytes(a) + flash1_no_l2_bytes(b));
  CHECK(batch_visited_tiles(s) == 2 * 3 + 4);  // 256 x 256: 3 tiles each; 128 x 512: 4
  check_everything(s);
  // A ragged batch of a million sequences costs one closed form per distinct item.
  std::vector<SeqLen> many(1'000'000, SeqLen{4096, 4096});
  many[7] = {100, 1 << 20};
  Shape big = square(4096, 128);
  big.causal = true;
  big.window = 4096;
  big.batch = many.size();
  big.seq_kv = 1 << 20;
  big.seq_lens = SeqList(std::move(many));
  CHECK(big.seq_lens.groups().size() == 2);
  CHECK(floor_bytes(big) > 0);
}

TEST_CASE("served shapes: the mask's closed forms equal counts by definition", "[shapes][mask]") {
  std::mt19937_64 rng(20261202);
  auto pick = [&](std::uint64_t lo, std::uint64_t hi) { return std::uniform_int_distribution<std::uint64_t>(lo, hi)(rng); };
  int n = 0;
  for (; n < 1500; ++n) {
    Shape s;
    s.block_rows = pick(1, 70);
    s.block_cols = pick(1, 70);
    s.causal = pick(0, 5) != 0;
    if (s.causal) {
      const auto kind = pick(0, 2);
      if (kind == 1) s.window = pick(1, 300);
      if (kind == 2) s.chunk = pick(1, 300);
    }
    check_sums(s, pick(1, 400), pick(1, 400));
  }
  // Chunks neither a multiple nor a divisor of Bc, long enough to take each
  // of the three sums (by chunk, by key block, by residue), and the divisible ones.
  struct Case { std::uint64_t nq, nkv, br, bc, chunk; };
  const Case cases[] = {
      {5000, 5000, 128, 128, 1000},  // a few chunks
      {2000, 2000, 64, 200, 3},      // many chunks, few key blocks
      {5000, 5000, 8, 6, 4},         // many of both, bp = 3
      {4000, 4100, 16, 10, 7},       // many of both, bp = 10
      {3000, 3000, 128, 64, 256},    // C a multiple of Bc
      {3000, 3000, 32, 96, 32},      // C a divisor of Bc
      {777, 3333, 50, 30, 45},       // Nq < Nkv
      {3333, 777, 50, 30, 45},       // Nq > Nkv
  };
  for (const Case& c : cases) {
    Shape s;
    s.causal = true;
    s.block_rows = c.br;
    s.block_cols = c.bc;
    s.chunk = c.chunk;
    check_sums(s, c.nq, c.nkv);
    ++n;
  }
  CHECK(n == 1508);
}

TEST_CASE("served shapes: the tile walk equals every closed form on random shapes", "[shapes][walk]") {
  std::mt19937_64 rng(19);
  auto pick = [&](std::uint64_t lo, std::uint64_t hi) { return std::uniform_int_distribution<std::uint64_t>(lo, hi)(rng); };
  for (int t = 0; t < 400; ++t) {
    Shape s;
    const bool latent = pick(0, 7) == 0;
    s.kv_heads = latent ? 1 : pick(1, 3);
    s.heads = s.kv_heads * pick(1, 4);
    s.head_dim = pick(1, 96);
    if (latent) {
      s.latent_kv = true;
      s.head_dim_v = pick(1, s.head_dim);
    } else if (pick(0, 1)) {
      s.head_dim_v = pick(1, 96);
    }
    s.dtype = static_cast<Dtype>(pick(0, 3));
    if (pick(0, 1)) s.kv_dtype = static_cast<Dtype>(pick(0, 3));
    s.block_rows = pick(1, 90);
    s.block_cols = pick(1, 90);
    s.causal = pick(0, 4) != 0;
    if (s.causal) {
      const auto kind = pick(0, 2);
      if (kind == 1) s.window = pick(1, 400);
      if (kind == 2) s.chunk = pick(1, 400);
    }
    if (pick(0, 2) == 0) {  // a ragged batch of L and Q:KV items
      std::vector<SeqLen> items;
      for (std::uint64_t b = 0, n = pick(1, 4); b < n; ++b) {
        const std::uint64_t kv = pick(1, 500);
        items.push_back({pick(0, 1) ? kv : pick(1, kv), kv});
      }
      s.seq_lens = SeqList(std::move(items));
      s.batch = s.seq_lens.size();
      s.seq_q = s.seq_lens.max_q();
      s.seq_kv = s.seq_lens.max_kv();
    } else {
      s.batch = pick(1, 2);
      s.seq_q = pick(1, 500);
      s.seq_kv = pick(1, 500);
    }
    validate(s);
    check_everything(s);
  }
}

TEST_CASE("served shapes: refused combinations", "[shapes][validate]") {
  Shape s = square(100);
  s.seq_lens = SeqList(std::vector<SeqLen>{{100, 100}, {50, 40}});
  s.batch = 2;
  CHECK_THROWS_WITH(validate(s), Catch::Contains("more new tokens than keys"));
  s.seq_lens = SeqList(std::vector<SeqLen>{{100, 100}});
  CHECK_THROWS_WITH(validate(s), Catch::Contains("1 sequences for batch 2"));
  Shape m = square(100, 576);
  m.latent_kv = true;
  m.heads = 8;
  m.kv_heads = 8;
  m.head_dim_v = 512;
  CHECK_THROWS_WITH(validate(m), Catch::Contains("one KV head"));
  // A count past 2^64 is refused, never wrapped, with a window too.
  Shape big = square(std::uint64_t{1} << 40, 128);
  big.causal = true;
  big.window = std::uint64_t{1} << 39;
  CHECK_THROWS_WITH(flash_no_l2_bytes(big), Catch::Contains("overflows"));
}

TEST_CASE("served shapes: a decode sweep drops repeated values of every axis, as prefill does", "[shapes][sweep]") {
  SweepAxes a;
  a.decode = true;
  a.seq = {1};
  a.seq_kv = {4096, 4096};
  a.head_dim = {128};
  a.heads = {32};
  a.kv_heads = {8};
  a.causal = {true};
  a.window = {1024, 1024, 0};
  a.kv_dtype = {Dtype::fp8, Dtype::fp8};
  const auto shapes = expand(a);
  REQUIRE(shapes.size() == 2);  // window 1024 and none, once each
  CHECK(shape_count(a) >= shapes.size());
  CHECK(!(shapes[0] == shapes[1]));
}

TEST_CASE("served shapes: sweep axes, their product and what it leaves out", "[shapes][sweep]") {
  SweepAxes a;
  a.seq = {4096};
  a.head_dim = {128};
  a.causal = {false, true};
  a.window = {0, 1024};
  a.chunk = {0, 2048};
  a.head_dim_v = {0, 128, 64};  // 128 = d: the default, given twice
  a.kv_dtype = {std::nullopt, Dtype::bf16, Dtype::fp8};  // bf16 = dtype: the default again
  const auto shapes = expand(a);
  // Not causal: no mask (2 DV x 2 kv dtypes); causal: none, window, chunk (x 4).
  REQUIRE(shapes.size() == 4 + 3 * 4);
  CHECK(shape_count(a) >= shapes.size());
  for (std::size_t i = 0; i < shapes.size(); ++i)
    for (std::size_t k = 0; k < i; ++k) REQUIRE(!(shapes[i] == shapes[k]));  // no shape twice
  CHECK(shapes[0].head_dim_v == 0);
  CHECK(!shapes[0].kv_dtype);
  CHECK(shapes[1].kv_dtype == Dtype::fp8);
  CHECK(shapes[2].head_dim_v == 64);
  CHECK(shapes[8].chunk == 2048);  // window outer, chunk inner: (0, 0), (0, 2048), (1024, 0)
  CHECK(shapes[12].window == 1024);
  // A window and a chunk on every shape, or a window without any causal row, are refused.
  SweepAxes b;
  b.seq = {4096};
  b.head_dim = {64};
  b.causal = {true};
  b.window = {1024};
  b.chunk = {2048};
  CHECK_THROWS_WITH(expand(b), Catch::Contains("cannot be combined"));
  b.chunk = {0};
  b.causal = {false};
  CHECK_THROWS_WITH(expand(b), Catch::Contains("causal"));
  // MLA: a latent KV takes one kv head unless told otherwise; decode rows too.
  SweepAxes m;
  m.decode = true;
  m.seq = {1};
  m.seq_kv = {32768};
  m.heads = {128};
  m.head_dim = {576};
  m.head_dim_v = {512};
  m.latent_kv = true;
  const auto ms = expand(m);
  REQUIRE(ms.size() == 1);
  CHECK(ms[0].kv_heads == 1);
  CHECK(ms[0].latent_kv);
  // Ragged prefill batches with Q:KV items.
  SweepAxes r;
  r.head_dim = {64, 128};
  r.causal = {true};
  r.seq_lens = {SeqList(parse_seq_len_items("512,1K:8K,4K", "seq-lens")), SeqList(parse_seq_len_items("2K,2K", "seq-lens"))};
  const auto rs = expand(r);
  REQUIRE(rs.size() == 4);
  CHECK(rs[0].batch == 3);
  CHECK(rs[0].seq_q == 4096);
  CHECK(rs[0].seq_kv == 8192);
  CHECK(rs[0].seq_lens[1] == SeqLen{1024, 8192});
  CHECK(rs[2].seq_lens.empty());  // equal sequences: a dense batch
  CHECK(rs[2].batch == 2);
  CHECK_THROWS_WITH(parse_seq_len_items("8K:1K", "seq-lens"), Catch::Contains("more new tokens"));
  CHECK_THROWS_AS(parse_seq_len_items("1K:x", "seq-lens"), UsageError);
  CHECK(parse_int_axis_or_none("0,4K,none", "window") == std::vector<std::uint64_t>{0, 4096, 0});
  CHECK(parse_kv_dtype_axis("same,fp8", "kv-dtype") == std::vector<std::optional<Dtype>>{std::nullopt, Dtype::fp8});
}

TEST_CASE("served shapes: sweep config keys", "[shapes][sweep_config]") {
  const auto cfg = sweep_config_from_json(nlohmann::json::parse(R"({"groups": [
      {"label": "Mistral 7B", "seq": "4K,32K", "head_dim": 128, "heads": 32, "kv_heads": 8, "causal": true,
       "window": [0, 4096], "kv_dtype": ["same", "fp8"]},
      {"label": "Llama 4 Scout", "seq": "32K", "head_dim": 128, "heads": 40, "kv_heads": 8, "causal": true, "chunk": 8192},
      {"label": "DeepSeek-V3 MLA", "decode": true, "seq": 1, "seq_kv": "32K", "heads": 128, "head_dim": 576,
       "head_dim_v": 512, "latent_kv": true},
      {"label": "packed", "seq_lens": [[512, "4K", "1K:8K"]], "head_dim": 128, "causal": true}]})"),
                                          "s.json");
  const LabelledShapes all = expand(cfg);
  REQUIRE(all.shapes.size() == 8 + 1 + 1 + 1);
  CHECK(all.shapes[3].window == 4096);
  CHECK(all.shapes[3].kv_dtype == Dtype::fp8);
  CHECK(all.shapes[8].chunk == 8192);
  CHECK(all.shapes[9].latent_kv);
  CHECK(all.shapes[9].kv_heads == 1);
  CHECK(all.shapes[10].seq_lens.size() == 3);
  const auto error_of = [](const char* text) {
    try {
      (void)sweep_config_from_json(nlohmann::json::parse(text), "s.json");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  CHECK_THAT(error_of(R"({"axes": {"seq": 1, "head_dim": 64, "window": -4}})"), Catch::Contains("axes.window"));
  CHECK_THAT(error_of(R"({"axes": {"seq": 1, "head_dim": 64, "kv_dtype": "fp4"}})"), Catch::Contains("kv_dtype"));
  CHECK_THAT(error_of(R"({"axes": {"seq_lens": [["9:3"]], "head_dim": 64}})"), Catch::Contains("seq_lens[0][0]"));
  CHECK_THAT(error_of(R"({"axes": {"seq_lens": [[1]], "seq": 4, "head_dim": 64}})"), Catch::Contains("drop"));
  CHECK_THAT(error_of(R"({"axes": {"seq": 1, "head_dim": 64, "latent_kv": 1}})"), Catch::Contains("true or false"));
}

TEST_CASE("served shapes: JSON, CSV and tables carry the new shape fields", "[shapes][report]") {
  SweepAxes a;
  a.seq = {2048};
  a.head_dim = {192};
  a.causal = {true};
  a.window = {0, 512};
  a.head_dim_v = {128};
  a.kv_dtype = {Dtype::fp8};
  Report rep;
  rep.rows = model_rows(expand(a));
  SweepAxes r;
  r.head_dim = {64};
  r.causal = {true};
  r.seq_lens = {SeqList(parse_seq_len_items("512,1K:8K", "seq-lens"))};
  for (Row& row : model_rows(expand(r))) rep.rows.push_back(std::move(row));
  const nlohmann::json j = report_to_json(rep);
  CHECK(j["schema"] == "hbmscope.report/3");
  CHECK(j["rows"][0]["shape"].count("window") == 0);  // written only where set
  CHECK(j["rows"][1]["shape"]["window"] == 512);
  CHECK(j["rows"][1]["shape"]["head_dim_v"] == 128);
  CHECK(j["rows"][1]["shape"]["kv_dtype"] == "fp8");
  CHECK(j["rows"][1]["shape"]["kv_elem_bytes"] == 1);
  CHECK(j["rows"][2]["shape"]["seq_lens"] == nlohmann::json::parse("[[512, 512], [1024, 8192]]"));
  CHECK(j["rows"][2]["shape"]["query_tokens"] == 1536);
  const Report back = report_from_json(j, "t.json");
  REQUIRE(back.rows.size() == 3);
  for (std::size_t i = 0; i < 3; ++i) {
    CHECK(back.rows[i].shape == rep.rows[i].shape);
    CHECK(back.rows[i].variants[1].bytes == rep.rows[i].variants[1].bytes);
  }
  // A /2 report's rows read as the same shapes (every new field absent).
  nlohmann::json old = report_to_json(Report{"model", {model_row(Shape{})}, {}, {}, {}});
  old["schema"] = "hbmscope.report/2";
  CHECK(report_from_json(old, "old.json").rows[0].shape == Shape{});
  // Wrong types are named.
  nlohmann::json bad = j;
  bad["rows"][2]["shape"]["seq_lens"][1] = "1K:8K";
  CHECK_THROWS_WITH(report_from_json(bad, "b.json"), Catch::Contains("rows[2].shape.seq_lens[1]"));
  bad = j;
  bad["rows"][1]["shape"]["kv_dtype"] = "int4";
  CHECK_THROWS_WITH(report_from_json(bad, "b.json"), Catch::Contains("rows[1].shape.kv_dtype"));
  // CSV: the served columns, last.
  PrintOptions csv;
  csv.format = Format::csv;
  const std::string c = render(rep, csv);
  CHECK_THAT(c, Catch::Contains(",window,chunk,head_dim_v,kv_dtype,kv_elem_bytes,latent_kv,query_tokens,seq_lens\n"));
  CHECK_THAT(c, Catch::Contains(",512,0,128,fp8,1,false,,\n"));
  CHECK_THAT(c, Catch::Contains(",0,0,64,bf16,2,false,1536,512;1024:8192\n"));
  // Tables: a column for what differs, the title for what does not.
  const std::string t = render(rep, {});
  CHECK_THAT(t, Catch::Contains("Mask"));
  CHECK_THAT(t, Catch::Contains("window 512"));
  CHECK_THAT(t, Catch::Contains("2 seqs, q 512..1024 of kv 512..8192 (Σq 1536)"));
  Report one;
  one.rows = {rep.rows[1]};
  CHECK_THAT(render(one, {}), Catch::Contains("causal, window 512, V and O of head dim 128, K and V in FP8)"));
}

TEST_CASE("served shapes: compare matches on the new fields", "[shapes][compare]") {
  SweepAxes a;
  a.seq = {4096, 8192};
  a.head_dim = {128};
  a.causal = {true};
  Report plain;
  plain.rows = model_rows(expand(a));
  a.kv_dtype = {Dtype::fp8};
  Report fp8;
  fp8.rows = model_rows(expand(a));
  const nlohmann::json ja = report_to_json(plain), jb = report_to_json(fp8);
  // Different shapes: nothing matches, and the hint names the field.
  const Comparison none = compare_reports(ja, "a.json", jb, "b.json", {});
  CHECK(none.rows.empty());
  CHECK_THAT(none.hint, Catch::Contains("kv_dtype"));
  CompareOptions o;
  o.ignore = {"kv_dtype"};
  const Comparison c = compare_reports(ja, "a.json", jb, "b.json", o);
  REQUIRE(c.rows.size() == 2);
  CHECK(c.rows[0].verdict == "FASTER");  // an fp8 cache moves fewer bytes
  bool named = false;
  for (const auto& d : c.differences) named |= d.find("kv_dtype:  vs fp8") != std::string::npos;
  CHECK(named);
  o.ignore.clear();
  o.match = {"seq", "window"};
  CHECK(compare_reports(ja, "a.json", jb, "b.json", o).rows.size() == 2);
  // A /2 report of the same plain shapes matches a /3 one row for row.
  nlohmann::json old = ja;
  old["schema"] = "hbmscope.report/2";
  CHECK(compare_reports(old, "old.json", ja, "new.json", {}).rows.size() == 2);
}
