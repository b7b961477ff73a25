#include <catch2/catch.hpp>

#include "hbmscope/error.hpp"
#include "hbmscope/sweep.hpp"

using namespace hbmscope;
using V = std::vector<std::uint64_t>;

TEST_CASE("integer axes: lists, suffixes and ranges", "[axis]") {
  CHECK(parse_int_axis("4096", "seq") == V{4096});
  CHECK(parse_int_axis("1024,4096", "seq") == V{1024, 4096});
  CHECK(parse_int_axis(" 1K, 4k ,1M", "seq") == V{1024, 4096, 1048576});
  CHECK(parse_int_axis("1024:65536:x2", "seq") == V{1024, 2048, 4096, 8192, 16384, 32768, 65536});
  CHECK(parse_int_axis("1024:5000:x2", "seq") == V{1024, 2048, 4096});
  CHECK(parse_int_axis("1024:4096:+1024", "seq") == V{1024, 2048, 3072, 4096});
  CHECK(parse_int_axis("64:128:32,512", "seq") == V{64, 96, 128, 512});
  CHECK(parse_int_axis("1K:4K:x2", "seq") == V{1024, 2048, 4096});
}

TEST_CASE("integer axes: bad input names the option and the value", "[axis][errors]") {
  auto msg = [](const char* text) {
    try {
      parse_int_axis(text, "seq");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK(msg("0") == "--seq: '0' must be positive");
  CHECK(msg("-5") == "--seq: '-5' is negative; a positive integer is expected");
  CHECK(msg("abc") == "--seq: 'abc' is not a positive integer (examples: 4096, 4K, 1M)");
  CHECK(msg("") == "--seq: '' is an empty list");
  CHECK(msg("1024,,2048") == "--seq: '1024,,2048' has an empty item");
  CHECK(msg("1024:") == "--seq: '1024:' is not a range START:STOP:xFACTOR or START:STOP:+STEP");
  CHECK(msg("4096:1024:x2") == "--seq: '4096:1024:x2' has START greater than STOP");
  CHECK(msg("1:8:x1") == "--seq: '1:8:x1' needs a factor of at least 2");
  CHECK(msg("99999999999999999999999") ==
        "--seq: '99999999999999999999999' is too large for a 64-bit count");
  CHECK(msg("20000000000000000G") == "--seq: '20000000000000000G' is too large for a 64-bit count");
  CHECK(msg("1:100000000:+1") == "--seq: '1:100000000:+1' has too many values (a sweep has at most 4000000 shapes)");
  CHECK(msg("1.5") == "--seq: '1.5' is not a positive integer (examples: 4096, 4K, 1M)");
}

TEST_CASE("dtype axes", "[axis]") {
  CHECK(parse_dtype_axis("bf16,fp8", "dtype") == std::vector<Dtype>{Dtype::bf16, Dtype::fp8});
  CHECK_THROWS_WITH(parse_dtype_axis("int4", "dtype"),
                    "--dtype: 'int4' is not a dtype (fp32, fp16, bf16, fp8)");
}

TEST_CASE("expand: the note's three rows by default", "[sweep]") {
  const auto shapes = expand(note_axes());
  REQUIRE(shapes.size() == 3);
  CHECK(shapes[0].seq_q == 4096);
  CHECK(shapes[0].head_dim == 64);
  CHECK(shapes[1].head_dim == 128);
  CHECK(shapes[2].seq_q == 8192);
  CHECK(shapes[2].seq_kv == 8192);
}

TEST_CASE("expand: cartesian product, kv-heads and seq-kv default to their partners", "[sweep]") {
  SweepAxes a;
  a.seq = {1024, 2048};
  a.head_dim = {64, 128};
  a.heads = {8, 32};
  a.dtype = {Dtype::bf16, Dtype::fp8};
  const auto shapes = expand(a);
  CHECK(shapes.size() == 16);
  for (const auto& s : shapes) {
    CHECK(s.kv_heads == s.heads);
    CHECK(s.seq_kv == s.seq_q);
  }
  a.kv_heads = {8};
  CHECK(expand(a).size() == 16);
  a.kv_heads = {16};  // 8 heads cannot share 16 kv-heads
  CHECK_THROWS_WITH(expand(a), Catch::Contains("multiple of kv-heads"));
}

TEST_CASE("expand refuses an enormous product before building it", "[sweep]") {
  SweepAxes a;
  // Distinct values: repeated ones are dropped before the product is sized.
  for (std::uint64_t v = 1; v <= 10000; ++v) a.seq.push_back(v), a.head_dim.push_back(v);
  CHECK_THROWS_WITH(expand(a), Catch::Contains("sweep too large: 100000000 shapes"));
}

TEST_CASE("expand names a count past 2^64 as a power of two, not a wrapped number", "[sweep]") {
  SweepAxes a;
  for (std::uint64_t v = 1; v <= 65536; ++v) {
    a.seq.push_back(v), a.head_dim.push_back(v), a.batch.push_back(v), a.heads.push_back(v);
  }
  a.dtype = {Dtype::fp32, Dtype::fp16, Dtype::bf16, Dtype::fp8};
  CHECK_THROWS_WITH(expand(a), Catch::StartsWith("sweep too large: about 2^66 shapes (at most 4000000)"));
}

TEST_CASE("expand drops repeated shapes, keeping the first in order", "[sweep]") {
  SweepAxes a;
  a.seq = {64, 128, 64, 256, 128};
  a.dtype = {Dtype::bf16, Dtype::fp8, Dtype::bf16};
  a.causal = {true, true};
  a.pass = {Pass::fwd, Pass::fwd};
  const auto shapes = expand(a);
  REQUIRE(shapes.size() == 6);
  CHECK(shapes[0].seq_q == 64);
  CHECK(shapes[1].seq_q == 128);
  CHECK(shapes[2].seq_q == 256);
  CHECK(shapes[3].dtype == Dtype::fp8);
  for (const auto& s : shapes) CHECK(s.causal);
  SweepAxes p;
  p.seq_head_dim = {{4096, 64}, {4096, 128}, {4096, 64}};
  CHECK(expand(p).size() == 2);
}
