// Measurement bookkeeping without a GPU: kernel lists, statistics, derived
// figures, report rows through a fake backend, the no-GPU backend, and how
// printers show measurements.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "hbmscope/backend.hpp"
#include "hbmscope/config.hpp"
#include "hbmscope/error.hpp"
#include "hbmscope/json_report.hpp"
#include "hbmscope/measure.hpp"
#include "hbmscope/model.hpp"
#include "hbmscope/printers.hpp"
#include "hbmscope/reference.hpp"
#include "hbmscope/sweep.hpp"

using namespace hbmscope;

namespace {

// Every kernel takes 1 ms, except the one told to fail or be skipped.
class FakeBackend final : public Backend {
 public:
  std::string fail_kernel, skip_kernel;
  std::vector<Shape> seen;
  bool available() const override { return true; }
  std::string unavailable_reason() const override { return {}; }
  DeviceInfo device() const override {
    DeviceInfo d;
    d.name = "Fake GPU";
    d.cc_major = 9;
    d.sm_count = 132;
    d.l2_bytes = 60'000'000;
    d.peak_bandwidth = 4.8e12;
    return d;
  }
  KernelMeasurement run(const Shape& s, KernelKind k, const MeasureOptions&) override {
    seen.push_back(s);
    KernelMeasurement m;
    m.kernel = std::string(kernel_name(k));
    m.variant = std::string(kernel_variant(k));
    if (m.kernel == fail_kernel) throw Error("launch failed: out of luck");
    if (m.kernel == skip_kernel) {
      m.status = MeasureStatus::skipped;
      m.reason = "needs 70 GB of device memory, 60 GB free";
      return m;
    }
    m.status = MeasureStatus::ok;
    m.rel_error = 3e-3;
    m.validated_on = describe(s);
    if (k == KernelKind::flash || k == KernelKind::flash_v1) {
      m.block_rows = s.block_rows;
      m.block_cols = s.block_cols;
      m.warps = s.block_rows / (k == KernelKind::flash ? 32 : 16);
    }
    m.timing = summarize({1e-3, 1.1e-3, 0.9e-3}, 0.8e-3);
    return m;
  }
  KernelMeasurement copy_probe(const MeasureOptions&) override {
    KernelMeasurement m;
    m.kernel = m.variant = "copy";
    m.status = MeasureStatus::ok;
    m.model_bytes = 2'000'000'000;
    m.timing = summarize({0.5e-3}, 0.5e-3);  // 4 TB/s
    return m;
  }
};

Shape note_shape() {
  Shape s;
  s.seq_q = s.seq_kv = 4096;
  s.head_dim = 64;
  return s;
}

}  // namespace

TEST_CASE("kernel list parsing (--kernels)", "[measure]") {
  CHECK(parse_kernels("flash") == std::vector<KernelKind>{KernelKind::flash});
  CHECK(parse_kernels("floor,standard") == std::vector<KernelKind>{KernelKind::floor, KernelKind::standard});
  CHECK_THROWS_WITH(parse_kernels("flash,flash"), Catch::Contains("'flash' is listed twice"));
  CHECK_THROWS_WITH(parse_kernels("flash,cudnn"), Catch::Contains("'cudnn' is not one of"));
  CHECK_THROWS_WITH(parse_kernels(""), Catch::Contains("empty list"));
  CHECK_THROWS_WITH(parse_kernels("flash,"), Catch::Contains("'' is not one of"));
  CHECK(kernel_variant(KernelKind::flash) == "flash_no_l2");
  CHECK(kernel_name(KernelKind::copy) == "copy");
  CHECK(parse_kernels("softmax") == std::vector<KernelKind>{KernelKind::softmax});
}

TEST_CASE("timing statistics", "[measure]") {
  const auto t = summarize({4.0, 1.0, 3.0, 2.0}, 0.5);
  CHECK(t.median == 2.5);
  CHECK(t.min == 1.0);
  CHECK(t.max == 4.0);
  CHECK(t.rel_spread == Approx(3.0 / 2.5));
  CHECK(t.warm_median == 0.5);
  CHECK(t.samples == std::vector<double>{4.0, 1.0, 3.0, 2.0});  // kept in run order
  CHECK(summarize({2.0, 1.0, 3.0}, 0).median == 2.0);
  CHECK(summarize({}, 0).median == 0.0);
}

