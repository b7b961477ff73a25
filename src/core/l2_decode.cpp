// Decode attention through the simulated L2 (docs/model.md, "Decode in the L2
// simulation"): the split kernel's CTAs in FlashAttention-2's launch order on
// the schedule's slots, then the combine kernel; enumerated access by access.
#include <algorithm>
#include <string>
#include <vector>

#include "hbmscope/checked.hpp"
#include "hbmscope/error.hpp"
#include "hbmscope/tile_bytes.hpp"
#include "l2_decode.hpp"
#include "l2_list.hpp"
#include "l2_stack.hpp"

namespace hbmscope::l2 {

namespace {

// --- Decode ------------------------------------------------------------------

// The decode grid: CTA index spaces and object ids (docs/model.md).
struct DecodeLayout {
  const Shape& s;
  DecodeVariant v;
  std::uint64_t splits;
  bool packed, paged;
  std::uint64_t nh, rows_per_head, mb;  // heads of the grid, query rows per head index, row blocks
  std::uint64_t unit;                   // keys per KV object: Bc, or P when paged
  std::vector<std::uint64_t> unit_prefix, kb_prefix;  // ragged: objects before sequence b
  std::uint64_t units_total = 0, kb_total = 0;
  std::uint64_t q_base = 0, kv_base = 0, table_base = 0, partial_base = 0, objects = 0;

