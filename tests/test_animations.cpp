// The frames of `walk` and the steps of `softmax`: what the core hands the
// renderers, and that the renderers draw it (colour only when asked).
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <random>

#include "hbmscope/animations.hpp"
#include "hbmscope/error.hpp"
#include "hbmscope/model.hpp"

using namespace hbmscope;

namespace {

Shape walk_shape(std::uint64_t nq, std::uint64_t nkv, std::uint64_t br, std::uint64_t bc,
                 bool causal, std::uint64_t h = 1, std::uint64_t hkv = 1, std::uint64_t batch = 1) {
  Shape s;
  s.seq_q = nq;
  s.seq_kv = nkv;
  s.head_dim = 64;
  s.block_rows = br;
  s.block_cols = bc;
  s.causal = causal;
  s.heads = h;
  s.kv_heads = hkv;
  s.batch = batch;
  return s;
}

void check_frames(const Shape& s, LoopOrder order) {
  INFO(describe(s) << (order == LoopOrder::fa1 ? " fa1" : " fa2"));
  std::uint64_t frames = 0, last_moved = 0, last_once = 0;
  WalkFrame final_frame;
  walk_frames(s, order, true, [&](const WalkFrame& f) {
    ++frames;
    CHECK(f.moved >= last_moved);
    CHECK(f.once >= last_once);
    last_moved = f.moved;
    last_once = f.once;
    std::uint64_t on_chip = 0;
    for (auto t : f.tiles) on_chip += t == TileState::on_chip;
    CHECK(on_chip == (f.final ? 0u : 1u));
    if (!f.final) {
      CHECK(f.step == frames);
      CHECK(f.tile(f.current.q_block, f.current.k_block) == TileState::on_chip);
    } else {
      final_frame = f;
    }
  });
  CHECK(frames == final_frame.steps + 1);
  CHECK(final_frame.step == final_frame.steps);
  CHECK(final_frame.steps == visited_tiles(s) * s.heads * s.batch);
  CHECK(final_frame.moved == final_frame.moved_total);
  CHECK(final_frame.once == final_frame.once_total);
  CHECK(final_frame.moved_total ==
        (order == LoopOrder::fa2 ? flash_no_l2_bytes(s) : flash1_no_l2_bytes(s)));
  CHECK(final_frame.once_total == floor_bytes(s));
  // The last head's grid: visited tiles done, the rest masked.
  for (std::uint64_t i = 0; i < final_frame.q_blocks; ++i)
    for (std::uint64_t j = 0; j < final_frame.k_blocks; ++j) {
      const KeyRange range = visible_key_blocks(s, i);
      const bool visited = range.begin <= j && j < range.end;
      const TileState t = final_frame.tile(i, j);
      CHECK((visited ? (t == TileState::done_first || t == TileState::done_reread)
                     : t == TileState::masked));
    }
  // Without every_tile, only the final frame, the same.
  std::uint64_t only = 0;
  walk_frames(s, order, false, [&](const WalkFrame& f) {
    ++only;
    CHECK(f.final);
    CHECK(f.moved == final_frame.moved);
    CHECK(f.tiles == final_frame.tiles);
  });
  CHECK(only == 1);
}

}  // namespace

TEST_CASE("walk frames: one tile on chip, counters reach the closed forms", "[walk][frames]") {
  for (LoopOrder order : {LoopOrder::fa2, LoopOrder::fa1})
    for (bool causal : {false, true}) {
      check_frames(walk_shape(1024, 1024, 128, 128, causal), order);
      check_frames(walk_shape(300, 500, 64, 128, causal, 4, 2, 2), order);
      check_frames(walk_shape(500, 200, 128, 64, causal), order);
    }
}