TEST_CASE("derived figures of a measurement", "[measure]") {
  KernelMeasurement m;
  m.timing = summarize({2e-3}, 0);
  complete_measurement(m, 8'000'000'000, 600'000'000'000, 4e12, 5e12);
  CHECK(m.bandwidth == Approx(4e12));
  CHECK(m.copy_fraction == Approx(1.0));
  CHECK(m.tflops == Approx(300.0));
  CHECK(m.predicted_copy == Approx(2e-3));
  CHECK(m.predicted_peak == Approx(1.6e-3));
  CHECK(m.measured_over_predicted == Approx(1.0));
  KernelMeasurement no_copy;
  no_copy.timing = summarize({1e-3}, 0);
  complete_measurement(no_copy, 1000, 0, 0.0, 5e12);
  CHECK(no_copy.copy_fraction == 0.0);
  CHECK(no_copy.measured_over_predicted == 0.0);
  CHECK(no_copy.predicted_peak == Approx(2e-10));
}

TEST_CASE("flash blocks of a measured shape are the kernel's", "[measure]") {
  Shape s = note_shape();
  s.block_rows = s.block_cols = 128;
  s.head_dim = 128;
  CHECK(with_flash_blocks(s, false).block_cols == 64);  // the d = 128 default is 128 x 64
  s.block_rows = 64;
  s.block_cols = 64;
  CHECK(with_flash_blocks(s, true).block_rows == 64);
  s.block_rows = 32;
  CHECK_THROWS_AS(with_flash_blocks(s, true), Error);
  s.head_dim = 96;  // no flash kernel: blocks stay, flash will be skipped
  CHECK(with_flash_blocks(s, true).block_rows == 32);
}

TEST_CASE("measure_row: model bytes per kernel variant and derived figures", "[measure]") {
  FakeBackend b;
  const Shape s = with_flash_blocks(note_shape(), false);
  const MeasureOptions opt;
  const DeviceReport dev = measure_device(b, opt);
  CHECK(copy_bandwidth(dev.copy) == Approx(4e12));
  CHECK(dev.copy.bandwidth == Approx(4e12));
  const Row row = measure_row(b, s, parse_kernels("standard,flash,floor"), opt, copy_bandwidth(dev.copy));
  REQUIRE(row.measurements.size() == 3);
  const auto& st = row.measurements[0];
  const auto& fl = row.measurements[1];
  const auto& fo = row.measurements[2];
  CHECK(st.model_bytes == standard_bytes(s));
  CHECK(fl.model_bytes == flash_no_l2_bytes(s));
  CHECK(fo.model_bytes == floor_bytes(s));
  CHECK(fl.block_rows == 128);
  CHECK(fl.block_cols == 128);
  CHECK(fl.bandwidth == Approx(static_cast<double>(flash_no_l2_bytes(s)) / 1e-3));
  CHECK(fl.tflops == Approx(static_cast<double>(attention_flops(s)) / 1e-3 / 1e12));
  CHECK(fo.predicted_copy == Approx(static_cast<double>(floor_bytes(s)) / 4e12));
  CHECK(fo.predicted_peak == Approx(static_cast<double>(floor_bytes(s)) / 4.8e12));
  CHECK(fo.tflops == 0.0);  // the floor kernel does none of attention's FLOPs
  CHECK(st.tflops == Approx(fl.tflops));
}

TEST_CASE("softmax kernel bytes: S read once, P written once", "[measure]") {
  FakeBackend b;
  Shape s = note_shape();
  s.batch = 2;
  s.heads = 3;
  s.kv_heads = 1;
  s.seq_kv = 1000;
  CHECK(softmax_bytes(s) == 2ull * 2 * 2 * 3 * 4096 * 1000);
  const Row row = measure_row(b, with_flash_blocks(s, false), {KernelKind::softmax}, {}, 4e12);
  CHECK(row.measurements[0].kernel == "softmax");
  CHECK(row.measurements[0].model_bytes == softmax_bytes(s));
  CHECK(row.measurements[0].tflops == 0.0);
  CHECK(row.measurements[0].copy_fraction == Approx(static_cast<double>(softmax_bytes(s)) / 1e-3 / 4e12));
  // Its bytes are the middle of the standard variant: 2 of the 4 N^2 terms.
  Shape one = note_shape();
  CHECK(standard_bytes(one) - 2 * softmax_bytes(one) == floor_bytes(one));
}

