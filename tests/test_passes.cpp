// The backward pass, FlashAttention-1's loop order and --pass: closed forms
// against hand-derived figures, against counts by definition, and against the
// tile walk in both loop orders.
#include <catch2/catch.hpp>
#include <random>
#include <sstream>

#include "hbmscope/error.hpp"
#include "hbmscope/json_report.hpp"
#include "hbmscope/model.hpp"
#include "hbmscope/printers.hpp"
#include "hbmscope/sweep.hpp"
#include "hbmscope/tile_walk.hpp"

using namespace hbmscope;

namespace {

Shape make(std::uint64_t nq, std::uint64_t nkv, std::uint64_t d, std::uint64_t br,
           std::uint64_t bc, Dtype dt, bool causal, std::uint64_t h = 1, std::uint64_t hkv = 1,
           std::uint64_t batch = 1) {
  Shape s;
  s.seq_q = nq;
  s.seq_kv = nkv;
  s.head_dim = d;
  s.block_rows = br;
  s.block_cols = bc;
  s.dtype = dt;
  s.causal = causal;
  s.heads = h;
  s.kv_heads = hkv;
  s.batch = batch;
  return s;
}

// Tiles and streamed query rows by the definition: query block i visits key
// block j iff some row r of i sees some key c of j (c <= r + Nkv - Nq when causal).
struct ByDefinition {
  std::uint64_t tiles = 0, rows = 0;
};

ByDefinition by_definition(const Shape& s) {
  ByDefinition out;
  const std::int64_t off = causal_offset(s);
  for (std::uint64_t i = 0; i * s.block_rows < s.seq_q; ++i) {
    const std::uint64_t r0 = i * s.block_rows, r1 = std::min(r0 + s.block_rows, s.seq_q);
    for (std::uint64_t j = 0; j * s.block_cols < s.seq_kv; ++j) {
      const std::uint64_t c0 = j * s.block_cols, c1 = std::min(c0 + s.block_cols, s.seq_kv);
      bool visited = !s.causal;
      for (std::uint64_t r = r0; !visited && r < r1; ++r)
        for (std::uint64_t c = c0; !visited && c < c1; ++c)
          visited = static_cast<std::int64_t>(c) <= static_cast<std::int64_t>(r) + off;
      if (visited) {
        ++out.tiles;
        out.rows += r1 - r0;
      }
    }
  }
  return out;
}

// FlashAttention-2 backward, itemised as docs/model.md lists it, with R counted
// by definition rather than in closed form.
std::uint64_t flash_bwd_by_definition(const Shape& s) {
  const std::uint64_t e = elem_bytes(s.dtype), H = s.heads, Hkv = s.kv_heads, Nq = s.seq_q,
                      Nkv = s.seq_kv, d = s.head_dim;
  const std::uint64_t R = by_definition(s).rows;
  std::uint64_t b = 0;
  b += 2 * e * H * Nq * d + 4 * H * Nq + 4 * H * Nq * d;  // preprocessing
  b += 4 * e * H * Nkv * d;                               // K, V in; dK, dV out
  b += H * R * (2 * e * d + 8 + 8 * d);                   // Q, dO, LSE, D, dQ accumulator
  b += 4 * H * Nq * d + e * H * Nq * d;                   // dQ conversion
  if (H != Hkv) b += e * (2 * H * Nkv * d + 2 * Hkv * Nkv * d);
  return s.batch * b;
}

std::uint64_t flash1_by_definition(const Shape& s) {
  const std::uint64_t e = elem_bytes(s.dtype), H = s.heads, d = s.head_dim;
  const std::uint64_t R = by_definition(s).rows;
  return s.batch * H * (e * s.seq_q * d + 8 * s.seq_q + 2 * e * s.seq_kv * d + R * (3 * e * d + 16));
}

void check_against_definition(const Shape& s) {
  INFO(describe(s));
  const ByDefinition def = by_definition(s);
  CHECK(visited_tiles(s) == def.tiles);
  CHECK(streamed_query_rows(s) == def.rows);
  CHECK(flash_bwd_no_l2_bytes(s) == flash_bwd_by_definition(s));
  CHECK(flash1_no_l2_bytes(s) == flash1_by_definition(s));
  // Both loop orders walk to their closed forms; both have the same floor.
  const WalkTotals fa2 = walk_totals(s, LoopOrder::fa2);
  const WalkTotals fa1 = walk_totals(s, LoopOrder::fa1);
  CHECK(fa2.moved == flash_no_l2_bytes(s));
  CHECK(fa2.once == floor_bytes(s));
  CHECK(fa1.moved == flash1_no_l2_bytes(s));
  CHECK(fa1.once == floor_bytes(s));
  CHECK(fa1.tiles == s.batch * s.heads * def.tiles);
  CHECK(fa2.tiles == fa1.tiles);
}

}  // namespace