TEST_CASE("walk frames: FA2 marks first reads and re-reads of K, V", "[walk][frames]") {
  const Shape s = walk_shape(512, 512, 128, 128, false);
  walk_frames(s, LoopOrder::fa2, false, [&](const WalkFrame& f) {
    for (std::uint64_t j = 0; j < 4; ++j) {
      CHECK(f.tile(0, j) == TileState::done_first);
      for (std::uint64_t i = 1; i < 4; ++i) CHECK(f.tile(i, j) == TileState::done_reread);
      CHECK(f.streamed_read[j]);
    }
  });
  walk_frames(s, LoopOrder::fa1, false, [&](const WalkFrame& f) {
    for (std::uint64_t i = 0; i < 4; ++i) {
      CHECK(f.tile(i, 0) == TileState::done_first);
      for (std::uint64_t j = 1; j < 4; ++j) CHECK(f.tile(i, j) == TileState::done_reread);
    }
  });
}

TEST_CASE("walk refuses the backward pass and enormous walks", "[walk][frames]") {
  Shape s = walk_shape(1024, 1024, 128, 128, false);
  s.pass = Pass::bwd;
  CHECK_THROWS_WITH(walk_frames(s, LoopOrder::fa2, false, [](const WalkFrame&) {}),
                    Catch::Contains("forward pass only"));
  s = walk_shape(1 << 20, 1 << 20, 16, 16, false);
  CHECK_THROWS_WITH(walk_frames(s, LoopOrder::fa2, false, [](const WalkFrame&) {}),
                    Catch::Contains("hbmscope model"));
}

TEST_CASE("walk frame rendering: grid, legend, counters, colour only when asked", "[walk][render]") {
  const Shape s = walk_shape(1024, 1024, 128, 128, true);
  std::string plain, coloured, mid;
  walk_frames(s, LoopOrder::fa2, true, [&](const WalkFrame& f) {
    if (f.step == 10 && !f.final) mid = render_walk_frame(f, {false});
    if (f.final) {
      plain = render_walk_frame(f, {false});
      coloured = render_walk_frame(f, {true});
    }
  });
  CHECK(plain.find('\x1b') == std::string::npos);
  CHECK(coloured.find("\x1b[") != std::string::npos);
  CHECK_THAT(plain, Catch::Contains("All 36 tiles done"));
  CHECK_THAT(plain, Catch::Contains("flash_no_l2"));
  CHECK_THAT(plain, Catch::Contains("(blank) hidden by the causal mask"));
  CHECK_THAT(plain, Catch::Contains("query block 7   ++ ++ ++ ++ ++ ++ ++ ##\n"));
  CHECK_THAT(plain, Catch::Contains("query block 0   ##\n"));
  CHECK_THAT(mid, Catch::Contains("Tile 10/36: query block 3, key block 3; K_3, V_3 read from HBM"));
  CHECK_THAT(mid, Catch::Contains("@@"));
  // Grids too large for a terminal are left out, counters kept.
  walk_frames(walk_shape(65536, 65536, 128, 128, false), LoopOrder::fa2, false,
              [&](const WalkFrame& f) {
                const std::string r = render_walk_frame(f, {false});
                CHECK_THAT(r, Catch::Contains("does not fit a terminal"));
                CHECK_THAT(r, Catch::Contains("of  8,606,711,808 B  flash_no_l2"));
              });
}

