#include "hbmscope/tile_walk.hpp"

namespace hbmscope {

Shape walk_sequence(const Shape& s, std::uint64_t b) {
  if (!ragged_prefill(s)) return s;
  const SeqLen& item = s.seq_lens.at(static_cast<std::size_t>(b));
  return sequence_shape(s, SeqGroup{item, 1});
}

KeyRange query_block_keys(const Shape& s, std::uint64_t q_block) {
  const std::uint64_t r0 = q_block * s.block_rows, r1 = std::min(r0 + s.block_rows, s.seq_q);
  KeyRange u{s.seq_kv, 0};
  for (std::uint64_t r = r0; r < r1; ++r) {
    const KeyRange k = visible_keys(s, r);
    if (k.empty()) continue;
    u.begin = std::min(u.begin, k.begin);
    u.end = std::max(u.end, k.end);
  }
  return u.empty() ? KeyRange{} : u;
}

WalkOperands walk_operands(const Shape& s) {
  WalkOperands o;
  o.e = elem_bytes(s.dtype);
  o.ek = elem_bytes(key_value_dtype(s));
  o.d = s.head_dim;
  o.dv = value_head_dim(s);
  o.dkv = s.latent_kv ? o.d : o.d + o.dv;
  return o;
}

std::uint64_t mark_new_keys(std::vector<bool>& seen, std::uint64_t base, std::uint64_t begin, std::uint64_t end) {
  std::uint64_t fresh = 0;
  for (std::uint64_t c = begin; c < end; ++c)
    if (!seen[base + c]) {
      seen[base + c] = true;
      ++fresh;
    }
  return fresh;
}

WalkTotals walk_totals(const Shape& s) { return walk_totals(s, LoopOrder::fa2); }

WalkTotals walk_totals(const Shape& s, LoopOrder order) {
  WalkTotals t;
  for_each_tile_event(s, order, [&](const TileEvent& ev) {
    t.moved = checked_add(t.moved, ev.moved, "walked bytes");
    t.once = checked_add(t.once, ev.once, "walked bytes");
    if (ev.kind == TileEventKind::tile) ++t.tiles;
  });
  return t;
}

}  // namespace hbmscope
