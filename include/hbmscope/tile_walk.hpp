#pragma once
// A tile-by-tile walk of FlashAttention-2's loop order, counting the bytes each
// step moves, as the design note's code does. Tests hold it equal to the closed
// forms of model.hpp on every shape: masks, operand shapes, ragged batches.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "hbmscope/checked.hpp"
#include "hbmscope/mask.hpp"
#include "hbmscope/shape.hpp"

namespace hbmscope {

enum class TileEventKind {
  load_q,   // a query block's Q tile is read (once per query block)
  tile,     // the (query block, key block) tile: K_j and V_j streamed in
  store_o,  // the query block's O tile is written (once per query block)
  // FlashAttention-1 order only (LoopOrder::fa1):
  init_o,   // O_i = 0, l_i = 0, m_i = -inf written to HBM before the loops
  load_kv,  // a key block's K_j, V_j read (once per head and key block)
};

// FlashAttention-2: query blocks outer (one CTA each), key blocks inner.
// FlashAttention-1: key blocks outer, query blocks inner; `tile` events then
// read Q_i, O_i, l_i, m_i and write O_i, l_i, m_i back (docs/model.md).
enum class LoopOrder { fa2, fa1 };

struct TileEvent {
  TileEventKind kind = TileEventKind::tile;
  std::uint64_t batch = 0;
  std::uint64_t head = 0;
  std::uint64_t kv_head = 0;
  std::uint64_t q_block = 0;
  std::uint64_t k_block = 0;  // meaningful for `tile` events
  std::uint64_t rows = 0;     // real rows of the query block
  std::uint64_t cols = 0;     // real columns of the key block (tile events)
  std::uint64_t moved = 0;    // bytes this event adds with no L2 reuse
  std::uint64_t once = 0;     // bytes this event adds if every value moves once
  bool kv_first_visit = false;  // tile events: first read of this K_j, V_j
  // fa1 tile events: first visit of Q_i, O_i (later visits re-read them)
  bool q_first_visit = false;
};

struct WalkTotals {
  std::uint64_t moved = 0;
  std::uint64_t once = 0;
  std::uint64_t tiles = 0;  // (query block, key block) pairs visited
};

// Sequence b of s as a shape of its own: s when dense, else its ragged
// batch's item b (batch 1, seq_q and seq_kv its own).
Shape walk_sequence(const Shape& s, std::uint64_t b);

// The keys some row of query block q_block sees, found row by row: [the
// smallest first key, the largest end) over the block's rows (one range: the
// rows' ranges overlap or touch). Empty when no row sees a key.
KeyRange query_block_keys(const Shape& s, std::uint64_t q_block);

// Element sizes and head dims the walk moves (docs/model.md, "Operand shapes").
struct WalkOperands {
  std::uint64_t e = 0, ek = 0, d = 0, dv = 0;
  std::uint64_t dkv = 0;  // K and V values per key: d + DV, or d for a latent KV
};
WalkOperands walk_operands(const Shape& s);

// Keys of [begin, end) of one kv head's sequence not seen before: marks them
// in `seen` (one flag per key, from `base`) and returns how many were new.
std::uint64_t mark_new_keys(std::vector<bool>& seen, std::uint64_t base, std::uint64_t begin, std::uint64_t end);

// Calls on_event for every event of FA2's loop order: batch (each sequence of
// a ragged batch), head, query block (the grid), then key blocks in order
// inside the CTA. Validates the shape. `once` counts Q and O at their block,
// and K and V of each key the first time some query block that sees it visits
// its tile, for each kv head (docs/model.md, "The tile walk").
template <class OnEvent>
void for_each_tile_event(const Shape& s, OnEvent&& on_event) {
  validate(s);
  const WalkOperands o = walk_operands(s);
  const std::uint64_t group = s.heads / s.kv_heads;
  std::vector<bool> seen, key_seen;
  for (std::uint64_t b = 0; b < s.batch; ++b) {
    const Shape q = walk_sequence(s, b);
    const std::uint64_t nqb = ceil_div(q.seq_q, q.block_rows);
    const std::uint64_t nkb = ceil_div(q.seq_kv, q.block_cols);
    seen.assign(s.kv_heads * nkb, false);
    key_seen.assign(s.kv_heads * q.seq_kv, false);
    for (std::uint64_t h = 0; h < s.heads; ++h) {
      const std::uint64_t kvh = h / group;
      for (std::uint64_t i = 0; i < nqb; ++i) {
        TileEvent ev;
        ev.batch = b;
        ev.head = h;
        ev.kv_head = kvh;
        ev.q_block = i;
        ev.rows = std::min(q.block_rows, q.seq_q - i * q.block_rows);
        ev.kind = TileEventKind::load_q;
        ev.moved = ev.once = o.e * ev.rows * o.d;
        on_event(ev);
        const KeyRange visited = visible_key_blocks(q, i);
        const KeyRange keys = query_block_keys(q, i);
        for (std::uint64_t j = visited.begin; j < visited.end; ++j) {
          ev.kind = TileEventKind::tile;
          ev.k_block = j;
          const std::uint64_t k0 = j * q.block_cols;
          ev.cols = std::min(q.block_cols, q.seq_kv - k0);
          ev.moved = o.ek * ev.cols * o.dkv;
          const std::size_t key = kvh * nkb + j;
          ev.kv_first_visit = !seen[key];
          seen[key] = true;
          const std::uint64_t fresh = mark_new_keys(key_seen, kvh * q.seq_kv, std::max(k0, keys.begin),
                                                    std::min(k0 + ev.cols, keys.end));
          ev.once = o.ek * fresh * o.dkv;
          on_event(ev);
        }
        ev.kind = TileEventKind::store_o;
        ev.k_block = 0;
        ev.cols = 0;
        ev.kv_first_visit = false;
        ev.moved = ev.once = o.e * ev.rows * o.dv;
        on_event(ev);
      }
    }
  }
}

// Calls on_event for every event of the given loop order. fa2 is the walk above.
// fa1: batch, head, then O/l/m initialisation of every query block, then the
// key blocks some query block visits, in order, each a load_kv event followed
// by the tiles of the query blocks that see it, in order. `once` counts Q and
// O at a query block's first tile and K and V of each key at the first tile
// whose query block sees it.
template <class OnEvent>
void for_each_tile_event(const Shape& s, LoopOrder order, OnEvent&& on_event) {
  if (order == LoopOrder::fa2) {
    for_each_tile_event(s, on_event);
    return;
  }
  validate(s);
  const WalkOperands o = walk_operands(s);
  const std::uint64_t group = s.heads / s.kv_heads;
  std::vector<bool> seen, key_seen;
  for (std::uint64_t b = 0; b < s.batch; ++b) {
    const Shape q = walk_sequence(s, b);
    const std::uint64_t nqb = ceil_div(q.seq_q, q.block_rows);
    const std::uint64_t nkb = ceil_div(q.seq_kv, q.block_cols);
    std::vector<KeyRange> visited(nqb), keys(nqb);
    std::vector<bool> block_visited(nkb);
    for (std::uint64_t i = 0; i < nqb; ++i) {
      visited[i] = visible_key_blocks(q, i);
      keys[i] = query_block_keys(q, i);
      for (std::uint64_t j = visited[i].begin; j < visited[i].end; ++j) block_visited[j] = true;
    }
    seen.assign(s.kv_heads * nkb, false);
    key_seen.assign(s.kv_heads * q.seq_kv, false);
    for (std::uint64_t h = 0; h < s.heads; ++h) {
      TileEvent ev;
      ev.batch = b;
      ev.head = h;
      ev.kv_head = h / group;
      for (std::uint64_t i = 0; i < nqb; ++i) {
        ev.kind = TileEventKind::init_o;
        ev.q_block = i;
        ev.rows = std::min(q.block_rows, q.seq_q - i * q.block_rows);
        ev.moved = o.e * ev.rows * o.dv + 8 * ev.rows;
        // A block no key is visible to is never loaded: its Q and O count
        // once here. Every other block counts them at its first tile.
        ev.once = visited[i].empty() ? o.e * ev.rows * (o.d + o.dv) : 0;
        on_event(ev);
      }
      for (std::uint64_t j = 0; j < nkb; ++j) {
        if (!block_visited[j]) continue;  // no query sees it: never loaded
        ev.kind = TileEventKind::load_kv;
        ev.q_block = 0;
        ev.rows = 0;
        ev.k_block = j;
        const std::uint64_t k0 = j * q.block_cols;
        ev.cols = std::min(q.block_cols, q.seq_kv - k0);
        ev.moved = o.ek * ev.cols * o.dkv;
        const std::size_t key = ev.kv_head * nkb + j;
        ev.kv_first_visit = !seen[key];
        seen[key] = true;
        ev.once = 0;  // counted key by key at the tiles that see them
        on_event(ev);
        ev.kv_first_visit = false;
        for (std::uint64_t i = 0; i < nqb; ++i) {
          if (j < visited[i].begin || j >= visited[i].end) continue;
          ev.kind = TileEventKind::tile;
          ev.q_block = i;
          ev.rows = std::min(q.block_rows, q.seq_q - i * q.block_rows);
          // Q_i read, O_i read and written (element type), l_i and m_i read
          // and written (fp32).
          ev.moved = o.e * ev.rows * (o.d + 2 * o.dv) + 16 * ev.rows;
          // Visited key blocks are one range, so its first block is the first visit.
          ev.q_first_visit = j == visited[i].begin;
          const std::uint64_t fresh = mark_new_keys(key_seen, ev.kv_head * q.seq_kv, std::max(k0, keys[i].begin),
                                                    std::min(k0 + ev.cols, keys[i].end));
          ev.once = (ev.q_first_visit ? o.e * ev.rows * (o.d + o.dv) : 0) + o.ek * fresh * o.dkv;
          on_event(ev);
        }
        ev.q_first_visit = false;
      }
    }
  }
}

// Totals of the walk, with every addition checked for overflow.
WalkTotals walk_totals(const Shape& s);
WalkTotals walk_totals(const Shape& s, LoopOrder order);

}  // namespace hbmscope
