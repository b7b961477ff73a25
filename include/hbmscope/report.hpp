#pragma once
// What a run produces: rows of figures per shape, kept apart from how they are
// printed (src/report) and how they were computed (src/core).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hbmscope/measurement.hpp"
#include "hbmscope/decode.hpp"
#include "hbmscope/device_spec.hpp"
#include "hbmscope/model_config.hpp"
#include "hbmscope/shape.hpp"

namespace hbmscope {

inline constexpr std::string_view report_schema = "hbmscope.report/3";
// Reports of versions 1 (before `reconcile`) and 2 (before attention as
// served) are read as well: /2 only added fields (rows[].call, reconcile), /3
// the shape fields window, chunk, head_dim_v, kv_dtype, latent_kv, seq_lens,
// written only where they are set, so a /2 row reads as the same /3 row.
inline constexpr std::string_view report_schema_v1 = "hbmscope.report/1";
inline constexpr std::string_view report_schema_v2 = "hbmscope.report/2";
inline bool readable_report_schema(std::string_view s) {
  return s == report_schema || s == report_schema_v2 || s == report_schema_v1;
}

// One variant's traffic on one shape.
struct VariantResult {
  VariantResult() = default;
  VariantResult(std::string id_, std::uint64_t bytes_, double intensity_)
      : id(std::move(id_)), bytes(bytes_), intensity(intensity_) {}

  std::string id;            // "standard", "flash_no_l2", "floor"
  std::uint64_t bytes = 0;   // HBM bytes, reads + writes
  double intensity = 0.0;    // FLOPs per HBM byte
  std::optional<Prediction> prediction;  // roofline time, when a device is chosen
  // Decode variants (decode.hpp): bytes by operand (decode->kv is the report's
  // kv_bytes) and the split count the variant ran with (1: no combine).
  std::optional<DecodeBytes> decode;
  std::uint64_t splits = 0;
};

// What the L2 simulation (l2_sim.hpp) found on one shape, beside its
// flash_l2_sim and standard_l2_sim variants.
struct L2SimDetail {
  std::uint64_t l2_bytes = 0;     // simulated L2 capacity
  std::uint32_t sm_count = 0;
  std::uint32_t ctas_per_sm = 0;
  std::string order;              // "query-block-major" or "head-major"
  bool q_o_allocate = true;       // Q and O tiles take L2 space
  struct Variant {
    std::uint64_t read_bytes = 0;   // DRAM reads
    std::uint64_t write_bytes = 0;  // DRAM writes
    double hit_rate = 0.0;          // read bytes served by L2 / read bytes requested
    std::uint64_t l2_bytes_to_min = 0;  // smallest L2 at which the variant reaches its minimum
  };
  Variant flash;     // minimum: the floor
  Variant standard;  // minimum: floor + S and P written once
  bool has_standard = true;  // false for backward rows: standard attention's backward is not simulated
  double heads_per_wave = 0.0;     // mean distinct (batch, head) among resident CTAs
  double kv_heads_per_wave = 0.0;  // the same for (batch, kv head)
  std::uint64_t waves = 0;         // ceil(CTAs / (SMs x CTAs per SM))
  // Decode rows: one entry per simulated decode variant ("decode_split", ...);
  // flash, standard and the per-wave figures above do not apply.
  struct DecodeSim {
    std::string id;
    std::uint64_t splits = 0;
    Variant sim;  // minimum: the variant's first reads of every object + its writes
    std::uint64_t waves = 0;
  };
  std::vector<DecodeSim> decode;
};

struct Row {
  Shape shape;
  std::uint64_t flops = 0;   // attention FLOPs (the visible pairs when causal)
  std::vector<VariantResult> variants;
  std::optional<L2SimDetail> l2_sim;  // present when the L2 simulation ran
  std::vector<KernelMeasurement> measurements;  // `measure`: one per kernel run on this shape
  std::string label;         // optional: which group of a sweep config (e.g. "Llama-3 8B")
  double ridge_point = 0.0;  // device's FLOP/B where memory and compute time meet (0: no device)
  std::uint64_t decode_sm_count = 0;  // decode rows: the SM count the split heuristic used
  // Whole-model rows (whole_model.hpp): the model, the kind of layer ("total"
  // for the sum over all layers) and its KV cache; bytes and FLOPs are then
  // those of all the kind's layers.
  std::optional<ModelLayers> model_layers;

  const VariantResult* variant(std::string_view id) const {
    for (const auto& v : variants)
      if (v.id == id) return &v;
    return nullptr;
  }
};

// Slice I (1-based) of N of a sweep: `--shard I/N`.
struct ShardInfo {
  std::uint64_t index = 1;
  std::uint64_t count = 1;
  std::uint64_t total_rows = 0;  // rows of the whole sweep
};

// The device the roofline predictions of a report were made for.
struct RooflineInfo {
  DeviceSpec device;
  double bandwidth_fraction = 1.0;  // of the device's datasheet bandwidth
};

struct Report {
  std::string command = "model";
  std::vector<Row> rows;
  std::optional<DeviceReport> device;  // `measure`: the device and its copy ceiling
  std::optional<RooflineInfo> roofline;  // set when predictions were made (--device)
  std::optional<ShardInfo> shard;        // set for `sweep --shard`
};

// Variant ids of a report's rows, in order of first appearance.
inline std::vector<std::string> variant_ids(const Report& rep) {
  std::vector<std::string> ids;
  for (const Row& r : rep.rows)
    for (const auto& v : r.variants) {
      bool known = false;
      for (const auto& id : ids) known |= id == v.id;
      if (!known) ids.push_back(v.id);
    }
  return ids;
}

}  // namespace hbmscope