TEST_CASE("measure_row: failures and skips are reported, not thrown", "[measure]") {
  FakeBackend b;
  b.fail_kernel = "flash";
  b.skip_kernel = "standard";
  const Row row = measure_row(b, note_shape(), parse_kernels("standard,flash,floor"), {}, 4e12);
  CHECK(row.measurements[0].status == MeasureStatus::skipped);
  CHECK(row.measurements[0].bandwidth == 0.0);
  CHECK(row.measurements[1].status == MeasureStatus::failed);
  CHECK(row.measurements[1].reason == "launch failed: out of luck");
  CHECK(row.measurements[2].status == MeasureStatus::ok);
}

TEST_CASE("the no-GPU backend refuses with its reason", "[measure][no-gpu]") {
  auto b = make_no_gpu_backend("no CUDA device: cudaGetDeviceCount: cudaErrorNoDevice: no CUDA-capable device");
  CHECK_FALSE(b->available());
  CHECK_THROWS_WITH(measure_device(*b, {}), Catch::Contains("cudaErrorNoDevice"));
  CHECK_THROWS_WITH(measure_row(*b, note_shape(), {KernelKind::flash}, {}, 0), Catch::Contains("no CUDA device"));
  CHECK_THROWS_AS(b->run(note_shape(), KernelKind::flash, {}), Error);
}

TEST_CASE("a shape no kernel runs is refused before any device work, by both backends", "[measure][no-gpu]") {
  // The same check (check_measurable) refuses it in measure_row before the
  // backend is asked anything, and in either backend's run(): the no-GPU one
  // says why the shape is refused, not that there is no device.
  auto none = make_no_gpu_backend("no CUDA device: the driver reports 0 devices");
  Shape s = note_shape();
  s.causal = true;
  s.kv_dtype = Dtype::fp8;
  CHECK_THROWS_WITH(measure_row(*none, s, {KernelKind::flash}, {}, 0),
                    Catch::StartsWith("measure: our kernels do not run K and V in a dtype of their own (--kv-dtype fp8"));
  CHECK_THROWS_WITH(none->run(s, KernelKind::standard, {}), Catch::Contains("--kv-dtype fp8"));
  FakeBackend fake;
  CHECK_THROWS_WITH(measure_row(fake, s, parse_kernels("standard,flash"), {}, 4e12), Catch::Contains("fp8"));
  CHECK(fake.seen.empty());  // nothing ran
  s.kv_dtype.reset();
  s.chunk = 1024;
  CHECK_THROWS_WITH(measure_row(fake, s, parse_kernels("standard,flash_v1"), {}, 4e12),
                    Catch::Contains("chunked attention (--chunk) in the flash kernels") &&
                        Catch::Contains("(kernel flash_v1, shape "));
  CHECK(fake.seen.empty());
  CHECK(measure_row(fake, s, parse_kernels("standard,softmax"), {}, 4e12).measurements.size() == 2);
  // A window: every prefill kernel runs it; the rows carry it.
  s.chunk = 0;
  s.window = 512;
  const Row row = measure_row(fake, s, parse_kernels("standard,flash,flash_v1"), {}, 4e12);
  CHECK(row.shape.window == 512);
  CHECK(row.measurements.size() == 3);
  for (const auto& m : row.measurements) CHECK(m.status == MeasureStatus::ok);
  // Without a device the no-GPU backend still says that first.
  CHECK_THROWS_WITH(measure_row(*none, s, {KernelKind::flash}, {}, 0), Catch::Contains("no CUDA device"));
}

namespace {
// Sets an environment variable for one scope.
struct ScopedEnv {
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (old_) setenv(name_, old_->c_str(), 1);
    else unsetenv(name_);
  }
  const char* name_;
  std::optional<std::string> old_;
};

// The CUDA plugin this build made, where there is one.
const char* built_plugin() {
#ifdef HBMSCOPE_TEST_CUDA_PLUGIN
  return HBMSCOPE_TEST_CUDA_PLUGIN;
#else
  return "";
#endif
}
}  // namespace