// Shape A: one head, Nq = Nkv = 256, d = 64, Br = Bc = 128, fp16 (e = 2), no mask.
// 2 x 2 = 4 tiles, R = 2 key blocks x 256 rows = 512.
//   standard_bwd = e(7 Nq Nkv + 4 Nq d + 4 Nkv d) = 2 (458752 + 65536 + 65536) = 1179648
//   flash_bwd    = preprocessing 2e Nq d + 4 Nq + 4 Nq d     = 65536 + 1024 + 65536
//                + K, V read and dK, dV written 4e Nkv d     = 131072
//                + R (2ed + 8 + 8d) = 512 x 776              = 397312
//                + conversion 4 Nq d + e Nq d                = 98304
//                                                            = 758784
//   floor_bwd    = 4e Nq d + 4e Nkv d + 4 Nq = 131072 + 131072 + 1024 = 263168
//   flash1       = e Nq d + 8 Nq + 2e Nkv d + R (3ed + 16)
//                = 32768 + 2048 + 65536 + 512 x 400 = 305152
// Causal: tiles (0,0), (1,0), (1,1): T = 3, R = 384, so flash_bwd and flash1 lose
// one tile of 128 rows: 758784 - 128 x 776 = 659456 and 305152 - 128 x 400 = 253952.
TEST_CASE("backward and FA1 counts: hand-derived figures, square", "[model][bwd][fa1]") {
  Shape s = make(256, 256, 64, 128, 128, Dtype::fp16, false);
  CHECK(visited_tiles(s) == 4);
  CHECK(streamed_query_rows(s) == 512);
  CHECK(standard_bwd_bytes(s) == 1179648);
  CHECK(flash_bwd_no_l2_bytes(s) == 758784);
  CHECK(floor_bwd_bytes(s) == 263168);
  CHECK(flash1_no_l2_bytes(s) == 305152);
  s.causal = true;
  CHECK(visited_tiles(s) == 3);
  CHECK(streamed_query_rows(s) == 384);
  CHECK(standard_bwd_bytes(s) == 1179648);  // S, P, dP, dS are materialised in full
  CHECK(flash_bwd_no_l2_bytes(s) == 659456);
  CHECK(floor_bwd_bytes(s) == 263168);
  CHECK(flash1_no_l2_bytes(s) == 253952);
}

// Shape C: batch 2, H = 4, Hkv = 2, Nq = 200, Nkv = 300, d = 16, Br = 64, Bc = 128,
// fp32 (e = 4), causal (offset Nkv - Nq = 100).
// Query blocks of 64, 64, 64, 8 rows end at rows 63, 127, 191, 199; they see keys up
// to 163, 227, 291, 299, i.e. key blocks 0..1, 0..1, 0..2, 0..2: T = 10 tiles and
// R = 64x2 + 64x2 + 64x3 + 8x3 = 472 rows.
// Per batch element:
//   standard_bwd = e (7 H Nq Nkv + 4 H Nq d + 4 H Nkv d + 2 H Nkv d + 2 Hkv Nkv d)
//                = 4 (1680000 + 51200 + 76800 + 38400 + 19200)     = 7462400
//   flash_bwd    = 102400 + 3200 + 51200                (preprocessing)
//                + 307200                               (K, V, dK, dV per query head)
//                + H R (2ed + 8 + 8d) = 4 x 472 x 264 = 498432
//                + 51200 + 51200                        (conversion)
//                + e (2 H Nkv d + 2 Hkv Nkv d) = 230400 (GQA group sum)
//                                                                  = 1295232
//   floor_bwd    = 4e H Nq d + 4e Hkv Nkv d + 4 H Nq = 204800 + 153600 + 3200 = 361600
//   flash1       = e H Nq d + 8 H Nq + 2e H Nkv d + 3e d H R + 16 H R
//                = 51200 + 6400 + 153600 + 362496 + 30208          = 603904
TEST_CASE("backward and FA1 counts: hand-derived figures, ragged causal GQA", "[model][bwd][fa1]") {
  const Shape s = make(200, 300, 16, 64, 128, Dtype::fp32, true, 4, 2, 2);
  CHECK(visited_tiles(s) == 10);
  CHECK(streamed_query_rows(s) == 472);
  CHECK(standard_bwd_bytes(s) == 2 * 7462400);
  CHECK(flash_bwd_no_l2_bytes(s) == 2 * 1295232);
  CHECK(floor_bwd_bytes(s) == 2 * 361600);
  CHECK(flash1_no_l2_bytes(s) == 2 * 603904);
}

