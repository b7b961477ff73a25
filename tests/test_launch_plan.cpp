// Host-side decisions of the CUDA backend (src/cuda/launch_plan.cpp).
#include <catch2/catch.hpp>
#include <set>

#include "hbmscope/error.hpp"
#include "hbmscope/launch_plan.hpp"
#include "hbmscope/model.hpp"

using namespace hbmscope;

namespace {
Shape shape(std::uint64_t nq, std::uint64_t nkv, std::uint64_t d, std::uint64_t batch = 1, std::uint64_t heads = 1,
            std::uint64_t kv_heads = 1, bool causal = false) {
  Shape s;
  s.seq_q = nq;
  s.seq_kv = nkv;
  s.head_dim = d;
  s.batch = batch;
  s.heads = heads;
  s.kv_heads = kv_heads;
  s.causal = causal;
  return s;
}
}  // namespace

TEST_CASE("flash instantiations: defaults, choice, refusal", "[plan][flash]") {
  CHECK(default_flash_config(64) == FlashConfig{64, 128, 128});
  CHECK(default_flash_config(128) == FlashConfig{128, 128, 64});
  CHECK_THROWS_AS(default_flash_config(96), Error);
  CHECK(choose_flash_config(128, std::nullopt, std::nullopt) == FlashConfig{128, 128, 64});
  CHECK(choose_flash_config(64, 64, 64) == FlashConfig{64, 64, 64});
  CHECK(choose_flash_config(128, std::nullopt, 128) == FlashConfig{128, 128, 128});
  CHECK_THROWS_WITH(choose_flash_config(64, 256, 64),
                    Catch::Contains("256x64 are not compiled for head dim 64 (have 64x64, 128x64, 128x128)"));
  CHECK(flash_supports(64));
  CHECK(flash_supports(128));
  CHECK_FALSE(flash_supports(80));
  std::set<std::tuple<int, int, int>> unique;
  for (const auto& c : flash_configs()) {
    unique.insert({c.head_dim, c.block_rows, c.block_cols});
    CHECK(c.block_rows % 16 == 0);
    CHECK(c.block_cols % 16 == 0);
    CHECK(flash_threads(c) <= 1024);
    CHECK(flash_smem_bytes(c) <= 227u * 1024);  // sm_90's per-block opt-in limit
  }
  CHECK(unique.size() == flash_configs().size());
  CHECK(describe(FlashConfig{128, 128, 64}) == "d=128 Br=128 Bc=64");
}

TEST_CASE("flash shared memory and threads", "[plan][flash]") {
  CHECK(flash_threads({64, 128, 128}) == 256);
  CHECK(flash_threads({128, 64, 64}) == 128);
  CHECK(flash_smem_bytes({64, 128, 128}) == (128 * 64 + 4 * 128 * 64) * 2);   // 80 KiB
  CHECK(flash_smem_bytes({128, 128, 64}) == (128 * 128 + 4 * 64 * 128) * 2);  // 96 KiB
}

