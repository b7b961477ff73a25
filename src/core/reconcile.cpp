// `reconcile`'s core: kernels classified by the table, launches grouped into
// attention calls per stream, shapes given, the model evaluated (its variants
// and verdicts: reconcile_model.cpp; launch geometry: reconcile_geometry.cpp;
// NVTX shapes: reconcile_nvtx.cpp).
#include "hbmscope/reconcile.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <unordered_map>

#include "hbmscope/checked.hpp"
#include "hbmscope/decode.hpp"
#include "hbmscope/error.hpp"
#include "hbmscope/model.hpp"
#include "reconcile_internal.hpp"

namespace hbmscope {

namespace {

struct RoleName {
  KernelRole role;
  const char* name;
};
constexpr RoleName role_names[] = {
    {KernelRole::flash_fwd, "flash_fwd"},     {KernelRole::flash_bwd, "flash_bwd"},
    {KernelRole::split_kv, "split_kv"},       {KernelRole::split_kv_combine, "split_kv_combine"},
    {KernelRole::gemm, "gemm"},               {KernelRole::gemm_reduce, "gemm_reduce"},
    {KernelRole::softmax, "softmax"},         {KernelRole::elementwise, "elementwise"},
    {KernelRole::floor, "floor"},             {KernelRole::other, "other"},
    {KernelRole::unknown, "unknown"},
};

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

std::string_view time_source_name(TimeSource t) {
  switch (t) {
    case TimeSource::none: return "";
    case TimeSource::duration: return "duration";
    case TimeSource::section: return "Duration (SOL section)";
    case TimeSource::cycles: return "derived: cycles / cycles per second";
  }
  return "";
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

std::vector<CallGroup> group_launches(const std::vector<KernelRole>& roles,
                                      const std::vector<std::optional<KernelRole>>& whole_call,
                                      const std::vector<std::string_view>& families) {
  std::vector<CallGroup> out;
  const std::size_t n = roles.size();
  auto free_at = [&](std::size_t i) { return i >= whole_call.size() || !whole_call[i]; };
  auto family = [&](std::size_t i) { return i < families.size() ? families[i] : std::string_view{}; };
  auto same_family = [&](std::size_t a, std::size_t b) {
    return family(a).empty() || family(b).empty() || family(a) == family(b);
  };
  // Launches of role r right after i (and of i's family) join the group.
  auto absorb = [&](std::size_t& i, KernelRole r, std::size_t head) {
    while (i + 1 < n && roles[i + 1] == r && free_at(i + 1) && same_family(head, i + 1))
      out.back().launches.push_back(++i);
  };
  for (std::size_t i = 0; i < n; ++i) {
    if (!free_at(i)) {
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
        const std::size_t head = i;
        out.push_back({roles[i] == KernelRole::split_kv ? CallKind::split_kv : CallKind::flash, {i}});
        const std::size_t before = out.back().launches.size();
        absorb(i, KernelRole::split_kv_combine, head);
        // A forward kernel followed by a combine ran in splits (flash-attn 3, cuDNN decode).
        if (out.back().launches.size() > before) out.back().kind = CallKind::split_kv;
        break;
      }
      case KernelRole::flash_bwd:
        out.push_back({CallKind::flash_bwd, {i}});
        absorb(i, KernelRole::flash_bwd, i);
        break;
      case KernelRole::floor: out.push_back({CallKind::floor, {i}}); break;
      case KernelRole::gemm: {
        // GEMM (its split-K reductions), elementwise..., softmax, elementwise..., GEMM (reductions).
        std::size_t j = i + 1;
        auto skip = [&](KernelRole r) {
          while (j < n && roles[j] == r && free_at(j)) ++j;
        };
        skip(KernelRole::gemm_reduce);
        skip(KernelRole::elementwise);
        if (j >= n || roles[j] != KernelRole::softmax || !free_at(j)) break;
        ++j;
        skip(KernelRole::elementwise);
        if (j >= n || roles[j] != KernelRole::gemm || !free_at(j)) break;
        ++j;
        skip(KernelRole::gemm_reduce);
        CallGroup g{CallKind::standard, {}};
        for (std::size_t k = i; k < j; ++k) g.launches.push_back(k);
        out.push_back(std::move(g));
        i = j - 1;
        break;
      }
      default: break;  // outside any call
    }
  }
  return out;
}

namespace {

using reconciling::find_variant;

void add_count(std::vector<KernelCount>& list, std::map<std::string_view, std::size_t>& at, const MeasuredLaunch& l,
               KernelRole role) {
  auto [it, fresh] = at.emplace(l.kernel, list.size());
  if (fresh) {
    KernelCount k;
    k.kernel = l.kernel;
    k.role = role;
    k.seconds = 0.0;
    k.read_bytes = 0;
    list.push_back(std::move(k));
  }
  KernelCount& k = list[it->second];
  ++k.launches;
  if (k.seconds && l.seconds) *k.seconds += *l.seconds;
  else k.seconds.reset();
  const auto bytes = l.dram_read ? l.dram_read : l.dram_total;
  if (k.read_bytes && bytes && *k.read_bytes <= UINT64_MAX - *bytes) *k.read_bytes += *bytes;
  else k.read_bytes.reset();
}

// The shapes of the calls without one of their own, from the options: the
// product of the axes is counted first and built only when it is one shape
// or one per call.
std::vector<Shape> option_shapes(const ReconcileOptions& opt, std::size_t without) {
  if (!opt.axes) {
    if (opt.shapes.size() > 1 && opt.shapes.size() != without)
      throw Error(std::to_string(opt.shapes.size()) + " shapes given for " + std::to_string(without) +
                  " attention call(s) without an NVTX shape: give one shape for all, one per call in launch "
                  "order, or NVTX ranges (see `hbmscope reconcile --help`)");
    return opt.shapes;
  }
  const std::uint64_t n = shape_count(*opt.axes);
  if (n != 1 && n != without)
    throw Error((n == UINT64_MAX ? std::string("more than 2^64") : std::to_string(n)) + " shapes given for " +
                std::to_string(without) +
                " attention call(s) without an NVTX shape: give one shape for all, one per call in launch "
                "order, or NVTX ranges (see `hbmscope reconcile --help`)");
  return expand(*opt.axes);
}

struct CallInfo {
  const KernelPattern* head = nullptr;  // the pattern of the call's first launch
  bool has_combine = false;
};

// A split-KV (or decode) call: its decode shape, split count and variants.
void model_decode_call(ReconciledCall& c, const CallInfo& info, const MeasuredLaunch& first,
                       const ReconcileOptions& opt) {
  Shape ds = *c.shape;
  ds.decode = true;
  if (opt.page_size) ds.page_size = *opt.page_size;
  const GridLayout layout = info.head ? info.head->grid : GridLayout::unknown;
  const GridCheck g = check_grid(layout, first, ds);
  if (g.contradiction) c.geometry_warning = *g.contradiction;
  if (opt.splits) c.splits = opt.splits, c.splits_from = "--splits";
  else if (c.shape->splits) c.splits = c.shape->splits, c.splits_from = "NVTX range";
  else if (g.splits && *g.splits >= 1 && *g.splits <= max_decode_splits)
    c.splits = *g.splits, c.splits_from = "launch grid";
  else if (!info.has_combine) c.splits = 1, c.splits_from = "no combine kernel";
  else {
    ds.splits = 0;
    c.splits = decode_splits(ds, DecodeVariant::split, opt.sm_count);
    c.splits_from = "heuristic (FlashAttention-2's, " + std::to_string(opt.sm_count) + " SMs)";
  }
  ds.splits = c.splits;
  c.shape = ds;
  const bool paged = info.head && info.head->paged;
  const bool per_head = info.head && info.head->per_query_head;
  c.model = decode_model_bytes(ds, c.splits, per_head);
  c.flops = decode_flops(ds);
  c.judged_against = paged ? "decode_paged" : "decode_split";
  c.judged_why = std::to_string(c.splits) + " split(s) from " + c.splits_from + (paged ? ", a paged kernel" : "");
  if (per_head && ds.kv_heads != ds.heads)
    c.notes.push_back("one CTA per query head: each KV head read " + std::to_string(group_size(ds)) +
                      " times, from L2 when it holds (decode_split_unpacked: none do)");
}

}  // namespace

Reconciliation reconcile(const std::vector<MeasuredLaunch>& launches, const KernelTable& table,
                         const ReconcileOptions& opt) {
  Reconciliation out;
  const std::size_t n = launches.size();
  std::vector<KernelRole> roles(n, KernelRole::unknown);
  std::vector<std::optional<KernelRole>> whole(n);
  std::vector<const KernelPattern*> pats(n, nullptr);
  std::vector<std::string_view> families(n);
  std::map<std::string_view, std::size_t> unmatched_at, outside_at;
  {
    // A capture repeats a few kernel names many times: each is classified once.
    std::unordered_map<std::string_view, const KernelPattern*> memo;
    for (std::size_t i = 0; i < n; ++i) {
      whole[i] = launches[i].whole_call;
      auto [it, fresh] = memo.emplace(launches[i].kernel, nullptr);
      if (fresh) it->second = classify(table, launches[i].kernel);
      pats[i] = it->second;
      if (pats[i]) roles[i] = pats[i]->role, families[i] = pats[i]->family;
      if (!pats[i] && !whole[i]) add_count(out.unmatched, unmatched_at, launches[i], KernelRole::unknown);
    }
  }
  // Group per stream, then order the calls by their first launch.
  std::vector<CallGroup> groups;
  {
    std::unordered_map<std::string_view, std::size_t> key_index;
    std::vector<std::vector<std::size_t>> members;
    for (std::size_t i = 0; i < n; ++i) {
      auto [it, fresh] = key_index.emplace(launches[i].stream, members.size());
      if (fresh) members.emplace_back();
      members[it->second].push_back(i);
    }
    for (const auto& idx : members) {
      std::vector<KernelRole> r;
      std::vector<std::optional<KernelRole>> w;
      std::vector<std::string_view> fam;
      for (auto i : idx) r.push_back(roles[i]), w.push_back(whole[i]), fam.push_back(families[i]);
      for (auto g : group_launches(r, w, fam)) {
        for (auto& i : g.launches) i = idx[i];
        groups.push_back(std::move(g));
      }
    }
    std::stable_sort(groups.begin(), groups.end(),
                     [](const CallGroup& a, const CallGroup& b) { return a.launches.front() < b.launches.front(); });
  }
  std::vector<bool> used(n, false);
  for (const auto& g : groups)
    for (auto i : g.launches) used[i] = true;
  for (std::size_t i = 0; i < n; ++i)
    if (!used[i] && pats[i]) add_count(out.outside, outside_at, launches[i], roles[i]);

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
  const std::vector<Shape> shapes = option_shapes(opt, without);

  // Counts, times and shapes per call.
  std::vector<CallInfo> info(groups.size());
  std::size_t next_shape = 0;
  for (std::size_t gi = 0; gi < groups.size(); ++gi) {
    const auto& g = groups[gi];
    ReconciledCall c;
    c.index = gi + 1;
    c.kind = g.kind;
    c.launches = g.launches;
    const MeasuredLaunch& first = launches[g.launches.front()];
    c.origin = first.origin;
    c.grid = first.grid;
    c.grid_size = first.grid_size;
    info[gi].head = pats[g.launches.front()];
    c.source = info[gi].head ? info[gi].head->source : std::string();
    bool all_reads = true, all_writes = true, all_totals = true, all_times = true, all_l2 = true, have_pct = true;
    std::uint64_t rd = 0, wr = 0, tot = 0, l2_reads = 0, l2_hits = 0;
    double secs = 0, pct_time = 0;
    for (auto i : g.launches) {
      const auto& l = launches[i];
      info[gi].has_combine = info[gi].has_combine || roles[i] == KernelRole::split_kv_combine;
      if (!c.kernels.empty()) c.kernels += " + ";
      c.kernels += l.kernel;
      if (l.dram_read) rd = checked_add(rd, *l.dram_read, "counted read bytes");
      else all_reads = false;
      if (l.dram_write) wr = checked_add(wr, *l.dram_write, "counted write bytes");
      else all_writes = false;
      if (l.dram_total) tot = checked_add(tot, *l.dram_total, "counted bytes");
      else all_totals = false;
      if (l.seconds) secs += *l.seconds;
      else all_times = false;
      if (l.time_from == TimeSource::cycles || c.time_from == TimeSource::none) c.time_from = l.time_from;
      if (l.dram_pct_of_peak && l.seconds) pct_time += *l.dram_pct_of_peak * *l.seconds;
      else have_pct = false;
      if (l.l2_read_sectors && l.l2_read_hit_sectors) {
        l2_reads = checked_add(l2_reads, *l.l2_read_sectors, "L2 sectors");
        l2_hits = checked_add(l2_hits, *l.l2_read_hit_sectors, "L2 sectors");
      } else {
        all_l2 = false;
      }
    }
    if (all_reads) c.read_bytes = rd;
    if (all_writes) c.write_bytes = wr;
    if (all_totals && !all_reads) c.total_bytes = tot;
    if (all_times) c.seconds = secs;
    else c.time_from = TimeSource::none;
    if (all_l2 && l2_reads > 0) c.l2_hit_rate = static_cast<double>(l2_hits) / static_cast<double>(l2_reads);
    if (own[gi]) {
      c.shape = own[gi];
      c.shape_from = own_from[gi];
    } else if (shapes.size() == 1) {
      c.shape = shapes[0];
      c.shape_from = "options";
    } else if (!shapes.empty()) {
      c.shape = shapes[next_shape++];
      c.shape_from = "options";
    }
    const std::optional<std::uint64_t> both =
        c.read_bytes ? std::optional<std::uint64_t>(*c.read_bytes + c.write_bytes.value_or(0)) : c.total_bytes;
    if (both && c.seconds && *c.seconds > 0 && std::isfinite(static_cast<double>(*both) / *c.seconds))
      c.achieved_bandwidth = static_cast<double>(*both) / *c.seconds;
    if (c.achieved_bandwidth && opt.device) c.pct_of_peak = *c.achieved_bandwidth / opt.device->bandwidth * 100;
    else if (have_pct && secs > 0 && !both) {
      c.pct_of_peak = pct_time / secs;  // ncu's own figure, time-weighted over the launches
      if (opt.device) c.achieved_bandwidth = *c.pct_of_peak / 100 * opt.device->bandwidth;
    }
    out.calls.push_back(std::move(c));
  }

  // Decode shapes, and which forward shapes the L2 simulation may run on.
  std::vector<Shape> to_simulate;
  for (std::size_t gi = 0; gi < out.calls.size(); ++gi) {
    ReconciledCall& c = out.calls[gi];
    if (!c.shape) continue;
    c.shape->pass = c.kind == CallKind::flash_bwd ? Pass::bwd : Pass::fwd;
    if (c.shape->decode && c.kind == CallKind::flash) c.kind = CallKind::split_kv;  // one decode kernel, unsplit
    const bool decodable = c.shape->decode || (c.kind == CallKind::split_kv && c.shape->seq_q <= max_decode_seq_q &&
                                               c.shape->seq_lens.empty());
    if (c.kind == CallKind::split_kv && decodable) continue;
    if (c.shape->decode) {  // one decode shape for every call: this one cannot take it
      c.notes.push_back("a decode shape (" + c.shape_from + ") for a " + std::string(call_kind_name(c.kind)) +
                        " call: left without a shape (give the calls NVTX ranges, or one shape per call)");
      c.shape.reset();
      c.shape_from.clear();
      continue;
    }
    if (opt.l2 && (c.kind == CallKind::flash || c.kind == CallKind::standard) &&
        std::find(to_simulate.begin(), to_simulate.end(), *c.shape) == to_simulate.end())
      to_simulate.push_back(*c.shape);
  }
  std::vector<bool> simulate(to_simulate.size(), true);
  if (opt.l2_plan && !to_simulate.empty()) simulate = opt.l2_plan(to_simulate, out.notes);
  auto allowed = [&](const Shape& s) {
    for (std::size_t i = 0; i < to_simulate.size(); ++i)
      if (to_simulate[i] == s) return i < simulate.size() && simulate[i];
    return false;
  };

  // Captures repeat one shape many times: each (kind, shape) is modelled once.
  std::vector<std::pair<std::pair<CallKind, Shape>, std::vector<ModelBytesRW>>> modelled;
  auto model_of = [&](CallKind k, const Shape& s) -> const std::vector<ModelBytesRW>& {
    for (const auto& [key, m] : modelled)
      if (key.first == k && key.second == s) return m;
    modelled.push_back({{k, s}, model_bytes_for(k, s, allowed(s) ? opt.l2 : std::nullopt)});
    return modelled.back().second;
  };
  for (std::size_t gi = 0; gi < out.calls.size(); ++gi) {
    ReconciledCall& c = out.calls[gi];
    const MeasuredLaunch& first = launches[c.launches.front()];
    if (c.shape) {
      try {
        if (c.kind == CallKind::split_kv && (c.shape->decode || (c.shape->seq_q <= max_decode_seq_q &&
                                                                 c.shape->seq_lens.empty()))) {
          model_decode_call(c, info[gi], first, opt);
        } else {
          c.model = model_of(c.kind, *c.shape);
          c.flops = pass_flops(*c.shape);
          c.judged_against = c.kind == CallKind::standard ? "standard" : "floor";
          if (c.kind == CallKind::split_kv)
            c.notes.push_back("judged against the floor: seq " + std::to_string(c.shape->seq_q) +
                              " is no decode shape (1 to " + std::to_string(max_decode_seq_q) + " new tokens)");
          if (info[gi].head && c.kind != CallKind::standard)
            if (const GridCheck g = check_grid(info[gi].head->grid, first, *c.shape); g.contradiction)
              c.geometry_warning = *g.contradiction;
          if (opt.l2 && (c.kind == CallKind::flash || c.kind == CallKind::standard) && !allowed(*c.shape))
            c.notes.push_back("L2 simulation left out (see the notes below)");
          else if (opt.l2 && (c.kind == CallKind::flash || c.kind == CallKind::standard) &&
                   !l2_sim_within_budget(*c.shape, *opt.l2))
            c.notes.push_back("L2 simulation left out: more than " + std::to_string(max_l2_sim_work) +
                              " work units (docs/l2-simulation.md, \"Cost and the budget\")");
        }
      } catch (const Error& e) {
        throw Error("call " + std::to_string(c.index) + " (" + c.origin + "): shape " + describe(*c.shape) + ": " +
                    e.what());
      }
    }
    reconciling::judge(c, opt);
  }
  for (const auto& c : out.calls)
    if (c.write_bytes) {
      out.notes.push_back("writes are reported, not judged: lines still dirty in L2 when a kernel ends are written "
                          "back outside its profiled range");
      break;
    }
  for (const auto& c : out.calls)
    if (c.total_bytes) {
      out.notes.push_back("dram__bytes.sum counts reads and writes in one figure: the writes still in L2 when a "
                          "kernel ends are missing from it, so it is held against the model's reads up to its total");
      break;
    }
  for (const auto& c : out.calls)
    if (c.time_from == TimeSource::cycles) {
      out.notes.push_back("times marked ~ are derived: sm__cycles_elapsed.avg / sm__cycles_elapsed.avg.per_second "
                          "(no gpu__time_duration.sum in the input)");
      break;
    }
  if (!out.unmatched.empty())
    out.notes.push_back(std::to_string(out.unmatched.size()) +
                        " kernel name(s) matched no pattern of the kernel table (" + table.origin + ")");
  return out;
}

std::vector<Row> reconcile_rows(const Reconciliation& r) {
  std::vector<Row> rows;
  for (const auto& c : r.calls) {
    if (!c.shape) continue;
    Row row;
    row.shape = *c.shape;
    row.flops = c.flops;
    row.label = "call " + std::to_string(c.index) + " (" + std::string(call_kind_name(c.kind)) + ")";
    for (const auto& v : c.model) {
      row.variants.emplace_back(v.id, v.total, intensity(c.flops, v.total));
      if (v.splits) row.variants.back().splits = v.splits;
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

}  // namespace hbmscope