TEST_CASE("the note's 4096 x 64 shape: backward and FA1 figures", "[model][bwd][fa1][note]") {
  Shape s = make(4096, 4096, 64, 128, 128, Dtype::bf16, false);
  // R = 32 x 4096 = 131072; FA1: 524288 + 32768 + 1048576 + 131072 x 400.
  CHECK(flash1_no_l2_bytes(s) == 54034432);
  // 2 (4 N d + 4 N d + 7 N^2)
  CHECK(standard_bwd_bytes(s) == 239075328);
  // 1048576 + 16384 + 1048576 + 2097152 + 131072 x 776 + 1572864
  CHECK(flash_bwd_no_l2_bytes(s) == 107495424);
  CHECK(floor_bwd_bytes(s) == 4210688);
  s.pass = Pass::bwd;
  const ModelBytes b = evaluate(s);
  CHECK(b.standard == 239075328);
  CHECK(b.flash_no_l2 == 107495424);
  CHECK(b.floor == 4210688);
  CHECK(format_bytes(b.standard, Units::decimal) == "239 MB");
  CHECK(format_bytes(b.flash_no_l2, Units::decimal) == "107 MB");
  CHECK(format_bytes(b.floor, Units::decimal) == "4.21 MB");
  CHECK(format_bytes(flash1_no_l2_bytes(s), Units::decimal) == "54 MB");
}

TEST_CASE("closed forms equal the counts by definition and both walks, grid", "[model][walk][fa1]") {
  for (std::uint64_t nq : {1u, 64u, 100u, 128u, 129u, 300u})
    for (std::uint64_t nkv : {1u, 100u, 128u, 257u})
      for (std::uint64_t br : {16u, 64u, 128u})
        for (std::uint64_t bc : {32u, 128u})
          for (bool causal : {false, true})
            for (auto [h, hkv] : {std::pair<std::uint64_t, std::uint64_t>{1, 1}, {4, 4}, {8, 2}})
              check_against_definition(make(nq, nkv, 32, br, bc, Dtype::bf16, causal, h, hkv, 2));
}

TEST_CASE("closed forms equal the counts by definition and both walks, random", "[model][walk][fa1]") {
  std::mt19937_64 rng(606);
  auto pick = [&](std::uint64_t lo, std::uint64_t hi) {
    return std::uniform_int_distribution<std::uint64_t>(lo, hi)(rng);
  };
  for (int t = 0; t < 300; ++t) {
    const std::uint64_t hkv = pick(1, 3);
    const Shape s = make(pick(1, 400), pick(1, 400), pick(1, 128), pick(1, 100), pick(1, 100),
                         static_cast<Dtype>(pick(0, 3)), pick(0, 1) == 1, hkv * pick(1, 3), hkv,
                         pick(1, 2));
    check_against_definition(s);
  }
}

TEST_CASE("FA1 order: key blocks outer, the query blocks that see each inner", "[walk][fa1]") {
  // 300 x 300, blocks of 128, causal: query block i visits key blocks 0..i.
  const Shape s = make(300, 300, 64, 128, 128, Dtype::bf16, true);
  std::vector<std::pair<std::uint64_t, std::uint64_t>> tiles;
  std::vector<std::uint64_t> kv_loads;
  int inits = 0, q_first = 0;
  for_each_tile_event(s, LoopOrder::fa1, [&](const TileEvent& ev) {
    if (ev.kind == TileEventKind::tile) {
      tiles.emplace_back(ev.q_block, ev.k_block);
      q_first += ev.q_first_visit;
    }
    if (ev.kind == TileEventKind::load_kv) kv_loads.push_back(ev.k_block);
    if (ev.kind == TileEventKind::init_o) {
      CHECK(kv_loads.empty());  // initialisation precedes the loops
      ++inits;
    }
    CHECK(ev.kind != TileEventKind::load_q);
    CHECK(ev.kind != TileEventKind::store_o);
  });
  const std::vector<std::pair<std::uint64_t, std::uint64_t>> expected{
      {0, 0}, {1, 0}, {2, 0}, {1, 1}, {2, 1}, {2, 2}};
  CHECK(tiles == expected);
  CHECK(kv_loads == std::vector<std::uint64_t>{0, 1, 2});
  CHECK(inits == 3);
  CHECK(q_first == 3);
}