TEST_CASE("softmax trace: the note's example, block by block", "[softmax][trace]") {
  const std::vector<double> x{3, 1, 4, 1, 5, 9, 2, 6};
  const SoftmaxTrace t = trace_online_softmax(x, 3);
  REQUIRE(t.steps.size() == 3);
  CHECK(t.steps[0].begin == 0);
  CHECK(t.steps[0].end == 3);
  CHECK(t.steps[2].end == 8);
  CHECK_FALSE(t.steps[0].rescaled);  // nothing earlier to rescale
  CHECK(t.steps[1].rescaled);        // 9 > 4
  CHECK_FALSE(t.steps[2].rescaled);  // 6 < 9
  CHECK(t.steps[1].update.scale == Approx(std::exp(4.0 - 9.0)));
  // At the rescale every earlier term shrinks by the same factor.
  for (std::size_t i = 0; i < 3; ++i)
    CHECK(t.steps[1].terms[i] == Approx(t.steps[0].terms[i] * t.steps[1].update.scale));
  // l is the sum of the terms so far, after every step.
  for (const auto& st : t.steps) {
    double sum = 0;
    for (double v : st.terms) sum += v;
    CHECK(st.update.l_after == Approx(sum).epsilon(1e-14));
    CHECK(st.terms.size() == st.end);
  }
  CHECK(t.max_difference < 1e-15);
  double total = 0;
  for (double p : t.online) total += p;
  CHECK(total == Approx(1.0));
}

TEST_CASE("softmax trace: random rows agree with the two-pass softmax to ~1e-16", "[softmax][trace]") {
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    const auto x = random_logits(150, seed);
    for (double v : x) {
      CHECK(v >= -4.0);
      CHECK(v < 4.0);
    }
    const SoftmaxTrace t = trace_online_softmax(x, 1 + seed % 7);
    CHECK(t.max_difference < 1e-15);
  }
  CHECK(random_logits(5, 9) == random_logits(5, 9));
  CHECK(random_logits(5, 9) != random_logits(5, 10));
}

TEST_CASE("softmax trace: -inf entries and bad input", "[softmax][trace]") {
  const double ninf = -std::numeric_limits<double>::infinity();
  const SoftmaxTrace t = trace_online_softmax(std::vector<double>{ninf, ninf, 1, ninf}, 2);
  CHECK(t.steps[0].update.l_after == 0);  // a block of only -inf adds nothing
  CHECK(t.online[2] == 1.0);
  CHECK(t.online[0] == 0.0);
  CHECK_THROWS_WITH(trace_online_softmax(std::vector<double>{}, 3), Catch::Contains("no values"));
  CHECK_THROWS_WITH(trace_online_softmax(std::vector<double>{1, 2}, 0), Catch::Contains("--block"));
  CHECK_THROWS_WITH(trace_online_softmax(std::vector<double>{ninf}, 1), Catch::Contains("-inf"));
  CHECK_THROWS_AS(trace_online_softmax(std::vector<double>(201, 0.0), 3), Error);
  CHECK(parse_logit("3") == 3.0);
  CHECK(parse_logit("-2.5e1") == -25.0);
  CHECK(parse_logit("-inf") == ninf);
  for (const char* bad : {"abc", "", "nan", "inf", "0x10", "1,2", "--"})
    CHECK_THROWS_WITH(parse_logit(bad), Catch::Contains("is not a number"));
  CHECK_THROWS_WITH(parse_logit("1e999"), Catch::Contains("out of range"));
}

TEST_CASE("softmax rendering: steps, rescale, bars, result", "[softmax][render]") {
  const SoftmaxTrace t = trace_online_softmax(std::vector<double>{3, 1, 4, 1, 5, 9, 2, 6}, 3);
  const std::string plain = render_softmax(t, {false});
  CHECK(plain.find('\x1b') == std::string::npos);
  CHECK(render_softmax(t, {true}).find("\x1b[") != std::string::npos);
  CHECK_THAT(plain, Catch::Contains("Block 2 of 3: x[3..5] = 1  5  9"));
  CHECK_THAT(plain, Catch::Contains("rescale: l x e^(m - m') = 1.41767 x e^(4 - 9) = 1.41767 x 0.00673795"));
  CHECK_THAT(plain, Catch::Contains("(x 0.00674, was 0.368)"));
  CHECK_THAT(plain, Catch::Contains("████████████████████████████████████████  new"));
  CHECK_THAT(plain, Catch::Contains("two-pass safe softmax"));
  CHECK_THAT(plain, Catch::Contains("Largest difference"));
}
