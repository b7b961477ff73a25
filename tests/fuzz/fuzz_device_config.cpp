// libFuzzer: the device file reader (docs/devices.md), then what hbmscope does
// with an accepted device: list it, show its sources, export it as JSON.
#include "../../src/report/json_check.hpp"
#include "fuzz_common.hpp"
#include "hbmscope/device_config.hpp"
#include "hbmscope/json_report.hpp"
#include "hbmscope/printers.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace hbmscope;
  fuzz::refusal_ok([&] {
    const DeviceSpec d = device_from_json(json_check::parse_json_text(fuzz::text(data, size), "fuzz.json"), "fuzz.json");
    for (const Format f : {Format::table, Format::json, Format::csv, Format::md}) {
      (void)render_devices({d}, true, f);
      (void)render_devices({d}, false, f);
    }
    // What `devices NAME --format json` writes must read back, as the same device
    // (its id is the origin's name, so the same origin).
    const nlohmann::json exported = device_spec_to_json(d);
    try {
      const DeviceSpec again =
          device_from_json(json_check::parse_json_text(exported.dump(), "fuzz.json"), "fuzz.json");
      if (device_spec_to_json(again) != exported) __builtin_trap();
    } catch (const Error&) {
      __builtin_trap();
    }
  });
  return 0;
}
