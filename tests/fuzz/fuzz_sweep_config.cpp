// libFuzzer: the sweep config reader (docs/sweep-config.md) and, for configs
// of a modest size, their expansion into shapes.
#include <algorithm>

#include "../../src/report/json_check.hpp"
#include "fuzz_common.hpp"
#include "hbmscope/sweep_config.hpp"

namespace {
// Shapes a group expands to, saturating: expansion itself is only worth
// fuzzing on small sweeps (a legitimate 4M-shape sweep takes seconds).
std::uint64_t shapes_of(const hbmscope::SweepAxes& a) {
  std::uint64_t n = 1;
  const std::size_t points = a.seq_head_dim.empty() ? a.seq.size() * std::max<std::size_t>(a.seq_kv.size(), 1) *
                                                         a.head_dim.size()
                                                   : a.seq_head_dim.size() * std::max<std::size_t>(a.seq_kv.size(), 1);
  for (const std::size_t k : {points, a.batch.size(), a.heads.size(), a.kv_heads.size(), a.dtype.size(),
                              a.block_rows.size(), a.block_cols.size(), a.causal.size(), a.pass.size()}) {
    const std::uint64_t f = k == 0 ? 1 : k;
    n = n > (std::uint64_t{1} << 40) / f ? (std::uint64_t{1} << 40) : n * f;
  }
  return n;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace hbmscope;
  fuzz::refusal_ok([&] {
    const SweepConfig c =
        sweep_config_from_json(json_check::parse_json_text(fuzz::text(data, size), "fuzz.json"), "fuzz.json");
    std::uint64_t total = 0;
    for (const SweepGroup& g : c.groups) total += shapes_of(g.axes);
    if (total <= 20000) (void)expand(c);
  });
  return 0;
}
