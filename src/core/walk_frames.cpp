#include "hbmscope/walk_frames.hpp"

#include <string>

#include "hbmscope/error.hpp"
#include "hbmscope/model.hpp"

namespace hbmscope {

void walk_frames(const Shape& s, LoopOrder order, bool every_tile,
                 const std::function<void(const WalkFrame&)>& on_frame) {
  validate(s);
  if (s.pass != Pass::fwd)
    throw Error("walk steps through the forward pass only, not --pass " +
                std::string(pass_name(s.pass)));
  WalkFrame f;
  f.shape = s;
  f.order = order;
  f.q_blocks = query_blocks(s);
  f.k_blocks = key_blocks(s);
  if (ragged_prefill(s))
    throw Error("walk draws one sequence; a ragged batch (--seq-lens) has several: walk one of them with --seq and --seq-kv");
  f.steps = checked_product("walked tiles", visited_tiles(s), s.heads, s.batch);
  if (f.steps > max_walk_tiles)
    throw Error("walk: " + describe(s) + " has " + std::to_string(f.steps) +
                " tiles, more than the " + std::to_string(max_walk_tiles) +
                " walk steps through; `hbmscope model` gives its totals");
  f.moved_total = order == LoopOrder::fa2 ? flash_no_l2_bytes(s) : flash1_no_l2_bytes(s);
  f.once_total = floor_bytes(s);

  const std::uint64_t nkb = f.k_blocks;
  std::vector<TileState> fresh(f.q_blocks * nkb);
  for (std::uint64_t i = 0; i < f.q_blocks; ++i) {
    const KeyRange visited = visible_key_blocks(s, i);
    for (std::uint64_t j = 0; j < nkb; ++j)
      fresh[i * nkb + j] = visited.begin <= j && j < visited.end ? TileState::todo : TileState::masked;
  }
  // K_j, V_j of each kv head read so far in this batch element (FA2's strip).
  std::vector<bool> kv_seen(s.kv_heads * nkb);
  bool started = false;

  auto finish_current = [&] {
    if (!f.has_current) return;
    const bool first = order == LoopOrder::fa2 ? f.current.kv_first_visit : f.current.q_first_visit;
    f.tiles[f.current.q_block * nkb + f.current.k_block] =
        first ? TileState::done_first : TileState::done_reread;
    f.has_current = false;
  };

  for_each_tile_event(s, order, [&](const TileEvent& ev) {
    if (!started || ev.batch != f.batch || ev.head != f.head) {
      if (started && ev.batch != f.batch) kv_seen.assign(kv_seen.size(), false);
      started = true;
      f.batch = ev.batch;
      f.head = ev.head;
      f.tiles = fresh;
      f.has_current = false;
      if (order == LoopOrder::fa2) {
        f.streamed_read.assign(nkb, false);
        for (std::uint64_t j = 0; j < nkb; ++j) f.streamed_read[j] = kv_seen[ev.kv_head * nkb + j];
      } else {
        f.streamed_read.assign(f.q_blocks, false);
      }
    }
    f.moved = checked_add(f.moved, ev.moved, "walked bytes");
    f.once = checked_add(f.once, ev.once, "walked bytes");
    if (ev.kind != TileEventKind::tile) return;
    finish_current();
    f.current = ev;
    f.has_current = true;
    f.tiles[ev.q_block * nkb + ev.k_block] = TileState::on_chip;
    if (order == LoopOrder::fa2) {
      kv_seen[ev.kv_head * nkb + ev.k_block] = true;
      f.streamed_read[ev.k_block] = true;
    } else {
      f.streamed_read[ev.q_block] = true;
    }
    ++f.step;
    if (every_tile) on_frame(f);
  });
  finish_current();
  f.final = true;
  on_frame(f);
}

}  // namespace hbmscope
