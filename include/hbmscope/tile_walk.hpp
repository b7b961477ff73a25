#pragma once
// A tile-by-tile walk of FlashAttention-2's loop order, counting the bytes each
// step moves, as the design note's code does. Tests hold it equal to the closed
// forms of model.hpp on every shape.
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

// Calls on_event for every event of FA2's loop order: batch, head, query block
// (the grid), then key blocks in order inside the CTA. Validates the shape.
template <class OnEvent>
void for_each_tile_event(const Shape& s, OnEvent&& on_event) {
  validate(s);
  const std::uint64_t e = elem_bytes(s.dtype);
  const std::uint64_t nqb = ceil_div(s.seq_q, s.block_rows);
  const std::uint64_t nkb = ceil_div(s.seq_kv, s.block_cols);
  const std::uint64_t group = s.heads / s.kv_heads;
  std::vector<bool> seen(s.kv_heads * nkb);
  for (std::uint64_t b = 0; b < s.batch; ++b) {
    seen.assign(seen.size(), false);
    for (std::uint64_t h = 0; h < s.heads; ++h) {
      const std::uint64_t kvh = h / group;
      for (std::uint64_t i = 0; i < nqb; ++i) {
        TileEvent ev;
        ev.batch = b;
        ev.head = h;
        ev.kv_head = kvh;
        ev.q_block = i;
        ev.rows = std::min(s.block_rows, s.seq_q - i * s.block_rows);
        ev.kind = TileEventKind::load_q;
        ev.moved = ev.once = e * ev.rows * s.head_dim;
        on_event(ev);
        const KeyRange visited = visible_key_blocks(s, i);
        for (std::uint64_t j = visited.begin; j < visited.end; ++j) {
          ev.kind = TileEventKind::tile;
          ev.k_block = j;
          ev.cols = std::min(s.block_cols, s.seq_kv - j * s.block_cols);
          ev.moved = 2 * e * ev.cols * s.head_dim;
          const std::size_t key = kvh * nkb + j;
          ev.kv_first_visit = !seen[key];
          seen[key] = true;
          ev.once = ev.kv_first_visit ? ev.moved : 0;
          on_event(ev);
        }
        ev.kind = TileEventKind::store_o;
        ev.k_block = 0;
        ev.cols = 0;
        ev.kv_first_visit = false;
        ev.moved = ev.once = e * ev.rows * s.head_dim;
        on_event(ev);
      }
    }
  }
}

// Calls on_event for every event of the given loop order. fa2 is the walk above.
// fa1: batch, head, then O/l/m initialisation of every query block, then key
// blocks in order, each a load_kv event followed by the tiles of the query
// blocks that see it, in order.
template <class OnEvent>
void for_each_tile_event(const Shape& s, LoopOrder order, OnEvent&& on_event) {
  if (order == LoopOrder::fa2) {
    for_each_tile_event(s, on_event);
    return;
  }
  validate(s);
  const std::uint64_t e = elem_bytes(s.dtype);
  const std::uint64_t nqb = ceil_div(s.seq_q, s.block_rows);
  const std::uint64_t nkb = ceil_div(s.seq_kv, s.block_cols);
  const std::uint64_t group = s.heads / s.kv_heads;
  std::vector<KeyRange> visited(nqb);
  for (std::uint64_t i = 0; i < nqb; ++i) visited[i] = visible_key_blocks(s, i);
  std::vector<bool> seen(s.kv_heads * nkb);
  for (std::uint64_t b = 0; b < s.batch; ++b) {
    seen.assign(seen.size(), false);
    for (std::uint64_t h = 0; h < s.heads; ++h) {
      TileEvent ev;
      ev.batch = b;
      ev.head = h;
      ev.kv_head = h / group;
      for (std::uint64_t i = 0; i < nqb; ++i) {
        ev.kind = TileEventKind::init_o;
        ev.q_block = i;
        ev.rows = std::min(s.block_rows, s.seq_q - i * s.block_rows);
        ev.moved = e * ev.rows * s.head_dim + 8 * ev.rows;
        // A block no key is visible to is never loaded: its Q and O count
        // once here. Every other block counts them at its first tile.
        ev.once = visited[i].empty() ? 2 * e * ev.rows * s.head_dim : 0;
        on_event(ev);
      }
      for (std::uint64_t j = 0; j < nkb; ++j) {
        ev.kind = TileEventKind::load_kv;
        ev.q_block = 0;
        ev.rows = 0;
        ev.k_block = j;
        ev.cols = std::min(s.block_cols, s.seq_kv - j * s.block_cols);
        ev.moved = 2 * e * ev.cols * s.head_dim;
        const std::size_t key = ev.kv_head * nkb + j;
        ev.kv_first_visit = !seen[key];
        seen[key] = true;
        ev.once = ev.kv_first_visit ? ev.moved : 0;
        on_event(ev);
        ev.kv_first_visit = false;
        for (std::uint64_t i = 0; i < nqb; ++i) {
          if (j < visited[i].begin || j >= visited[i].end) continue;
          ev.kind = TileEventKind::tile;
          ev.q_block = i;
          ev.rows = std::min(s.block_rows, s.seq_q - i * s.block_rows);
          // Q_i read, O_i read and written (element type), l_i and m_i read
          // and written (fp32).
          ev.moved = 3 * e * ev.rows * s.head_dim + 16 * ev.rows;
          // Visited key blocks are one range, so its first block is the first visit.
          ev.q_first_visit = j == visited[i].begin;
          ev.once = ev.q_first_visit ? 2 * e * ev.rows * s.head_dim : 0;
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
