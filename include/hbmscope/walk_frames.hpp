#pragma once
// The frames of `hbmscope walk`: the (query block x key block) grid of one head
// as the tile walk steps through it, with the running byte counters and their
// closed-form totals. Pure data; src/report draws it.
#include <cstdint>
#include <functional>
#include <vector>

#include "hbmscope/shape.hpp"
#include "hbmscope/tile_walk.hpp"

namespace hbmscope {

enum class TileState : std::uint8_t {
  todo,       // visited later
  masked,     // never visited: the causal mask hides every key of it from every row
  on_chip,    // the tile being computed
  done_first, // computed; its streamed operands came from HBM for the first time
  done_reread // computed; its streamed operands were re-read (an L2 hit if cached):
              // K_j, V_j in FA2 order, Q_i, O_i, l_i, m_i in FA1 order
};

struct WalkFrame {
  Shape shape;
  LoopOrder order = LoopOrder::fa2;
  std::uint64_t q_blocks = 0, k_blocks = 0;
  std::uint64_t batch = 0, head = 0;   // the head whose grid is drawn
  std::vector<TileState> tiles;        // q_blocks x k_blocks, query block major
  // The operand each tile streams, read at least once so far (for this head's
  // kv head in FA2 order: K_j, V_j per key block; in FA1 order: Q_i, O_i per
  // query block): re-reading it would be an L2 hit if it stayed cached.
  std::vector<bool> streamed_read;
  std::uint64_t step = 0, steps = 0;   // tiles computed so far, of all heads
  std::uint64_t moved = 0, once = 0;   // bytes so far: no L2 reuse, every value once
  std::uint64_t moved_total = 0;       // closed form: flash_no_l2 (fa2), flash1_no_l2 (fa1)
  std::uint64_t once_total = 0;        // closed form: floor
  bool has_current = false;            // a tile is on chip (false on the final frame)
  TileEvent current;                   // that tile's event
  bool final = false;                  // every event counted: moved = moved_total

  TileState tile(std::uint64_t q, std::uint64_t k) const { return tiles[q * k_blocks + k]; }
};

// The most tiles (all heads and batch elements) `walk` steps through.
inline constexpr std::uint64_t max_walk_tiles = 50'000'000;

// Steps through s (forward pass) in the given loop order. Calls on_frame after
// every tile when every_tile is set, and in any case once at the end with the
// final frame, whose counters equal the closed forms. Throws Error for a shape
// that cannot be walked (not the forward pass, too many tiles).
void walk_frames(const Shape& s, LoopOrder order, bool every_tile,
                 const std::function<void(const WalkFrame&)>& on_frame);

}  // namespace hbmscope
