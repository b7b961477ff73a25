#pragma once
// The frames of `hbmscope walk --decode`: the splits of one decode row as the
// split kernel reads them (every split CTA one key block a step, in lockstep)
// and as the combine kernel reduces their partials, with running byte counters
// for the whole row that reach decode_bytes on the final frame. Pure data;
// src/report draws it.
#include <cstdint>
#include <functional>
#include <vector>

#include "hbmscope/decode.hpp"

namespace hbmscope {

enum class DecodePhase { split, combine, done };

struct DecodeWalkFrame {
  Shape shape;
  DecodeVariant variant = DecodeVariant::split;
  std::uint64_t splits = 1;
  std::uint64_t sequence = 0;          // the sequence drawn: the first of the longest context
  std::uint64_t blocks_per_split = 0;  // key blocks of a full split
  std::vector<KeyRange> ranges;        // the drawn sequence's keys per split
  std::uint64_t step = 0, steps = 0;   // split steps done (key blocks per split), then the combine
  DecodePhase phase = DecodePhase::split;
  // Bytes so far, whole row (every sequence, head and split CTA), by operand.
  DecodeBytes moved;
  DecodeBytes total;                   // closed form: decode_bytes(shape, variant, splits)
  std::uint64_t floor_total = 0;       // decode_floor
  bool final = false;                  // every byte counted: moved == total
};

// The most (sequence, split, key block) steps a decode walk counts.
inline constexpr std::uint64_t max_decode_walk_work = 50'000'000;

// Walks one decode row: a frame after every split step when every_step is
// set (and after the combine), and in any case the final frame. Throws Error
// for a shape that is not a decode shape, for decode_floor (no kernel) or for a
// walk past max_decode_walk_work.
void decode_walk_frames(const Shape& s, DecodeVariant v, std::uint64_t splits, bool every_step,
                        const std::function<void(const DecodeWalkFrame&)>& on_frame);

}  // namespace hbmscope
