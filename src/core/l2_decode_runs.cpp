// The runs of decode (docs/model.md, "Decode in the L2 simulation"): with one
// split and one context length every split CTA reads the whole visible
// context, so waves of slots run in lockstep and each step's accesses are the
// same for every CTA (its Q with the first key block, its K and V, or its
// block-table entries and pages, its O with the last). The CTAs that share a
// K/V object (the query heads of a kv head unpacked, the row blocks packed) or
// a block-table entry (a sequence's CTAs) are neighbours in launch order, so a
// re-read's previous access is the neighbour's in the same step, or in the
// previous wave's last step-mate. Other decode rows (several splits, ragged
// batches, pages that do not divide the key block) take few CTAs and are
// enumerated.
#include <algorithm>
#include <vector>

#include "hbmscope/checked.hpp"
#include "hbmscope/tile_bytes.hpp"
#include "l2_decode.hpp"
#include "l2_list.hpp"

namespace hbmscope::l2 {

namespace {

bool decode_in_waves(const Shape& s, DecodeVariant v, std::uint64_t splits) {
  if (splits != 1 || ragged(s)) return false;
  if (v == DecodeVariant::paged && (s.page_size > s.block_cols || s.block_cols % s.page_size != 0)) return false;
  return true;
}

// One access of a CTA's step: a shared object of family f (0: K/V or a page,
// 1: a block-table entry), or an object of its own.
struct Access {
  int family = -1;  // -1: its own (Q, O)
  std::uint64_t bytes = 0;
  bool allocate = true;
};

struct Geometry {
  const Shape& s;
  DecodeVariant v;
  OperandBytes ob;
  bool packed, paged;
  std::uint64_t nh, G, rows_per_head, mb, n = 0;
  KeyRange keys;  // every sequence's (one length)
  std::uint64_t kb0 = 0;