TEST_CASE("flash launch geometry: query block fastest", "[plan][flash]") {
  const auto g = flash_geometry(shape(1000, 1000, 128, 3, 8, 2), FlashConfig{128, 128, 64});
  CHECK(g.grid_x == 8);  // ceil(1000 / 128)
  CHECK(g.grid_y == 8);
  CHECK(g.grid_z == 3);
  CHECK(g.threads == 256);
  CHECK(g.smem_bytes == 96u * 1024);
  CHECK_THROWS_WITH(flash_geometry(shape(64, 64, 64, 70000), FlashConfig{64, 128, 128}),
                    Catch::Contains("batch 70000 exceeds"));
  CHECK_THROWS_WITH(flash_geometry(shape(64, 64, 64, 1, 70000, 70000), FlashConfig{64, 128, 128}),
                    Catch::Contains("70000 heads"));
  CHECK_THROWS_AS(flash_geometry(shape(64, 64, 128), FlashConfig{64, 128, 128}), Error);
  CHECK_THROWS_WITH(flash_geometry(shape(3'000'000'000ull, 64, 64), FlashConfig{64, 128, 128}),
                    Catch::Contains("32-bit"));
}

TEST_CASE("score rows are padded to 16 bytes", "[plan][standard]") {
  CHECK(score_row_stride(shape(10, 4096, 64)) == 4096);
  CHECK(score_row_stride(shape(10, 1000, 64)) == 1000);
  CHECK(score_row_stride(shape(10, 1001, 64)) == 1008);
  CHECK(score_row_stride(shape(10, 1, 64)) == 8);
}

TEST_CASE("softmax plan: S read once up to 16384 columns", "[plan][standard]") {
  auto p = softmax_plan(shape(4096, 4096, 64, 2, 3));
  CHECK(p.rows == 2 * 3 * 4096);
  CHECK(p.single_pass);
  CHECK(p.threads == 256);
  CHECK(p.chunks_per_thread == 2);
  CHECK(p.threads * p.chunks_per_thread * 8 >= 4096);
  p = softmax_plan(shape(1, 8, 64));
  CHECK((p.threads == 32 && p.chunks_per_thread == 1));
  p = softmax_plan(shape(1, 1000, 64));
  CHECK((p.threads == 128 && p.chunks_per_thread == 1));
  p = softmax_plan(shape(1, 8192, 64));
  CHECK((p.threads == 256 && p.chunks_per_thread == 4 && p.single_pass));
  p = softmax_plan(shape(1, 16384, 64));
  CHECK((p.threads == 256 && p.chunks_per_thread == 8 && p.single_pass));
  p = softmax_plan(shape(1, 16385, 64));
  CHECK_FALSE(p.single_pass);
  CHECK(p.threads == 1024);
  for (std::uint64_t n : {1, 7, 9, 255, 257, 2047, 2049, 5000, 16383, 16384}) {
    const auto q = softmax_plan(shape(1, n, 64));
    CHECK(q.single_pass);
    CHECK(static_cast<std::uint64_t>(q.threads) * q.chunks_per_thread * 8 >= score_row_stride(shape(1, n, 64)));
    CHECK((q.chunks_per_thread == 1 || q.chunks_per_thread == 2 || q.chunks_per_thread == 4 ||
           q.chunks_per_thread == 8));
    CHECK(q.threads % 32 == 0);
  }
}

TEST_CASE("floor plan: chunks of Q and K, grid capped by SMs", "[plan][floor]") {
  const auto p = floor_plan(shape(4096, 4096, 128, 4, 16, 4), 132);
  CHECK(p.q_chunks == 4ull * 16 * 4096 * 128 / 8);
  CHECK(p.kv_chunks == 4ull * 4 * 4096 * 128 / 8);
  CHECK(p.blocks == 132 * 8);
  const auto small = floor_plan(shape(8, 8, 64), 132);
  CHECK(small.blocks == 1);
  CHECK(floor_plan(shape(8, 8, 64), 0).blocks == 1);
}

TEST_CASE("device footprint per kernel family", "[plan][memory]") {
  const Shape s = shape(1000, 1001, 64, 2, 4, 2);
  const std::uint64_t q = 2 * 4 * 1000 * 64 * 2, kv = 2 * 2 * 1001 * 64 * 2;
  CHECK(device_footprint(s, KernelKind::floor) == 2 * q + 2 * kv);
  CHECK(device_footprint(s, KernelKind::flash) == 2 * q + 2 * kv + 2 * 4 * 1000 * 4);
  CHECK(device_footprint(s, KernelKind::standard) == 2 * q + 2 * kv + 2 * (2ull * 4 * 1000 * 1008 * 2));
  CHECK(device_footprint(s, KernelKind::softmax) == device_footprint(s, KernelKind::standard));
  // Standard attention at N = 131072 needs N^2 scores per head: 68.7 GB for S and P.
  CHECK(device_footprint(shape(131072, 131072, 128), KernelKind::standard) > 68'000'000'000ull);
  CHECK_THROWS_AS(device_footprint(shape(1ull << 40, 1ull << 40, 128), KernelKind::standard), Error);
}

TEST_CASE("memory fit keeps a margin", "[plan][memory]") {
  const std::uint64_t gib = 1ull << 30;
  CHECK(fits_in_memory(1 * gib, 10 * gib));
  CHECK_FALSE(fits_in_memory(10 * gib, 10 * gib));
  CHECK_FALSE(fits_in_memory(10'500'000'000ull, 10 * gib));  // inside the 5% margin
  CHECK_FALSE(fits_in_memory(1, 100ull << 20));            // under the 256 MiB floor
}

TEST_CASE("unsupported shapes say why", "[plan]") {
  Shape s = shape(64, 64, 64);
  CHECK_FALSE(unsupported_reason(s, KernelKind::flash));
  CHECK_FALSE(unsupported_reason(s, KernelKind::standard));
  s.dtype = Dtype::fp16;
  CHECK_THAT(*unsupported_reason(s, KernelKind::floor), Catch::Contains("BF16 only"));
  s = shape(64, 64, 96);
  CHECK_THAT(*unsupported_reason(s, KernelKind::flash), Catch::Contains("head dim 64 and 128"));
  CHECK_FALSE(unsupported_reason(s, KernelKind::standard));
  s = shape(64, 64, 60);
  CHECK_THAT(*unsupported_reason(s, KernelKind::standard), Catch::Contains("multiple of 8"));
  CHECK_FALSE(unsupported_reason(s, KernelKind::copy));
}

TEST_CASE("validation shape: cheap shapes as they are, big ones reduced", "[plan][validation]") {
  const Shape small = shape(300, 513, 64, 2, 4, 2, true);
  CHECK(validation_shape(small) == small);
  Shape big = shape(8192, 8192, 128, 4, 32, 8, true);
  big.block_rows = 128;
  big.block_cols = 64;
  const Shape v = validation_shape(big);
  CHECK(v.batch == 2);
  CHECK(v.kv_heads == 2);
  CHECK(v.heads == 4);  // group kept > 1: GQA stays GQA
  CHECK(v.seq_q == 1000);
  CHECK(v.seq_kv == 1000);
  CHECK(v.head_dim == 128);
  CHECK(v.causal);
  CHECK(v.block_rows == 128);
  CHECK(v.block_cols == 64);
  CHECK(v.seq_q % 64 != 0);  // ragged for every compiled block size
  // Nkv > Nq stays Nkv > Nq (the causal offset keeps its sign), and the other way.
  const Shape longer_kv = validation_shape(shape(4096, 8192, 64, 1, 16, 16, true));
  CHECK(longer_kv.seq_kv > longer_kv.seq_q);
  const Shape shorter_kv = validation_shape(shape(8192, 4096, 64, 1, 16, 16, true));
  CHECK(shorter_kv.seq_kv < shorter_kv.seq_q);
  // A length in (1000, 1024] is kept while the other is cut: the sign must survive that too.
  const Shape kept_q = validation_shape(shape(1024, 4096, 64, 4, 16, 16, true));
  CHECK(kept_q.seq_kv > kept_q.seq_q);
  const Shape kept_kv = validation_shape(shape(4096, 1020, 64, 4, 16, 16, true));
  CHECK(kept_kv.seq_kv < kept_kv.seq_q);
  const Shape one_long = validation_shape(shape(512, 100000, 64, 8, 8, 8));
  CHECK(one_long.seq_q == 512);
  CHECK(one_long.seq_kv > 512);
  CHECK(one_long.seq_kv <= 1024);
  // The reduced shape is cheap for the CPU reference.
  for (const Shape& s : {v, longer_kv, shorter_kv, kept_q, kept_kv, one_long})
    CHECK(s.batch * s.heads * s.seq_q * s.seq_kv * s.head_dim <= validation_budget);
}

TEST_CASE("flush buffer is at least twice the L2", "[plan][timing]") {
  CHECK(flush_bytes(60ull * 1000 * 1000) >= 120'000'000ull);
  CHECK(flush_bytes(60ull * 1000 * 1000) % (1u << 20) == 0);
  CHECK(flush_bytes(50ull << 20) == 100ull << 20);
  CHECK(flush_bytes(0) == 1u << 20);
}
