#include "hbmscope/tile_walk.hpp"

namespace hbmscope {

WalkTotals walk_totals(const Shape& s) {
  WalkTotals t;
  for_each_tile_event(s, [&](const TileEvent& ev) {
    t.moved = checked_add(t.moved, ev.moved, "walked bytes");
    t.once = checked_add(t.once, ev.once, "walked bytes");
    if (ev.kind == TileEventKind::tile) ++t.tiles;
  });
  return t;
}

}  // namespace hbmscope
