// libFuzzer: the kernel classification table of `reconcile` (kernel_table.hpp,
// schema "hbmscope.kernels/1"): a JSON text read as a user's --kernel-table
// file, and a table that loads classifies a few names (its patterns run).
#include "../../src/report/json_check.hpp"
#include "fuzz_common.hpp"
#include "hbmscope/kernel_table.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace hbmscope;
  fuzz::refusal_ok([&] {
    const KernelTable t =
        kernel_table_from_json(json_check::parse_json_text(fuzz::text(data, size), "fuzz.json"), "fuzz.json");
    for (const char* name : {"pytorch_flash::flash_fwd_kernel", "ampere_bf16_s16816gemm_bf16_128x64_ldg8_f2f_tn",
                             "void at::native::(anonymous namespace)::cunn_SoftMaxForward<8, c10::BFloat16>",
                             "", "flash_fwd_splitkv_combine_kernel", "x"})
      (void)classify(t, name);
  });
  return 0;
}
