#pragma once
// Drawing the note's two animations in a terminal: the frames of `walk` and the
// steps of `softmax`. Renderers format what the core computed (walk_frames.hpp,
// softmax_trace.hpp); the players write them out, one frame at a time with a
// delay on a terminal, or only the final frame / the whole trace at once.
#include <cstdint>
#include <cstdio>
#include <string>

#include "hbmscope/decode_walk.hpp"
#include "hbmscope/softmax_trace.hpp"
#include "hbmscope/walk_frames.hpp"

namespace hbmscope {

struct TermStyle {
  bool color = false;  // ANSI colours (a terminal, and NO_COLOR unset)
};

// One frame: title, status line, the grid (when it fits), legend, counters.
std::string render_walk_frame(const WalkFrame& f, const TermStyle& style);

std::string render_softmax_header(const SoftmaxTrace& t, const TermStyle& style);
std::string render_softmax_step(const SoftmaxTrace& t, std::size_t step, const TermStyle& style);
std::string render_softmax_result(const SoftmaxTrace& t, const TermStyle& style);
// Header, every step, and the result.
std::string render_softmax(const SoftmaxTrace& t, const TermStyle& style);

struct Playback {
  bool animate = false;     // step through frames (only on a terminal)
  unsigned delay_ms = 100;  // between frames when animating
  TermStyle style;
  int term_rows = 0, term_cols = 0;  // the terminal's size; 0 when unknown
  std::uint64_t every = 1;  // walk: draw one tile in `every` (and the final frame)
};

// Walks s and writes its frames to out: every tile, redrawn in place, when
// animating; otherwise the final frame only, written in one piece.
void play_walk(const Shape& s, LoopOrder order, const Playback& p, std::FILE* out);
// Writes the trace: step by step with the delay when animating, else at once.
void play_softmax(const SoftmaxTrace& t, const Playback& p, std::FILE* out);

// `walk --decode`: one frame of a decode row's splits, and the player (as
// play_walk: every step on a terminal, else the final frame only).
std::string render_decode_walk_frame(const DecodeWalkFrame& f, const TermStyle& style);
void play_decode_walk(const Shape& s, DecodeVariant v, std::uint64_t splits, const Playback& p, std::FILE* out);

}  // namespace hbmscope
