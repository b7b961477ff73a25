// The L2 simulation's public entry points (docs/model.md, "The L2
// simulation"): the method of evaluation, the budget, and the report rows.
// The schedule and streams live in l2_flash*.cpp, l2_standard.cpp,
// l2_decode*.cpp and l2_backward.cpp; both evaluations feed one Tally.
#include "hbmscope/l2_sim.hpp"

#include <algorithm>
#include <array>
#include <string>

#include "hbmscope/checked.hpp"
#include "hbmscope/error.hpp"
#include "hbmscope/model.hpp"
#include "l2_backward.hpp"
#include "l2_decode.hpp"
#include "l2_flash.hpp"
#include "l2_list.hpp"
#include "l2_standard.hpp"
#include "l2_tally.hpp"

namespace hbmscope {

std::string_view rasterization_name(Rasterization r) {
  switch (r) {
    case Rasterization::query_block_major: return "query-block-major";
    case Rasterization::head_major: return "head-major";
  }
  return "?";
}

std::optional<Rasterization> parse_rasterization(std::string_view s) {
  if (s == "query-block-major") return Rasterization::query_block_major;
  if (s == "head-major") return Rasterization::head_major;
  return std::nullopt;
}

std::string_view l2_method_name(L2SimMethod m) {
  switch (m) {
    case L2SimMethod::runs: return "runs";
    case L2SimMethod::enumeration: return "enumeration";
  }
  return "?";
}

std::optional<L2SimMethod> parse_l2_method(std::string_view s) {
  if (s == "runs") return L2SimMethod::runs;
  if (s == "enumeration") return L2SimMethod::enumeration;
  return std::nullopt;
}

void validate(const L2SimConfig& c) {
  if (c.sm_count == 0) throw Error("L2 simulation: SM count must be positive");
  if (c.ctas_per_sm == 0) throw Error("L2 simulation: CTAs per SM must be positive");
}

namespace l2 {

L2SimResult result_at(const Tally& t, std::uint64_t capacity) {
  L2SimResult r;
  r.dram_read_bytes = t.dram_reads(capacity);
  r.dram_write_bytes = t.dram_writes(capacity);
  r.dram_bytes = checked_add(r.dram_read_bytes, r.dram_write_bytes, "L2 simulation bytes");
  r.read_request_bytes = t.requested();
  r.l2_hit_rate = r.read_request_bytes == 0
                      ? 0.0
                      : static_cast<double>(r.read_request_bytes - r.dram_read_bytes) /
                            static_cast<double>(r.read_request_bytes);
  r.l2_bytes_to_min = t.max_reuse_distance();
  r.min_dram_bytes = checked_add(t.first_access_reads(), t.writes_always(), "L2 simulation bytes");
  return r;
}

std::vector<std::uint64_t> curve(const Tally& t, const std::vector<std::uint64_t>& caps) {
  std::vector<std::uint64_t> out;
  out.reserve(caps.size());
  for (auto cap : caps) out.push_back(checked_add(t.dram_reads(cap), t.dram_writes(cap), "L2 simulation bytes"));
  return out;
}

}  // namespace l2

namespace {

using l2::Tally;

// Refuses a shape over the budget before anything runs, and one whose tiles'
// bytes overflow 64 bits (every stack distance is at most their sum, so the
// closed forms' unchecked sums then fit).
void check_before(const Shape& s, const L2SimConfig& c) {
  validate(s);
  validate(c);
  (void)checked_add(kv_footprint_bytes(s), qo_footprint_bytes(s), "L2 simulation footprint");
  if (s.pass == Pass::fwd) (void)standard_bytes(s);  // S and P panels of the standard stream
  check_l2_sim_size(s, c);
}

// The forward pass into a tally, by either method.
l2::FlashStats flash_forward(const Shape& s, const L2SimConfig& c, Tally& t) {
  return c.method == L2SimMethod::enumeration ? l2::enumerate_flash(s, c, t) : l2::runs_flash(s, c, t);
}

// flash_l2_sim's tally for s.pass, and the forward's (or the backward main
// loop's) schedule figures.
l2::FlashStats flash_pass(const Shape& s, const L2SimConfig& c, Tally& t) {
  if (s.pass == Pass::fwd) return flash_forward(s, c, t);
  Shape fwd = s;
  fwd.pass = Pass::fwd;
  Shape bwd = s;
  bwd.pass = Pass::bwd;
  if (s.pass == Pass::bwd) return l2::flash_backward(bwd, c, t);
  l2::FlashStats st = flash_forward(fwd, c, t);
  (void)l2::flash_backward(bwd, c, t);
  t.write(forward_lse_bytes(fwd));  // the training forward's log-sum-exp, read by the backward
  return st;
}

void standard_pass(const Shape& s, const L2SimConfig& c, Tally& t) {
  if (s.pass != Pass::fwd)
    throw Error("shape " + describe(s) + ": standard_l2_sim simulates the forward pass only");
  if (c.method == L2SimMethod::enumeration) l2::enumerate_standard(s, c, t);
  else l2::runs_standard(s, c, t);
}

}  // namespace

void for_each_flash_l2_access(const Shape& s, const L2SimConfig& c,
                              const std::function<void(const L2Access&)>& on_access) {
  validate(s);
  validate(c);
  if (s.pass == Pass::fwd) return l2::trace_flash(s, c, on_access);
  Shape fwd = s;
  fwd.pass = Pass::fwd;
  Shape bwd = s;
  bwd.pass = Pass::bwd;
  if (s.pass == Pass::fwdbwd) l2::trace_flash(fwd, c, on_access);
  l2::trace_backward(bwd, c, on_access);
}

void for_each_standard_l2_access(const Shape& s, const L2SimConfig& c,
                                 const std::function<void(const L2Access&)>& on_access) {
  validate(s);
  validate(c);
  if (s.pass != Pass::fwd)
    throw Error("shape " + describe(s) + ": standard_l2_sim simulates the forward pass only");
  l2::trace_standard(s, c, on_access);
}

L2SimResult flash_l2_sim(const Shape& s, const L2SimConfig& c) {
  check_before(s, c);
  Tally t({c.l2_bytes});
  const l2::FlashStats st = flash_pass(s, c, t);
  L2SimResult r = l2::result_at(t, c.l2_bytes);
  r.heads_per_wave = st.heads;
  r.kv_heads_per_wave = st.kv_heads;
  r.waves = st.waves;
  r.steps = st.steps;
  return r;
}

L2SimResult standard_l2_sim(const Shape& s, const L2SimConfig& c) {
  check_before(s, c);
  Tally t({c.l2_bytes});
  standard_pass(s, c, t);
  return l2::result_at(t, c.l2_bytes);
}

std::vector<std::uint64_t> flash_l2_curve(const Shape& s, const L2SimConfig& c,
                                          const std::vector<std::uint64_t>& capacities) {
  check_before(s, c);
  Tally t(capacities);
  flash_pass(s, c, t);
  return l2::curve(t, capacities);
}

std::vector<std::uint64_t> standard_l2_curve(const Shape& s, const L2SimConfig& c,
                                             const std::vector<std::uint64_t>& capacities) {
  check_before(s, c);
  Tally t(capacities);
  standard_pass(s, c, t);
  return l2::curve(t, capacities);
}

std::uint64_t kv_footprint_bytes(const Shape& s) {
  validate(s);
  const OperandBytes ob = operand_bytes(s);
  const auto total = s.seq_lens.total_kv();
  if (!s.seq_lens.empty() && !total) throw_overflow("K/V footprint");
  const std::uint64_t keys = s.seq_lens.empty() ? checked_mul(s.batch, s.seq_kv, "K/V footprint") : *total;
  return checked_product("K/V footprint", s.kv_heads, keys, ob.kv_col());
}

std::uint64_t qo_footprint_bytes(const Shape& s) {
  validate(s);
  const OperandBytes ob = operand_bytes(s);
  const auto total = s.seq_lens.total_q();
  if (!s.seq_lens.empty() && !total) throw_overflow("Q/O footprint");
  const std::uint64_t rows = s.seq_lens.empty() ? checked_mul(s.batch, s.seq_q, "Q/O footprint") : *total;
  return checked_product("Q/O footprint", s.heads, rows, checked_add(ob.q_row, ob.o_row, "Q/O footprint"));
}

namespace {
// The split counts a decode shape's simulations may run with: --splits, or
// at most FlashAttention's cap.
std::uint64_t decode_split_bound(const Shape& s) { return s.splits != 0 ? s.splits : max_heuristic_splits; }

constexpr std::array<DecodeVariant, 3> simulated_decode_variants{DecodeVariant::split, DecodeVariant::split_unpacked,
                                                                 DecodeVariant::paged};

std::uint64_t add_work(std::uint64_t a, std::uint64_t b) {
  const std::uint64_t r = a + b;
  return r < a ? ~std::uint64_t{0} : r;  // saturates: a sum past 2^64 is past every budget
}
std::uint64_t mul_work(std::uint64_t a, std::uint64_t b) {
  std::uint64_t r = 0;
  return __builtin_mul_overflow(a, b, &r) ? ~std::uint64_t{0} : r;
}
}  // namespace

std::uint64_t flash_l2_sim_accesses(const Shape& s) {
  validate(s);
  if (s.decode) {
    std::uint64_t n = 0;
    for (DecodeVariant v : simulated_decode_variants)
      n = checked_add(n, l2::decode_enum_accesses(s, v, decode_split_bound(s)), "L2 simulation");
    return n;
  }
  Shape fwd = s;
  fwd.pass = Pass::fwd;
  Shape bwd = s;
  bwd.pass = Pass::bwd;
  switch (s.pass) {
    case Pass::fwd: return l2::flash_enum_accesses(s);
    case Pass::bwd: return l2::backward_enum_accesses(bwd);
    case Pass::fwdbwd:
      return checked_add(l2::flash_enum_accesses(fwd), l2::backward_enum_accesses(bwd), "L2 simulation");
  }
  return 0;
}

std::uint64_t standard_l2_sim_accesses(const Shape& s) {
  validate(s);
  if (s.decode || s.pass != Pass::fwd) return 0;  // simulated for forward prefill rows only
  return l2::standard_enum_accesses(s);
}

std::uint64_t l2_sim_accesses(const Shape& s) {
  return std::max(flash_l2_sim_accesses(s), standard_l2_sim_accesses(s));
}

std::uint64_t decode_l2_sim_accesses(const Shape& s, DecodeVariant v, std::uint64_t splits) {
  validate(s);
  return l2::decode_enum_accesses(s, v, splits);
}

std::uint64_t l2_sim_work(const Shape& s, const L2SimConfig& c) {
  validate(s);
  validate(c);
  if (c.method == L2SimMethod::enumeration)
    return mul_work(add_work(flash_l2_sim_accesses(s), standard_l2_sim_accesses(s)), l2::enumeration_units());
  if (s.decode) {
    std::uint64_t w = 0;
    for (DecodeVariant v : simulated_decode_variants)
      w = add_work(w, l2::decode_runs_work(s, v, decode_split_bound(s), c));
    return w;
  }
  Shape fwd = s;
  fwd.pass = Pass::fwd;
  Shape bwd = s;
  bwd.pass = Pass::bwd;
  switch (s.pass) {
    case Pass::fwd: return add_work(l2::flash_runs_work(s, c), l2::standard_runs_work(s));
    case Pass::bwd: return l2::backward_work(bwd, c);
    case Pass::fwdbwd: return add_work(l2::flash_runs_work(fwd, c), l2::backward_work(bwd, c));
  }
  return 0;
}

bool l2_sim_within_budget(const Shape& s, const L2SimConfig& c) { return l2_sim_work(s, c) <= max_l2_sim_work; }

bool l2_sim_backward_not_in_closed_form(const Shape& s) { return s.pass != Pass::fwd && !l2::backward_in_waves(s); }

bool l2_sim_fits_query_block_major(const Shape& s, const L2SimConfig& c) {
  if (c.method != L2SimMethod::runs || c.order != Rasterization::head_major) return false;
  L2SimConfig q = c;
  q.order = Rasterization::query_block_major;
  return l2_sim_within_budget(s, q);
}

void check_l2_sim_size(const Shape& s, const L2SimConfig& c) {
  const std::uint64_t w = l2_sim_work(s, c);
  if (w <= max_l2_sim_work) return;
  L2SimConfig runs = c;
  runs.method = L2SimMethod::runs;
  const std::string change =
      c.method == L2SimMethod::enumeration && l2_sim_work(s, runs) <= max_l2_sim_work
          ? "use --l2-method runs, or bigger --block-rows/--block-cols"
      : c.method == L2SimMethod::enumeration
          ? "use bigger --block-rows/--block-cols"
      : l2_sim_fits_query_block_major(s, c)
          ? "use --l2-order query-block-major (within the budget there), or bigger --block-rows/--block-cols, fewer "
            "heads or a shorter sequence"
          : (s.decode ? "use fewer --splits or a smaller batch" : "use bigger --block-rows/--block-cols, fewer heads or a shorter sequence");
  throw Error("shape " + describe(s) + ": the L2 simulation (" + std::string(l2_method_name(c.method)) +
              ") would take " + std::to_string(w) + " work units (at most " + std::to_string(max_l2_sim_work) +
              ", about 10 s); " + change);
}

namespace {
void check_decode(const Shape& s, DecodeVariant v, std::uint64_t splits, const L2SimConfig& c) {
  validate(s);
  validate(c);
  if (!s.decode) throw Error("shape " + describe(s) + ": not a decode shape");
  if (v == DecodeVariant::floor) throw Error("decode_floor is a bound, not a kernel: nothing to simulate");
  if (splits == 0) throw Error("decode: the split count must be positive");
  check_l2_sim_size(s, c);
}
}  // namespace

L2SimResult decode_l2_sim(const Shape& s, DecodeVariant v, std::uint64_t splits, const L2SimConfig& c) {
  check_decode(s, v, splits, c);
  Tally t({c.l2_bytes});
  std::uint64_t waves = 0, steps = 0;
  if (c.method == L2SimMethod::enumeration) l2::enumerate_decode(s, v, splits, c, t, waves, steps);
  else l2::runs_decode(s, v, splits, c, t, waves, steps);
  L2SimResult r = l2::result_at(t, c.l2_bytes);
  r.waves = waves;
  r.steps = steps;
  return r;
}

std::vector<std::uint64_t> decode_l2_curve(const Shape& s, DecodeVariant v, std::uint64_t splits,
                                           const L2SimConfig& c, const std::vector<std::uint64_t>& capacities) {
  check_decode(s, v, splits, c);
  Tally t(capacities);
  std::uint64_t waves = 0, steps = 0;
  if (c.method == L2SimMethod::enumeration) l2::enumerate_decode(s, v, splits, c, t, waves, steps);
  else l2::runs_decode(s, v, splits, c, t, waves, steps);
  return l2::curve(t, capacities);
}

void for_each_decode_l2_access(const Shape& s, DecodeVariant v, std::uint64_t splits, const L2SimConfig& c,
                               const std::function<void(const L2Access&)>& on_access) {
  validate(s);
  validate(c);
  l2::trace_decode(s, v, splits, c, on_access);
}

namespace {
void add_decode_l2_sim(Row& row, const L2SimConfig& c) {
  L2SimDetail d;
  d.l2_bytes = c.l2_bytes;
  d.sm_count = c.sm_count;
  d.ctas_per_sm = c.ctas_per_sm;
  d.order = "split-major";  // FlashAttention-2's split-KV grid: row block, split, head, sequence
  d.q_o_allocate = c.q_o_allocate;
  std::vector<VariantResult> added;
  for (const auto& v : row.variants) {
    const auto dv = parse_decode_variant(v.id);
    if (!dv || *dv == DecodeVariant::floor) continue;
    L2SimResult r;
    try {
      r = decode_l2_sim(row.shape, *dv, v.splits, c);
    } catch (const Error& e) {
      const std::string msg = e.what();
      if (msg.rfind("shape ", 0) == 0) throw;
      throw Error("shape " + describe(row.shape) + ": " + msg);
    }
    added.push_back({v.id + "_l2_sim", r.dram_bytes, intensity(row.flops, r.dram_bytes)});
    d.decode.push_back({v.id, v.splits, {r.dram_read_bytes, r.dram_write_bytes, r.l2_hit_rate, r.l2_bytes_to_min},
                        r.waves});
  }
  for (auto& a : added) row.variants.push_back(std::move(a));
  row.l2_sim = d;
}
}  // namespace

void add_l2_sim(Row& row, const L2SimConfig& c) {
  if (row.shape.decode) {
    add_decode_l2_sim(row, c);
    return;
  }
  const bool forward = row.shape.pass == Pass::fwd;
  L2SimResult f, st;
  try {
    f = flash_l2_sim(row.shape, c);
    if (forward) st = standard_l2_sim(row.shape, c);
  } catch (const Error& e) {
    const std::string msg = e.what();
    if (msg.rfind("shape ", 0) == 0) throw;
    throw Error("shape " + describe(row.shape) + ": " + msg);
  }
  row.variants.push_back({"flash_l2_sim", f.dram_bytes, intensity(row.flops, f.dram_bytes)});
  if (forward) row.variants.push_back({"standard_l2_sim", st.dram_bytes, intensity(row.flops, st.dram_bytes)});
  L2SimDetail d;
  d.l2_bytes = c.l2_bytes;
  d.sm_count = c.sm_count;
  d.ctas_per_sm = c.ctas_per_sm;
  d.order = std::string(rasterization_name(c.order));
  d.q_o_allocate = c.q_o_allocate;
  d.flash = {f.dram_read_bytes, f.dram_write_bytes, f.l2_hit_rate, f.l2_bytes_to_min};
  if (forward) d.standard = {st.dram_read_bytes, st.dram_write_bytes, st.l2_hit_rate, st.l2_bytes_to_min};
  d.has_standard = forward;
  d.heads_per_wave = f.heads_per_wave;
  d.kv_heads_per_wave = f.kv_heads_per_wave;
  d.waves = f.waves;
  row.l2_sim = d;
}

void L2SimMemo::add_l2_sim(Row& row, const L2SimConfig& c) {
  std::vector<std::pair<std::string, std::uint64_t>> asked;
  asked.reserve(row.variants.size());
  for (const auto& v : row.variants) asked.emplace_back(v.id, v.splits);
  for (const Entry& e : recent_)
    if (e.shape == row.shape && e.config == c && e.asked == asked) {
      for (VariantResult v : e.added) {
        v.intensity = intensity(row.flops, v.bytes);
        row.variants.push_back(std::move(v));
      }
      row.l2_sim = e.detail;
      ++replays_;
      return;
    }
  const std::size_t before = row.variants.size();
  hbmscope::add_l2_sim(row, c);
  if (recent_.size() == capacity) recent_.erase(recent_.begin());
  recent_.push_back({row.shape, c, std::move(asked),
                     std::vector<VariantResult>(row.variants.begin() + static_cast<std::ptrdiff_t>(before),
                                                row.variants.end()),
                     row.l2_sim});
}

}  // namespace hbmscope