TEST_CASE("FA1 moves more than FA2 on the note's shapes", "[model][fa1]") {
  for (auto [n, d] : {std::pair<std::uint64_t, std::uint64_t>{4096, 64}, {4096, 128}, {8192, 128}}) {
    const Shape s = make(n, n, d, 128, 128, Dtype::bf16, false);
    CHECK(flash1_no_l2_bytes(s) > flash_no_l2_bytes(s));
    CHECK(flash1_no_l2_bytes(s) < standard_bytes(s));
  }
}

TEST_CASE("pass FLOPs: backward 2.5x, forward + backward 3.5x, halved when causal", "[model][bwd]") {
  Shape s = make(1000, 3000, 96, 64, 32, Dtype::bf16, false, 8, 2, 3);
  const std::uint64_t fwd = attention_flops(s);
  CHECK(pass_flops(s) == fwd);
  s.pass = Pass::bwd;
  CHECK(pass_flops(s) * 2 == fwd * 5);
  s.pass = Pass::fwdbwd;
  CHECK(pass_flops(s) * 2 == fwd * 7);
  s.causal = true;
  const std::uint64_t causal_fwd = attention_flops(s);
  CHECK(pass_flops(s) * 2 == causal_fwd * 7);
  s.pass = Pass::bwd;
  CHECK(pass_flops(s) * 2 == causal_fwd * 5);
}

TEST_CASE("fwdbwd is the sum of the two passes", "[model][bwd]") {
  std::mt19937_64 rng(11);
  auto pick = [&](std::uint64_t lo, std::uint64_t hi) {
    return std::uniform_int_distribution<std::uint64_t>(lo, hi)(rng);
  };
  for (int t = 0; t < 50; ++t) {
    Shape s = make(pick(1, 5000), pick(1, 5000), pick(1, 256), pick(1, 256), pick(1, 256),
                   Dtype::bf16, pick(0, 1) == 1);
    const ModelBytes f = evaluate(s);
    s.pass = Pass::bwd;
    const ModelBytes b = evaluate(s);
    s.pass = Pass::fwdbwd;
    const ModelBytes fb = evaluate(s);
    // The forward's log-sum-exp write (fp32 per row and head), which FlashAttention's
    // backward and the backward floor read; standard attention's backward reads P.
    const std::uint64_t lse = 4 * s.heads * s.seq_q * s.batch;
    CHECK(forward_lse_bytes(s) == lse);
    CHECK(fb.standard == f.standard + b.standard);
    CHECK(fb.flash_no_l2 == f.flash_no_l2 + lse + b.flash_no_l2);
    CHECK(fb.floor == f.floor + lse + b.floor);
    CHECK(b.floor <= b.flash_no_l2);
  }
}

TEST_CASE("backward counts that overflow are refused", "[model][bwd][overflow]") {
  Shape s = make(std::uint64_t{1} << 32, std::uint64_t{1} << 32, 128, 128, 128, Dtype::bf16, false);
  CHECK_THROWS_WITH(standard_bwd_bytes(s), Catch::Contains("overflows"));
  CHECK_THROWS_WITH(flash_bwd_no_l2_bytes(s), Catch::Contains("overflows"));
  CHECK_THROWS_WITH(flash1_no_l2_bytes(s), Catch::Contains("overflows"));
  CHECK_NOTHROW(floor_bwd_bytes(s));
  s.pass = Pass::fwdbwd;
  CHECK_THROWS_AS(model_row(s), Error);
}

