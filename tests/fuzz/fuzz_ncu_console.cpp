// libFuzzer harness: Nsight Compute's console text reader (ncu without
// --csv) on arbitrary bytes, then the reconciliation and its table. Every
// input ends in a result or one line of hbmscope::Error; the table, whatever
// the kernel names held, carries no control character.
#include "fuzz_common.hpp"
#include "hbmscope/kernel_table.hpp"
#include "hbmscope/ncu_import.hpp"
#include "hbmscope/reconcile.hpp"
#include "hbmscope/reconcile_report.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace hbmscope;
  const std::string_view t = fuzz::text(data, size);
  fuzz::refusal_ok([&] {
    const LaunchStream s = read_ncu_console_text(t, "fuzz.txt");
    ReconcileOptions opt;
    Shape shape;
    shape.batch = 2, shape.heads = 8, shape.kv_heads = 2, shape.seq_q = 1, shape.seq_kv = 4096, shape.head_dim = 64;
    shape.decode = true;
    opt.shapes = {shape};
    const Reconciliation r = reconcile(s.launches, builtin_kernel_table(), {});
    Report rep;
    const ReconcileView v{r, {{"fuzz.txt", s.format, s.launches.size()}}, "built in", rep};
    for (Format f : {Format::table, Format::md, Format::csv})
      for (const char c : render_reconcile(v, {f}))
        if ((static_cast<unsigned char>(c) < 0x20 && c != '\n') || c == 0x7f) __builtin_trap();
    (void)reconcile(s.launches, builtin_kernel_table(), opt);
  });
  return 0;
}
