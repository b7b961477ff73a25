// Kernel correctness on a real device: each kernel family against the CPU
// reference on many shapes (ragged lengths, causal, sliding windows, chunks,
// GQA, Nq != Nkv, d = 64 and 128, every flash instantiation), through the same Backend::run that
// `hbmscope measure` uses, with the output poisoned first and the whole shape
// validated. Exits 77 (CTest: skipped) with the reason when there is no device.
//
//   usage: hbmscope_gpu_tests standard|softmax|flash|flash_v1|floor|decode|decode_paged
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "hbmscope/backend.hpp"
#include "hbmscope/error.hpp"
#include "hbmscope/measure.hpp"

using namespace hbmscope;

namespace {

struct Case {
  std::uint64_t batch, heads, kv_heads, seq_q, seq_kv, head_dim;
  bool causal;
  std::uint64_t window = 0, chunk = 0;  // causal only
};

// Chosen to hit: one token; lengths below, at and just past block sizes;
// Nq > Nkv under the causal mask (leading rows see no key: O = 0, lse = -inf);
// Nq < Nkv; GQA groups of 2, 3 and 4; batch > 1.
const Case cases[] = {
    {1, 1, 1, 1, 1, 64, false},     {1, 1, 1, 1, 1, 128, true},     {1, 2, 1, 77, 77, 64, true},
    {2, 4, 2, 128, 128, 128, false}, {1, 4, 1, 1000, 1000, 128, true}, {2, 2, 2, 300, 513, 64, true},
    {1, 2, 2, 513, 300, 128, true},  {1, 2, 2, 513, 300, 64, false},  {3, 6, 2, 257, 129, 64, false},
    {1, 3, 1, 64, 2048, 64, true},   {2, 8, 8, 200, 200, 128, true},  {1, 1, 1, 4096, 4096, 64, true},
    {1, 2, 1, 1025, 1023, 128, false},
    // Full rows for the softmax's fast path at 1, 4 and 8 chunks per thread
    // (2048, 8192 and 16384 keys; the causal 4096 above mixes both paths).
    {1, 2, 1, 256, 2048, 64, false}, {1, 1, 1, 64, 8192, 64, false},  {1, 1, 1, 32, 16384, 128, false},
    // Sliding windows (issue 19): narrower than a block, of one key, not
    // dividing the blocks, several blocks wide, Nq < Nkv (keys no query
    // sees: the flash kernels never load their blocks), Nq > Nkv (rows that
    // see nothing), GQA, batch > 1, a long row of 16384 keys (the softmax's
    // two-pass kernel and a window inside it).
    {1, 2, 1, 300, 300, 64, true, 37},       {1, 1, 1, 200, 200, 128, true, 1},
    {2, 4, 2, 1000, 1000, 128, true, 256},   {1, 2, 2, 513, 2000, 64, true, 300},
    {1, 3, 1, 700, 257, 128, true, 100},     {2, 4, 2, 2048, 2048, 64, true, 512},
    {1, 2, 1, 129, 4099, 128, true, 4000},   {1, 1, 1, 16, 16384, 64, true, 5000},
    // Chunks (Llama 4's attention_chunk_size): the standard path and the
    // softmax only; measure refuses them for the flash kernels.
    {1, 2, 1, 1000, 1000, 64, true, 0, 128}, {1, 2, 2, 300, 777, 128, true, 0, 100},
};

Shape to_shape(const Case& c) {
  Shape s;
  s.batch = c.batch;
  s.heads = c.heads;
  s.kv_heads = c.kv_heads;
  s.seq_q = c.seq_q;
  s.seq_kv = c.seq_kv;
  s.head_dim = c.head_dim;
  s.causal = c.causal;
  s.window = c.window;
  s.chunk = c.chunk;
  return s;
}

// Decode rows: GQA groups 1 to 16 (two row blocks), 1 to 8 new tokens, ragged
// batches, causal, the split heuristic (splits 0) and forced split counts that
// do not divide the length (with empty trailing splits), page sizes 1 to 64,
// long contexts (a split of many tiles), head dims 64 and 128.
struct DecodeCase {
  std::uint64_t batch, heads, kv_heads, seq_q;
  std::vector<std::uint64_t> lengths;  // one: every sequence
  std::uint64_t head_dim;
  bool causal;
  std::uint64_t splits, page_size;
  std::uint64_t window = 0, chunk = 0;  // causal only: the step reads the last W + Nq - 1 keys, or the chunk
};

const DecodeCase decode_cases[] = {
    {1, 1, 1, 1, {1}, 64, false, 0, 16},
    {4, 32, 8, 1, {4096}, 128, false, 0, 16},
    {1, 32, 8, 1, {40000}, 128, false, 0, 16},
    {3, 32, 8, 1, {513, 4097, 64}, 128, false, 0, 16},
    {2, 64, 8, 8, {3000, 17}, 128, true, 0, 16},
    {2, 32, 2, 8, {1000}, 64, true, 3, 7},
    {2, 6, 2, 3, {129, 700}, 64, false, 16, 5},
    {5, 8, 8, 2, {300, 1, 2, 900, 65}, 128, false, 4, 1},
    {1, 28, 4, 4, {9999}, 128, true, 11, 64},
    {2, 16, 16, 1, {2048}, 64, false, 1, 32},
    // Windows: Mistral-like 4096 over 40000 keys with the heuristic's splits,
    // splits that do not divide the window, ragged with sequences shorter
    // than the window, several tokens, pages of 7; chunks.
    {2, 32, 8, 1, {40000}, 128, true, 0, 16, 4096},
    {3, 32, 8, 1, {513, 9000, 64}, 128, true, 3, 16, 1000},
    {2, 32, 2, 8, {3000, 17}, 64, true, 5, 7, 300},
    {1, 8, 8, 2, {2500}, 128, true, 0, 1, 1},
    {2, 40, 8, 1, {20000, 8192}, 128, true, 0, 16, 0, 8192},
    {1, 16, 4, 4, {1234}, 64, true, 3, 5, 0, 100},
};

Shape to_shape(const DecodeCase& c) {
  Shape s;
  s.decode = true;
  s.batch = c.batch;
  s.heads = c.heads;
  s.kv_heads = c.kv_heads;
  s.seq_q = c.seq_q;
  s.seq_kv = *std::max_element(c.lengths.begin(), c.lengths.end());
  if (c.lengths.size() > 1) s.context_lengths = c.lengths;
  s.head_dim = c.head_dim;
  s.causal = c.causal;
  s.splits = c.splits;
  s.page_size = c.page_size;
  s.window = c.window;
  s.chunk = c.chunk;
  return s;
}

int run_family(Backend& b, KernelKind kind) {
  MeasureOptions opt;
  opt.repeats = 0;  // correctness only
  opt.warmup = 0;
  opt.validate = true;
  opt.validate_full_shape = true;
  int failures = 0, runs = 0;
  std::uint64_t seed = 11;
  const bool decode = kind == KernelKind::decode || kind == KernelKind::decode_paged;
  for (const Case& c : cases) {
    if (decode) break;  // decode rows below
    const Shape base = to_shape(c);
    // The floor kernel moves every value whatever the mask; the flash
    // kernels do not run chunks (measure refuses them).
    if (kind == KernelKind::floor && (c.window != 0 || c.chunk != 0)) continue;
    if ((kind == KernelKind::flash || kind == KernelKind::flash_v1) && c.chunk != 0) continue;
    std::vector<Shape> shapes;
    if (kind == KernelKind::flash || kind == KernelKind::flash_v1) {
      const int version = kind == KernelKind::flash ? 2 : 1;
      for (const FlashConfig& f : flash_configs()) {
        if (static_cast<std::uint64_t>(f.head_dim) != base.head_dim || f.version != version) continue;
        Shape s = base;
        s.block_rows = static_cast<std::uint64_t>(f.block_rows);
        s.block_cols = static_cast<std::uint64_t>(f.block_cols);
        shapes.push_back(s);
      }
    } else {
      shapes.push_back(base);
    }
    for (const Shape& s : shapes) {
      opt.seed = seed++;  // fresh inputs for every check
      const KernelMeasurement m = b.run(s, kind, opt);
      ++runs;
      const bool ok = m.status == MeasureStatus::ok;
      std::printf("%-7s %-60s %s  error %.3g", ok ? "ok" : "FAIL", describe(s).c_str(), m.kernel.c_str(),
                  m.rel_error);
      if (kind == KernelKind::flash || kind == KernelKind::flash_v1)
        std::printf("  %llux%llu %llu warps  lse error %.3g", static_cast<unsigned long long>(m.block_rows),
                    static_cast<unsigned long long>(m.block_cols), static_cast<unsigned long long>(m.warps),
                    m.lse_rel_error);
      if (!ok) std::printf("  (%s: %s)", status_name(m.status).c_str(), m.reason.c_str());
      std::printf("\n");
      failures += ok ? 0 : 1;
    }
  }
  if (decode)
    for (const DecodeCase& c : decode_cases) {
      const Shape s = to_shape(c);
      opt.seed = seed++;
      const KernelMeasurement m = b.run(s, kind, opt);
      ++runs;
      const bool ok = m.status == MeasureStatus::ok;
      std::printf("%-7s %-90s %s splits %llu  error %.3g  lse error %.3g", ok ? "ok" : "FAIL", describe(s).c_str(),
                  m.kernel.c_str(), static_cast<unsigned long long>(m.splits), m.rel_error, m.lse_rel_error);
      if (!ok) std::printf("  (%s: %s)", status_name(m.status).c_str(), m.reason.c_str());
      std::printf("\n");
      failures += ok ? 0 : 1;
    }
  // measure --counters reaches every family: a DRAM count, or the reason
  // there is none (the decode path once ignored it, saying nothing).
  {
    MeasureOptions co = opt;
    co.validate = false;
    co.counters = true;
    co.seed = seed++;
    const Shape s = decode ? to_shape(decode_cases[0]) : to_shape(cases[0]);
    const KernelMeasurement m = b.run(s, kind, co);
    ++runs;
    const bool ok = m.status == MeasureStatus::ok && !m.counters.empty() &&
                    (m.counters != "ok" || m.dram_read_bytes.has_value());
    std::printf("%-7s --counters %-50s %s: %s", ok ? "ok" : "FAIL", describe(s).c_str(), m.kernel.c_str(),
                m.counters.empty() ? "(nothing said)" : m.counters.c_str());
    if (m.dram_read_bytes) std::printf(", %llu bytes read", static_cast<unsigned long long>(*m.dram_read_bytes));
    std::printf("\n");
    failures += ok ? 0 : 1;
  }
  std::printf("%d of %d passed\n", runs - failures, runs);
  return failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s standard|softmax|flash|flash_v1|floor|decode|decode_paged\n", argv[0]);
    return 2;
  }
  KernelKind kind{};
  try {
    const auto kinds = parse_kernels(argv[1]);
    if (kinds.size() != 1) throw Error("one kernel family per run");
    kind = kinds[0];
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
#ifdef HBMSCOPE_TEST_CUDA_PLUGIN
  setenv("HBMSCOPE_CUDA_PLUGIN", HBMSCOPE_TEST_CUDA_PLUGIN, 0);  // the plugin this build made
#endif
  try {
    auto backend = make_backend(0);
    if (!backend->available()) {
      std::printf("SKIPPED: %s\n", backend->unavailable_reason().c_str());
      return 77;
    }
    const DeviceInfo d = backend->device();
    std::printf("device: %s (sm_%d%d, %d SMs)\n", d.name.c_str(), d.cc_major, d.cc_minor, d.sm_count);
    return run_family(*backend, kind);
  } catch (const std::exception& e) {
    std::printf("FAIL: %s\n", e.what());
    return 1;
  }
}
