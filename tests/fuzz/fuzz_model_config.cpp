// libFuzzer: the config.json reader (docs/models.md), then what hbmscope does
// with an accepted model: list it in every format, and count a small prefill
// and decode step of it, whose total must be the sum of its kinds.
#include "../../src/report/json_check.hpp"
#include "fuzz_common.hpp"
#include "hbmscope/hf_config.hpp"
#include "hbmscope/json_report.hpp"
#include "hbmscope/printers.hpp"
#include "hbmscope/whole_model.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace hbmscope;
  fuzz::refusal_ok([&] {
    const ModelConfig m =
        model_config_from_json(json_check::parse_json_text(fuzz::text(data, size), "fuzz.json"), "fuzz.json", "fuzz.json");
    for (const Format f : {Format::table, Format::json, Format::csv, Format::md}) {
      (void)render_models({m}, true, f);
      (void)render_models({m}, false, f);
    }
    Shape prefill;
    prefill.batch = 2;
    prefill.seq_q = prefill.seq_kv = 100;
    Shape decode;
    decode.decode = true;
    decode.batch = 3;
    decode.seq_q = 2;
    decode.seq_kv = 300;
    for (const Shape& base : {prefill, decode}) {
      Report rep;
      try {
        rep.rows = whole_model_rows(m, base, ModelOptions{});
      } catch (const Error& e) {  // a count past 64 bits: refused in one line
        fuzz::check_message(e);
        continue;
      }
      std::uint64_t kv = 0;
      for (std::size_t i = 0; i + 1 < rep.rows.size(); ++i) kv += rep.rows[i].model_layers->kv_cache_bytes;
      if (rep.rows.back().model_layers->kv_cache_bytes != kv) __builtin_trap();
      for (const Format f : {Format::table, Format::csv}) (void)render(rep, PrintOptions{f});
      const Report back = report_from_json(report_to_json(rep), "fuzz.json");
      if (back.rows.size() != rep.rows.size() || back.rows.back().model_layers != rep.rows.back().model_layers)
        __builtin_trap();
    }
  });
  return 0;
}
