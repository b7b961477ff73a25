// `reconcile`: the Nsight Compute / timings importer, the kernel table, the
// grouping into attention calls and the verdicts. Fixtures in
// tests/fixtures/ncu/ are constructed from the documented formats.
#include <catch2/catch.hpp>

#include "reconcile_fixtures.hpp"

#include <cstring>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "hbmscope/decode.hpp"
#include "hbmscope/device_config.hpp"
#include "hbmscope/error.hpp"
#include "hbmscope/json_report.hpp"
#include "hbmscope/kernel_table.hpp"
#include "hbmscope/model.hpp"
#include "hbmscope/ncu_import.hpp"
#include "hbmscope/reconcile.hpp"
#include "hbmscope/printers.hpp"
#include "hbmscope/reconcile_report.hpp"
#include "hbmscope/roofline.hpp"

using namespace hbmscope;
using hbmscope::testing::fixtures;
using hbmscope::testing::shape;
using hbmscope::testing::slurp;

namespace {

ImportedFile fixture(const std::string& name) { return read_ncu_csv_text(slurp(name), name); }


}  // namespace

TEST_CASE("ncu numbers: plain, n/a, unambiguous grouping; ambiguous ones refused", "[reconcile][ncu]") {
  CHECK(parse_ncu_number("406240") == 406240.0);
  CHECK(parse_ncu_number(" 94.59 ") == 94.59);
  CHECK(parse_ncu_number("1e3") == 1000.0);
  CHECK_FALSE(parse_ncu_number("n/a"));
  CHECK_FALSE(parse_ncu_number(""));
  CHECK(parse_ncu_number("1,234.5") == 1234.5);
  CHECK(parse_ncu_number("1,234,567") == 1234567.0);
  CHECK(parse_ncu_number("27.595.520") == 27595520.0);
  CHECK(parse_ncu_number("1.234,5") == 1234.5);
  CHECK(parse_ncu_number("1,5") == 1.5);  // a decimal comma: grouping needs three digits
  CHECK(parse_ncu_number("0,125") == 0.125);      // no group starts with 0
  CHECK(parse_ncu_number("1234,567") == 1234.567);  // a first group has at most three digits
  CHECK_THROWS_WITH(parse_ncu_number("1,234"), Catch::Contains("ambiguous number '1,234'"));
  CHECK_THROWS_WITH(parse_ncu_number("12,34,567"), Catch::Contains("misplaced grouping"));
  CHECK_THROWS_WITH(parse_ncu_number("1,2345,678"), Catch::Contains("misplaced grouping"));
  CHECK_THROWS_WITH(parse_ncu_number("PolicySpread"), Catch::Contains("not a number: 'PolicySpread'"));
  CHECK_THROWS(parse_ncu_number("12abc"));
  CHECK_THROWS(parse_ncu_number("inf"));
}

TEST_CASE("ncu units: SI bytes, sectors, time", "[reconcile][ncu]") {
  CHECK(unit_scale("byte", false) == 1.0);
  CHECK(unit_scale("Kbyte", false) == 1e3);
  CHECK(unit_scale("Mbyte", false) == 1e6);
  CHECK(unit_scale("Gbyte", false) == 1e9);
  CHECK(unit_scale("sector", false) == 32.0);
  CHECK(unit_scale("nsecond", true) == 1e-9);
  CHECK(unit_scale("usecond", true) == 1e-6);
  CHECK(unit_scale("msecond", true) == 1e-3);
  CHECK_FALSE(unit_scale("furlong", false));
  CHECK_FALSE(unit_scale("byte", true));
}

TEST_CASE("ncu raw page, current header: application output and ==PROF== skipped, units row read",
          "[reconcile][ncu]") {
  const auto f = fixture("raw_sdpa.csv");
  CHECK(f.format == "ncu-raw");
  REQUIRE(f.launches.size() == 10);
  const auto& flash = f.launches[1];
  CHECK(flash.id == "1");
  CHECK(flash.origin == "raw_sdpa.csv:10");
  CHECK_THAT(flash.kernel, Catch::StartsWith("pytorch_flash::flash_fwd_kernel<"));
  CHECK(flash.dram_read == 101187584u);
  CHECK(flash.dram_write == 30212096u);
  CHECK(*flash.seconds == Approx(610304e-9));
  CHECK(f.notes.empty());
}

TEST_CASE("ncu raw page, 2020 header: Kernel Time column, sectors, Mbyte and usecond", "[reconcile][ncu]") {
  const auto f = fixture("raw_old_header.csv");
  REQUIRE(f.launches.size() == 3);
  CHECK(f.launches[0].dram_read == 3145728u * 32);
  CHECK(f.launches[0].dram_write == 33554432u);
  CHECK(*f.launches[0].seconds == Approx(610.304e-6));
}