  Geometry(const Shape& shape, DecodeVariant var)
      : s(shape), v(var), ob(operand_bytes(shape)), packed(gqa_packed(var)), paged(var == DecodeVariant::paged) {
    G = group_size(s);
    nh = packed ? s.kv_heads : s.heads;
    rows_per_head = packed ? s.seq_q * G : s.seq_q;
    mb = ceil_div(rows_per_head, decode_block_m);
    keys = split_key_range(s, 1, 0, 0);
    kb0 = keys.begin / s.block_cols;
    n = keys.empty() ? 0 : (keys.end - 1) / s.block_cols - kb0 + 1;
  }
  std::uint64_t ctas() const { return s.batch * nh * mb; }
  std::uint64_t rows(std::uint64_t id) const {
    const std::uint64_t m = id % mb;
    return std::min(decode_block_m, rows_per_head - m * decode_block_m);
  }
  // Keys of the objects a CTA shares: K/V and pages by (sequence, kv head),
  // block-table entries by sequence.
  std::uint64_t key(std::uint64_t id, int family) const {
    const std::uint64_t b = id / (nh * mb), hh = (id / mb) % nh;
    if (family == 1) return b;
    return b * s.kv_heads + (packed ? hh : hh / G);
  }
  // The accesses of step j of CTA id, in order.
  void step(std::uint64_t id, std::uint64_t j, bool qo, std::vector<Access>& out) const {
    out.clear();
    const std::uint64_t lo = std::max(keys.begin, (kb0 + j) * s.block_cols);
    const std::uint64_t hi = std::min(keys.end, (kb0 + j + 1) * s.block_cols);
    if (j == 0) out.push_back({-1, ob.q_row * rows(id), qo});
    if (!paged) {
      out.push_back({0, ob.kv_col() * (hi - lo), true});
    } else {
      const std::uint64_t pages = (hi - 1) / s.page_size - lo / s.page_size + 1;
      out.push_back({1, 4 * pages, true});
      for (std::uint64_t p = 0; p < pages; ++p) out.push_back({0, ob.kv_col() * s.page_size, true});
    }
    if (j + 1 == n) out.push_back({-1, ob.o_row * rows(id), qo});
  }
};

std::uint64_t allocated(const std::vector<Access>& a, std::size_t from, std::size_t to) {
  std::uint64_t b = 0;
  for (std::size_t k = from; k < to; ++k) b += a[k].allocate ? a[k].bytes : 0;
  return b;
}

}  // namespace

void runs_decode(const Shape& s, DecodeVariant v, std::uint64_t splits, const L2SimConfig& c, Tally& t,
                 std::uint64_t& waves, std::uint64_t& steps) {
  if (!decode_in_waves(s, v, splits)) {
    enumerate_decode(s, v, splits, c, t, waves, steps);
    return;
  }
  constexpr std::string_view what = "L2 simulation bytes";
  const Geometry g(s, v);
  const std::uint64_t N = g.ctas(), n = g.n, S = std::uint64_t{c.sm_count} * c.ctas_per_sm;
  const bool qo = c.q_o_allocate;
  waves = ceil_div(N, S);
  steps = waves * n;
  // Step types: the first, an interior one, the last (n = 1: one step is both).
  const std::uint64_t types[3] = {0, n > 2 ? std::uint64_t{1} : std::uint64_t{0}, n - 1};
  auto type_count = [&](int k) -> std::uint64_t { return k == 1 ? (n > 2 ? n - 2 : 0) : (k == 2 && n == 1 ? 0 : 1); };
  // Distinct bytes a wave [L, U) moves in step j: one object per key per
  // shared access, and every CTA's own.
  std::vector<Access> a, b, w_acc;
  auto wave_step_bytes = [&](std::uint64_t L, std::uint64_t U, std::uint64_t j) {
    g.step(L, j, qo, w_acc);
    std::uint64_t total = 0;
    for (const Access& x : w_acc) {
      if (x.family < 0) continue;
      const std::uint64_t keys = g.key(U - 1, x.family) - g.key(L, x.family) + 1;
      total += keys * x.bytes;
    }
    for (std::uint64_t id = L; id < U; ++id) {  // own objects: Q, O (rows differ by row block)
      if (j == 0 && qo) total += g.ob.q_row * g.rows(id);
      if (j + 1 == n && qo) total += g.ob.o_row * g.rows(id);
    }
    return total;
  };
  // Sum of wave_step_bytes over steps [x, y).
  auto wave_bytes = [&](std::uint64_t L, std::uint64_t U, std::uint64_t x, std::uint64_t y) {
    std::uint64_t total = 0;
    for (int k = 0; k < 3; ++k) {
      if (type_count(k) == 0) continue;
      const std::uint64_t j = types[k];
      std::uint64_t cnt = 0;
      if (k == 1) cnt = (std::min(y, n - 1) > std::max(x, std::uint64_t{1})) ? std::min(y, n - 1) - std::max(x, std::uint64_t{1}) : 0;
      else cnt = (j >= x && j < y) ? 1 : 0;
      total += cnt * wave_step_bytes(L, U, j);
    }
    return total;
  };
  for (std::uint64_t w = 0; w < waves; ++w) {
    const std::uint64_t L = w * S, U = std::min(N, L + S);
    std::vector<std::uint64_t> db_prev, db_cur;
    for (std::uint64_t id = L; id < U; ++id) {
      for (int k = 0; k < 3; ++k) {
        if (type_count(k) == 0) continue;
        const std::uint64_t j = types[k], times = type_count(k);
        g.step(id, j, qo, a);
        for (std::size_t p = 0; p < a.size(); ++p) {
          if (a[p].family < 0) {  // Q read (a first access) or O written
            if (j == 0 && p == 0) t.reads(infinite, 0, times, a[p].bytes);
            else t.write(checked_mul(times, a[p].bytes, what));
            continue;
          }
          const bool same_prev = id > 0 && g.key(id - 1, a[p].family) == g.key(id, a[p].family);
          if (!same_prev) {
            t.reads(infinite, 0, times, a[p].bytes);
            continue;
          }
          g.step(id - 1, j, qo, b);
          const std::uint64_t around = allocated(b, p + 1, b.size()) + allocated(a, 0, p);
          if (id > L) {  // the neighbour read it earlier in this step
            t.reads(a[p].bytes + around, 0, times, a[p].bytes);
            continue;
          }
          // The previous wave's last CTA read it n steps ago: everything the
          // previous wave moved after step j and this wave before it.
          const std::uint64_t Lp = L - S;
          if (k == 1) {
            const std::uint64_t d1 = a[p].bytes + around + wave_bytes(Lp, L, 2, n) + wave_bytes(L, U, 0, 1);
            const auto step = static_cast<std::int64_t>(wave_step_bytes(L, U, 1)) -
                              static_cast<std::int64_t>(wave_step_bytes(Lp, L, 1));
            t.reads(d1, step, times, a[p].bytes);
          } else {
            t.read(a[p].bytes + around + wave_bytes(Lp, L, j + 1, n) + wave_bytes(L, U, 0, j), a[p].bytes);
          }
        }
      }
    }
  }
}

std::uint64_t decode_runs_work(const Shape& s, DecodeVariant v, std::uint64_t splits, const L2SimConfig& c) {
  (void)c;
  if (!decode_in_waves(s, v, splits))
    return checked_mul(decode_enum_accesses(s, v, splits), enumeration_units(), "L2 work");
  const Geometry g(s, v);
  // Per CTA and step type, its accesses (pages: Bc / P of them).
  const std::uint64_t per = v == DecodeVariant::paged ? s.block_cols / s.page_size + 2 : 2;
  return checked_product("L2 work", g.ctas(), 3 * per, 60);
}

}  // namespace hbmscope::l2
