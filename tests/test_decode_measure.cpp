// Measuring decode rows without a GPU: the decode kernel kinds, and measure_row
// running each with its model variant's split count (FlashAttention's
// heuristic on the device's SM count) and holding it against that variant's bytes.
#include <catch2/catch.hpp>

#include "hbmscope/backend.hpp"
#include "hbmscope/decode.hpp"
#include "hbmscope/error.hpp"
#include "hbmscope/json_report.hpp"
#include "hbmscope/measure.hpp"
#include "hbmscope/printers.hpp"
#include "hbmscope/sweep.hpp"

using namespace hbmscope;

namespace {

// Every kernel takes 100 us; remembers the shapes it was asked to run.
class DecodeFakeBackend final : public Backend {
 public:
  int sm_count = 132;
  std::vector<std::pair<Shape, KernelKind>> seen;
  bool available() const override { return true; }
  std::string unavailable_reason() const override { return {}; }
  DeviceInfo device() const override {
    DeviceInfo d;
    d.name = "Fake GPU";
    d.sm_count = sm_count;
    d.peak_bandwidth = 4.8e12;
    return d;
  }
  KernelMeasurement run(const Shape& s, KernelKind k, const MeasureOptions&) override {
    seen.emplace_back(s, k);
    KernelMeasurement m;
    m.kernel = std::string(kernel_name(k));
    m.variant = std::string(kernel_variant(k));
    m.status = MeasureStatus::ok;
    m.splits = s.splits;
    m.page_size = k == KernelKind::decode_paged ? s.page_size : 0;
    m.timing = summarize({100e-6}, 90e-6);
    return m;
  }
  KernelMeasurement copy_probe(const MeasureOptions&) override { return {}; }
};

Shape llama_decode(std::uint64_t batch, std::uint64_t len) {
  Shape s;
  s.decode = true;
  s.batch = batch;
  s.heads = 32;
  s.kv_heads = 8;
  s.seq_q = 1;
  s.seq_kv = len;
  s.head_dim = 128;
  return s;
}

}  // namespace

TEST_CASE("decode kernel kinds", "[decode][measure]") {
  CHECK(parse_kernels("decode,decode_paged") == std::vector<KernelKind>{KernelKind::decode, KernelKind::decode_paged});
  CHECK(kernel_name(KernelKind::decode) == "decode");
  CHECK(kernel_variant(KernelKind::decode) == "decode_split");
  CHECK(kernel_variant(KernelKind::decode_paged) == "decode_paged");
  CHECK_THROWS_WITH(parse_kernels("decoder"), Catch::Contains("decode, decode_paged"));
  // with_flash_blocks leaves a decode row's key block alone.
  Shape s = llama_decode(1, 4096);
  s.block_cols = 256;
  CHECK(with_flash_blocks(s, false).block_cols == 256);
}

TEST_CASE("measure_row runs decode kernels with the model's split count", "[decode][measure]") {
  for (int sms : {132, 78}) {
    DecodeFakeBackend b;
    b.sm_count = sms;
    const Shape s = llama_decode(1, 131072);
    const Row row = measure_row(b, s, {KernelKind::decode, KernelKind::decode_paged}, MeasureOptions{}, 4e12);
    REQUIRE(b.seen.size() == 2);
    for (std::size_t i = 0; i < 2; ++i) {
      const auto v = i == 0 ? DecodeVariant::split : DecodeVariant::paged;
      const std::uint64_t splits = decode_splits(s, v, static_cast<std::uint64_t>(sms));
      INFO(sms << " SMs, " << decode_variant_id(v));
      CHECK(splits > 1);
      CHECK(b.seen[i].first.splits == splits);
      CHECK(row.measurements[i].splits == splits);
      CHECK(row.measurements[i].model_bytes == decode_bytes(s, v, splits).total);
      CHECK(row.measurements[i].variant == decode_variant_id(v));
      CHECK(row.measurements[i].flops == decode_flops(s));
    }
    CHECK(row.measurements[1].page_size == 16);
    // The JSON carries the split count and the page size.
    Report rep;
    rep.command = "measure";
    rep.rows = {row};
    const std::string json = report_to_json(rep).dump();
    CHECK(json.find("\"splits\":" + std::to_string(row.measurements[0].splits)) != std::string::npos);
    CHECK(json.find("\"page_size\":16") != std::string::npos);
    // The measured table names the split count and the page size beside the kernel.
    PrintOptions print;
    print.format = Format::table;
    const std::string table = render(rep, print);
    CHECK(table.find("decode_paged, " + std::to_string(row.measurements[1].splits) + " splits, page 16") !=
          std::string::npos);
  }
  // An explicit --splits is kept.
  DecodeFakeBackend b;
  Shape s = llama_decode(8, 32768);
  s.splits = 3;
  (void)measure_row(b, s, {KernelKind::decode}, MeasureOptions{}, 4e12);
  CHECK(b.seen.at(0).first.splits == 3);
}

TEST_CASE("prefill kernels refuse decode rows and the other way round", "[decode][measure]") {
  const Shape d = llama_decode(2, 100);
  for (KernelKind k : {KernelKind::standard, KernelKind::flash, KernelKind::floor, KernelKind::softmax})
    CHECK(unsupported_reason(d, k).value_or("").find("decode,decode_paged") != std::string::npos);
  Shape p = d;
  p.decode = false;
  p.seq_q = 100;
  CHECK(unsupported_reason(p, KernelKind::decode).has_value());
  CHECK(device_footprint(d, KernelKind::decode) > 0);
}
