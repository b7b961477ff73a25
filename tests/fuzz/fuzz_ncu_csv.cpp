// libFuzzer harness: the `reconcile` importer (Nsight Compute CSV, timings
// CSV and JSON, ncu numbers, NVTX range names) on arbitrary bytes. Every
// input must end in a result or an hbmscope::Error: no crash, hang or other
// exception.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "hbmscope/error.hpp"
#include "hbmscope/kernel_table.hpp"
#include "hbmscope/ncu_import.hpp"
#include "hbmscope/reconcile.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace hbmscope;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const ImportedFile f = read_ncu_csv_text(text, "fuzz.csv");
    ReconcileOptions opt;
    (void)reconcile(f.launches, builtin_kernel_table(), opt);
  } catch (const Error&) {
  }
  try {
    std::size_t at = 0;
    ByteSource src = [&](char* b, std::size_t n) {
      const std::size_t k = std::min(n, text.size() - at);
      std::memcpy(b, text.data() + at, k);
      at += k;
      return k;
    };
    LaunchStream into;
    read_timings_csv(src, "fuzz.csv", builtin_kernel_table(), into);
  } catch (const Error&) {
  }
  try {
    (void)read_timings_json(text, "fuzz.json");
  } catch (const Error&) {
  }
  try {
    (void)parse_ncu_number(text.substr(0, 64));
  } catch (const Error&) {
  }
  try {
    (void)parse_nvtx_shape(text.substr(0, 256), Dtype::bf16);
  } catch (const Error&) {
  }
  return 0;
}
