#pragma once
// Whole-model rows (docs/models.md): one step of a model, a prefill of a
// batch of sequences or one decode step, as a row per kind of layer (its
// shape; bytes, FLOPs and, with a device, time for all its layers) and a row
// for the total over all layers, each with the KV cache its layers hold.
// Every layer's figures are model_row's for that layer's shape, so the model's
// counting (windows, chunks, MLA, kv dtype) carries over unchanged.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "hbmscope/l2_sim.hpp"
#include "hbmscope/model_config.hpp"
#include "hbmscope/report.hpp"
#include "hbmscope/sweep.hpp"

namespace hbmscope {

// Tokens one layer of shape s holds for the step, over the batch: per
// sequence, the keys its queries see together (mask.hpp's visible_keys; all of
// them without a window or chunk, at most W + Nq - 1 with a window, C + Nq - 1
// with a chunk). Checked: refuses overflow.
std::uint64_t kv_cache_tokens(const Shape& s);

// The rows of model m on step `base`: one per layer kind (layer_kinds order),
// then "total". Throws Error naming the model and the shape.
std::vector<Row> whole_model_rows(const ModelConfig& m, const Shape& base, const ModelOptions& options);
// How many rows whole_model_rows makes for m.
std::size_t whole_model_row_count(const ModelConfig& m);

// The points of a sweep: expand(axes), each shape with each of
// axes.model_config (models outermost), a shape alone when there is none; a
// model's torch_dtype replaces the shape's dtype unless axes.dtype_given.
struct ModelSteps {
  std::vector<Shape> shapes;
  std::vector<ModelConfigRef> models;  // parallel to shapes; null: a plain row
};
ModelSteps expand_model_steps(const SweepAxes& axes);
// The same points in the same order, each handed to visit as it is made (none held).
void for_each_model_step(const SweepAxes& axes, const std::function<void(const Shape&, const ModelConfigRef&)>& visit);

// Rows a point makes: 1, or whole_model_row_count of its model.
std::size_t point_row_count(const ModelConfigRef& model);

// The rows of the points in order: model_row(shape) for a point without a
// model, whole_model_rows otherwise; labels (parallel to shapes, or empty) go
// on every row of a point. Progress counts points.
std::vector<Row> point_rows(const std::vector<Shape>& shapes, const std::vector<ModelConfigRef>& models,
                            const std::vector<std::string>& labels, const ModelOptions& options,
                            const Progress& progress = {});

// The L2 simulation of a row (docs/models.md, "The L2 simulation"): add_l2_sim
// on row.shape; on a whole model's kind row, whose shape is one layer's, the
// simulated bytes (variants and row.l2_sim's read and write bytes) are then
// those of all its layers, one layer's times their number (hit rates, waves
// and the L2 to reach the minimum are one layer's). Not for a total row.
void add_layers_l2_sim(Row& row, const L2SimConfig& c, L2SimMemo* memo = nullptr);
// After the kind rows are simulated: each total gets every simulated variant
// that all its kinds have, their bytes summed (no l2_sim detail: hit rates and
// waves are a kernel's). A total some of whose kinds were not simulated gets
// none; the notes name those totals and the kinds left out.
std::vector<std::string> sum_whole_model_l2_sims(std::vector<Row>& rows);

// A total row's predictions are the sums of its kind rows' (each layer is a
// kernel of its own, run one after the other), not the roofline of the summed
// bytes: called by add_predictions after every row has its own.
void sum_whole_model_predictions(Report& report);

}  // namespace hbmscope
