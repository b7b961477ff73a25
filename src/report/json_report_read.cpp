// Reading a report back (compare, merge): every field checked, a wrong one
// named in one line. The writer is json_report.cpp.
#include "hbmscope/json_report.hpp"

#include <cmath>

#include <algorithm>
#include <map>
#include <optional>

#include "hbmscope/l2_sim.hpp"
#include "hbmscope/model.hpp"
#include "hbmscope/sweep.hpp"
#include "json_check.hpp"

namespace hbmscope {

namespace jc = json_check;

namespace {

// Checked getters: every field read from a report, required or optional, is
// type-checked here, so that a wrong type is one line naming the key (never a
// nlohmann type_error) and merge never copies a malformed field.

std::string key_of(const std::string& parent, const char* key) {
  return parent.empty() ? key : parent + "." + key;
}

// The member, or nullptr when absent (never operator[] on a missing key).
const nlohmann::json* member(const nlohmann::json& o, const char* key) {
  const auto it = o.find(key);
  return it == o.end() ? nullptr : &*it;
}

// nlohmann reads "-0" as a signed integer 0: a non-negative integer all the
// same (a float -0.0 is not an integer, and its message shows -0.0).
bool non_negative_integer(const nlohmann::json& v) {
  return v.is_number_unsigned() || (v.is_number_integer() && v.get<std::int64_t>() == 0);
}

std::uint64_t get_u64(const nlohmann::json& o, std::string_view origin, const std::string& parent,
                      const char* key) {
  const auto* v = member(o, key);  // the key's path is built only for a message
  if (!v) jc::fail_text(origin, key_of(parent, key), "missing");
  if (!non_negative_integer(*v)) jc::fail(origin, key_of(parent, key), "a non-negative integer", *v);
  return v->get<std::uint64_t>();
}

double get_number(const nlohmann::json& o, std::string_view origin, const std::string& k) {
  if (!o.is_number() || !std::isfinite(o.get<double>())) jc::fail(origin, k, "a number", o);
  return o.get<double>();
}

double get_positive(const nlohmann::json& o, std::string_view origin, const std::string& k) {
  if (!o.is_number() || !std::isfinite(o.get<double>()) || o.get<double>() <= 0)
    jc::fail(origin, k, "a positive number", o);
  return o.get<double>();
}

const nlohmann::json& get_object(const nlohmann::json& o, std::string_view origin,
                                 const std::string& parent, const char* key) {
  const auto* v = member(o, key);
  if (!v) jc::fail_text(origin, key_of(parent, key), "missing");
  if (!v->is_object()) jc::fail(origin, key_of(parent, key), "an object", *v);
  return *v;
}

// Optional members: absent is fine, present must have the type.
void opt_u64(const nlohmann::json& o, std::string_view origin, const std::string& parent,
             const char* key) {
  if (member(o, key)) (void)get_u64(o, origin, parent, key);
}

void opt_number(const nlohmann::json& o, std::string_view origin, const std::string& parent,
                const char* key, bool null_ok = false) {
  const auto* v = member(o, key);
  if (!v || (null_ok && v->is_null())) return;
  if (!v->is_number() || !std::isfinite(v->get<double>()))
    jc::fail(origin, key_of(parent, key), null_ok ? "a number or null" : "a number", *v);
}

std::optional<std::string> opt_string(const nlohmann::json& o, std::string_view origin,
                                      const std::string& parent, const char* key) {
  const auto* v = member(o, key);
  if (!v) return std::nullopt;
  if (!v->is_string()) jc::fail(origin, key_of(parent, key), "a string", *v);
  if (jc::has_control(v->get_ref<const std::string&>()))
    jc::require_printable(origin, key_of(parent, key), v->get_ref<const std::string&>());
  return v->get<std::string>();
}

void opt_bool(const nlohmann::json& o, std::string_view origin, const std::string& parent,
              const char* key) {
  const auto* v = member(o, key);
  if (v && !v->is_boolean()) jc::fail(origin, key_of(parent, key), "true or false", *v);
}

const nlohmann::json* opt_object(const nlohmann::json& o, std::string_view origin,
                                 const std::string& parent, const char* key) {
  const auto* v = member(o, key);
  if (v && !v->is_object()) jc::fail(origin, key_of(parent, key), "an object", *v);
  return v;
}

DeviceSpec roofline_device_from_json(const nlohmann::json& d, std::string_view origin) {
  const std::string p = "roofline.device";
  DeviceSpec spec;
  const auto name = opt_string(d, origin, p, "name");
  if (!name) jc::fail_text(origin, p + ".name", "missing");
  spec.name = *name;
  spec.id = opt_string(d, origin, p, "id").value_or(spec.name);
  spec.memory = opt_string(d, origin, p, "memory").value_or("");
  const auto* bw = member(d, "memory_bandwidth_bytes_per_s");
  if (!bw) jc::fail_text(origin, p + ".memory_bandwidth_bytes_per_s", "missing");
  spec.bandwidth = get_positive(*bw, origin, p + ".memory_bandwidth_bytes_per_s");
  spec.l2_bytes = get_u64(d, origin, p, "l2_bytes");
  spec.sm_count = get_u64(d, origin, p, "sm_count");
  if (member(d, "memory_bytes")) spec.memory_bytes = get_u64(d, origin, p, "memory_bytes");
  const auto& pk = get_object(d, origin, p, "peak_flops_dense");
  auto peak = [&](const char* k) {
    const auto* v = member(pk, k);
    if (!v || v->is_null()) return 0.0;
    return get_positive(*v, origin, p + ".peak_flops_dense." + k);
  };
  spec.peak = {peak("fp32"), peak("fp16"), peak("bf16"), peak("fp8")};
  if (const auto* src = opt_object(d, origin, p, "sources"))
    for (const auto& [k, v] : src->items()) {
      if (!v.is_string()) jc::fail(origin, p + ".sources." + k, "a string", v);
      jc::require_printable(origin, p + ".sources." + k, k);
      jc::require_printable(origin, p + ".sources." + k, v.get_ref<const std::string&>());
      spec.sources[k] = v.get<std::string>();
    }
  return spec;
}

// measure's objects: checked, not read back (compare reads their numbers as
// JSON); numbers may be null where a failed run has none.
void check_measurement(const nlohmann::json& m, std::string_view origin, const std::string& p) {
  if (!m.is_object()) jc::fail(origin, p, "a measurement object", m);
  for (const char* k : {"kernel", "variant", "status", "reason", "validated_on", "counters"})
    (void)opt_string(m, origin, p, k);
  for (const char* k : {"block_rows", "block_cols", "model_bytes", "dram_read_bytes", "dram_write_bytes", "warps",
                        "splits", "page_size"})
    opt_u64(m, origin, p, k);
  if (const auto* f = member(m, "output_fits_l2"); f && !f->is_boolean())
    jc::fail(origin, p + ".output_fits_l2", "true or false", *f);
  for (const char* k : {"rel_error", "lse_rel_error", "bandwidth_Bps", "copy_fraction", "tflops",
                        "measured_over_predicted"})
    opt_number(m, origin, p, k, true);
  if (const auto* t = opt_object(m, origin, p, "time_s")) {
    const std::string tp = p + ".time_s";
    for (const char* k : {"median", "min", "max", "rel_spread", "warm_median"})
      opt_number(*t, origin, tp, k, true);
    if (const auto* s = member(*t, "samples")) {
      if (!s->is_array()) jc::fail(origin, tp + ".samples", "an array of numbers", *s);
      for (std::size_t i = 0; i < s->size(); ++i)
        if (!(*s)[i].is_number() && !(*s)[i].is_null())
          jc::fail(origin, tp + ".samples[" + std::to_string(i) + "]", "a number", (*s)[i]);
    }
  }
  if (const auto* ps = opt_object(m, origin, p, "predicted_s"))
    for (const char* k : {"copy", "peak"}) opt_number(*ps, origin, p + ".predicted_s", k, true);
}

void check_measured_device(const nlohmann::json& d, std::string_view origin) {
  const std::string p = "device";
  for (const char* k : {"name", "compute_capability"}) (void)opt_string(d, origin, p, k);
  for (const char* k : {"index", "sm_count", "l2_bytes", "memory_clock_khz", "bus_width_bits",
                        "total_memory", "free_memory", "driver_version", "runtime_version"})
    opt_u64(d, origin, p, k);
  opt_number(d, origin, p, "peak_bandwidth_Bps", true);
  if (const auto* c = member(d, "copy")) check_measurement(*c, origin, p + ".copy");
}

void check_l2_sim(const nlohmann::json& rj, std::string_view origin, const std::string& row) {
  const auto* l2 = opt_object(rj, origin, row, "l2_sim");
  if (!l2) return;
  const std::string p = row + ".l2_sim";
  for (const char* k : {"l2_bytes", "sm_count", "ctas_per_sm"}) opt_u64(*l2, origin, p, k);
  if (const auto o = opt_string(*l2, origin, p, "order"); o && !parse_rasterization(*o) && *o != "split-major")
    jc::fail(origin, p + ".order", "\"query-block-major\" or \"head-major\"", (*l2)["order"]);
  opt_bool(*l2, origin, p, "q_o_allocate");
  if (const auto* dec = opt_object(*l2, origin, p, "decode"))
    for (const auto& [id, x] : dec->items()) {
      const std::string xp = p + ".decode." + id;
      if (!x.is_object()) jc::fail(origin, xp, "an object", x);
      for (const char* k : {"read_bytes", "write_bytes", "l2_bytes_to_min", "splits", "waves"}) opt_u64(x, origin, xp, k);
      opt_number(x, origin, xp, "hit_rate");
    }
  for (const char* v : {"flash", "standard"})
    if (const auto* x = opt_object(*l2, origin, p, v)) {
      const std::string xp = p + "." + v;
      for (const char* k : {"read_bytes", "write_bytes", "l2_bytes_to_floor", "l2_bytes_to_min", "waves"})
        opt_u64(*x, origin, xp, k);
      for (const char* k : {"hit_rate", "heads_per_wave", "kv_heads_per_wave"})
        opt_number(*x, origin, xp, k);
    }
}

// A decode row's "decode" object: the split counts and bytes by operand,
// restored on the variants (merge and compare re-render them).
void read_decode_detail(const nlohmann::json& rj, std::string_view origin, const std::string& k, Row& row) {
  if (const auto* kv = opt_object(rj, origin, k, "kv_bytes"))
    for (const auto& [id, x] : kv->items()) (void)get_u64(*kv, origin, k + ".kv_bytes", id.c_str());
  const auto* d = opt_object(rj, origin, k, "decode");
  if (!d) return;
  const std::string p = k + ".decode";
  if (member(*d, "sm_count")) row.decode_sm_count = get_u64(*d, origin, p, "sm_count");
  const auto* per = opt_object(*d, origin, p, "variants");
  if (!per) return;
  for (const auto& [id, x] : per->items()) {
    const std::string vp = p + ".variants." + id;
    if (!x.is_object()) jc::fail(origin, vp, "an object", x);
    for (auto& v : row.variants) {
      if (v.id != id) continue;
      DecodeBytes b;
      v.splits = get_u64(x, origin, vp, "splits");
      b.kv = get_u64(x, origin, vp, "kv_bytes");
      b.q = get_u64(x, origin, vp, "q_bytes");
      b.o = get_u64(x, origin, vp, "o_bytes");
      b.partials = get_u64(x, origin, vp, "partial_bytes");
      b.block_table = get_u64(x, origin, vp, "block_table_bytes");
      b.total = v.bytes;
      v.decode = b;
    }
  }
}

// The shape fields of attention as served (schema /3), each optional: absent
// in /1 and /2 reports and wherever unset. DV equal to d and a kv dtype equal
// to dtype are the defaults, read as unset (one form per shape).
void read_served_fields(const nlohmann::json& j, std::string_view origin, const std::string& key, Shape& s) {
  if (member(j, "window")) s.window = get_u64(j, origin, key, "window");
  if (member(j, "chunk")) s.chunk = get_u64(j, origin, key, "chunk");
  if (member(j, "head_dim_v")) {
    s.head_dim_v = get_u64(j, origin, key, "head_dim_v");
    if (s.head_dim_v == s.head_dim) s.head_dim_v = 0;
  }
  if (const auto* k = member(j, "kv_dtype")) {
    const auto d = k->is_string() ? parse_dtype(k->get<std::string>()) : std::nullopt;
    if (!d) jc::fail(origin, key + ".kv_dtype", "one of \"fp32\", \"fp16\", \"bf16\", \"fp8\"", *k);
    if (*d != s.dtype) s.kv_dtype = d;
  }
  opt_u64(j, origin, key, "kv_elem_bytes");
  if (const auto* l = member(j, "latent_kv")) {
    if (!l->is_boolean()) jc::fail(origin, key + ".latent_kv", "true or false", *l);
    s.latent_kv = l->get<bool>();
  }
  opt_u64(j, origin, key, "query_tokens");
  if (const auto* q = member(j, "seq_lens")) {
    constexpr const char* pair = "a [queries, keys] pair of positive integers";
    if (!q->is_array()) jc::fail(origin, key + ".seq_lens", "an array of [queries, keys] pairs", *q);
    if (q->size() > max_context_lengths)
      jc::fail_text(origin, key + ".seq_lens", "more than " + std::to_string(max_context_lengths) + " sequences");
    std::vector<SeqLen> items;
    items.reserve(q->size());
    for (std::size_t i = 0; i < q->size(); ++i) {
      const auto& x = (*q)[i];
      const std::string k = key + ".seq_lens[" + std::to_string(i) + "]";
      if (!x.is_array() || x.size() != 2 || !non_negative_integer(x[0]) || !non_negative_integer(x[1]))
        jc::fail(origin, k, pair, x);
      items.push_back({x[0].get<std::uint64_t>(), x[1].get<std::uint64_t>()});
    }
    s.seq_lens = SeqList(std::move(items));
  }
}

// rows[].model of a whole-model row.
ModelLayers read_model_layers(const nlohmann::json& m, std::string_view origin, const std::string& p) {
  ModelLayers ml;
  const auto config = opt_string(m, origin, p, "config");
  const auto kind = opt_string(m, origin, p, "layer_kind");
  if (!config || config->empty()) jc::fail_text(origin, p + ".config", "missing (a model config's id)");
  if (!kind || kind->empty()) jc::fail_text(origin, p + ".layer_kind", "missing (a kind of layer, or \"total\")");
  ml.config = *config;
  ml.kind = *kind;
  ml.layers = get_u64(m, origin, p, "layers");
  const auto& kv = get_object(m, origin, p, "kv_cache");
  ml.kv_bytes_per_token = get_u64(kv, origin, p + ".kv_cache", "bytes_per_token");
  ml.kv_cache_bytes = get_u64(kv, origin, p + ".kv_cache", "bytes");
  if (member(kv, "tokens")) ml.kv_cache_tokens = get_u64(kv, origin, p + ".kv_cache", "tokens");
  if (const auto mask = opt_string(m, origin, p, "mask")) {
    if (*mask != "mixed") jc::fail_text(origin, p + ".mask", "'" + *mask + "' is not \"mixed\" (the only value)");
    ml.mixed_masks = true;
  }
  return ml;
}

}  // namespace

Shape shape_from_json(const nlohmann::json& j, std::string_view origin, const std::string& key) {
  if (!j.is_object()) jc::fail(origin, key, "a shape object", j);
  Shape s;
  s.batch = get_u64(j, origin, key, "batch");
  s.heads = get_u64(j, origin, key, "heads");
  s.kv_heads = get_u64(j, origin, key, "kv_heads");
  s.seq_q = get_u64(j, origin, key, "seq_q");
  s.seq_kv = get_u64(j, origin, key, "seq_kv");
  s.head_dim = get_u64(j, origin, key, "head_dim");
  s.block_rows = get_u64(j, origin, key, "block_rows");
  s.block_cols = get_u64(j, origin, key, "block_cols");
  opt_u64(j, origin, key, "elem_bytes");
  if (!j.contains("dtype")) jc::fail_text(origin, key + ".dtype", "missing");
  const auto d = j["dtype"].is_string() ? parse_dtype(j["dtype"].get<std::string>()) : std::nullopt;
  if (!d) jc::fail(origin, key + ".dtype", "one of \"fp32\", \"fp16\", \"bf16\", \"fp8\"", j["dtype"]);
  s.dtype = *d;
  if (!j.contains("causal") || !j["causal"].is_boolean())
    jc::fail(origin, key + ".causal", "true or false", j.value("causal", nlohmann::json()));
  s.causal = j["causal"].get<bool>();
  if (j.contains("pass")) {  // reports written before the backward pass have none: forward
    const auto p = j["pass"].is_string() ? parse_pass(j["pass"].get<std::string>()) : std::nullopt;
    if (!p) jc::fail(origin, key + ".pass", "one of \"fwd\", \"bwd\", \"fwdbwd\"", j["pass"]);
    s.pass = *p;
  }
  read_served_fields(j, origin, key, s);
  if (const auto* dec = member(j, "decode")) {
    if (!dec->is_boolean()) jc::fail(origin, key + ".decode", "true or false", *dec);
    s.decode = dec->get<bool>();
  }
  if (s.decode) {
    s.splits = get_u64(j, origin, key, "splits");
    s.page_size = get_u64(j, origin, key, "page_size");
    opt_u64(j, origin, key, "context_tokens");
    if (const auto* c = member(j, "context_lengths")) {
      if (!c->is_array()) jc::fail(origin, key + ".context_lengths", "an array of lengths", *c);
      std::vector<std::uint64_t> lengths;
      for (std::size_t i = 0; i < c->size(); ++i) {
        if (!non_negative_integer((*c)[i]))
          jc::fail(origin, key + ".context_lengths[" + std::to_string(i) + "]", "a positive integer", (*c)[i]);
        lengths.push_back((*c)[i].get<std::uint64_t>());
      }
      s.context_lengths = lengths;
    }
  }
  try {
    validate(s);
  } catch (const Error& e) {
    jc::fail_text(origin, key, e.what());
  }
  return s;
}

Report report_from_json(const nlohmann::json& j, std::string_view origin) {
  if (!j.is_object()) jc::fail(origin, "(top level)", "a JSON object (an hbmscope report)", j);
  if (!j.contains("schema")) jc::fail_text(origin, "schema", "missing: not an hbmscope report");
  if (!j["schema"].is_string() || !readable_report_schema(j["schema"].get<std::string>()))
    jc::fail(origin, "schema",
             "\"" + std::string(report_schema) + "\", \"" + std::string(report_schema_v2) + "\" or \"" +
                 std::string(report_schema_v1) + "\"",
             j["schema"]);
  Report r;
  if (const auto c = opt_string(j, origin, "", "command")) r.command = *c;
  if (const auto* tool = opt_object(j, origin, "", "tool"))
    for (const char* k : {"name", "version"}) (void)opt_string(*tool, origin, "tool", k);
  if (const auto* rl = opt_object(j, origin, "", "roofline")) {
    DeviceSpec spec = roofline_device_from_json(get_object(*rl, origin, "roofline", "device"), origin);
    const auto* fj = member(*rl, "bandwidth_fraction");
    if (!fj) jc::fail_text(origin, "roofline.bandwidth_fraction", "missing");
    const double f = get_positive(*fj, origin, "roofline.bandwidth_fraction");
    if (f > 1) jc::fail(origin, "roofline.bandwidth_fraction", "a number in (0, 1]", *fj);
    opt_number(*rl, origin, "roofline", "effective_bandwidth_bytes_per_s");
    r.roofline = RooflineInfo{spec, f};
  }
  if (const auto* d = opt_object(j, origin, "", "device")) {
    check_measured_device(*d, origin);
    r.device = device_report_from_json(*d, origin);
  }
  if (const auto* sh = opt_object(j, origin, "", "shard")) {
    const auto& s = *sh;
    r.shard = ShardInfo{get_u64(s, origin, "shard", "index"), get_u64(s, origin, "shard", "count"),
                        get_u64(s, origin, "shard", "total_rows")};
    if (r.shard->count == 0 || r.shard->index < 1 || r.shard->index > r.shard->count)
      jc::fail(origin, "shard.index", "1 <= index <= count", s["index"]);
  }
  if (!j.contains("rows") || !j["rows"].is_array())
    jc::fail(origin, "rows", "an array of rows", j.value("rows", nlohmann::json()));
  const auto& rows = j["rows"];
  for (std::size_t i = 0; i < rows.size(); ++i) r.rows.push_back(row_from_json(rows[i], origin, i));
  return r;
}

Row row_from_json(const nlohmann::json& rj, std::string_view origin, std::size_t i) {
  {
    const std::string k = "rows[" + std::to_string(i) + "]";
    if (!rj.is_object()) jc::fail(origin, k, "a row object", rj);
    Row row;
    row.shape = shape_from_json(rj.value("shape", nlohmann::json()), origin, k + ".shape");
    row.flops = get_u64(rj, origin, k, "flops");
    row.label = opt_string(rj, origin, k, "label").value_or("");
    const auto& bytes = get_object(rj, origin, k, "bytes");
    // A row has a handful of variants; printers look each one up by id, so a
    // count read from input is bounded before anything is built from it.
    constexpr std::size_t max_variants = 256;
    if (bytes.size() > max_variants)
      jc::fail_text(origin, k + ".bytes", "more than " + std::to_string(max_variants) +
                                              " variants: not an hbmscope report");
    // Every entry of intensity and prediction is checked, also those of a
    // variant without bytes: merge copies them all.
    const auto* inten = opt_object(rj, origin, k, "intensity");
    if (inten)
      for (const auto& [id, x] : inten->items())
        if (!x.is_number() || !std::isfinite(x.get<double>())) (void)get_number(x, origin, k + ".intensity." + id);
    const auto* pred = opt_object(rj, origin, k, "prediction");
    std::map<std::string, Prediction> preds;
    if (pred)
      for (const auto& [id, p] : pred->items()) {
        const std::string pk = k + ".prediction." + id;
        if (!p.is_object()) jc::fail(origin, pk, "an object", p);
        Prediction pr;
        const auto* sec = member(p, "seconds");
        if (!sec) jc::fail_text(origin, pk + ".seconds", "missing");
        pr.seconds = get_number(*sec, origin, pk + ".seconds");
        opt_number(p, origin, pk, "memory_seconds");
        opt_number(p, origin, pk, "compute_seconds");
        pr.memory_seconds = p.value("memory_seconds", 0.0);
        pr.compute_seconds = p.value("compute_seconds", 0.0);
        const auto* bound = member(p, "bound");
        if (!bound) jc::fail_text(origin, pk + ".bound", "missing");
        if (*bound != "memory" && *bound != "compute")
          jc::fail(origin, pk + ".bound", "\"memory\" or \"compute\"", *bound);
        pr.bound = *bound == "compute" ? Bound::compute : Bound::memory;
        if (member(p, "footprint_bytes")) pr.footprint_bytes = get_u64(p, origin, pk, "footprint_bytes");
        opt_bool(p, origin, pk, "fits_in_memory");
        pr.fits_in_memory = p.value("fits_in_memory", true);
        preds[id] = pr;
      }
    for (const auto& [id, b] : bytes.items()) {
      if (!non_negative_integer(b)) jc::fail(origin, k + ".bytes." + id, "a non-negative integer", b);
      VariantResult v;
      v.id = id;
      v.bytes = b.get<std::uint64_t>();
      v.intensity = intensity(row.flops, v.bytes);
      if (inten && inten->contains(id)) v.intensity = inten->at(id).get<double>();
      if (const auto it = preds.find(id); it != preds.end()) v.prediction = it->second;
      row.variants.push_back(std::move(v));
    }
    if (row.shape.decode) read_decode_detail(rj, origin, k, row);
    if (const auto* m = opt_object(rj, origin, k, "model")) row.model_layers = read_model_layers(*m, origin, k + ".model");
    check_l2_sim(rj, origin, k);
    if (const auto* ms = member(rj, "measurements")) {
      if (!ms->is_array()) jc::fail(origin, k + ".measurements", "an array of measurements", *ms);
      for (std::size_t m = 0; m < ms->size(); ++m) {
        const std::string mk = k + ".measurements[" + std::to_string(m) + "]";
        check_measurement((*ms)[m], origin, mk);
        row.measurements.push_back(measurement_from_json((*ms)[m], origin, mk));
      }
    }
    // JSON objects come back in key order: restore the model's variant order.
    const auto rank = [](const std::string& id) {
      if (id == "standard") return 0;
      if (id == "flash_no_l2") return 1;
      if (id == "floor") return 2;
      if (const auto d = parse_decode_variant(id)) return 3 + static_cast<int>(*d);
      if (id.rfind("decode_", 0) == 0) {  // the decode simulations, in their variants' order
        constexpr std::string_view sim = "_l2_sim";
        if (id.size() > sim.size() && id.compare(id.size() - sim.size(), sim.size(), sim) == 0)
          if (const auto d = parse_decode_variant(id.substr(0, id.size() - sim.size()))) return 7 + static_cast<int>(*d);
        return 11;
      }
      return 3;
    };
    std::stable_sort(row.variants.begin(), row.variants.end(),
                     [&](const auto& a, const auto& b) { return rank(a.id) < rank(b.id); });
    if (const auto* rp = member(rj, "ridge_point")) row.ridge_point = get_number(*rp, origin, k + ".ridge_point");
    if (const auto* l2 = member(rj, "l2_sim")) row.l2_sim = l2_sim_from_json(*l2, row.variants);
    return row;
  }
}

}  // namespace hbmscope
