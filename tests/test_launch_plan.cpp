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
  std::set<std::tuple<int, int, int, int>> unique;
  for (const auto& c : flash_configs()) {
    unique.insert({c.head_dim, c.block_rows, c.block_cols, c.version});
    CHECK(c.block_rows % 16 == 0);
    CHECK(c.block_cols % 16 == 0);
    CHECK(flash_threads(c) <= 1024);
    CHECK(flash_smem_bytes(c) <= 227u * 1024);  // sm_90's per-block opt-in limit
  }
  CHECK(unique.size() == flash_configs().size());
  CHECK(describe(FlashConfig{128, 128, 64}) == "d=128 Br=128 Bc=64");
  CHECK(describe(FlashConfig{128, 128, 64, 2}) == "d=128 Br=128 Bc=64 v2 (4 warps)");
}

TEST_CASE("flash v2: defaults, choice, warps", "[plan][flash]") {
  CHECK(default_flash_config(64, 2) == FlashConfig{64, 128, 128, 2});
  CHECK(default_flash_config(128, 2) == FlashConfig{128, 128, 64, 2});
  CHECK_THROWS_AS(default_flash_config(64, 3), Error);
  CHECK(choose_flash_config(64, 64, 64, 2) == FlashConfig{64, 64, 64, 2});
  // v2 has no 128 x 128 at d = 128 (it would spill); v1 has.
  CHECK_THROWS_WITH(choose_flash_config(128, 128, 128, 2),
                    Catch::Contains("flash kernel: blocks 128x128 are not compiled for head dim 128 (have 128x64)"));
  CHECK(choose_flash_config(128, 128, 128, 1) == FlashConfig{128, 128, 128, 1});
  CHECK(flash_warps({128, 128, 64, 2}) == 4);
  CHECK(flash_threads({128, 128, 64, 2}) == 128);
  CHECK(flash_warps({128, 128, 64, 1}) == 8);
  CHECK(flash_smem_bytes({128, 128, 64, 2}) == flash_smem_bytes({128, 128, 64, 1}));
  // Every v2 entry has a v1 twin, so that blocks valid for v2 are valid for both.
  for (const auto& c : flash_configs())
    if (c.version == 2) CHECK(choose_flash_config(static_cast<std::uint64_t>(c.head_dim), c.block_rows, c.block_cols, 1).version == 1);
}

TEST_CASE("CTAs per SM follow registers and shared memory (ptxas, sm_90)", "[plan][flash]") {
  // The figures docs/cuda.md records from ptxas -v.
  CHECK(flash_registers({128, 128, 64, 2}) == 255);
  CHECK(flash_registers({128, 128, 64, 1}) == 189);
  CHECK(flash_registers({96, 128, 64, 2}) == 0);
  for (const auto& c : flash_configs()) {
    INFO(describe(c));
    CHECK(flash_registers(c) > 0);
    CHECK(flash_registers(c) <= 255);
  }
  // v1 defaults: 8 warps x 192 or 208 registers take most of the 64 K registers: 1 CTA.
  CHECK(flash_ctas_per_sm({128, 128, 64, 1}) == 1);
  CHECK(flash_ctas_per_sm({64, 128, 128, 1}) == 1);
  // v2 defaults: 4 warps x 256 registers = 32 K; 96 / 80 KiB of shared memory: 2 CTAs.
  CHECK(flash_ctas_per_sm({128, 128, 64, 2}) == 2);
  CHECK(flash_ctas_per_sm({64, 128, 128, 2}) == 2);
  // v1 128 x 128 at d = 128: 160 KiB of shared memory, 1 CTA.
  CHECK(flash_ctas_per_sm({128, 128, 128, 1}) == 1);
  // 2-warp CTAs: 64 x 64 at d = 64, 40 KiB and 2 x 7.5 K registers (238 -> 240 -> 7680 per warp).
  CHECK(flash_ctas_per_sm({64, 64, 64, 2}) == 4);
  // An A100's 164 KiB: the 96 KiB CTA fits once.
  CHECK(flash_ctas_per_sm({128, 128, 64, 2}, sm_limits_for_device("A100 80GB SXM")) == 1);
  CHECK(flash_ctas_per_sm({64, 64, 64, 2}, sm_limits_for_device("L40S")) == 2);  // 100 KiB / 41 KiB
  CHECK(flash_ctas_per_sm({128, 128, 64, 2}, sm_limits_for_device("H200 SXM")) == 2);
  // The other rows of docs/cuda.md's table.
  CHECK(flash_ctas_per_sm({64, 128, 64, 2}) == 2);
  CHECK(flash_ctas_per_sm({64, 64, 64, 1}) == 3);
  CHECK(flash_ctas_per_sm({64, 128, 64, 1}) == 1);
  CHECK(flash_ctas_per_sm({128, 64, 64, 1}) == 2);
  Shape s;
  s.head_dim = 128;
  s.block_rows = 128;
  s.block_cols = 64;
  CHECK(shape_ctas_per_sm(s) == 2);       // v2
  s.block_cols = 128;
  CHECK(shape_ctas_per_sm(s) == 1);       // only v1 has 128 x 128 at d = 128
  s.head_dim = 256;                       // no kernel: (128 + 4 * 128) * 256 * 2 = 320 KiB > 228
  CHECK(shape_ctas_per_sm(s) == 1);
  s.head_dim = 32;                        // (128 + 512) * 32 * 2 = 40 KiB + 1: 5 by shared memory
  CHECK(shape_ctas_per_sm(s) == 5);
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
  // Windows run everywhere, but the floor kernel reads every key: it is left
  // out where the window hides keys from every query (Nkv > Nq + W - 1).
  s = shape(1000, 1000, 64, 1, 1, 1, true);
  s.window = 100;
  for (KernelKind k : {KernelKind::standard, KernelKind::softmax, KernelKind::flash, KernelKind::flash_v1,
                       KernelKind::floor})
    CHECK_FALSE(unsupported_reason(s, k));
  s.seq_kv = 2000;  // row 0 sits at 1000: keys 0 to 900 are seen by no query
  CHECK_THAT(*unsupported_reason(s, KernelKind::floor), Catch::Contains("keys 0 to 900 are seen by no query"));
  CHECK_FALSE(unsupported_reason(s, KernelKind::flash));
}

