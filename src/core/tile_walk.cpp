#include "hbmscope/tile_walk.hpp"

namespace hbmscope {

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
