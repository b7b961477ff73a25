// Whole models on the command line: --model-config and `hbmscope models`.
#include "model_configs.hpp"

#include <algorithm>
#include <memory>

#include "hbmscope/error.hpp"
#include "hbmscope/hf_config.hpp"
#include "hbmscope/printers.hpp"
#include "command_io.hpp"

namespace hbmscope::cli {

namespace {

const char* const models_help = R"(Columns: the model's id (for --model-config), its name, the layers by kind
(sliding with their window W: a query at position p sees the W keys p - W < c <= p;
chunked with their chunk C; mla: multi-head latent attention), query/KV heads, head dim
(Q and K / V; MLA's latent), one period of the layer pattern, K and V bytes one token
takes over all layers in the model's dtype, and the dtype (torch_dtype).
A FILE is any Hugging Face config.json (the text_config of a multimodal one); what is
read, which layers are local and what each model's window means: docs/models.md.
Examples:
  hbmscope models
  hbmscope models gemma-3-27b          its figures' source and the conventions applied
  hbmscope models ./config.json       check a config.json of your own
  hbmscope model --model-config llama-3.1-8b,gemma-3-27b --decode --batch 32 --seq-kv 32K --device h200)";

}  // namespace

const char* const whole_models_help = R"(With --model-config (whole models, docs/models.md), each step of each model (a prefill
of --seq tokens or a ragged batch, --seq-lens; or a decode step: --decode with --seq-kv
or --context-lengths, and --batch) is a row per kind of layer and a total:
  Model, Layers        the model config, the kind of layer and how many (sliding layers
                       with their window W, chunked with their chunk C, mla: latent KV)
  bytes, FLOPs, time   of all the kind's layers (one layer's times their number); the
                       total's time is the sum of its kinds' (each layer a kernel)
  KV cache             the K and V the step's queries see, for the whole batch: a window
                       layer holds at most W + Nq - 1 tokens per sequence, a chunked one
                       C + Nq - 1; MLA the latent (kv_lora_rank + qk_rope_head_dim values)
  KV/token             one token's K and V over those layers (in --kv-dtype, else the dtype)
The model gives heads, head dims, windows, chunks and MLA (--heads, --kv-heads and
--head-dim are refused) and its torch_dtype unless --dtype; every layer is causal.
A total over layers of different masks (sliding and full) has the mask "mixed".
With --device (or --l2-bytes) each kind's layer is simulated once, its simulated bytes
times its layers; the total's are their sum.
  hbmscope model --model-config llama-3.1-8b,gemma-3-27b,deepseek-v3 --decode --batch 32 --seq-kv 32K --device h200
  hbmscope model --model-config gpt-oss-120b --seq 8K --device h100
  hbmscope model --model-config ./config.json --decode --context-lengths 512,4K,32K --format json)";

void add_model_config_option(CLI::App& app, std::optional<std::string>& o) {
  app.add_option("--model-config", o,
                 "Whole models: a row per kind of layer and a total for each step of these models, "
                 "shipped names (`hbmscope models`) or Hugging Face config.json files, e.g. "
                 "llama-3.1-8b,gemma-3-27b or ./config.json; the model gives heads, head dims, windows, "
                 "chunks, MLA and (unless --dtype) the dtype")
      ->type_name("NAME|FILE,...")
      ->check(not_empty());
}

std::vector<ModelConfigRef> model_configs(const std::string& list) {
  std::vector<ModelConfigRef> out;
  for (const std::string& item : split_list(list, "--model-config")) {
    auto m = std::make_shared<const ModelConfig>(find_model_config(item));
    for (const auto& x : out)
      if (x->id == m->id) throw UsageError("--model-config: '" + m->id + "' is named twice");
    out.push_back(std::move(m));
  }
  return out;
}

void refuse_model_files_as_output(const std::vector<ModelConfigRef>& models, const std::optional<std::string>& output,
                                  const std::optional<std::string>& plot) {
  std::vector<std::string> files;  // a file's id is its path as given; shipped ones are names
  for (const auto& m : models)
    if (m->id.find('/') != std::string::npos || m->id.ends_with(".json")) files.push_back(m->id);
  refuse_input_as_output(output, files, "--output");
  if (plot && *plot != "-") refuse_input_as_output(plot, files, "--plot");
}

void check_model_shape_options(const ShapeOptions& o) {
  for (const auto& [given, name] : {std::pair{o.heads.has_value(), "--heads"},
                                    {o.kv_heads.has_value(), "--kv-heads"},
                                    {o.head_dim.has_value(), "--head-dim"},
                                    {o.head_dim_v.has_value(), "--head-dim-v"},
                                    {o.mla.has_value(), "--mla"},
                                    {o.window.has_value(), "--window"},
                                    {o.chunk.has_value(), "--chunk"}})
    if (given) throw UsageError(std::string(name) + ": the model config gives it (--model-config); drop " + name);
}

SweepAxes model_config_axes(const ShapeOptions& o, std::vector<ModelConfigRef> models) {
  const bool decode = o.decode || o.context_lengths;
  if (!o.seq && !o.seq_lens && !decode)
    throw UsageError("--model-config: give the step, --seq N (or a ragged batch, --seq-lens) for a prefill, or "
                     "--decode with --seq-kv (or --context-lengths) for a decode step");
  SweepAxes a = to_axes(o);
  a.model_config = std::move(models);  // to_axes set dtype_given when --dtype was given
  return a;
}

ModelsCommand::ModelsCommand(CLI::App& app) {
  cmd_ = app.add_subcommand("models", "List the shipped model configs and their layer patterns, or show one in full");
  cmd_->add_option("model", which_, "A shipped name or a config.json file to show in full")->type_name("NAME|FILE");
  cmd_->add_option("--format", format_, "table, json, csv or md [default: table]")->type_name("table|json|csv|md");
  cmd_->footer(models_help);
}

bool ModelsCommand::run(int& rc) {
  if (!cmd_->parsed()) return false;
  const auto f = parse_format(format_);
  if (!f) throw UsageError("--format: '" + format_ + "' is not one of table, json, csv, md");
  std::vector<ModelConfig> list;
  if (which_) list.push_back(find_model_config(*which_, "models"));
  else list = preset_model_configs();
  write_stdout(render_models(list, which_.has_value(), *f));
  rc = 0;
  return true;
}

}  // namespace hbmscope::cli
