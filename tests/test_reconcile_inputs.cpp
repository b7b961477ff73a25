// `reconcile` on what the profilers really write (issue 18) and on bad input
// (issue 22): every Nsight Compute generation, console text, Nsight Systems
// traces and NVTX reports, decode calls against the decode variants, launch
// geometry. Fixtures in tests/fixtures/ncu/ are constructed (docs/reconcile.md).
#include <catch2/catch.hpp>

#include "reconcile_fixtures.hpp"

#include <cstring>
#include <fstream>
#include <sstream>

#include "hbmscope/decode.hpp"
#include "hbmscope/device_config.hpp"
#include "hbmscope/error.hpp"
#include "hbmscope/kernel_table.hpp"
#include "hbmscope/model.hpp"
#include "hbmscope/ncu_import.hpp"
#include "hbmscope/printers.hpp"
#include "hbmscope/reconcile.hpp"
#include "hbmscope/reconcile_report.hpp"
#include "hbmscope/sweep.hpp"

using namespace hbmscope;
using hbmscope::testing::fixtures;
using hbmscope::testing::shape;
using hbmscope::testing::slurp;

namespace {

LaunchStream read_any(const std::string& name) {
  LaunchStream s;
  import_measurements(fixtures + "/" + name, builtin_kernel_table(), s);
  return s;
}

std::string error_of(const std::string& name) {
  try {
    (void)read_any(name);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}


const ModelBytesRW& variant(const ReconciledCall& c, const std::string& id) {
  for (const auto& v : c.model)
    if (v.id == id) return v;
  FAIL("no variant " << id);
  return c.model.front();
}

}  // namespace

TEST_CASE("numbers: the input's decimal mark resolves a lone grouping comma", "[reconcile][ncu]") {
  CHECK_THROWS_WITH(parse_ncu_number("295,808"), Catch::Contains("ambiguous number '295,808'"));
  CHECK(parse_ncu_number("295,808", DecimalMark::point) == 295808.0);
  CHECK(parse_ncu_number("295,808", DecimalMark::comma) == Approx(295.808));
  CHECK(parse_ncu_number("1.234", DecimalMark::comma) == 1234.0);
  CHECK(parse_ncu_number("1.234", DecimalMark::point) == Approx(1.234));
  CHECK(parse_ncu_number("1,031,877,059.00", DecimalMark::unknown) == 1031877059.0);
  CHECK(parse_ncu_number("2,560", DecimalMark::point) == 2560.0);
}

TEST_CASE("ncu 2021 details page: dram__bytes.sum, cycles for time, separators, short rows, cast-style names",
          "[reconcile][ncu][real-features]") {
  const auto f = read_any("details_2021_fa1.csv");
  CHECK(f.format == "ncu-details");
  REQUIRE(f.launches.size() == 6);
  const auto& fmha = f.launches[3];
  CHECK_THAT(fmha.kernel, Catch::StartsWith("void fmha_fwd_loop_kernel<FMHA_kernel_traits<(int)128"));
  CHECK(fmha.dram_total == 295936u);
  CHECK_FALSE(fmha.dram_read);
  CHECK(fmha.time_from == TimeSource::cycles);
  CHECK(*fmha.seconds == Approx(8702.5 / 930e6));
  CHECK(fmha.grid_size == 312u);
  CHECK(fmha.stream == "5120/1/7/");
  // The FlashAttention-1 call, batch 2, 12 heads, N = 32, d = 64, fp16.
  ReconcileOptions opt;
  opt.shapes = {shape(2, 12, 12, 32, 32, 64, Dtype::fp16)};
  opt.device = find_device("a100");
  const auto r = reconcile(f.launches, builtin_kernel_table(), opt);
  REQUIRE(r.calls.size() == 1);
  const auto& c = r.calls[0];
  CHECK(c.kind == CallKind::flash);
  CHECK(c.source == "flash-attn 1");
  CHECK(c.total_bytes == 295936u);
  CHECK_FALSE(c.read_bytes);
  CHECK(c.time_from == TimeSource::cycles);
  const auto& fl = variant(c, "floor");
  CHECK(*fl.reads == 294912u);  // Q + K + V = 3 x 2 x 12 x 32 x 64 x 2 B
  CHECK(fl.total == 393216u);   // and O
  CHECK(*fl.counted_over_total == Approx(295936.0 / 393216.0));
  // dram__bytes.sum alone stands for the reads and the total.
  CHECK(*fl.counted_over_reads == Approx(295936.0 / 294912.0));
  CHECK(*c.reads_over_model == Approx(295936.0 / 294912.0));
  CHECK(c.verdict == VerdictKind::at_floor);
  CHECK_THAT(c.verdict_text, Catch::Contains("0.753× its total") && Catch::Contains("still in L2"));
  CHECK_FALSE(c.geometry_warning);  // (batch, heads, query splits): 312 = 2 x 12 x 13
  // The GEMMs stay outside: the first alone, the second with its split-K reduction.
  bool reduce_outside = false;
  for (const auto& k : r.outside) reduce_outside = reduce_outside || k.role == KernelRole::gemm_reduce;
  CHECK(reduce_outside);
  CHECK(r.outside.size() == 5);
  // A contradicting shape: one warning naming both.
  opt.shapes = {shape(4, 12, 12, 32, 32, 64, Dtype::fp16)};
  opt.shapes[0].heads = 10, opt.shapes[0].kv_heads = 10;
  const auto w = reconcile(f.launches, builtin_kernel_table(), opt);
  REQUIRE(w.calls[0].geometry_warning);
  CHECK_THAT(*w.calls[0].geometry_warning,
             Catch::Contains("of 312 CTAs") && Catch::Contains("batch 4, 10 heads") && Catch::Contains("flash-attn 1"));
}

TEST_CASE("ncu 2021 details page: standard attention with cuBLAS split-K GEMMs", "[reconcile][ncu][real-features]") {
  const auto f = read_any("details_2021_standard.csv");
  REQUIRE(f.launches.size() == 7);
  ReconcileOptions opt;
  opt.shapes = {shape(2, 8, 8, 20, 20, 32, Dtype::fp32)};
  const auto r = reconcile(f.launches, builtin_kernel_table(), opt);
  REQUIRE(r.calls.size() == 1);
  const auto& c = r.calls[0];
  CHECK(c.kind == CallKind::standard);
  CHECK(c.launches == std::vector<std::size_t>{1, 2, 3});
  CHECK(c.total_bytes == 82048u + 25664u + 66688u);
  const auto& st = variant(c, "standard");
  // Q, K, S, P, V read (fp32); S, P and O written.
  CHECK(*st.reads == 3u * 2 * 8 * 20 * 32 * 4 + 2u * 2 * 8 * 20 * 20 * 4);
  CHECK(c.verdict == VerdictKind::matches);
  // The output projection (GEMM + splitKreduce) has no softmax: outside, its
  // reduction with it.
  CHECK(group_launches({KernelRole::gemm, KernelRole::gemm_reduce, KernelRole::softmax, KernelRole::gemm,
                        KernelRole::gemm_reduce})
            .front()
            .launches.size() == 5);
}

TEST_CASE("ncu 2021 raw page and a capture of two processes, each header with its units row", "[reconcile][ncu]") {
  const auto r21 = read_any("raw_2021.csv");
  CHECK(r21.format == "ncu-raw");
  REQUIRE(r21.launches.size() == 1);
  CHECK(r21.launches[0].dram_total == 295936u);
  CHECK(r21.launches[0].grid_size == 312u);
  CHECK(*r21.launches[0].seconds == Approx(8702.5 / 930e6));
  const auto two = read_any("raw_two_captures.csv");
  REQUIRE(two.launches.size() == 2);
  CHECK(*two.launches[1].seconds == Approx(612.5e-6));
  CHECK(two.launches[1].dram_read == 101190000u);
  CHECK(two.launches[0].grid == std::array<std::uint64_t, 3>{32, 4, 16});
  CHECK(two.notes.empty());
}

TEST_CASE("a B200 raw page of decode calls: times only, splits from the grid or the heuristic, a cut capture",
          "[reconcile][ncu][decode]") {
  const auto f = read_any("raw_b200_decode.csv");
  REQUIRE(f.launches.size() == 7);
  CHECK(f.launches[0].time_from == TimeSource::duration);
  ReconcileOptions opt;
  Shape s = shape(8, 32, 8, 1, 32768, 128);
  s.decode = true;
  opt.shapes = {s};
  opt.device = find_device("b200");
  opt.sm_count = opt.device->sm_count;
  const auto r = reconcile(f.launches, builtin_kernel_table(), opt);
  // The combine kernel the capture starts with lost its split kernel to
  // --launch-skip: it stays outside, paired with nothing.
  REQUIRE(r.calls.size() == 3);
  REQUIRE(r.outside.size() == 1);
  CHECK(r.outside[0].role == KernelRole::split_kv_combine);
  const auto& cudnn = r.calls[0];
  CHECK(cudnn.kind == CallKind::split_kv);
  CHECK(cudnn.launches.size() == 2);  // with cudnn::fusion::lean_reduction_kernel
  CHECK_THAT(cudnn.splits_from, Catch::StartsWith("heuristic"));
  const auto& fa = r.calls[1];
  CHECK(fa.splits == 4);
  CHECK(fa.splits_from == "launch grid");
  CHECK(fa.judged_against == "decode_split");
  CHECK(variant(fa, "decode_split").splits == 4);
  CHECK_FALSE(fa.geometry_warning);
  const auto& fi = r.calls[2];
  CHECK(fi.judged_against == "decode_paged");
  for (const auto& c : r.calls) {
    CHECK(c.verdict == VerdictKind::no_counts);
    CHECK(c.seconds);
    CHECK(c.model_bandwidth);
    CHECK(c.time_over_roofline);
    CHECK(c.shape->decode);
  }
  // --splits overrides the grid.
  opt.splits = 16;
  const auto forced = reconcile(f.launches, builtin_kernel_table(), opt);
  CHECK(forced.calls[1].splits == 16);
  CHECK(forced.calls[1].splits_from == "--splits");
  // A shape the grid contradicts: one warning per call, naming both.
  opt.splits = 0;
  opt.shapes[0].batch = 4;
  const auto w = reconcile(f.launches, builtin_kernel_table(), opt);
  REQUIRE(w.calls[1].geometry_warning);
  CHECK_THAT(*w.calls[1].geometry_warning, Catch::Contains("(1, 4, 64)") && Catch::Contains("batch 4, 32 heads"));
  CHECK_FALSE(w.calls[0].geometry_warning);  // cuDNN's layout is not public: no check
}

TEST_CASE("Nsight Compute console text: kernel lines, Section tables, units, old tables without a header",
          "[reconcile][console]") {
  const auto f = read_any("console_vllm_decode.txt");
  CHECK(f.format == "ncu-console");
  REQUIRE(f.launches.size() == 2);
  const auto& v2 = f.launches[0];
  CHECK_THAT(v2.kernel, Catch::StartsWith("void vllm::paged_attention_v2_kernel<unsigned short"));
  CHECK(v2.grid == std::array<std::uint64_t, 3>{32, 1, 32});
  CHECK(v2.stream == "8120/1/7/");
  CHECK(*v2.seconds == Approx(272.16e-6));
  CHECK(v2.time_from == TimeSource::section);
  CHECK(*v2.dram_pct_of_peak == Approx(94.59));
  CHECK(v2.dram_read == 268570000u);
  CHECK(v2.dram_write == 851970u);
  CHECK(v2.l2_read_sectors == 8420000u);
  CHECK(v2.l2_read_hit_sectors == 23808u);
  CHECK(*f.launches[1].seconds == Approx(5.12e-6));
  CHECK(*f.launches[1].dram_pct_of_peak == Approx(3.21));
  ReconcileOptions opt;
  opt.shapes = {shape(1, 32, 32, 1, 16384, 128, Dtype::fp16)};
  const auto r = reconcile(f.launches, builtin_kernel_table(), opt);
  REQUIRE(r.calls.size() == 1);
  const auto& c = r.calls[0];
  CHECK(c.launches.size() == 2);  // the reduce kernel joins its split kernel
  CHECK(c.splits == 32);
  CHECK(c.judged_against == "decode_paged");
  CHECK(c.verdict == VerdictKind::matches);
  CHECK(*c.read_bytes == 268570000u + 331780u);
  CHECK(*c.l2_hit_rate == Approx((23808.0 + 8192.0) / (8420000.0 + 10368.0)));
  const double floor_reads = static_cast<double>(*variant(c, "decode_floor").reads);
  CHECK(*variant(c, "decode_floor").counted_over_reads == Approx((268570000.0 + 331780.0) / floor_reads));
}

TEST_CASE("Nsight Systems: a decode loop's trace and its NVTX ranges; an older trace in microseconds",
          "[reconcile][nsys]") {
  LaunchStream s;
  import_measurements(fixtures + "/nsys_decode_trace.csv", builtin_kernel_table(), s);
  CHECK(s.format == "nsys-trace");
  REQUIRE(s.launches.size() == 12);  // the memcpy and memset rows left out, with a note
  CHECK_THAT(s.notes.at(0), Catch::Contains("2 memory copies and sets left out"));
  CHECK(s.launches[2].grid == std::array<std::uint64_t, 3>{1, 4, 64});
  CHECK(*s.launches[2].seconds == Approx(252416e-9));
  CHECK(s.launches[2].stream == "NVIDIA H200 (0)/1//7/");
  import_measurements(fixtures + "/nsys_decode_nvtx.csv", builtin_kernel_table(), s);
  CHECK(s.format == "nsys-nvtx");
  CHECK(s.ranges.size() == 3);
  apply_nvtx_ranges(s);
  CHECK(s.launches[2].nvtx == "hbmscope:decode=1,seq_kv=32768,d=128,heads=32,kv_heads=8,batch=8");
  CHECK(s.launches[3].nvtx == s.launches[2].nvtx);
  CHECK(s.launches[0].nvtx.empty());  // rms_norm starts before the range
  const auto r = reconcile(s.launches, builtin_kernel_table(), {});
  REQUIRE(r.calls.size() == 3);
  for (const auto& c : r.calls) {
    CHECK(c.kind == CallKind::split_kv);
    CHECK(c.shape_from == "nvtx");
    CHECK(c.splits == 4);
    CHECK(c.splits_from == "launch grid");
    CHECK(c.judged_against == "decode_split");
  }
  const auto old = read_any("nsys_trace_2023.csv");
  REQUIRE(old.launches.size() == 1);
  CHECK(*old.launches[0].seconds == Approx(610.304e-6));
  CHECK(old.launches[0].start_ns == 1500000125u);
  ReconcileOptions opt;
  opt.shapes = {shape(4, 16, 16, 4096, 4096, 64)};
  CHECK_FALSE(reconcile(old.launches, builtin_kernel_table(), opt).calls[0].geometry_warning);
  opt.shapes[0].batch = 2;
  const auto w = reconcile(old.launches, builtin_kernel_table(), opt);
  REQUIRE(w.calls[0].geometry_warning);
  CHECK_THAT(*w.calls[0].geometry_warning, Catch::Contains("(32, 4, 16)") && Catch::Contains("batch 2, 16 heads"));
}

TEST_CASE("inputs that are not what they seem: one line each", "[reconcile][bad]") {
  CHECK_THAT(error_of("bad/prof_only.txt"), Catch::Contains("no kernel was profiled") &&
                                                Catch::Contains("\"No kernels were profiled\""));
  CHECK_THAT(error_of("bad/prof_error.txt"),
             Catch::Contains("the profiler reported an error ('==ERROR== The application returned an error code (1).')"));
  CHECK_THAT(error_of("bad/after_quote.csv"), Catch::Contains("after_quote.csv:4: field 5: text after a closing quote"));
  CHECK_THAT(error_of("bad/duplicate_ids.csv"),
             Catch::Contains("duplicate_ids.csv:6: launch ID 0 of process '1' again (first at") &&
                 Catch::Contains("duplicate_ids.csv:4)"));
  CHECK_THAT(error_of("bad/denormal_duration.csv"), Catch::Contains("'1e-310' is not a kernel's duration"));
  CHECK_THAT(error_of("bad/nsys_summary.csv"), Catch::Contains("a summary report"));
  for (const char* name : {"bad/prof_only.txt", "bad/prof_error.txt", "bad/after_quote.csv", "bad/duplicate_ids.csv",
                           "bad/denormal_duration.csv", "bad/nsys_summary.csv"})
    CHECK(error_of(name).find('\n') == std::string::npos);
}

TEST_CASE("a byte-order mark does not hide the header", "[reconcile][ncu]") {
  std::string text = slurp("raw_two_captures.csv");
  text = "\xEF\xBB\xBF" + text.substr(text.find("\"ID\""));
  const auto f = read_ncu_csv_text(text, "bom.csv");
  CHECK(f.launches.size() == 2);
  const auto c = read_ncu_console_text("\xEF\xBB\xBF" + slurp("console_vllm_decode.txt"), "bom.txt");
  CHECK(c.launches.size() == 2);
}

TEST_CASE("launches are bounded by their memory", "[reconcile][ncu]") {
  LaunchStream s;
  s.max_bytes = 4096;
  MeasuredLaunch l;
  l.origin = "x.csv:9";
  l.kernel = std::string(1000, 'k');
  CHECK_THROWS_WITH(
      [&] {
        for (int i = 0; i < 100; ++i) s.add(l);
      }(),
      Catch::Contains("x.csv:9: more than 0 MiB of launches (") && Catch::Contains("--launch-count"));
  CHECK(s.bytes <= 4096);
  CHECK_FALSE(s.launches.empty());
}

TEST_CASE("kernel names are escaped in the table, Markdown and CSV", "[reconcile][report]") {
  MeasuredLaunch l;
  l.kernel = "evil\x1b]0;pwned\x07\rflash_fwd_kernel";
  l.dram_read = 1000;
  l.seconds = 1e-6;
  const auto r = reconcile({l}, builtin_kernel_table(), {});
  REQUIRE(r.calls.size() == 1);
  Report rep;
  const ReconcileView v{r, {{"in\x1b.csv", "ncu-raw", 1}}, "built in", rep};
  for (Format f : {Format::table, Format::md, Format::csv}) {
    const std::string out = render_reconcile(v, {f});
    INFO(out);
    CHECK(out.find('\x1b') == std::string::npos);
    CHECK(out.find('\x07') == std::string::npos);
    CHECK(out.find('\r') == std::string::npos);
    CHECK_THAT(out, Catch::Contains("\\x1b"));
  }
}

TEST_CASE("every variant's counted / model ratio in JSON, CSV and --columns all", "[reconcile][report]") {
  const auto f = read_any("details_2021_fa1.csv");
  ReconcileOptions opt;
  opt.shapes = {shape(2, 12, 12, 32, 32, 64, Dtype::fp16)};
  const auto r = reconcile(f.launches, builtin_kernel_table(), opt);
  Report rep;
  rep.command = "reconcile";
  rep.rows = reconcile_rows(r);
  ReconcileView v{r, {{"f.csv", "ncu-details", 6}}, "built in", rep};
  const auto j = nlohmann::json::parse(render_reconcile(v, {Format::json}));
  const auto& model = j["reconcile"]["calls"][0]["model"];
  REQUIRE(model.size() == 2);
  for (const auto& m : model) CHECK(m["counted_over_total"].is_number());
  CHECK(j["reconcile"]["calls"][0]["counted"]["total_bytes"] == 295936u);
  CHECK(j["reconcile"]["calls"][0]["time_from"] == "derived: cycles / cycles per second");
  const std::string csv = render_reconcile(v, {Format::csv});
  CHECK_THAT(csv, Catch::Contains("model_floor_counted_over_total") && Catch::Contains("model_flash_no_l2_counted_over_reads"));
  v.columns = reconcile_column_groups("all");
  const std::string table = render_reconcile(v, {Format::table});
  CHECK_THAT(table, Catch::Contains("Counted / floor") && Catch::Contains("0.753× (r+w)") &&
                        Catch::Contains("312 CTAs") && Catch::Contains("~9.36 µs"));
  CHECK_THROWS_AS(reconcile_column_groups("bytes"), UsageError);
}

TEST_CASE("the option product is counted before it is built", "[reconcile][cost]") {
  const auto f = read_any("raw_two_captures.csv");
  ReconcileOptions opt;
  SweepAxes a;
  a.seq = {4096};
  a.head_dim = {64};
  a.heads = parse_int_axis("151:250:+1", "heads");
  a.seq_kv = parse_int_axis("1:1000000:+1", "seq_kv");
  opt.axes = a;
  CHECK_THROWS_WITH(reconcile(f.launches, builtin_kernel_table(), opt),
                    Catch::StartsWith("100000000 shapes given for 2 attention call(s)"));
  a.seq_kv = {4096};
  a.heads = {16, 32};
  opt.axes = a;
  const auto r = reconcile(f.launches, builtin_kernel_table(), opt);
  CHECK(r.calls[1].shape->heads == 32);
}

TEST_CASE("the L2 simulation runs on the shapes the run's budget allows", "[reconcile][l2]") {
  const auto f = read_any("raw_two_captures.csv");
  ReconcileOptions opt;
  opt.shapes = {shape(4, 16, 16, 4096, 4096, 64)};
  opt.l2 = L2SimConfig{50ull << 20, 132, 2};
  std::size_t asked = 0;
  opt.l2_plan = [&](const std::vector<Shape>& shapes, std::vector<std::string>& notes) {
    asked += shapes.size();
    notes.push_back("left out by the plan");
    return std::vector<bool>(shapes.size(), false);
  };
  const auto r = reconcile(f.launches, builtin_kernel_table(), opt);
  CHECK(asked == 1);  // one distinct shape for both calls
  for (const auto& c : r.calls) {
    for (const auto& m : c.model) CHECK(m.id != "flash_l2_sim");
    CHECK_THAT(c.notes.front(), Catch::Contains("L2 simulation left out"));
  }
  CHECK(std::find(r.notes.begin(), r.notes.end(), "left out by the plan") != r.notes.end());
}

TEST_CASE("combine kernels join split kernels of their own family only", "[reconcile][grouping]") {
  using R = KernelRole;
  const auto g = group_launches({R::flash_fwd, R::split_kv_combine, R::split_kv, R::split_kv_combine}, {},
                                {"flash-attn", "flash-attn 3", "vllm", "vllm"});
  REQUIRE(g.size() == 2);
  CHECK(g[0].kind == CallKind::flash);
  CHECK(g[0].launches.size() == 1);
  CHECK(g[1].kind == CallKind::split_kv);
  CHECK(g[1].launches == std::vector<std::size_t>{2, 3});
}

TEST_CASE("NVTX ranges carry the shape options' fields", "[reconcile][nvtx]") {
  const Shape w = parse_nvtx_shape("hbmscope:seq=8192,d=128,heads=32,kv_heads=8,causal=1,window=4096", Dtype::bf16);
  CHECK(w.window == 4096);
  const Shape r = parse_nvtx_shape("hbmscope:seq_lens=512;4096;128:4096,d=128,heads=8", Dtype::bf16);
  CHECK(r.batch == 3);
  CHECK(r.seq_q == 4096);
  CHECK(r.seq_lens.size() == 3);
  CHECK(r.seq_lens[2].q == 128);
  const Shape d = parse_nvtx_shape("hbmscope:context_lengths=512;4096;131072,d=128,heads=32,kv_heads=8,page_size=64",
                                   Dtype::bf16);
  CHECK(d.decode);
  CHECK(d.seq_q == 1);
  CHECK(d.batch == 3);
  CHECK(d.seq_kv == 131072);
  CHECK(d.page_size == 64);
  const Shape m = parse_nvtx_shape("hbmscope:decode=1,seq_kv=4096,d=576,dv=512,heads=128,mla=1,kv_dtype=fp8", Dtype::bf16);
  CHECK(m.latent_kv);
  CHECK(m.kv_heads == 1);
  CHECK(m.head_dim_v == 512);
  CHECK(m.kv_dtype == Dtype::fp8);
  CHECK_THROWS_WITH(parse_nvtx_shape("hbmscope:seq=1,d=64,windw=3", Dtype::bf16), Catch::Contains("unknown key 'windw'"));
  CHECK_THROWS_WITH(parse_nvtx_shape("hbmscope:seq_lens=5;x,d=64", Dtype::bf16), Catch::Contains("seq_lens='x'"));
}

TEST_CASE("launch geometry: split counts and contradictions", "[reconcile][geometry]") {
  MeasuredLaunch l;
  Shape s = shape(8, 32, 8, 1, 32768, 128);
  l.grid = {1, 4, 64};
  CHECK(check_grid(GridLayout::fa2_splitkv, l, s).splits == 4u);
  l.grid = {1, 8, 32};  // unsplit: (row blocks, batch, heads)
  CHECK(check_grid(GridLayout::fa2_splitkv, l, s).splits == 1u);
  l.grid = {32, 8, 64};  // vLLM: (heads, sequences, partitions)
  CHECK(check_grid(GridLayout::vllm, l, s).splits == 64u);
  l.grid = {};
  l.grid_size = 32 * 8 * 3;
  CHECK(check_grid(GridLayout::vllm, l, s).splits == 3u);
  l.grid = {7, 3, 5};
  const auto bad = check_grid(GridLayout::fa2, l, s);
  REQUIRE(bad.contradiction);
  CHECK_THAT(*bad.contradiction, Catch::Contains("(7, 3, 5)") && Catch::Contains("batch 8, 32 heads, 8 kv heads"));
  CHECK_FALSE(check_grid(GridLayout::unknown, l, s).contradiction);
}

TEST_CASE("nvtx_pushpop_trace: CPU times, said in a note", "[reconcile][nsys]") {
  LaunchStream s = read_nsys_csv_text(
      "Start (ns),Duration (ns),CorrId,GrdX,GrdY,GrdZ,BlkX,BlkY,BlkZ,Reg/Trd,StcSMem (MB),DymSMem (MB),Bytes (MB),"
      "Throughput (MB/s),SrcMemKd,DstMemKd,Device,Ctx,GreenCtx,Strm,Name\n"
      "1000,500,1,32,4,16,128,1,1,255,0,0,,,,,GPU (0),1,,7,pytorch_flash::flash_fwd_kernel<T>(P)\n"
      "9000,500,2,32,4,16,128,1,1,255,0,0,,,,,GPU (0),1,,7,pytorch_flash::flash_fwd_kernel<T>(P)\n",
      "trace.csv");
  read_nsys_csv(
      [text = std::string(
           "Start (ns),End (ns),Duration (ns),DurChild (ns),DurNonChild (ns),Name,PID,TID,Lvl,NumChild,RangeId,"
           "ParentId,RangeStack\n"
           "900,2000,1100,0,1100,\"hbmscope:seq=4096,d=64,heads=16,batch=4\",42,42,0,0,1,,:1\n"
           "8000,20000,12000,0,12000,other range,42,42,0,0,2,,:2\n"),
       at = std::size_t{0}](char* b, std::size_t n) mutable {
        const std::size_t k = std::min(n, text.size() - at);
        std::memcpy(b, text.data() + at, k);
        at += k;
        return k;
      },
      "pushpop.csv", s);
  REQUIRE(s.ranges.size() == 1);
  CHECK_FALSE(s.ranges[0].projected);
  apply_nvtx_ranges(s);
  CHECK(s.launches[0].nvtx == "hbmscope:seq=4096,d=64,heads=16,batch=4");
  CHECK(s.launches[1].nvtx.empty());
  bool cpu_note = false, left_note = false;
  for (const auto& n : s.notes) {
    cpu_note = cpu_note || n.find("CPU times") != std::string::npos;
    left_note = left_note || n.find("1 of 2 traced launch(es) started inside no hbmscope: range") != std::string::npos;
  }
  CHECK(cpu_note);
  CHECK(left_note);
}

TEST_CASE("one decode shape for every call: flash kernels decode unsplit, a standard call gets none",
          "[reconcile][decode]") {
  const auto f = read_any("raw_sdpa.csv");
  ReconcileOptions opt;
  Shape s = shape(4, 16, 16, 1, 4096, 64);
  s.decode = true;
  opt.shapes = {s};
  const auto r = reconcile(f.launches, builtin_kernel_table(), opt);
  REQUIRE(r.calls.size() == 4);
  CHECK(r.calls[0].kind == CallKind::split_kv);  // one flash kernel on a decode shape
  CHECK(r.calls[0].splits == 1);
  CHECK(r.calls[0].splits_from == "no combine kernel");  // flash-attn 2's forward kernel: unsplit
  CHECK_FALSE(r.calls[0].geometry_warning);              // its grid (32, 4, 16) fits batch 4, 16 heads
  CHECK(r.calls[1].splits_from == "no combine kernel");
  CHECK_FALSE(r.calls[3].shape);
  CHECK(r.calls[3].verdict == VerdictKind::no_shape);
  CHECK_THAT(r.calls[3].notes.at(0), Catch::Contains("a decode shape (options) for a standard call"));
  // Separators in Grid Size too ("2,560"), read with the capture's decimal mark.
  CHECK(read_any("details_2021_fa1.csv").launches[0].grid_size == 2560u);
}
