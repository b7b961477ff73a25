// libFuzzer harness: the Nsight Systems `nsys stats` CSV reader (cuda_gpu_trace,
// nvtx_gpu_proj_trace, nvtx_pushpop_trace) on arbitrary bytes: the input read
// as a trace and as NVTX ranges, the ranges given to the launches, and the
// calls reconciled against the decode variants (splits from the grids). Every
// input ends in a result or one line of hbmscope::Error.
#include <algorithm>
#include <cstring>

#include "fuzz_common.hpp"
#include "hbmscope/kernel_table.hpp"
#include "hbmscope/ncu_import.hpp"
#include "hbmscope/reconcile.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace hbmscope;
  const std::string_view t = fuzz::text(data, size);
  fuzz::refusal_ok([&] {
    LaunchStream s = read_nsys_csv_text(t, "fuzz.csv");
    // The same text again as a second input of the run.
    fuzz::refusal_ok([&] {
      std::size_t at = 0;
      const ByteSource src = [&](char* b, std::size_t n) {
        const std::size_t k = std::min(n, t.size() - at);
        std::memcpy(b, t.data() + at, k);
        at += k;
        return k;
      };
      read_nsys_csv(src, "fuzz2.csv", s);
    });
    apply_nvtx_ranges(s);
    ReconcileOptions opt;
    Shape shape;
    shape.batch = 8, shape.heads = 32, shape.kv_heads = 8, shape.seq_q = 1, shape.seq_kv = 32768, shape.head_dim = 128;
    shape.decode = true;
    opt.shapes = {shape};
    (void)reconcile(s.launches, builtin_kernel_table(), opt);
    (void)reconcile(s.launches, builtin_kernel_table(), {});
  });
  return 0;
}