TEST_CASE("ncu raw page with NVTX columns, n/a and a ragged row", "[reconcile][ncu]") {
  const auto f = fixture("raw_nvtx.csv");
  REQUIRE(f.launches.size() == 3);
  CHECK(f.launches[0].nvtx == "hbmscope:seq=4096,d=128,heads=32,kv_heads=8,batch=4,causal=1");
  CHECK(f.launches[1].nvtx == "hbmscope:seq=8192,seq_kv=8192,d=64,heads=16,batch=2");
  CHECK_FALSE(f.launches[0].dram_write);  // n/a
  CHECK(f.launches[2].nvtx.empty());
  CHECK(f.launches[2].dram_write == 16777216u);
  CHECK_FALSE(f.launches[2].seconds);  // the ragged row's missing field
}

TEST_CASE("ncu raw page with grouping separators", "[reconcile][ncu]") {
  const auto f = fixture("raw_grouping.csv");
  REQUIRE(f.launches.size() == 2);
  for (const auto& l : f.launches) {
    CHECK(l.dram_read == 101187584u);
    CHECK(l.dram_write == 33554432u);
  }
  CHECK(*f.launches[0].seconds == Approx(610304.5e-9));
}

TEST_CASE("ncu details page, both header generations", "[reconcile][ncu]") {
  const auto d = fixture("details_vllm_decode.csv");
  CHECK(d.format == "ncu-details");
  REQUIRE(d.launches.size() == 1);
  CHECK(*d.launches[0].seconds == Approx(272.16e-6));
  CHECK(*d.launches[0].dram_pct_of_peak == Approx(94.59));
  CHECK_FALSE(d.launches[0].dram_read);  // the details page holds rates
  const auto o = fixture("details_old_header.csv");
  REQUIRE(o.launches.size() == 2);
  CHECK(o.launches[0].dram_read == 134873088u);
  CHECK(o.launches[1].dram_write == 100663296u);
  CHECK(*o.launches[1].seconds == Approx(612.5e-6));
}

