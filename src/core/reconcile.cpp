#include "hbmscope/reconcile.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "hbmscope/checked.hpp"
#include "hbmscope/error.hpp"
#include "hbmscope/model.hpp"

namespace hbmscope {

namespace {

struct RoleName {
  KernelRole role;
  const char* name;
};
constexpr RoleName role_names[] = {
    {KernelRole::flash_fwd, "flash_fwd"},     {KernelRole::flash_bwd, "flash_bwd"},
    {KernelRole::split_kv, "split_kv"},       {KernelRole::split_kv_combine, "split_kv_combine"},
    {KernelRole::gemm, "gemm"},               {KernelRole::softmax, "softmax"},
    {KernelRole::elementwise, "elementwise"}, {KernelRole::floor, "floor"},
    {KernelRole::other, "other"},             {KernelRole::unknown, "unknown"},
};

std::string fmt_ratio(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

std::string fmt_pct(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f %%", v * 100);
  return buf;
}

// Parses a decimal integer of an NVTX key; Error names the key.
std::uint64_t nvtx_number(std::string_view key, std::string_view v) {
  if (v.empty() || v.size() > 19) throw Error("NVTX range: " + std::string(key) + "='" + std::string(v) + "' is not a number");
  std::uint64_t n = 0;
  for (char c : v) {
    if (c < '0' || c > '9')
      throw Error("NVTX range: " + std::string(key) + "='" + std::string(v) + "' is not a number");
    n = n * 10 + static_cast<std::uint64_t>(c - '0');
  }
  return n;
}

const ModelBytesRW* find_variant(const std::vector<ModelBytesRW>& m, std::string_view id) {
  for (const auto& v : m)
    if (v.id == id) return &v;
  return nullptr;
}

}  // namespace

std::string_view role_name(KernelRole r) {
  for (const auto& x : role_names)
    if (x.role == r) return x.name;
  return "unknown";
}

std::optional<KernelRole> parse_role(std::string_view s) {
  for (const auto& x : role_names)
    if (s == x.name) return x.role;
  return std::nullopt;
}

std::string_view call_kind_name(CallKind k) {
  switch (k) {
    case CallKind::standard: return "standard";
    case CallKind::flash: return "flash";
    case CallKind::flash_bwd: return "flash_bwd";
    case CallKind::split_kv: return "split_kv";
    case CallKind::floor: return "floor";
  }
  return "?";
}

std::string_view verdict_name(VerdictKind v) {
  switch (v) {
    case VerdictKind::no_counts: return "NO COUNTS";
    case VerdictKind::no_shape: return "NO SHAPE";
    case VerdictKind::below_floor: return "BELOW FLOOR";
    case VerdictKind::at_floor: return "AT FLOOR";
    case VerdictKind::between: return "BETWEEN";
    case VerdictKind::at_no_l2: return "AT NO-L2";
    case VerdictKind::above_no_l2: return "ABOVE NO-L2";
    case VerdictKind::matches: return "MATCHES";
    case VerdictKind::above: return "ABOVE";
    case VerdictKind::below: return "BELOW";
  }
  return "?";
}

const KernelPattern* classify(const KernelTable& table, std::string_view name) {
  for (const auto& p : table.patterns) {
    bool all = !p.all.empty();
    for (const auto& s : p.all) all = all && name.find(s) != std::string_view::npos;
    if (all) return &p;
  }
  return nullptr;
}

Shape parse_nvtx_shape(std::string_view text, Dtype default_dtype) {
  const std::size_t at = text.rfind("hbmscope:");
  if (at == std::string_view::npos) throw Error("NVTX range '" + std::string(text) + "' has no 'hbmscope:'");
  std::string_view body = text.substr(at + 9);
  Shape s;
  s.dtype = default_dtype;
  bool have_seq = false, have_seq_kv = false, have_kv = false, have_d = false, have_heads = false;
  std::map<std::string, bool> seen;
  while (!body.empty()) {
    const std::size_t comma = std::min(body.find(','), body.size());
    std::string_view item = body.substr(0, comma);
    body = comma < body.size() ? body.substr(comma + 1) : std::string_view{};
    if (item.empty()) continue;
    const std::size_t eq = item.find('=');
    if (eq == std::string_view::npos)
      throw Error("NVTX range: '" + std::string(item) + "' is not KEY=VALUE");
    const std::string key(item.substr(0, eq));
    const std::string_view v = item.substr(eq + 1);
    if (seen[key]) throw Error("NVTX range: " + key + " given twice");
    seen[key] = true;
    if (key == "seq" || key == "seq_q") s.seq_q = nvtx_number(key, v), have_seq = true;
    else if (key == "seq_kv") s.seq_kv = nvtx_number(key, v), have_seq_kv = true;
    else if (key == "d" || key == "head_dim") s.head_dim = nvtx_number(key, v), have_d = true;
    else if (key == "heads") s.heads = nvtx_number(key, v), have_heads = true;
    else if (key == "kv_heads") s.kv_heads = nvtx_number(key, v), have_kv = true;
    else if (key == "batch") s.batch = nvtx_number(key, v);
    else if (key == "causal") {
      if (v != "0" && v != "1") throw Error("NVTX range: causal='" + std::string(v) + "' is not 0 or 1");
      s.causal = v == "1";
    } else if (key == "dtype") {
      const auto d = parse_dtype(v);
      if (!d) throw Error("NVTX range: dtype='" + std::string(v) + "' is not fp32, fp16, bf16 or fp8");
      s.dtype = *d;
    } else if (key == "pass") {
      const auto p = parse_pass(v);
      if (!p) throw Error("NVTX range: pass='" + std::string(v) + "' is not fwd, bwd or fwdbwd");
      s.pass = *p;
    } else {
      throw Error("NVTX range: unknown key '" + key +
                  "' (known: seq, seq_kv, d, heads, kv_heads, batch, causal, dtype, pass)");
    }
  }
  if (!have_seq || !have_d) throw Error("NVTX range '" + std::string(text) + "': seq= and d= are required");
  if (!have_seq_kv) s.seq_kv = s.seq_q;
  if (!have_heads) s.heads = 1;
  if (!have_kv) s.kv_heads = s.heads;
  validate(s);
  return s;
}

std::vector<CallGroup> group_launches(const std::vector<KernelRole>& roles,
                                      const std::vector<std::optional<KernelRole>>& whole_call) {
  std::vector<CallGroup> out;
  const std::size_t n = roles.size();
  auto absorb = [&](std::size_t& i, KernelRole r) {
    while (i + 1 < n && roles[i + 1] == r && (whole_call.empty() || !whole_call[i + 1])) out.back().launches.push_back(++i);
  };
  for (std::size_t i = 0; i < n; ++i) {
    if (i < whole_call.size() && whole_call[i]) {
      CallKind k = CallKind::flash;
      switch (*whole_call[i]) {
        case KernelRole::flash_bwd: k = CallKind::flash_bwd; break;
        case KernelRole::split_kv: k = CallKind::split_kv; break;
        case KernelRole::gemm:
        case KernelRole::softmax: k = CallKind::standard; break;
        case KernelRole::floor: k = CallKind::floor; break;
        default: k = CallKind::flash;
      }
      out.push_back({k, {i}});
      continue;
    }
    switch (roles[i]) {
      case KernelRole::flash_fwd:
      case KernelRole::split_kv: {
        out.push_back({roles[i] == KernelRole::split_kv ? CallKind::split_kv : CallKind::flash, {i}});
        const std::size_t before = out.back().launches.size();
        absorb(i, KernelRole::split_kv_combine);
        // A forward kernel followed by a combine ran in splits (flash-attn 3 decode).
        if (out.back().launches.size() > before) out.back().kind = CallKind::split_kv;
        break;
      }
      case KernelRole::flash_bwd:
        out.push_back({CallKind::flash_bwd, {i}});
        absorb(i, KernelRole::flash_bwd);
        break;
      case KernelRole::floor: out.push_back({CallKind::floor, {i}}); break;
      case KernelRole::gemm: {
        std::size_t j = i + 1;
        auto skip_elementwise = [&] {
          while (j < n && roles[j] == KernelRole::elementwise && (whole_call.empty() || !whole_call[j])) ++j;
        };
        skip_elementwise();
        if (j >= n || roles[j] != KernelRole::softmax) break;
        ++j;
        skip_elementwise();
        if (j >= n || roles[j] != KernelRole::gemm) break;
        CallGroup g{CallKind::standard, {}};
        for (std::size_t k = i; k <= j; ++k) g.launches.push_back(k);
        out.push_back(std::move(g));
        i = j;
        break;
      }
      default: break;  // outside any call
    }
  }
  return out;
}

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
    ModelBytesRW v{std::move(id), total, std::nullopt, writes};
    if (writes) v.reads = total - *writes;
    m.push_back(std::move(v));
  };
  auto add_sim = [&](std::string id, const L2SimResult& r) {
    m.push_back({std::move(id), r.dram_bytes, r.dram_read_bytes, r.dram_write_bytes});
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
      const std::uint64_t w = checked_add(o_bytes, checked_product(what, 2, e, s.batch, s.kv_heads, s.seq_kv, s.head_dim), what);
      add("floor", floor_bwd_bytes(s), w);
      break;
    }
    case CallKind::split_kv:
    case CallKind::floor: add("floor", floor_bytes(s), o_bytes); break;
  }
  return m;
}