TEST_CASE("measure refuses the shapes no kernel of ours runs, one line each", "[plan][measure]") {
  const KernelKind all[] = {KernelKind::standard, KernelKind::softmax, KernelKind::flash, KernelKind::flash_v1,
                            KernelKind::floor};
  const auto refused = [&](const Shape& s, const char* why) {
    for (KernelKind k : all) {
      INFO(describe(s));
      REQUIRE(measure_refusal(s, k).has_value());
      CHECK_THAT(*measure_refusal(s, k), Catch::Contains(why));
    }
    CHECK_THROWS_WITH(check_measurable(s, all), Catch::StartsWith("measure: our kernels do not run ") &&
                                                    Catch::Contains(why) && !Catch::Contains("\n"));
  };
  Shape s = shape(4096, 4096, 128, 1, 16, 16, true);
  for (KernelKind k : all) CHECK_FALSE(measure_refusal(s, k));
  CHECK_NOTHROW(check_measurable(s, all));
  s.window = 1024;  // windows run
  CHECK_NOTHROW(check_measurable(s, all));
  Shape dv = s;
  dv.head_dim_v = 64;
  refused(dv, "a V head dim other than --head-dim (--head-dim-v 64 against 128)");
  dv.head_dim_v = 128;  // DV = d: what the kernels run
  CHECK_NOTHROW(check_measurable(dv, all));
  Shape mla = shape(1, 4096, 576, 1, 128, 1, false);
  mla.latent_kv = true;
  mla.head_dim_v = 512;
  refused(mla, "a latent KV (MLA)");  // named as MLA, not by its DV
  mla.decode = true;
  CHECK_THAT(*measure_refusal(mla, KernelKind::decode), Catch::Contains("a latent KV (MLA)"));
  Shape kv = s;
  kv.kv_dtype = Dtype::fp8;
  refused(kv, "K and V in a dtype of their own (--kv-dtype fp8");
  kv.kv_dtype = Dtype::bf16;  // the kernels' own
  CHECK_NOTHROW(check_measurable(kv, all));
  Shape ragged = shape(4096, 4096, 128, 3, 16, 16, true);
  ragged.seq_lens = SeqList(std::vector<SeqLen>{{512, 512}, {4096, 4096}, {100, 1000}});
  ragged.seq_kv = 4096;
  refused(ragged, "ragged prefill batches (--seq-lens");
  // Chunks: the flash kernels refuse them, the standard path, the softmax,
  // the floor kernel and the decode kernels run them.
  Shape chunk = s;
  chunk.window = 0;
  chunk.chunk = 8192;
  for (KernelKind k : {KernelKind::flash, KernelKind::flash_v1})
    CHECK_THAT(*measure_refusal(chunk, k), Catch::Contains("chunked attention (--chunk) in the flash kernels"));
  for (KernelKind k : {KernelKind::standard, KernelKind::softmax, KernelKind::floor, KernelKind::decode,
                       KernelKind::decode_paged, KernelKind::copy})
    CHECK_FALSE(measure_refusal(chunk, k));
  CHECK_THROWS_WITH(check_measurable(chunk, all), Catch::Contains("chunked attention (--chunk) in the flash kernels "
                                                                  "(the standard path and the decode kernels run it) "
                                                                  "(kernel flash, shape "));
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
  // A window still hides keys once the lengths are cut; one that hid none
  // (or still fits) is kept.
  Shape windowed = big;
  windowed.window = 4096;
  CHECK(validation_shape(windowed).window == 500);
  windowed.window = 300;
  CHECK(validation_shape(windowed).window == 300);
  windowed.window = 8192;
  CHECK(validation_shape(windowed).window == 8192);
  windowed.window = 0;
  windowed.chunk = 2048;
  CHECK(validation_shape(windowed).chunk == 500);
  CHECK(cut_band(0, 100, 10) == 0);
  CHECK(cut_band(5000, 8192, 1000) == 500);
  CHECK(cut_band(1, 8192, 1) == 1);
  for (const Shape& w : {validation_shape(windowed)}) CHECK_NOTHROW(validate(w));
}

TEST_CASE("flush buffer is at least twice the L2", "[plan][timing]") {
  CHECK(flush_bytes(60ull * 1000 * 1000) >= 120'000'000ull);
  CHECK(flush_bytes(60ull * 1000 * 1000) % (1u << 20) == 0);
  CHECK(flush_bytes(50ull << 20) == 100ull << 20);
  CHECK(flush_bytes(0) == 1u << 20);
}