TEST_CASE("make_backend on this machine", "[measure][no-gpu]") {
  // CI has no GPU: make_backend must give the no-GPU backend with a one-line
  // reason. (On a machine with a device this checks the device instead.)
  ScopedEnv plugin("HBMSCOPE_CUDA_PLUGIN", built_plugin());
  auto b = make_backend(0);
  if (!b->available()) {
    const std::string why = b->unavailable_reason();
    CHECK_THAT(why, Catch::StartsWith("no CUDA device"));
    CHECK(why.find('\n') == std::string::npos);
    if (!config::have_cuda) CHECK_THAT(why, Catch::Contains("without the CUDA backend"));
  } else {
    CHECK(b->device().sm_count > 0);
    CHECK(b->device().peak_bandwidth > 0);
  }
  auto none = make_backend(1 << 20);
  CHECK_FALSE(none->available());
}

TEST_CASE("without CUDA, measure says why and how to get it", "[measure][no-gpu]") {
  if (config::have_cuda) {
    // A CUDA build whose plugin cannot be found or opened: one line naming it.
    ScopedEnv plugin("HBMSCOPE_CUDA_PLUGIN", "/nonexistent/libhbmscope_cuda.so");
    auto b = make_backend(0);
    REQUIRE_FALSE(b->available());
    const std::string why = b->unavailable_reason();
    CHECK_THAT(why, Catch::StartsWith("no CUDA device: cannot load the CUDA backend '/nonexistent/libhbmscope_cuda.so': "));
    CHECK(why.find('\n') == std::string::npos);
  } else {
    auto b = make_backend(0);
    REQUIRE_FALSE(b->available());
    const std::string why = b->unavailable_reason();
    CHECK_THAT(why, Catch::Contains("install the CUDA toolkit and reconfigure"));
    CHECK_THAT(why, Catch::Contains("-DHBMSCOPE_CUDA=ON"));
    CHECK(why.find('\n') == std::string::npos);
  }
}

TEST_CASE("floor reference adds Q, K and V", "[measure]") {
  Shape s = note_shape();
  s.seq_q = 2;
  s.seq_kv = 1;
  s.head_dim = 8;
  std::vector<float> q(16, 1.0f), k(8, 0.5f), v(8, 0.25f);
  const auto o = floor_reference(s, q, k, v);
  CHECK(o[0] == 1.75f);
  CHECK(o[8] == 1.0f);  // past K's elements: Q alone
}

TEST_CASE("printers show measurements with units", "[measure][report]") {
  FakeBackend b;
  b.skip_kernel = "standard";
  Report rep;
  rep.command = "measure";
  rep.device = measure_device(b, {});
  const Shape s = with_flash_blocks(note_shape(), false);
  rep.rows.push_back(measure_row(b, s, parse_kernels("standard,flash,floor"), {}, copy_bandwidth(rep.device->copy)));
  const std::string table = render(rep, {});
  CHECK_THAT(table, Catch::Contains("Measured on Fake GPU (sm_90, 132 SMs, L2 60 MB"));
  CHECK_THAT(table, Catch::Contains("device-to-device copy 4 TB/s"));
  CHECK_THAT(table, Catch::Contains("flash 128×128"));
  CHECK_THAT(table, Catch::Contains("1 ms"));
  CHECK_THAT(table, Catch::Contains("TB/s"));
  CHECK_THAT(table, Catch::Contains("needs 70 GB of device memory"));
  CHECK_THAT(table, Catch::Contains("Measured/predicted"));
  CHECK_THAT(table, Catch::Contains("0.003"));  // rel error
  // The model table above is unchanged.
  CHECK_THAT(table, Catch::Contains("34.6 MB"));

  PrintOptions md;
  md.format = Format::md;
  CHECK_THAT(render(rep, md), Catch::Contains("| Kernel |"));

  PrintOptions csv;
  csv.format = Format::csv;
  const std::string c = render(rep, csv);
  CHECK_THAT(c, Catch::Contains(",flash_status,flash_block_rows,"));
  CHECK_THAT(c, Catch::Contains(",ok,128,128,"));

  const auto j = report_to_json(rep);
  CHECK(j["command"] == "measure");
  CHECK(j["device"]["name"] == "Fake GPU");
  CHECK(j["device"]["copy"]["bandwidth_Bps"].get<double>() == Approx(4e12));
  const auto& ms = j["rows"][0]["measurements"];
  REQUIRE(ms.size() == 3);
  CHECK(ms[0]["status"] == "skipped");
  CHECK(ms[1]["kernel"] == "flash");
  CHECK(ms[1]["block_rows"] == 128);
  CHECK(ms[1]["model_bytes"] == flash_no_l2_bytes(s));
  CHECK(ms[1]["time_s"]["samples"].size() == 3);
  CHECK(ms[1]["time_s"]["median"].get<double>() == Approx(1e-3));
  // Existing fields keep their names.
  CHECK(j["rows"][0]["bytes"]["flash_no_l2"] == flash_no_l2_bytes(s));
}

