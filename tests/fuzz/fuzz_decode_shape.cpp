// libFuzzer: the decode shape options (--decode with --seq, --seq-kv, --batch,
// --heads, --kv-heads, --head-dim, --block-cols, --context-lengths, --splits,
// --page-size, --sms), one option value per line of the input, taken through
// the axes' parser, the sweep's product and the decode model: every shape
// that is accepted is counted without overflow, its split counts are in
// range, and no decode variant moves fewer bytes than decode_floor.
#include <algorithm>
#include <array>
#include <string>

#include "fuzz_common.hpp"
#include "hbmscope/decode.hpp"
#include "hbmscope/l2_sim.hpp"
#include "hbmscope/sweep.hpp"

namespace {

enum Field { seq, seq_kv, batch, heads, kv_heads, head_dim, block_cols, context_lengths, splits, page_size, sms, count };

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace hbmscope;
  const std::string_view t = fuzz::text(data, size);
  std::array<std::string_view, count> f{};
  std::size_t pos = 0;
  for (std::size_t i = 0; i < count && pos <= t.size(); ++i) {
    const std::size_t nl = std::min(t.find('\n', pos), t.size());
    f[i] = t.substr(pos, nl - pos);
    pos = nl + 1;
  }
  fuzz::refusal_ok([&] {
    SweepAxes a;
    a.decode = true;
    a.seq = {1};
    a.head_dim = {128};
    const auto axis = [&](Field k, const char* name, std::vector<std::uint64_t>& out) {
      if (!f[k].empty()) out = parse_int_axis(f[k], name);
    };
    axis(seq, "seq", a.seq);
    axis(seq_kv, "seq-kv", a.seq_kv);
    axis(batch, "batch", a.batch);
    axis(heads, "heads", a.heads);
    axis(kv_heads, "kv-heads", a.kv_heads);
    axis(head_dim, "head-dim", a.head_dim);
    axis(block_cols, "block-cols", a.block_cols);
    axis(splits, "splits", a.splits);
    axis(page_size, "page-size", a.page_size);
    if (!f[context_lengths].empty()) {
      const auto v = parse_int_axis(f[context_lengths], "context-lengths");
      if (v.size() > max_context_lengths) return;
      a.context_lengths = {SeqList(v)};
    }
    std::uint64_t sm = default_decode_sm_count;
    if (!f[sms].empty()) {
      const auto v = parse_int_axis(f[sms], "sms");
      if (v.size() != 1 || v[0] > 1'000'000) return;
      sm = v[0];
    }
    for (const auto s : a.splits)
      if (s > max_decode_splits) return;  // the command line refuses these before the model
    // Expansion and the model are fuzzed on small products (a legitimate
    // 4M-shape sweep takes seconds).
    if (shape_count(a) > 64) return;
    for (const Shape& s : expand(a)) {
      if (!s.decode) __builtin_trap();
      const Row r = decode_row(s, sm);
      const VariantResult* floor = r.variant("decode_floor");
      if (!floor) __builtin_trap();
      for (const VariantResult& v : r.variants) {
        if (v.bytes < floor->bytes) __builtin_trap();
        const auto dv = parse_decode_variant(v.id);
        if (!dv) __builtin_trap();
        if (*dv != DecodeVariant::floor) {
          if (v.splits == 0 || v.splits > std::max<std::uint64_t>(max_decode_splits, s.splits)) __builtin_trap();
          (void)decode_l2_sim_accesses(s, *dv, v.splits);
        }
      }
    }
  });
  return 0;
}
