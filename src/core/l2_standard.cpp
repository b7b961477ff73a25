// Standard attention through the simulated L2 (docs/model.md, "Standard
// attention through the same L2"): its three kernels as one ordered stream of
// row panels, enumerated access by access, and the same stream's stack
// distances in closed form (prefix sums over panels, one run per head).
#include <string>
#include <vector>

#include "hbmscope/checked.hpp"
#include "hbmscope/error.hpp"
#include "hbmscope/tile_bytes.hpp"
#include "l2_list.hpp"
#include "l2_stack.hpp"
#include "l2_standard.hpp"

namespace hbmscope::l2 {

namespace {

// The stream's geometry: sequences in order (one per batch element, ragged or
// not), each with H heads of ceil(q / Br) panels.
struct Panels {
  const Shape& s;
  OperandBytes ob;
  std::uint64_t e;
  explicit Panels(const Shape& shape) : s(shape), ob(operand_bytes(shape)), e(elem_bytes(shape.dtype)) {}
  std::uint64_t q(std::uint64_t b) const { return s.seq_lens.empty() ? s.seq_q : s.seq_lens[b].q; }
  std::uint64_t kv(std::uint64_t b) const { return s.seq_lens.empty() ? s.seq_kv : s.seq_lens[b].kv; }
  std::uint64_t blocks(std::uint64_t b) const { return ceil_div(q(b), s.block_rows); }
  std::uint64_t rows(std::uint64_t b, std::uint64_t i) const { return std::min(s.block_rows, q(b) - i * s.block_rows); }
  // K and V of one kv head: read whole by the GEMMs (a latent KV's V is its
  // first head_dim_v values, read by the second GEMM as a matrix of its own).
  std::uint64_t k_bytes(std::uint64_t b) const { return ob.k_col * kv(b); }
  std::uint64_t v_bytes(std::uint64_t b) const {
    const std::uint64_t col = s.latent_kv ? elem_bytes(key_value_dtype(s)) * value_head_dim(s) : ob.v_col;
    return col * kv(b);
  }
  std::uint64_t sp_bytes(std::uint64_t b, std::uint64_t rows) const { return e * rows * kv(b); }
};

// GEMM writes S panel by panel, softmax reads S and writes P, GEMM reads P and
// V and writes O. Each GEMM reads its K or V once per head.
template <class Sink>
void run_standard(const Shape& s, const L2SimConfig& c, Sink& l2) {
  constexpr std::string_view what = "L2 simulation";
  const Panels pn(s);
  const std::uint64_t group = group_size(s);
  const std::uint64_t kv_pairs = checked_mul(s.batch, s.kv_heads, what);
  std::vector<std::uint64_t> first_panel;  // ragged: panels before sequence b
  std::uint64_t panels = 0;
  if (s.seq_lens.empty()) {
    panels = checked_product(what, s.batch, s.heads, pn.blocks(0));
  } else {
    for (std::uint64_t b = 0; b < s.batch; ++b) {
      first_panel.push_back(panels);
      panels = checked_add(panels, checked_mul(s.heads, pn.blocks(b), what), what);
    }
  }
  auto base = [&](std::uint64_t b) { return first_panel.empty() ? b * s.heads * pn.blocks(0) : first_panel[b]; };
  const std::uint64_t objects = checked_add(checked_mul(2, kv_pairs, what), checked_mul(2, panels, what), what);
  if (objects >= (std::uint64_t{1} << 28))
    throw Error("shape " + describe(s) + ": the standard-attention L2 enumeration would track " +
                std::to_string(objects) + " objects (at most " + std::to_string(std::uint64_t{1} << 28) + ")");
  l2.reserve_objects(static_cast<std::size_t>(objects));
  const auto k_id = [&](std::uint64_t pair) { return static_cast<std::uint32_t>(pair); };
  const auto v_id = [&](std::uint64_t pair) { return static_cast<std::uint32_t>(kv_pairs + pair); };
  const auto s_id = [&](std::uint64_t panel) { return static_cast<std::uint32_t>(2 * kv_pairs + panel); };
  const auto p_id = [&](std::uint64_t panel) { return static_cast<std::uint32_t>(2 * kv_pairs + panels + panel); };
  const bool qo = c.q_o_allocate;

  // Kernel 1: S = Q K^T.
  for (std::uint64_t b = 0; b < s.batch; ++b)
    for (std::uint64_t h = 0; h < s.heads; ++h) {
      const std::uint64_t pair = b * s.kv_heads + h / group;
      l2.read(k_id(pair), pn.k_bytes(b));
      for (std::uint64_t i = 0; i < pn.blocks(b); ++i) {
        l2.read(none, pn.ob.q_row * pn.rows(b, i), qo);
        l2.write(s_id(base(b) + h * pn.blocks(b) + i), pn.sp_bytes(b, pn.rows(b, i)));
      }
      if (h % group == group - 1) l2.forget(k_id(pair));
    }
  // Kernel 2: P = softmax(S), row panel by row panel.
  for (std::uint64_t b = 0; b < s.batch; ++b)
    for (std::uint64_t h = 0; h < s.heads; ++h)
      for (std::uint64_t i = 0; i < pn.blocks(b); ++i) {
        const std::uint64_t panel = base(b) + h * pn.blocks(b) + i;
        const std::uint64_t bytes = pn.sp_bytes(b, pn.rows(b, i));
        l2.read(s_id(panel), bytes);
        l2.forget(s_id(panel));
        l2.write(p_id(panel), bytes);
      }
  // Kernel 3: O = P V.
  for (std::uint64_t b = 0; b < s.batch; ++b)
    for (std::uint64_t h = 0; h < s.heads; ++h) {
      const std::uint64_t pair = b * s.kv_heads + h / group;
      l2.read(v_id(pair), pn.v_bytes(b));
      for (std::uint64_t i = 0; i < pn.blocks(b); ++i) {
        const std::uint64_t panel = base(b) + h * pn.blocks(b) + i;
        l2.read(p_id(panel), pn.sp_bytes(b, pn.rows(b, i)));
        l2.forget(p_id(panel));
        l2.write(none, pn.ob.o_row * pn.rows(b, i), qo);
      }
      if (h % group == group - 1) l2.forget(v_id(pair));
    }
}

// One head's panels: the full ones and the last (maybe partial) one.
struct HeadPanels {
  std::uint64_t n = 0;                 // panels
  std::uint64_t q = 0, sp = 0, o = 0;  // bytes of a full panel's Q, S (= P), O
  std::uint64_t ql = 0, spl = 0, ol = 0;  // the last panel's
  std::uint64_t q_sum() const { return (n - 1) * q + ql; }
  std::uint64_t sp_sum() const { return (n - 1) * sp + spl; }
  std::uint64_t o_sum() const { return (n - 1) * o + ol; }
};

}  // namespace

void enumerate_standard(const Shape& s, const L2SimConfig& c, Tally& t) {
  with_lru(t, [&](auto& l2) { run_standard(s, c, l2); });
}

void trace_standard(const Shape& s, const L2SimConfig& c, const std::function<void(const L2Access&)>& f) {
  TraceSink sink{f};
  run_standard(s, c, sink);
}

std::uint64_t standard_enum_accesses(const Shape& s) {
  constexpr std::string_view what = "L2 simulation";
  std::uint64_t panels = 0;
  if (s.seq_lens.empty()) {
    panels = checked_product(what, s.batch, s.heads, ceil_div(s.seq_q, s.block_rows));
  } else {
    for (const SeqGroup& g : s.seq_lens.groups())
      panels = checked_add(panels, checked_product(what, g.count, s.heads, ceil_div(g.item.q, s.block_rows)), what);
  }
  return checked_add(checked_mul(6, panels, what), checked_product(what, 2, s.batch, s.heads), what);
}

std::uint64_t standard_runs_work(const Shape& s) { return checked_mul(64, checked_mul(s.batch, s.heads, "L2 work"), "L2 work"); }

// The same stream's distances, head by head (docs/model.md derives them):
// with panels k in stream order (batch, head, block), S_total the bytes of all
// S panels (= P's), and eta = the head of panel k,
//   S_k read:  S_total + Q after k + P before k + K of the pairs read after head eta
//   P_k read:  P_total + S after k + O before k + V of the pairs read up to head eta
//   K, V read by the g-th head of a group (g > 0): itself + the previous head's
//              Q and S panels (K) or P and O panels (V)
// (Q and O terms only when they take L2 space.) Q reads and the first K, V
// read of a pair are first accesses.
void runs_standard(const Shape& s, const L2SimConfig& c, Tally& t) {
  constexpr std::string_view what = "L2 simulation";
  const Panels pn(s);
  const std::uint64_t group = group_size(s);
  const bool qo = c.q_o_allocate;
  auto head_of = [&](std::uint64_t b) {
    HeadPanels h;
    h.n = pn.blocks(b);
    const std::uint64_t rl = pn.rows(b, h.n - 1);
    h.q = pn.ob.q_row * s.block_rows;
    h.o = pn.ob.o_row * s.block_rows;
    h.sp = pn.sp_bytes(b, s.block_rows);
    h.ql = pn.ob.q_row * rl;
    h.ol = pn.ob.o_row * rl;
    h.spl = pn.sp_bytes(b, rl);
    return h;
  };
  // Totals over the stream (checked once; every partial sum below is smaller).
  std::uint64_t q_total = 0, sp_total = 0, k_total = 0;
  if (s.seq_lens.empty()) {
    const HeadPanels h = head_of(0);
    q_total = checked_product(what, h.q_sum(), s.heads, s.batch);
    sp_total = checked_product(what, h.sp_sum(), s.heads, s.batch);
    k_total = checked_product(what, pn.k_bytes(0), s.kv_heads, s.batch);
  } else {
    for (std::uint64_t b = 0; b < s.batch; ++b) {
      const HeadPanels h = head_of(b);
      q_total = checked_add(q_total, checked_mul(h.q_sum(), s.heads, what), what);
      sp_total = checked_add(sp_total, checked_mul(h.sp_sum(), s.heads, what), what);
      k_total = checked_add(k_total, checked_mul(pn.k_bytes(b), s.kv_heads, what), what);
    }
  }
  // The largest distance is below everything the stream holds.
  (void)checked_add(checked_add(q_total, checked_mul(3, sp_total, what), what), checked_mul(2, k_total, what), what);
  const std::uint64_t qo_q = qo ? 1 : 0;

  std::uint64_t q_before = 0, sp_before = 0, o_before = 0, k_read = 0, v_read = 0;
  HeadPanels prev{};
  for (std::uint64_t b = 0; b < s.batch; ++b) {
    const HeadPanels hp = head_of(s.seq_lens.empty() ? 0 : b);
    const std::uint64_t kb = pn.k_bytes(b), vb = pn.v_bytes(b);
    for (std::uint64_t h = 0; h < s.heads; ++h) {
      const bool first_of_group = h % group == 0;
      // K read at the head's start (kernel 1) and V (kernel 3).
      if (first_of_group) {
        t.read(infinite, kb);
        t.read(infinite, vb);
        k_read += kb;
        v_read += vb;
      } else {
        t.read(kb + qo_q * prev.q_sum() + prev.sp_sum(), kb);
        t.read(vb + prev.sp_sum() + qo_q * prev.o_sum(), vb);
      }
      // K of the pairs whose K is read after this head in kernel 1: this
      // pair's if the group goes on, and every later pair's.
      const std::uint64_t k_after = k_total - k_read + (h % group != group - 1 ? kb : 0);
      // Q reads: first accesses.
      t.reads(infinite, 0, hp.n - 1, hp.q);
      t.read(infinite, hp.ql);
      // S_k reads (kernel 2), i = 0 .. n-1 within the head.
      // D(i) = S_total + qo*(Q_total - Q up to and including k) + (S before k) + K_after.
      const std::uint64_t base_s = sp_total + qo_q * (q_total - q_before) + sp_before + k_after;
      // full panels i < n-1: - qo*(i+1)*q + i*sp
      if (hp.n > 1) {
        const auto step = static_cast<std::int64_t>(hp.sp) - static_cast<std::int64_t>(qo_q * hp.q);
        t.reads(base_s - qo_q * hp.q, step, hp.n - 1, hp.sp);
      }
      t.read(base_s - qo_q * hp.q_sum() + (hp.n - 1) * hp.sp, hp.spl);
      // P_k reads (kernel 3): D(i) = P_total + (S after k) + qo*(O before k) + V up to this head.
      const std::uint64_t s_after_head = sp_total - sp_before;  // S of this head's panels and after
      const std::uint64_t base_p = sp_total + s_after_head + qo_q * o_before + v_read;
      if (hp.n > 1) {
        const auto step = static_cast<std::int64_t>(qo_q * hp.o) - static_cast<std::int64_t>(hp.sp);
        t.reads(base_p - hp.sp, step, hp.n - 1, hp.sp);
      }
      t.read(base_p - hp.sp_sum() + qo_q * (hp.n - 1) * hp.o, hp.spl);
      // Writes: S, P and O of every panel reach DRAM once.
      t.write(checked_mul(2, hp.sp_sum(), what));
      t.write(hp.o_sum());
      q_before += hp.q_sum();
      sp_before += hp.sp_sum();
      o_before += hp.o_sum();
      prev = hp;
    }
  }
}

}  // namespace hbmscope::l2