TEST_CASE("pass: parsing, sweep axis, rows and reports", "[report][bwd]") {
  CHECK(parse_pass_axis("fwd,bwd, fwdbwd", "pass") ==
        std::vector<Pass>{Pass::fwd, Pass::bwd, Pass::fwdbwd});
  CHECK_THROWS_WITH(parse_pass_axis("forward", "pass"), Catch::Contains("'forward' is not a pass"));
  CHECK_THROWS_WITH(parse_pass_axis("", "pass"), Catch::Contains("empty"));

  SweepAxes a;
  a.seq = {4096};
  a.head_dim = {64};
  a.pass = {Pass::fwd, Pass::bwd};
  const auto shapes = expand(a);
  REQUIRE(shapes.size() == 2);
  CHECK(shapes[0].pass == Pass::fwd);
  CHECK(shapes[1].pass == Pass::bwd);
  CHECK_THAT(describe(shapes[1]), Catch::EndsWith(", backward)"));

  Report r;
  r.rows = model_rows(shapes, ModelOptions{true}, {});
  REQUIRE(r.rows[0].variant("flash1_no_l2"));
  CHECK(r.rows[0].variant("flash1_no_l2")->bytes == 54034432);
  CHECK(r.rows[1].variant("flash1_no_l2") == nullptr);  // forward pass only
  CHECK(r.rows[1].variant("flash_no_l2")->bytes == 107495424);
  CHECK(r.rows[1].flops == 10737418240);

  const auto j = nlohmann::json::parse(render(r, {Format::json}));
  CHECK(j["rows"][0]["shape"]["pass"] == "fwd");
  CHECK(j["rows"][1]["shape"]["pass"] == "bwd");
  CHECK(j["rows"][0]["bytes"]["flash1_no_l2"] == 54034432);
  CHECK_FALSE(j["rows"][1]["bytes"].contains("flash1_no_l2"));

  const std::string table = render(r, {});
  CHECK_THAT(table, Catch::StartsWith("One head, by pass (model, BF16, blocks of 128)"));
  CHECK_THAT(table, Catch::Contains("Pass"));
  CHECK_THAT(table, Catch::Contains("flash1_no_l2"));  // split past 120 columns: variant ids
  CHECK_THAT(render(r, {Format::table, Units::decimal, true}), Catch::Contains("FlashAttention-1 order, no L2 reuse"));

  std::istringstream csv(render(r, {Format::csv}));
  std::string header, first;
  std::getline(csv, header);
  std::getline(csv, first);
  CHECK_THAT(header, Catch::StartsWith("batch,heads,kv_heads,seq_q,seq_kv,head_dim,dtype,elem_bytes,"
                                       "block_rows,block_cols,causal,pass,flops,"));
  CHECK_THAT(first, Catch::StartsWith("1,1,1,4096,4096,64,bf16,2,128,128,false,fwd,"));

  // Forward-only reports keep their columns and title.
  Report fwd;
  fwd.rows = model_rows(expand(note_axes()));
  CHECK_THAT(render(fwd, {}), Catch::StartsWith("One head, forward pass (model"));
  CHECK(render(fwd, {Format::csv}).find(",pass,") == std::string::npos);
  Report bwd;
  a.pass = {Pass::bwd};
  bwd.rows = model_rows(expand(a));
  CHECK_THAT(render(bwd, {}), Catch::StartsWith("One head, backward pass (model"));
}

TEST_CASE("causal FLOPs count the visible (query, key) pairs exactly", "[model][causal][flops]") {
  // Nq 4096 > Nkv 1024: the first 3072 rows see nothing, then 1, 2, ..., 1024 keys.
  Shape s = make(4096, 1024, 64, 128, 128, Dtype::bf16, true);
  CHECK(visible_pairs_per_head(s) == 524800);
  CHECK(attention_flops(s) == 4 * 64 * std::uint64_t{524800});
  // Nq = Nkv = N: N(N+1)/2, half of N^2 plus the diagonal's N/2.
  s = make(4096, 4096, 64, 128, 128, Dtype::bf16, true);
  CHECK(visible_pairs_per_head(s) == 4096 * 4097 / 2);
  CHECK(attention_flops(s) == std::uint64_t{4096} * 4096 * 64 * 2 + 4096 * 64 * 2);
  // The definition, row by row, on small and ragged shapes.
  for (std::uint64_t nq : {1u, 2u, 7u, 64u, 100u, 129u})
    for (std::uint64_t nkv : {1u, 3u, 64u, 99u, 130u}) {
      std::uint64_t pairs = 0;
      for (std::uint64_t r = 0; r < nq; ++r)
        for (std::uint64_t c = 0; c < nkv; ++c) pairs += c + nq <= r + nkv;  // c <= r + Nkv - Nq
      s = make(nq, nkv, 8, 16, 16, Dtype::bf16, true);
      CHECK(visible_pairs_per_head(s) == pairs);
      s.causal = false;
      CHECK(visible_pairs_per_head(s) == nq * nkv);
    }
}

TEST_CASE("FLOPs overflow is checked on the final count", "[model][overflow][flops]") {
  // 1M tokens, d 256, batch 16384, causal: 4 * 256 * 16384 * 2^20 (2^20 + 1) / 2 = 2^63 + 2^43,
  // which fits although 4 * Nq * Nkv * d * B = 2^64 does not.
  Shape s = make(std::uint64_t{1} << 20, std::uint64_t{1} << 20, 256, 128, 128, Dtype::bf16, true);
  s.batch = 16384;
  CHECK(attention_flops(s) == (std::uint64_t{1} << 63) + (std::uint64_t{1} << 43));
  s.causal = false;
  CHECK_THROWS_WITH(attention_flops(s), Catch::Contains("overflows"));
  s.causal = true;
  s.pass = Pass::bwd;  // 2.5x: over 2^64
  CHECK_THROWS_WITH(pass_flops(s), Catch::Contains("overflows"));
}