TEST_CASE("bad ncu files: one error naming file, line and column", "[reconcile][ncu]") {
  auto err = [](const std::string& name) {
    try {
      (void)fixture("bad/" + name);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK_THAT(err("truncated.csv"), Catch::Contains("truncated.csv:5: the input ends inside a quoted field"));
  CHECK_THAT(err("truncated_row.csv"), Catch::Contains("truncated_row.csv:5: the last row ends after 9 of 13 fields"));
  CHECK_THAT(err("not_csv.txt"), Catch::Contains("no Nsight Compute CSV header"));
  CHECK_THAT(err("no_metrics.csv"), Catch::Contains("none of the metric columns"));
  CHECK_THAT(err("header_only.csv"), Catch::Contains("header_only.csv:2: a header and no kernel launches"));
  CHECK_THAT(err("duplicate_columns.csv"),
             Catch::Contains("duplicate column 'dram__bytes_read.sum' (columns 12 and 13)"));
  CHECK_THAT(err("ambiguous_number.csv"),
             Catch::Contains("ambiguous_number.csv:4: column 'dram__bytes_read.sum': ambiguous number '101,187'"));
  CHECK_THAT(err("bad_unit.csv"), Catch::Contains("unit 'furlong' is not a byte unit"));
  CHECK_THAT(err("garbage.bin"), Catch::Contains("binary data"));
}

TEST_CASE("ncu input is read in a stream: a large generated input is never held whole", "[reconcile][ncu]") {
  // 64 MiB of rows produced on the fly; memory holds one buffer and the launches.
  const std::string head =
      "==PROF== Connected\n\"ID\",\"Kernel Name\",\"dram__bytes_read.sum\",\"gpu__time_duration.sum\"\n"
      "\"\",\"\",\"byte\",\"nsecond\"\n";
  const std::string row_pad(200, ' ');
  std::uint64_t produced = 0, rows = 0;
  const std::uint64_t target = 64ull << 20;
  std::string pending = head;
  std::size_t off = 0;
  ByteSource src = [&](char* b, std::size_t n) -> std::size_t {
    std::size_t k = 0;
    while (k < n) {
      if (off == pending.size()) {
        if (produced >= target) break;
        pending.assign(1, '"');
        pending += std::to_string(rows++);
        pending += "\",\"flash_fwd_kernel" + row_pad + "\",\"1000\",\"2000\"\n";
        off = 0;
      }
      const std::size_t c = std::min(n - k, pending.size() - off);
      std::memcpy(b + k, pending.data() + off, c);
      off += c, k += c, produced += c;
    }
    return k;
  };
  LaunchStream f;
  read_ncu_csv(src, "stream", f);
  CHECK(f.launches.size() == rows);
  CHECK(f.launches.back().dram_read == 1000u);
}

TEST_CASE("timings: sdpa_peer.py JSON and the timings CSV", "[reconcile][timings]") {
  const auto j = read_timings_json(slurp("sdpa_timings.json"), "sdpa_timings.json");
  REQUIRE(j.launches.size() == 2);  // the skipped result left out, with a note
  CHECK(j.notes.size() == 1);
  CHECK(j.launches[0].shape == shape(4, 16, 16, 4096, 4096, 64));
  CHECK(*j.launches[0].seconds == Approx(610.304e-6));
  CHECK(j.launches[0].whole_call == KernelRole::flash_fwd);
  LaunchStream t;
  import_measurements(fixtures + "/timings.csv", builtin_kernel_table(), t);
  CHECK(t.format == "timings-csv");
  REQUIRE(t.launches.size() == 3);
  CHECK(t.launches[0].dram_read == 101187584u);
  CHECK(t.launches[1].whole_call == KernelRole::split_kv);
  CHECK(t.launches[1].shape == shape(1, 32, 8, 1, 16384, 128, Dtype::fp16));
  CHECK(t.launches[2].whole_call == KernelRole::flash_bwd);
  CHECK(t.launches[2].shape->causal);
  auto csv_err = [](const std::string& text) {
    std::size_t i = 0;
    ByteSource src = [&](char* b, std::size_t n) {
      const std::size_t k = std::min(n, text.size() - i);
      std::memcpy(b, text.data() + i, k);
      i += k;
      return k;
    };
    try {
      LaunchStream into;
      read_timings_csv(src, "t.csv", builtin_kernel_table(), into);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK_THAT(csv_err("seq_q,head_dim,tme_s\n1,2,3\n"), Catch::Contains("t.csv:1: unknown column 'tme_s'"));
  CHECK_THAT(csv_err("seq_q,time_s\n1,2\n"), Catch::Contains("needs a 'head_dim' column"));
  CHECK_THAT(csv_err("seq_q,head_dim,time_s\n4096,64,-1\n"), Catch::Contains("t.csv:2: column 'time_s'"));
  CHECK_THAT(csv_err("seq_q,head_dim,time_s\n4096,64\n"), Catch::Contains("t.csv:2: 2 fields, the header has 3"));
  CHECK_THAT(csv_err("seq_q,head_dim,time_s\n"), Catch::Contains("no timing rows"));
}

TEST_CASE("the built-in kernel table classifies the kernels of the reference list", "[reconcile][kernels]") {
  const KernelTable& t = builtin_kernel_table();
  const std::pair<const char*, KernelRole> cases[] = {
      {"pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4>>(Flash_fwd_params)", KernelRole::flash_fwd},
      {"pytorch_flash::flash_fwd_splitkv_kernel<T>(Flash_fwd_params)", KernelRole::split_kv},
      {"pytorch_flash::flash_fwd_splitkv_combine_kernel<T, 4>(Flash_fwd_params)", KernelRole::split_kv_combine},
      {"pytorch_flash::flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel<T>(Flash_bwd_params)", KernelRole::flash_bwd},
      {"fmha_cutlassF_bf16_aligned_64x128_rf_sm80(Params)", KernelRole::flash_fwd},
      {"fmha_cutlassB_bf16_aligned_128x64_k128_sm80(Params)", KernelRole::flash_bwd},
      {"cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x128_4x1x1_cga1x1x1_kernel0_0",
       KernelRole::flash_fwd},
      {"cudnn_generated_fort_native_sdpa_sm90_flash_bprop_wgmma_f16_knob_3_64x128x128_4x1x1_cga1x1x1_kernel0_0",
       KernelRole::flash_bwd},
      {"sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_kernel__5x_cublas", KernelRole::gemm},
      {"nvjet_hsh_128x256_64x4_2x1_v_bz_coopA_NNT", KernelRole::gemm},
      {"ampere_sgemm_128x64_tn", KernelRole::gemm},
      {"cutlass_80_simt_sgemm_128x128_8x4_nn_align1", KernelRole::gemm},
      {"void at::native::cunn_SoftMaxForward<8, float, float, float, Epilogue>(T4 *, const T2 *, int)", KernelRole::softmax},
      {"void (anonymous namespace)::softmax_warp_forward<c10::BFloat16, c10::BFloat16, float, 10>(T2 *, const T1 *, int)",
       KernelRole::softmax},
      {"void at::native::vectorized_elementwise_kernel<4, at::native::MulFunctor<float>>(int, T2, T3)", KernelRole::elementwise},
      {"void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>(int, T2, T3)", KernelRole::other},
      {"flash::flash_fwd_kernel<T>(Flash_fwd_params)", KernelRole::flash_fwd},
      {"flash_fwd_kernel", KernelRole::flash_fwd},
      {"flash::flash_fwd_splitkv_kernel<T>(Flash_fwd_params)", KernelRole::split_kv},
      {"flash::flash_fwd_splitkv_combine_kernel<T>(Flash_fwd_params)", KernelRole::split_kv_combine},
      {"cutlass::device_kernel<flash::enable_sm90_or_later<flash::FlashAttnFwdSm90<Mainloop, Epilogue>>>(Params)",
       KernelRole::flash_fwd},
      {"cutlass::device_kernel<flash::FlashAttnFwdCombine<Shape, 7, 256>>(Params)", KernelRole::split_kv_combine},
      {"void flashinfer::BatchDecodeWithPagedKVCacheKernel<Params>(Params)", KernelRole::split_kv},
      {"void flashinfer::BatchPrefillWithPagedKVCacheKernel<Params>(Params)", KernelRole::flash_fwd},
      {"void flashinfer::BatchPrefillWithRaggedKVCacheKernel<Params>(Params)", KernelRole::flash_fwd},
      {"void flashinfer::MergeStatesKernel<8, 16>(T *, float *, T *, float *, unsigned int)", KernelRole::split_kv_combine},
      {"void flashinfer::PersistentVariableLengthMergeStatesKernel<8, 16>(T *)", KernelRole::split_kv_combine},
      {"void vllm::paged_attention_v1_kernel<unsigned short, 128, 16, 128>(...)", KernelRole::split_kv},
      {"void vllm::paged_attention_v2_kernel<unsigned short, 128, 16, 128, 512>(...)", KernelRole::split_kv},
      {"void vllm::paged_attention_v2_reduce_kernel<unsigned short, 128, 128, 512>(...)", KernelRole::split_kv_combine},
      {"void vllm::reshape_and_cache_flash_kernel<unsigned short>(...)", KernelRole::other},
      {"void hbmscope::cuda::flash_forward_kernel<128, 128, 64>(FlashParams)", KernelRole::flash_fwd},
      {"softmax_rows_kernel(SoftmaxArgs)", KernelRole::softmax},
      {"floor_kernel(const uint4 *, const uint4 *, const uint4 *, uint4 *, unsigned long, unsigned long)",
       KernelRole::floor},
      // Issue 18: FlashAttention-1, cuDNN's split-KV reduction, FlashMLA, Triton,
      // TensorRT-LLM's decode kernels, cuBLAS's split-K reduction.
      {"void fmha_fwd_loop_kernel<FMHA_kernel_traits<(int)128, (int)64, (int)16, (int)1, (int)4, (unsigned int)8, __half>, "
       "(bool)0, (bool)0, (bool)0>(FMHA_fprop_params)",
       KernelRole::flash_fwd},
      {"void pytorch_fmha::fmha_fwd_loop_kernel<FMHA_kernel_traits<256, 64, 16, 1, 4, 8u, __half>, false, false, false>",
       KernelRole::flash_fwd},
      {"void fmha_dgrad_fp16_sm80_loop_kernel<FMHA_kernel_traits<128, 64, 16, 1, 8, 8u, __half>>(FMHA_dgrad_params)",
       KernelRole::flash_bwd},
      {"void fmha_bwd_dq_dk_dv_loop_kernel<T>(FMHA_dgrad_params)", KernelRole::flash_bwd},
      {"void cudnn::fusion::lean_reduction_kernel<__nv_bfloat16, float, 128, 4>(cudnn::fusion::LeanReductionParams)",
       KernelRole::split_kv_combine},
      {"void flash::flash_fwd_splitkv_mla_kernel<Flash_fwd_kernel_traits_mla<576, 64, 64, 8, cutlass::bfloat16_t, 512>, "
       "true>(Flash_fwd_mla_params)",
       KernelRole::split_kv},
      {"void flash::flash_fwd_splitkv_mla_combine_kernel<cutlass::bfloat16_t, 512, 64, 5>(Flash_fwd_mla_params)",
       KernelRole::split_kv_combine},
      {"_attn_fwd", KernelRole::flash_fwd},
      {"void tensorrt_llm::kernels::mmha::masked_multihead_attention_kernel<uint16_t, uint16_t, 128, 4>(Params)",
       KernelRole::split_kv},
      {"kernel_mha", KernelRole::split_kv},
      {"void splitKreduce_kernel<(int)32, (int)16, int, __half, __half, float, __half, (bool)1, (bool)1, (bool)0>"
       "(cublasSplitKParams<T6>, const T4 *)",
       KernelRole::gemm_reduce},
  };
  for (const auto& [name, role] : cases) {
    INFO(name);
    const auto* p = classify(t, name);
    REQUIRE(p);
    CHECK(p->role == role);
  }
  CHECK_FALSE(classify(t, "my_custom_attention_kernel(float const*, float*)"));
}

TEST_CASE("kernel tables from users are checked", "[reconcile][kernels]") {
  using nlohmann::json;
  const auto t = kernel_table_from_json(json::parse(R"({"kernels": [{"match": ["my", "attn"], "role": "flash_fwd"}]})"), "k.json");
  REQUIRE(t.patterns.size() == 1);
  CHECK(classify(t, "my_attn_kernel"));
  CHECK_FALSE(classify(t, "my_kernel"));
  CHECK_THROWS_WITH(kernel_table_from_json(json::parse(R"({"kernels": [{"match": "x", "role": "fast"}]})"), "k.json"),
                    Catch::Contains("k.json: kernels[0].role: expected one of flash_fwd"));
  CHECK_THROWS_WITH(kernel_table_from_json(json::parse(R"({"kernels": [{"match": "", "role": "gemm"}]})"), "k.json"),
                    Catch::Contains("kernels[0].match"));
  CHECK_THROWS_WITH(kernel_table_from_json(json::parse(R"({"kernel": []})"), "k.json"), Catch::Contains("unknown key"));
  CHECK_THROWS_WITH(kernel_table_from_json(json::parse("[1]"), "k.json"), Catch::Contains("expected an object"));
}

TEST_CASE("launches group into attention calls", "[reconcile][grouping]") {
  using R = KernelRole;
  auto kinds = [](const std::vector<R>& roles) {
    std::vector<std::pair<CallKind, std::size_t>> out;
    for (const auto& g : group_launches(roles)) out.emplace_back(g.kind, g.launches.size());
    return out;
  };
  using V = std::vector<std::pair<CallKind, std::size_t>>;
  CHECK(kinds({R::gemm, R::elementwise, R::softmax, R::elementwise, R::gemm}) == V{{CallKind::standard, 5}});
  CHECK(kinds({R::elementwise, R::gemm, R::softmax, R::gemm}) == V{{CallKind::standard, 3}});
  CHECK(kinds({R::gemm, R::gemm}).empty());  // a GEMM pair without softmax is no attention
  CHECK(kinds({R::gemm, R::softmax, R::other, R::gemm}).empty());
  CHECK(kinds({R::flash_fwd, R::flash_fwd}) == V{{CallKind::flash, 1}, {CallKind::flash, 1}});
  CHECK(kinds({R::split_kv, R::split_kv_combine}) == V{{CallKind::split_kv, 2}});
  CHECK(kinds({R::split_kv}) == V{{CallKind::split_kv, 1}});
  CHECK(kinds({R::flash_fwd, R::split_kv_combine}) == V{{CallKind::split_kv, 2}});  // flash-attn 3 in splits
  CHECK(kinds({R::split_kv_combine}).empty());
  CHECK(kinds({R::flash_bwd, R::flash_bwd, R::flash_bwd, R::flash_fwd}) ==
        V{{CallKind::flash_bwd, 3}, {CallKind::flash, 1}});
  CHECK(kinds({R::floor, R::unknown, R::other}) == V{{CallKind::floor, 1}});
}

TEST_CASE("NVTX range names give shapes", "[reconcile][nvtx]") {
  const Shape s = parse_nvtx_shape("<default>:hbmscope:seq=4096,seq_kv=8192,d=128,heads=32,kv_heads=8,batch=4,causal=1",
                                   Dtype::bf16);
  CHECK(s == [] {
    Shape x = shape(4, 32, 8, 4096, 8192, 128);
    x.causal = true;
    return x;
  }());
  const Shape d = parse_nvtx_shape("hbmscope:seq=1,seq_kv=16384,d=128,heads=32,dtype=fp16", Dtype::bf16);
  CHECK(d == shape(1, 32, 32, 1, 16384, 128, Dtype::fp16));
  CHECK_THROWS_WITH(parse_nvtx_shape("hbmscope:seq=1,d=64,hedas=2", Dtype::bf16), Catch::Contains("unknown key 'hedas'"));
  CHECK_THROWS_WITH(parse_nvtx_shape("hbmscope:seq=1", Dtype::bf16), Catch::Contains("seq= and d= are required"));
  CHECK_THROWS_WITH(parse_nvtx_shape("hbmscope:seq=1,d=64,causal=yes", Dtype::bf16), Catch::Contains("causal='yes'"));
  CHECK_THROWS_WITH(parse_nvtx_shape("hbmscope:seq=1,d=6x4", Dtype::bf16), Catch::Contains("d='6x4' is not a number"));
  CHECK_THROWS_WITH(parse_nvtx_shape("hbmscope:seq=1,d=64,seq=2", Dtype::bf16), Catch::Contains("seq given twice"));
  CHECK_THROWS(parse_nvtx_shape("hbmscope:seq=64,d=64,heads=3,kv_heads=2", Dtype::bf16));  // not a GQA group
}

TEST_CASE("the model's reads and writes per call kind add up to its totals", "[reconcile][model]") {
  for (const Shape& s : {shape(4, 16, 16, 4096, 4096, 64), shape(2, 32, 8, 1000, 3000, 128), shape(1, 32, 8, 1, 16384, 128)})
    for (CallKind k : {CallKind::standard, CallKind::flash, CallKind::flash_bwd, CallKind::split_kv, CallKind::floor})
      for (const auto& v : model_bytes_for(k, s, L2SimConfig{50ull << 20, 132, 2})) {
        INFO(describe(s) << " " << call_kind_name(k) << " " << v.id);
        if (v.reads) CHECK(*v.reads + *v.writes == v.total);
      }
  const Shape s = shape(4, 16, 16, 4096, 4096, 64);
  const auto m = model_bytes_for(CallKind::flash, s, std::nullopt);
  REQUIRE(m.size() == 2);
  CHECK(m[0].id == "flash_no_l2");
  CHECK(m[0].total == flash_no_l2_bytes(s));
  CHECK(m[1].id == "floor");
  // Q, K, V read once; O written once.
  CHECK(*m[1].reads == 2ull * 4 * (16 * 4096 * 64 + 2 * 16 * 4096 * 64));
  CHECK(*m[1].writes == 2ull * 4 * 16 * 4096 * 64);
  const auto st = model_bytes_for(CallKind::standard, s, std::nullopt);
  CHECK(*st[0].writes == 2ull * 4 * 16 * (2 * 4096ull * 4096 + 4096 * 64));  // S, P, O
}

TEST_CASE("the vLLM decode data point: 268.4 MB of KV in 272.16 µs is 0.986 TB/s", "[reconcile][vllm]") {
  // flashinfer issue 188: RTX 4090, paged_attention_v2_kernel, one sequence of
  // 16384 tokens, 32 heads, d = 128, fp16; Duration 272.16 µs, DRAM Throughput 94.59 %.
  const auto f = fixture("details_vllm_decode.csv");
  ReconcileOptions opt;
  opt.shapes = {shape(1, 32, 32, 1, 16384, 128, Dtype::fp16)};
  opt.device = find_device("4090");
  const auto r = reconcile(f.launches, builtin_kernel_table(), opt);
  REQUIRE(r.calls.size() == 1);
  const auto& c = r.calls[0];
  CHECK(c.kind == CallKind::split_kv);
  CHECK(c.source == "vLLM");
  // Held against the decode variants: the grid (32 heads, 1 sequence, 32
  // partitions of 512 tokens) gives the split count; vLLM pages its cache and
  // runs one CTA per query head.
  CHECK(c.splits == 32);
  CHECK(c.splits_from == "launch grid");
  CHECK(c.judged_against == "decode_paged");
  REQUIRE(c.model.size() == 4);
  CHECK(c.model[0].id == "decode_floor");
  CHECK(c.model[1].id == "decode_split");
  CHECK(c.model[2].id == "decode_paged");
  CHECK(c.model[3].id == "decode_split_unpacked");
  CHECK(c.model[2].splits == 32);
  const std::uint64_t kv = 2ull * 16384 * 32 * 128 * 2;
  CHECK(kv == 268435456u);  // 268.4 MB
  CHECK(c.model[0].total == kv + 2ull * 32 * 128 * 2);  // plus Q and O
  Shape ds = opt.shapes[0];
  ds.decode = true;
  ds.splits = 32;
  CHECK(c.model[2].total == decode_bytes(ds, DecodeVariant::paged, 32).total);
  REQUIRE(c.model_bandwidth);
  CHECK(*c.model_bandwidth == Approx(static_cast<double>(c.model[2].total) / 272.16e-6));
  CHECK(static_cast<double>(kv) / *c.seconds == Approx(0.9863e12).epsilon(0.0005));
  CHECK(*c.pct_of_peak == Approx(94.59));  // ncu's own figure, no byte counts in the details page
  CHECK(*c.achieved_bandwidth == Approx(0.9459 * 1008e9));
  CHECK(c.verdict == VerdictKind::no_counts);
  REQUIRE(c.roofline);
  CHECK(c.roofline->bound == Bound::memory);
}

TEST_CASE("reconcile: verdicts of the SDPA fixture", "[reconcile]") {
  const auto f = fixture("raw_sdpa.csv");
  ReconcileOptions opt;
  opt.shapes = {shape(4, 16, 16, 4096, 4096, 64)};
  opt.device = find_device("h100");
  opt.l2 = L2SimConfig{opt.device->l2_bytes, 132, 2};
  const auto r = reconcile(f.launches, builtin_kernel_table(), opt);
  REQUIRE(r.calls.size() == 4);
  CHECK(r.calls[0].kind == CallKind::flash);
  CHECK(r.calls[0].verdict == VerdictKind::at_floor);
  CHECK(r.calls[1].source == "PyTorch SDPA cuDNN");
  CHECK(r.calls[2].verdict == VerdictKind::between);
  const auto floor_reads = static_cast<double>(*model_bytes_for(CallKind::flash, opt.shapes[0], std::nullopt)[1].reads);
  CHECK(*r.calls[2].reads_over_model == Approx(134873088.0 / floor_reads));
  CHECK(*r.calls[2].position == Approx((134873088.0 - floor_reads) / (2181038080.0 - floor_reads)));
  CHECK(r.calls[3].kind == CallKind::standard);
  CHECK(r.calls[3].launches.size() == 3);
  CHECK(r.calls[3].verdict == VerdictKind::matches);
  CHECK(*r.calls[3].read_bytes == 16908288ull + 2147745792ull + 2164260864ull);
  REQUIRE(r.unmatched.size() == 1);
  CHECK_THAT(r.unmatched[0].kernel, Catch::StartsWith("my_custom_attention_kernel"));
  CHECK(r.outside.size() == 3);
  // Time over roofline: max(counted bytes / bandwidth, FLOPs / peak).
  const auto& c0 = r.calls[0];
  const double bytes = static_cast<double>(*c0.read_bytes + *c0.write_bytes);
  const double want = std::max(bytes / opt.device->bandwidth, static_cast<double>(c0.flops) / opt.device->peak.bf16);
  CHECK(*c0.time_over_roofline == Approx(*c0.seconds / want));
}

TEST_CASE("reconcile: shapes from NVTX, from a list in order, and refused lists", "[reconcile]") {
  const auto f = fixture("raw_nvtx.csv");
  const auto r = reconcile(f.launches, builtin_kernel_table(), {});
  REQUIRE(r.calls.size() == 2);
  CHECK(r.calls[0].shape_from == "nvtx");
  CHECK(r.calls[0].shape->kv_heads == 8);
  CHECK(r.calls[1].shape->seq_q == 8192);
  const auto sdpa = fixture("raw_sdpa.csv");
  ReconcileOptions opt;
  opt.shapes = {shape(1, 1, 1, 1024, 1024, 64), shape(1, 1, 1, 2048, 2048, 64), shape(1, 1, 1, 4096, 4096, 64),
                shape(1, 1, 1, 8192, 8192, 64)};
  const auto listed = reconcile(sdpa.launches, builtin_kernel_table(), opt);
  CHECK(listed.calls[2].shape->seq_q == 4096);
  opt.shapes.pop_back();
  CHECK_THROWS_WITH(reconcile(sdpa.launches, builtin_kernel_table(), opt),
                    Catch::StartsWith("3 shapes given for 4 attention call(s)"));
  const auto none = reconcile(sdpa.launches, builtin_kernel_table(), {});
  CHECK(none.calls[0].verdict == VerdictKind::no_shape);
  CHECK(none.calls[0].model.empty());
}

TEST_CASE("reconcile reports: schema /2 rows with call objects, read back for compare and merge", "[reconcile][json]") {
  const auto f = fixture("raw_sdpa.csv");
  ReconcileOptions opt;
  opt.shapes = {shape(4, 16, 16, 4096, 4096, 64)};
  opt.device = find_device("h200");
  const auto r = reconcile(f.launches, builtin_kernel_table(), opt);
  Report rep;
  rep.command = "reconcile";
  rep.rows = reconcile_rows(r);
  add_predictions(rep, *opt.device, 1.0);
  const ReconcileView v{r, {{"raw_sdpa.csv", "ncu-raw", 10}}, "built in", rep};
  const auto j = nlohmann::json::parse(render_reconcile(v, {Format::json}));
  CHECK(j["schema"] == std::string(report_schema));
  CHECK(j["command"] == "reconcile");
  REQUIRE(j["rows"].size() == 4);
  CHECK(j["rows"][0]["label"] == "call 1 (flash)");
  CHECK(j["rows"][0]["call"]["counted"]["read_bytes"] == 101187584u);
  CHECK(j["rows"][0]["call"]["verdict"] == "AT FLOOR");
  CHECK(j["reconcile"]["calls"].size() == 4);
  CHECK(j["reconcile"]["unmatched"].size() == 1);
  const Report back = report_from_json(j, "r.json");
  CHECK(back.rows.size() == 4);
  CHECK(back.rows[3].variant("standard"));
  const std::string csv = render_reconcile(v, {Format::csv});
  CHECK(std::count(csv.begin(), csv.end(), '\n') == 5);
  CHECK_THAT(csv, Catch::StartsWith("call,kind,kernels,"));
  const std::string md = render_reconcile(v, {Format::md});
  CHECK_THAT(md, Catch::Contains("| Call |"));
  CHECK_THAT(reconcile_gnuplot_script(r, PlotTerminal::svg), Catch::Contains("counted reads"));
}

TEST_CASE("short kernel names drop templates and parameters", "[reconcile][report]") {
  CHECK(short_kernel_name("pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128>, false>(Flash_fwd_params)") ==
        "pytorch_flash::flash_fwd_kernel");
  CHECK(short_kernel_name("void at::native::(anonymous namespace)::cunn_SoftMaxForward<8, float>(T4 *, const T2 *, int)") ==
        "at::native::cunn_SoftMaxForward");
  CHECK(short_kernel_name("sdpa flash") == "sdpa flash");
}

#include "dram_counters.hpp"

TEST_CASE("measure --counters: counter values and the messages without a GPU", "[reconcile][counters]") {
  using namespace hbmscope::cuda;
  CHECK(counter_bytes(0.0, "dram__bytes_read.sum") == 0u);
  CHECK(counter_bytes(268435456.4, "dram__bytes_read.sum") == 268435456u);
  CHECK(counter_bytes(1.5e19, "m") == 15000000000000000000u);
  CHECK_THROWS_WITH(counter_bytes(-1.0, "dram__bytes_write.sum"),
                    "dram__bytes_write.sum: the GPU reported -1, not a byte count");
  CHECK_THROWS(counter_bytes(std::nan(""), "m"));
  CHECK_THROWS(counter_bytes(1.8446744073709552e19, "m"));
  const std::string perm = counters_unavailable(cupti_insufficient_privileges, "CUPTI_ERROR_INSUFFICIENT_PRIVILEGES",
                                                "cuptiProfilerGetCounterAvailability");
  CHECK_THAT(perm, Catch::Contains("NVreg_RestrictProfilingToAdminUsers=0"));
  CHECK_THAT(perm, Catch::EndsWith("timings only"));
  CHECK(perm.find('\n') == std::string::npos);
  CHECK_THAT(counters_unavailable(cupti_multiple_subscribers, "x", "y"), Catch::Contains("another profiler"));
  CHECK_THAT(counters_unavailable(1, "CUPTI_ERROR_INVALID_PARAMETER", "call"),
             Catch::Equals("DRAM counters unavailable (call: CUPTI_ERROR_INVALID_PARAMETER); timings only"));
}

TEST_CASE("measurements carry counted DRAM bytes beside the time in JSON", "[reconcile][counters][json]") {
  KernelMeasurement m;
  m.kernel = "flash";
  m.variant = "flash_no_l2";
  m.status = MeasureStatus::ok;
  m.dram_read_bytes = 123;
  m.dram_write_bytes = 45;
  m.counters = "ok";
  const auto j = measurement_to_json(m);
  CHECK(j["dram_read_bytes"] == 123u);
  CHECK(j["dram_write_bytes"] == 45u);
  CHECK(j["counters"] == "ok");
  KernelMeasurement none;
  CHECK_FALSE(measurement_to_json(none).contains("dram_read_bytes"));
}

TEST_CASE("the measure table shows counted DRAM bytes when there are any", "[reconcile][counters][report]") {
  Report rep;
  rep.command = "measure";
  rep.rows = {Row{}};
  rep.rows[0].shape = shape(1, 1, 1, 1024, 1024, 64);
  KernelMeasurement m;
  m.kernel = "flash";
  m.status = MeasureStatus::ok;
  rep.rows[0].measurements.push_back(m);
  CHECK_THAT(render(rep, {}), !Catch::Contains("DRAM read (counted)"));
  rep.rows[0].measurements[0].dram_read_bytes = 2097152;
  rep.rows[0].measurements[0].dram_write_bytes = 0;
  const std::string t = render(rep, {});
  CHECK_THAT(t, Catch::Contains("DRAM read (counted)"));
  CHECK_THAT(t, Catch::Contains("2.1 MB"));
}

TEST_CASE("timings JSON: malformed results are one line naming the key", "[reconcile][timings]") {
  auto err = [](const std::string& text) {
    try {
      (void)read_timings_json(text, "t.json");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK_THAT(err(R"({"rows": []})"), Catch::Contains("t.json: results: expected an array"));
  CHECK_THAT(err(R"({"results": [{"seq": 4096, "head_dim": 64, "median_s": "fast"}]})"),
             Catch::Contains("results[0].median_s: expected a positive number of seconds"));
  CHECK_THAT(err(R"({"results": [{"seq": -1, "head_dim": 64, "median_s": 1}]})"), Catch::Contains("results[0].seq"));
  CHECK_THAT(err(R"({"results": [{"seq": 4096, "median_s": 1}]})"), Catch::Contains("results[0].head_dim: missing"));
  CHECK_THAT(err(R"({"results": [{"seq": 4096, "head_dim": 64, "median_s": 1, "causal": 1}]})"),
             Catch::Contains("results[0].causal: expected true or false"));
  CHECK_THAT(err(R"({"results": [{"status": "skipped"}]})"), Catch::Contains("no results with status \"ok\""));
  CHECK_THAT(err("{"), Catch::Contains("t.json"));
  CHECK_THAT(err(R"("c#,,l")"), Catch::Contains("t.json: (top level): expected an object"));  // found by fuzzing
  CHECK_THAT(err(R"({"results": [{"status": 1}]})"), Catch::Contains("results[0].status: expected a string"));
}

TEST_CASE("launches are grouped per stream: another stream's kernels do not split a call", "[reconcile][grouping]") {
  auto launch = [](const char* kernel, const char* stream) {
    MeasuredLaunch l;
    l.kernel = kernel;
    l.stream = stream;
    l.dram_read = 1000;
    l.seconds = 1e-6;
    return l;
  };
  const std::vector<MeasuredLaunch> ls = {
      launch("sm90_xmma_gemm_bf16_tn", "1/1/7/"), launch("pytorch_flash::flash_fwd_kernel<T>(P)", "1/1/13/"),
      launch("cunn_SoftMaxForward<8>", "1/1/7/"), launch("sm90_xmma_gemm_bf16_nn", "1/1/7/")};
  const auto r = reconcile(ls, builtin_kernel_table(), {});
  REQUIRE(r.calls.size() == 2);
  CHECK(r.calls[0].kind == CallKind::standard);
  CHECK(r.calls[0].launches == std::vector<std::size_t>{0, 2, 3});
  CHECK(*r.calls[0].read_bytes == 3000u);
  CHECK(r.calls[1].kind == CallKind::flash);
  CHECK(r.calls[1].launches == std::vector<std::size_t>{1});
  CHECK(fixture("raw_sdpa.csv").launches[0].stream == "31337/1/7/");
}