TEST_CASE("flash v2 and v1 side by side; output that fits in the L2 is marked", "[measure][report]") {
  CHECK(parse_kernels("flash,flash_v1") == std::vector<KernelKind>{KernelKind::flash, KernelKind::flash_v1});
  CHECK(kernel_name(KernelKind::flash_v1) == "flash_v1");
  CHECK(kernel_variant(KernelKind::flash_v1) == "flash_no_l2");
  FakeBackend b;
  Report rep;
  rep.command = "measure";
  rep.device = measure_device(b, {});
  // 4096 x 64, one head: O + LSE = 540 KB, inside the fake's 60 MB L2.
  const Shape small = with_flash_blocks(note_shape(), false);
  // 8192 x 128, 4 x 16 heads: O = 128 MiB, outside.
  Shape big = small;
  big.batch = 4;
  big.heads = big.kv_heads = 16;
  big.seq_q = big.seq_kv = 8192;
  big.head_dim = 128;
  big = with_flash_blocks(big, false);
  CHECK(kernel_output_bytes(big, KernelKind::flash) == 4ull * 16 * 8192 * 128 * 2 + 4ull * 16 * 8192 * 4);
  CHECK(kernel_output_bytes(big, KernelKind::softmax) == 4ull * 16 * 8192 * 8192 * 2);
  CHECK(kernel_output_bytes(big, KernelKind::floor) == 4ull * 16 * 8192 * 128 * 2);
  const auto kinds = parse_kernels("flash,flash_v1,floor");
  rep.rows.push_back(measure_row(b, small, kinds, {}, copy_bandwidth(rep.device->copy)));
  rep.rows.push_back(measure_row(b, big, kinds, {}, copy_bandwidth(rep.device->copy)));
  const auto& ms = rep.rows[0].measurements;
  CHECK(ms[0].output_fits_l2);
  CHECK(ms[2].output_fits_l2);
  CHECK_FALSE(rep.rows[1].measurements[0].output_fits_l2);
  // Both flash kernels are timed against the same bytes and FLOPs.
  CHECK(ms[0].model_bytes == ms[1].model_bytes);
  CHECK(ms[0].tflops == Approx(ms[1].tflops));
  CHECK(ms[1].tflops > 0);

  const std::string table = render(rep, {});
  CHECK_THAT(table, Catch::Contains("flash 128×128 4w"));
  CHECK_THAT(table, Catch::Contains("flash_v1 128×128 8w"));
  CHECK_THAT(table, Catch::Contains("(L2)"));
  const auto j = report_to_json(rep);
  const auto& jm = j["rows"][0]["measurements"];
  CHECK(jm[0]["warps"] == 4);
  CHECK(jm[1]["kernel"] == "flash_v1");
  CHECK(jm[1]["warps"] == 8);
  CHECK(jm[1]["lse_rel_error"].is_number());
  CHECK(jm[0]["output_fits_l2"] == true);
  CHECK_FALSE(j["rows"][1]["measurements"][0].contains("output_fits_l2"));
  PrintOptions csv;
  csv.format = Format::csv;
  CHECK_THAT(render(rep, csv), Catch::Contains("_output_fits_l2"));
}

TEST_CASE("model reports carry no measurement fields", "[measure][report]") {
  Report rep;
  rep.rows.push_back(model_row(note_shape()));
  const auto j = report_to_json(rep);
  CHECK_FALSE(j.contains("device"));
  CHECK_FALSE(j["rows"][0].contains("measurements"));
}
