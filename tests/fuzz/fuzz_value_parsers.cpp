// libFuzzer: the option value parsers, each given the whole input as the
// option's text: integer axes (lists, K/M/G sizes, ranges START:STOP:xF and
// START:STOP:+S), dtype and pass lists, --shard I/N, --kernels, softmax values.
#include "fuzz_common.hpp"
#include "hbmscope/measure.hpp"
#include "hbmscope/printers.hpp"
#include "hbmscope/shape.hpp"
#include "hbmscope/shard.hpp"
#include "hbmscope/softmax_trace.hpp"
#include "hbmscope/sweep.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace hbmscope;
  const std::string_view t = fuzz::text(data, size);
  fuzz::refusal_ok([&] { (void)parse_int_axis(t, "seq"); });
  fuzz::refusal_ok([&] { (void)parse_dtype_axis(t, "dtype"); });
  fuzz::refusal_ok([&] { (void)parse_pass_axis(t, "pass"); });
  fuzz::refusal_ok([&] {
    const Shard s = parse_shard(t);
    for (const std::uint64_t n : {std::uint64_t{0}, std::uint64_t{7}, ~std::uint64_t{0}}) {
      const auto [begin, end] = shard_range(n, s);  // a slice of [0, n)
      if (begin > end || end > n) __builtin_trap();
    }
  });
  fuzz::refusal_ok([&] { (void)parse_kernels(t); });
  fuzz::refusal_ok([&] { (void)parse_logit(t); });
  (void)parse_format(t);
  (void)parse_units(t);
  (void)parse_dtype(t);
  (void)parse_pass(t);
  return 0;
}