  DecodeLayout(const Shape& shape, DecodeVariant var, std::uint64_t n_splits)
      : s(shape), v(var), splits(n_splits), packed(gqa_packed(var)), paged(var == DecodeVariant::paged) {
    constexpr std::string_view what = "decode L2 simulation";
    nh = packed ? s.kv_heads : s.heads;
    rows_per_head = packed ? checked_mul(s.seq_q, group_size(s), what) : s.seq_q;
    mb = ceil_div(rows_per_head, decode_block_m);
    unit = paged ? s.page_size : s.block_cols;
    if (!s.context_lengths.empty()) {
      unit_prefix.push_back(0);
      kb_prefix.push_back(0);
      for (const SeqLen& seq : s.context_lengths) {
        const std::uint64_t l = seq.kv;
        unit_prefix.push_back(checked_add(unit_prefix.back(), ceil_div(l, unit), what));
        kb_prefix.push_back(checked_add(kb_prefix.back(), ceil_div(l, s.block_cols), what));
      }
      units_total = unit_prefix.back();
      kb_total = kb_prefix.back();
    } else {
      units_total = checked_mul(s.batch, ceil_div(s.seq_kv, unit), what);
      kb_total = checked_mul(s.batch, ceil_div(s.seq_kv, s.block_cols), what);
    }
    const std::uint64_t ctas_per_split = checked_product(what, s.batch, nh, mb);
    q_base = 0;
    kv_base = ctas_per_split;
    table_base = checked_add(kv_base, checked_mul(s.kv_heads, units_total, what), what);
    partial_base = checked_add(table_base, paged ? kb_total : 0, what);
    objects = checked_add(partial_base, splits > 1 ? checked_mul(ctas_per_split, splits, what) : 0, what);
  }
  std::uint64_t units_before(std::uint64_t b) const {
    return unit_prefix.empty() ? b * ceil_div(s.seq_kv, unit) : unit_prefix[b];
  }
  std::uint64_t kb_before(std::uint64_t b) const {
    return kb_prefix.empty() ? b * ceil_div(s.seq_kv, s.block_cols) : kb_prefix[b];
  }
  std::uint64_t kv_id(std::uint64_t b, std::uint64_t kvh, std::uint64_t u) const {
    return kv_base + s.kv_heads * units_before(b) + kvh * ceil_div(context_length(s, b), unit) + u;
  }
  std::uint64_t cta_index(std::uint64_t b, std::uint64_t hh, std::uint64_t m) const { return (b * nh + hh) * mb + m; }
  std::uint64_t rows(std::uint64_t m) const { return std::min(decode_block_m, rows_per_head - m * decode_block_m); }
};

// At most the accesses run_decode makes (exact except for paged runs, where a
// step that reads no new page makes no table read).
std::uint64_t decode_accesses(const Shape& s, DecodeVariant v, std::uint64_t splits) {
  constexpr std::string_view what = "decode L2 simulation";
  if (splits == 0) throw Error("decode: the split count must be positive");
  const bool paged = v == DecodeVariant::paged;
  const std::uint64_t nh = gqa_packed(v) ? s.kv_heads : s.heads;
  const std::uint64_t mb = ceil_div(gqa_packed(v) ? s.seq_q * group_size(s) : s.seq_q, decode_block_m);
  const std::uint64_t per_seq_fixed = splits + (splits > 1 ? splits + 1 : 0);  // writes + combine
  std::uint64_t total = 0;
  auto add_len = [&](std::uint64_t len, std::uint64_t count) {
    const std::uint64_t kbs = ceil_div(len, s.block_cols);
    const std::uint64_t used = std::min(splits, ceil_div(kbs, blocks_per_split(s, splits)));
    std::uint64_t per = used + kbs + per_seq_fixed;  // Q reads, key blocks, writes, combine
    if (paged) per = checked_add(per, checked_add(ceil_div(len, s.page_size), used, what), what);
    total = checked_add(total, checked_product(what, per, count, nh, mb), what);
  };
  if (s.context_lengths.empty()) add_len(s.seq_kv, s.batch);
  else
    for (const SeqGroup& g : s.context_lengths.groups()) add_len(g.item.kv, g.count);
  return total;
}

struct DecodeStats {
  std::uint64_t waves = 0, steps = 0;
};

template <class Sink>
DecodeStats run_decode(const Shape& s, DecodeVariant v, std::uint64_t splits, const L2SimConfig& c, Sink& l2) {
  validate(s);
  validate(c);
  if (!s.decode) throw Error("shape " + describe(s) + ": not a decode shape");
  if (v == DecodeVariant::floor) throw Error("decode_floor is a bound, not a kernel: nothing to simulate");
  const DecodeLayout lay(s, v, splits);
  if (lay.objects >= (std::uint64_t{1} << 28))
    throw Error("shape " + describe(s) + ": the decode L2 simulation would track " + std::to_string(lay.objects) +
                " objects (at most " + std::to_string(std::uint64_t{1} << 28) + ")");
  l2.reserve_objects(static_cast<std::size_t>(lay.objects));
  const OperandBytes ob = operand_bytes(s);
  const std::uint64_t G = group_size(s);
  // fp32 partial O (head_dim_v values) and LSE per query row.
  const std::uint64_t partial_row = 4 * value_head_dim(s) + 4;
  const std::uint64_t ctas = checked_product("decode L2 simulation", s.batch, lay.nh, lay.mb, splits);
  const std::uint64_t slots = std::uint64_t{c.sm_count} * c.ctas_per_sm;
  const bool qo = c.q_o_allocate;
  const auto id32 = [](std::uint64_t id) { return static_cast<std::uint32_t>(id); };

  struct Cta {
    std::uint64_t b, hh, m, j, kvh, rows, pos, end, last_page;
    bool started;
  };
  std::uint64_t launched = 0;
  auto launch = [&]() {
    const std::uint64_t id = launched++;
    Cta t{};
    t.m = id % lay.mb;
    t.j = (id / lay.mb) % splits;
    t.hh = (id / (lay.mb * splits)) % lay.nh;
    t.b = id / (lay.mb * splits * lay.nh);
    t.kvh = lay.packed ? t.hh : t.hh / G;
    t.rows = lay.rows(t.m);
    const KeyRange k = split_key_range(s, splits, t.b, t.j);
    t.pos = k.begin;
    t.end = k.empty() ? k.begin : k.end;
    t.last_page = infinite;
    t.started = false;
    return t;
  };

  DecodeStats st;
  st.waves = ceil_div(ctas, slots);
  std::vector<Cta> resident, next;
  while (launched < ctas && resident.size() < slots) resident.push_back(launch());
  while (!resident.empty()) {
    ++st.steps;
    next.clear();
    for (Cta& t : resident) {
      if (!t.started && t.pos < t.end) l2.read(id32(lay.q_base + lay.cta_index(t.b, t.hh, t.m)), ob.q_row * t.rows, qo);
      t.started = true;
      if (t.pos < t.end) {
        const std::uint64_t kb = t.pos / s.block_cols;
        const std::uint64_t step_end = std::min((kb + 1) * s.block_cols, t.end);
        if (!lay.paged) {
          l2.read(id32(lay.kv_id(t.b, t.kvh, kb)), ob.kv_col() * (step_end - t.pos));
        } else {
          const std::uint64_t first = t.pos / s.page_size, last = (step_end - 1) / s.page_size;
          const std::uint64_t from = t.last_page == infinite ? first : std::max(first, t.last_page + 1);
          if (from <= last) {
            l2.read(id32(lay.table_base + lay.kb_before(t.b) + kb), 4 * (last - from + 1));
            for (std::uint64_t pg = from; pg <= last; ++pg)
              l2.read(id32(lay.kv_id(t.b, t.kvh, pg)), ob.kv_col() * s.page_size);
            t.last_page = last;
          }
        }
        t.pos = step_end;
        if (t.pos < t.end) {
          next.push_back(t);
          continue;
        }
      }
      if (splits > 1)  // fp32 partial O and LSE of its rows, for the combine kernel
        l2.write(id32(lay.partial_base + lay.cta_index(t.b, t.hh, t.m) * splits + t.j), t.rows * partial_row);
      else
        l2.write(none, ob.o_row * t.rows, qo);
    }
    while (launched < ctas && next.size() < slots) next.push_back(launch());
    resident.swap(next);
  }
  if (splits > 1)  // the combine kernel: each row block's partials, then its O
    for (std::uint64_t b = 0; b < s.batch; ++b)
      for (std::uint64_t hh = 0; hh < lay.nh; ++hh)
        for (std::uint64_t m = 0; m < lay.mb; ++m) {
          const std::uint64_t ci = lay.cta_index(b, hh, m);
          for (std::uint64_t j = 0; j < splits; ++j) {
            l2.read(id32(lay.partial_base + ci * splits + j), lay.rows(m) * partial_row);
            l2.forget(id32(lay.partial_base + ci * splits + j));
          }
          l2.write(none, ob.o_row * lay.rows(m), qo);
        }
  return st;
}

}  // namespace

void enumerate_decode(const Shape& s, DecodeVariant v, std::uint64_t splits, const L2SimConfig& c, Tally& t,
                      std::uint64_t& waves, std::uint64_t& steps) {
  const DecodeStats st = with_lru(t, [&](auto& l2) { return run_decode(s, v, splits, c, l2); });
  waves = st.waves;
  steps = st.steps;
}

void trace_decode(const Shape& s, DecodeVariant v, std::uint64_t splits, const L2SimConfig& c,
                  const std::function<void(const L2Access&)>& f) {
  TraceSink sink{f};
  run_decode(s, v, splits, c, sink);
}

std::uint64_t decode_enum_accesses(const Shape& s, DecodeVariant v, std::uint64_t splits) {
  return decode_accesses(s, v, splits);
}

}  // namespace hbmscope::l2