namespace {

void judge(ReconciledCall& c, const ReconcileOptions& opt) {
  if (!c.shape) {
    c.verdict = VerdictKind::no_shape;
    c.verdict_text = "no shape: give --seq/--head-dim/... or an NVTX range hbmscope:seq=...";
    return;
  }
  const ModelBytesRW* judged = find_variant(c.model, c.judged_against);
  if (judged && c.seconds && *c.seconds > 0) c.model_bandwidth = static_cast<double>(judged->total) / *c.seconds;
  if (opt.device && judged) {
    std::uint64_t bytes = judged->total;
    if (c.read_bytes && c.write_bytes) bytes = checked_add(*c.read_bytes, *c.write_bytes, "counted bytes");
    else if (c.read_bytes) bytes = *c.read_bytes;
    c.roofline = predict(bytes, c.flops, c.shape->dtype, *opt.device, opt.bandwidth_fraction);
    if (c.seconds && c.roofline->seconds > 0) c.time_over_roofline = *c.seconds / c.roofline->seconds;
  }
  if (!c.read_bytes) {
    c.verdict = VerdictKind::no_counts;
    c.verdict_text = "no DRAM byte counts: time only";
    if (c.pct_of_peak) c.verdict_text += "; ncu's DRAM throughput " + fmt_ratio(*c.pct_of_peak) + " % of peak";
    return;
  }
  const double r = static_cast<double>(*c.read_bytes);
  if (c.kind == CallKind::flash) {
    const ModelBytesRW* fl = find_variant(c.model, "floor");
    const ModelBytesRW* nl = find_variant(c.model, "flash_no_l2");
    const ModelBytesRW* sim = find_variant(c.model, "flash_l2_sim");
    const double f = static_cast<double>(*fl->reads), n = static_cast<double>(*nl->reads);
    c.reads_over_model = f > 0 ? r / f : 0;
    if (n > f) {
      c.position = (r - f) / (n - f);
      if (sim && sim->reads) c.sim_position = (static_cast<double>(*sim->reads) - f) / (n - f);
    }
    if (r < 0.95 * f) c.verdict = VerdictKind::below_floor;
    else if (r <= 1.05 * f) c.verdict = VerdictKind::at_floor;
    else if (r > 1.05 * n) c.verdict = VerdictKind::above_no_l2;
    else if (r >= 0.95 * n) c.verdict = VerdictKind::at_no_l2;
    else c.verdict = VerdictKind::between;
    std::string t = "reads " + fmt_ratio(r / f) + "× the floor";
    if (c.position) t += ", " + fmt_pct(*c.position) + " of the way to flash_no_l2";
    if (sim && sim->reads)
      t += "; the L2 simulation predicted " + fmt_ratio(static_cast<double>(*sim->reads) / f) + "×" +
           (c.sim_position ? " (" + fmt_pct(*c.sim_position) + ")" : std::string());
    if (c.verdict == VerdictKind::below_floor)
      t += "; below the floor: inputs already in L2 (--cache-control none?) or kernels missing from the call";
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
  c.verdict = r < 0.9 * m ? VerdictKind::below : r > 1.1 * m ? VerdictKind::above : VerdictKind::matches;
  std::string t = "reads " + fmt_ratio(r / m) + "× " + c.judged_against;
  if (c.kind == CallKind::standard)
    if (const ModelBytesRW* sim = find_variant(c.model, "standard_l2_sim"); sim && sim->reads)
      t += "; the L2 simulation predicted " + fmt_ratio(static_cast<double>(*sim->reads) / m) + "×";
  c.verdict_text = t;
}

void add_count(std::vector<KernelCount>& list, const std::string& name, KernelRole role) {
  for (auto& k : list)
    if (k.kernel == name) {
      ++k.launches;
      return;
    }
  list.push_back({name, role, 1});
}

}  // namespace

Reconciliation reconcile(const std::vector<MeasuredLaunch>& launches, const KernelTable& table,
                         const ReconcileOptions& opt) {
  Reconciliation out;
  std::vector<KernelRole> roles(launches.size(), KernelRole::unknown);
  std::vector<std::optional<KernelRole>> whole(launches.size());
  std::vector<const KernelPattern*> pats(launches.size(), nullptr);
  for (std::size_t i = 0; i < launches.size(); ++i) {
    whole[i] = launches[i].whole_call;
    pats[i] = classify(table, launches[i].kernel);
    if (pats[i]) roles[i] = pats[i]->role;
    if (!pats[i] && !whole[i]) add_count(out.unmatched, launches[i].kernel, KernelRole::unknown);
  }
  // Group per stream, then order the calls by their first launch.
  std::vector<CallGroup> groups;
  {
    std::vector<std::string> keys;
    std::vector<std::vector<std::size_t>> members;
    for (std::size_t i = 0; i < launches.size(); ++i) {
      std::size_t k = 0;
      while (k < keys.size() && keys[k] != launches[i].stream) ++k;
      if (k == keys.size()) {
        keys.push_back(launches[i].stream);
        members.emplace_back();
      }
      members[k].push_back(i);
    }
    for (const auto& idx : members) {
      std::vector<KernelRole> r;
      std::vector<std::optional<KernelRole>> w;
      for (auto i : idx) r.push_back(roles[i]), w.push_back(whole[i]);
      for (auto g : group_launches(r, w)) {
        for (auto& i : g.launches) i = idx[i];
        groups.push_back(std::move(g));
      }
    }
    std::stable_sort(groups.begin(), groups.end(),
                     [](const CallGroup& a, const CallGroup& b) { return a.launches.front() < b.launches.front(); });
  }
  std::vector<bool> used(launches.size(), false);
  for (const auto& g : groups)
    for (auto i : g.launches) used[i] = true;
  for (std::size_t i = 0; i < launches.size(); ++i)
    if (!used[i] && pats[i]) add_count(out.outside, launches[i].kernel, roles[i]);

  // Shapes: NVTX or the timing row first, then the options' list in order.
  std::size_t without = 0;
  std::vector<std::optional<Shape>> own(groups.size());
  std::vector<std::string> own_from(groups.size());
  for (std::size_t gi = 0; gi < groups.size(); ++gi) {
    for (auto i : groups[gi].launches) {
      const auto& l = launches[i];
      if (l.shape) {
        own[gi] = l.shape;
        own_from[gi] = "timings";
        break;
      }
      if (!l.nvtx.empty()) {
        try {
          own[gi] = parse_nvtx_shape(l.nvtx, opt.nvtx_dtype);
        } catch (const Error& e) {
          throw Error(l.origin + ": " + e.what());
        }
        own_from[gi] = "nvtx";
        break;
      }
    }
    if (!own[gi]) ++without;
  }
  if (opt.shapes.size() > 1 && opt.shapes.size() != without)
    throw Error(std::to_string(opt.shapes.size()) + " shapes given for " + std::to_string(without) +
                " attention call(s) without an NVTX shape: give one shape for all, one per call in launch "
                "order, or NVTX ranges (see `hbmscope reconcile --help`)");

  std::size_t next_shape = 0;
  // Captures repeat one shape many times: each (kind, shape) is modelled once
  // (the L2 simulation takes up to seconds).
  std::vector<std::pair<std::pair<CallKind, Shape>, std::vector<ModelBytesRW>>> modelled;
  auto model_of = [&](CallKind k, const Shape& s) -> const std::vector<ModelBytesRW>& {
    for (const auto& [key, m] : modelled)
      if (key.first == k && key.second == s) return m;
    modelled.push_back({{k, s}, model_bytes_for(k, s, opt.l2)});
    return modelled.back().second;
  };
  for (std::size_t gi = 0; gi < groups.size(); ++gi) {
    const auto& g = groups[gi];
    ReconciledCall c;
    c.index = gi + 1;
    c.kind = g.kind;
    c.launches = g.launches;
    const MeasuredLaunch& first = launches[g.launches.front()];
    c.origin = first.origin;
    c.source = pats[g.launches.front()] ? pats[g.launches.front()]->source : std::string();
    bool all_reads = true, all_writes = true, all_times = true;
    std::uint64_t rd = 0, wr = 0;
    double secs = 0, pct_time = 0;
    bool have_pct = true;
    for (auto i : g.launches) {
      const auto& l = launches[i];
      if (!c.kernels.empty()) c.kernels += " + ";
      c.kernels += l.kernel;
      if (l.dram_read) rd = checked_add(rd, *l.dram_read, "counted read bytes");
      else all_reads = false;
      if (l.dram_write) wr = checked_add(wr, *l.dram_write, "counted write bytes");
      else all_writes = false;
      if (l.seconds) secs += *l.seconds;
      else all_times = false;
      if (l.dram_pct_of_peak && l.seconds) pct_time += *l.dram_pct_of_peak * *l.seconds;
      else have_pct = false;
    }
    if (all_reads) c.read_bytes = rd;
    if (all_writes) c.write_bytes = wr;
    if (all_times) c.seconds = secs;
    if (own[gi]) {
      c.shape = own[gi];
      c.shape_from = own_from[gi];
    } else if (opt.shapes.size() == 1) {
      c.shape = opt.shapes[0];
      c.shape_from = "options";
    } else if (!opt.shapes.empty()) {
      c.shape = opt.shapes[next_shape++];
      c.shape_from = "options";
    }
    if (c.shape) {
      c.shape->pass = c.kind == CallKind::flash_bwd ? Pass::bwd : Pass::fwd;
      try {
        c.model = model_of(c.kind, *c.shape);
        c.flops = pass_flops(*c.shape);
      } catch (const Error& e) {
        throw Error("call " + std::to_string(c.index) + " (" + c.origin + "): shape " + describe(*c.shape) + ": " +
                    e.what());
      }
      c.judged_against = c.kind == CallKind::standard ? "standard" : "floor";
      if (c.kind == CallKind::split_kv)
        c.notes.push_back("split-KV call judged against the floor (the model has no decode variants here)");
      if (opt.l2 && c.kind != CallKind::split_kv && c.kind != CallKind::floor && c.kind != CallKind::flash_bwd &&
          !l2_sim_within_budget(*c.shape, *opt.l2))
        c.notes.push_back("L2 simulation left out: more than " + std::to_string(max_l2_sim_work) +
                          " work units (docs/model.md, \"Cost\")");
    }
    if (c.read_bytes && c.seconds && *c.seconds > 0)
      c.achieved_bandwidth = static_cast<double>(*c.read_bytes + (c.write_bytes ? *c.write_bytes : 0)) / *c.seconds;
    if (c.achieved_bandwidth && opt.device) c.pct_of_peak = *c.achieved_bandwidth / opt.device->bandwidth * 100;
    else if (have_pct && secs > 0 && !c.read_bytes) {
      c.pct_of_peak = pct_time / secs;  // ncu's own figure, time-weighted over the launches
      if (opt.device) c.achieved_bandwidth = *c.pct_of_peak / 100 * opt.device->bandwidth;
    }
    judge(c, opt);
    out.calls.push_back(std::move(c));
  }
  for (const auto& c : out.calls)
    if (c.write_bytes) {
      out.notes.push_back("writes are reported, not judged: lines still dirty in L2 when a kernel ends are written "
                          "back outside its profiled range");
      break;
    }
  if (!out.unmatched.empty())
    out.notes.push_back(std::to_string(out.unmatched.size()) +
                        " kernel name(s) matched no pattern of the kernel table (" + table.origin + ")");
  return out;
}

}  // namespace hbmscope

namespace hbmscope {

std::vector<Row> reconcile_rows(const Reconciliation& r) {
  std::vector<Row> rows;
  for (const auto& c : r.calls) {
    if (!c.shape) continue;
    Row row;
    row.shape = *c.shape;
    row.flops = c.flops;
    row.label = "call " + std::to_string(c.index) + " (" + std::string(call_kind_name(c.kind)) + ")";
    for (const auto& v : c.model) row.variants.emplace_back(v.id, v.total, intensity(c.flops, v.total));
    rows.push_back(std::move(row));
  }
  return rows;
}

}  // namespace hbmscope
