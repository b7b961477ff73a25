// The model beside a call: its variants' bytes, reads and writes split
// (prefill kinds and the decode variants), every variant's counted / model
// ratio, and the verdict (docs/reconcile.md, "Figures per call", "Verdicts").
#include <cmath>
#include <cstdio>

#include "hbmscope/checked.hpp"
#include "hbmscope/decode.hpp"
#include "hbmscope/error.hpp"
#include "hbmscope/model.hpp"
#include "hbmscope/roofline.hpp"
#include "reconcile_internal.hpp"

namespace hbmscope {

namespace reconciling {

std::string fmt_ratio(double v) {
  // Three figures, trailing zeros kept (1.00, 0.752, 64.4), none past the point above 100.
  char buf[32];
  if (std::fabs(v) >= 100 && std::fabs(v) < 1e15) std::snprintf(buf, sizeof buf, "%.0f", v);
  else std::snprintf(buf, sizeof buf, "%#.3g", v);
  return buf;
}

std::string fmt_pct(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f %%", v * 100);
  return buf;
}

const ModelBytesRW* find_variant(const std::vector<ModelBytesRW>& m, std::string_view id) {
  for (const auto& v : m)
    if (v.id == id) return &v;
  return nullptr;
}

}  // namespace reconciling

using reconciling::find_variant;
using reconciling::fmt_pct;
using reconciling::fmt_ratio;

std::vector<ModelBytesRW> model_bytes_for(CallKind kind, const Shape& shape, const std::optional<L2SimConfig>& l2) {
  Shape s = shape;
  s.pass = kind == CallKind::flash_bwd ? Pass::bwd : Pass::fwd;
  validate(s);
  const std::uint64_t e = elem_bytes(s.dtype);
  constexpr std::string_view what = "written bytes";
  // O, the output every forward variant writes once.
  const std::uint64_t o_bytes = checked_product(what, e, s.batch, s.heads, s.seq_q, s.head_dim);
  std::vector<ModelBytesRW> m;
  auto add = [&](std::string id, std::uint64_t total, std::optional<std::uint64_t> writes) {
    ModelBytesRW v;
    v.id = std::move(id);
    v.total = total;
    v.writes = writes;
    if (writes) v.reads = total - *writes;
    m.push_back(std::move(v));
  };
  auto add_sim = [&](std::string id, const L2SimResult& r) {
    ModelBytesRW v;
    v.id = std::move(id);
    v.total = r.dram_bytes;
    v.reads = r.dram_read_bytes;
    v.writes = r.dram_write_bytes;
    v.l2_hit_rate = r.l2_hit_rate;
    m.push_back(std::move(v));
  };
  const bool simulate = l2 && l2_sim_within_budget(s, *l2);
  switch (kind) {
    case CallKind::standard: {
      // S and P written once each, O once.
      const std::uint64_t sp = checked_product(what, 2, e, s.batch, s.heads, s.seq_q, s.seq_kv);
      add("standard", standard_bytes(s), checked_add(sp, o_bytes, what));
      if (simulate) add_sim("standard_l2_sim", standard_l2_sim(s, *l2));
      break;
    }
    case CallKind::flash:
      add("flash_no_l2", flash_no_l2_bytes(s), o_bytes);
      if (simulate) add_sim("flash_l2_sim", flash_l2_sim(s, *l2));
      add("floor", floor_bytes(s), o_bytes);
      break;
    case CallKind::flash_bwd: {
      // dQ, dK, dV written once at the floor; flash_no_l2's read/write split
      // (atomic dQ updates) is not separated.
      add("flash_no_l2", flash_bwd_no_l2_bytes(s), std::nullopt);
      const std::uint64_t w =
          checked_add(o_bytes, checked_product(what, 2, e, s.batch, s.kv_heads, s.seq_kv, s.head_dim), what);
      add("floor", floor_bwd_bytes(s), w);
      break;
    }
    case CallKind::split_kv:
    case CallKind::floor: add("floor", floor_bytes(s), o_bytes); break;
  }
  return m;
}

std::vector<ModelBytesRW> decode_model_bytes(const Shape& s, std::uint64_t splits, bool per_query_head) {
  validate(s);
  std::vector<ModelBytesRW> m;
  auto add = [&](DecodeVariant v, std::uint64_t n) {
    const DecodeBytes b = decode_bytes(s, v, n);
    ModelBytesRW x;
    x.id = std::string(decode_variant_id(v));
    x.total = b.total;
    // The split kernel writes the partials and the combine reads them back:
    // half of `partials` is written, as O is.
    x.writes = b.o + b.partials / 2;
    x.reads = b.total - *x.writes;
    x.splits = n;
    m.push_back(std::move(x));
  };
  add(DecodeVariant::floor, 1);
  add(DecodeVariant::split, splits);
  add(DecodeVariant::paged, splits);
  if (per_query_head) add(DecodeVariant::split_unpacked, splits);
  return m;
}

namespace reconciling {

namespace {

bool finite_positive(double v) { return std::isfinite(v) && v > 0; }

// Every variant against the counts: counted reads / its reads, counted
// reads + writes / its total. With only dram__bytes.sum (reads and writes in
// one count), that count stands for both.
void add_ratios(ReconciledCall& c) {
  std::optional<std::uint64_t> both = c.total_bytes;
  if (c.read_bytes && c.write_bytes) both = *c.read_bytes + *c.write_bytes;
  const std::optional<std::uint64_t> reads = c.read_bytes ? c.read_bytes : c.total_bytes;
  for (auto& v : c.model) {
    if (reads && v.reads && *v.reads > 0)
      v.counted_over_reads = static_cast<double>(*reads) / static_cast<double>(*v.reads);
    if (both && v.total > 0) v.counted_over_total = static_cast<double>(*both) / static_cast<double>(v.total);
  }
}

std::string ratios_text(const ReconciledCall& c, const ModelBytesRW* judged) {
  std::string t;
  for (const auto& v : c.model) {
    // The simulations' own prediction is stated beside (model against model).
    if (&v == judged || v.id.find("_l2_sim") != std::string::npos) continue;
    const auto r = v.counted_over_reads;
    if (!r) continue;
    t += (t.empty() ? "; " : ", ") + v.id + " " + fmt_ratio(*r) + "×";
  }
  return t;
}

}  // namespace

void judge(ReconciledCall& c, const ReconcileOptions& opt) {
  if (!c.shape) {
    c.verdict = VerdictKind::no_shape;
    c.verdict_text = "no shape: give --seq/--head-dim/... or an NVTX range hbmscope:seq=...";
    return;
  }
  add_ratios(c);
  const ModelBytesRW* judged = find_variant(c.model, c.judged_against);
  if (judged && c.seconds && *c.seconds > 0 && finite_positive(static_cast<double>(judged->total) / *c.seconds))
    c.model_bandwidth = static_cast<double>(judged->total) / *c.seconds;
  if (opt.device && judged) {
    std::uint64_t bytes = judged->total;
    if (c.read_bytes && c.write_bytes) bytes = checked_add(*c.read_bytes, *c.write_bytes, "counted bytes");
    else if (c.read_bytes) bytes = *c.read_bytes;
    else if (c.total_bytes) bytes = *c.total_bytes;
    c.roofline = predict(bytes, c.flops, c.shape->dtype, *opt.device, opt.bandwidth_fraction);
    if (c.seconds && c.roofline->seconds > 0 && std::isfinite(*c.seconds / c.roofline->seconds))
      c.time_over_roofline = *c.seconds / c.roofline->seconds;
  }
  const bool total_only = !c.read_bytes && c.total_bytes;
  if (!c.read_bytes && !total_only) {
    c.verdict = VerdictKind::no_counts;
    c.verdict_text = "no DRAM byte counts: time only";
    if (c.pct_of_peak) c.verdict_text += "; ncu's DRAM throughput " + fmt_ratio(*c.pct_of_peak) + " % of peak";
    if (!c.judged_why.empty()) c.verdict_text += "; the model's bytes: " + c.judged_against + " (" + c.judged_why + ")";
    return;
  }
  // r: counted reads; with dram__bytes.sum alone, reads and writes together,
  // held against the model's reads up to its total (the writes still in L2
  // when a kernel ends are missing from the count).
  const double r = static_cast<double>(c.read_bytes ? *c.read_bytes : *c.total_bytes);
  const char* counted = total_only ? "read+write counted (dram__bytes.sum) " : "reads ";
  auto top = [&](const ModelBytesRW* v) {
    return total_only ? static_cast<double>(v->total) : static_cast<double>(*v->reads);
  };
  if (c.kind == CallKind::flash && !c.shape->decode) {
    const ModelBytesRW* fl = find_variant(c.model, "floor");
    const ModelBytesRW* nl = find_variant(c.model, "flash_no_l2");
    const ModelBytesRW* sim = find_variant(c.model, "flash_l2_sim");
    const double f = static_cast<double>(*fl->reads), n = static_cast<double>(*nl->reads);
    c.reads_over_model = f > 0 ? r / f : 0;
    if (n > f && !total_only) {
      c.position = (r - f) / (n - f);
      if (sim && sim->reads) c.sim_position = (static_cast<double>(*sim->reads) - f) / (n - f);
    }
    if (r < 0.95 * f) c.verdict = VerdictKind::below_floor;
    else if (r <= 1.05 * top(fl)) c.verdict = VerdictKind::at_floor;
    else if (r > 1.05 * top(nl)) c.verdict = VerdictKind::above_no_l2;
    else if (r >= 0.95 * n) c.verdict = VerdictKind::at_no_l2;
    else c.verdict = VerdictKind::between;
    std::string t = counted + fmt_ratio(r / f) + "× the floor's reads";
    if (total_only) t += ", " + fmt_ratio(r / static_cast<double>(fl->total)) + "× its total";
    if (c.position) t += ", " + fmt_pct(*c.position) + " of the way to flash_no_l2";
    if (sim && sim->reads)
      t += "; the L2 simulation predicted " + fmt_ratio(static_cast<double>(*sim->reads) / f) + "×" +
           (c.sim_position ? " (" + fmt_pct(*c.sim_position) + ")" : std::string());
    if (c.l2_hit_rate && sim && sim->l2_hit_rate)
      t += "; L2 hit rate " + fmt_pct(*c.l2_hit_rate) + " counted, " + fmt_pct(*sim->l2_hit_rate) + " simulated";
    if (c.verdict == VerdictKind::below_floor)
      t += "; below the floor: inputs already in L2 (--cache-control none?) or kernels missing from the call";
    if (total_only && r < static_cast<double>(fl->total) && r >= 0.95 * f)
      t += "; the writes (O) were still in L2 when the kernel ended, outside the count";
    c.verdict_text = t;
    return;
  }
  const double m = judged && judged->reads ? static_cast<double>(*judged->reads) : 0;
  if (m <= 0) {
    c.verdict = VerdictKind::no_counts;
    c.verdict_text = "the model does not split " + c.judged_against + " into reads";
    return;
  }
  c.reads_over_model = r / m;
  c.verdict = r < 0.9 * m ? VerdictKind::below : r > 1.1 * top(judged) ? VerdictKind::above : VerdictKind::matches;
  std::string t = counted + fmt_ratio(r / m) + "× " + c.judged_against + "'s reads";
  if (total_only) t += ", " + fmt_ratio(r / static_cast<double>(judged->total)) + "× its total";
  if (!c.judged_why.empty()) t += " (" + c.judged_why + ")";
  t += ratios_text(c, judged);
  if (c.kind == CallKind::standard)
    if (const ModelBytesRW* sim = find_variant(c.model, "standard_l2_sim"); sim && sim->reads)
      t += "; the L2 simulation predicted " + fmt_ratio(static_cast<double>(*sim->reads) / m) + "×";
  if (total_only && r < static_cast<double>(judged->total) && r >= 0.9 * m)
    t += "; the writes were still in L2 when the kernels ended, outside the count";
  c.verdict_text = t;
}

}  // namespace reconciling

}  // namespace hbmscope
