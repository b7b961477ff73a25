#include "hbmscope/animations.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <cmath>
#include <thread>
#include <utility>
#include <vector>

#include "hbmscope/error.hpp"
#include "hbmscope/printers.hpp"

namespace hbmscope {

namespace {

constexpr const char* reset = "\x1b[0m";

std::string paint(const std::string& text, const char* sgr, const TermStyle& st) {
  if (!st.color || text.empty()) return text;
  return std::string("\x1b[") + sgr + "m" + text + reset;
}

// Display width: one column per UTF-8 code point, ANSI escape sequences none.
std::size_t display_width(std::string_view s) {
  std::size_t w = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\x1b') {
      while (i < s.size() && !(s[i] >= '@' && s[i] <= '~' && s[i] != '[')) ++i;
      continue;
    }
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) ++w;
  }
  return w;
}

std::string pad_left(const std::string& s, std::size_t w) {
  const std::size_t n = display_width(s);
  return std::string(w > n ? w - n : 0, ' ') + s;
}

std::string pad_right(const std::string& s, std::size_t w) {
  const std::size_t n = display_width(s);
  return s + std::string(w > n ? w - n : 0, ' ');
}

// 34603008 -> "34,603,008"
std::string grouped(std::uint64_t v) {
  std::string digits = std::to_string(v), out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i != 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string num(double v, int digits = 6) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*g", digits, v);
  return buf;
}

// ---------------------------------------------------------------- walk

struct Glyph {
  const char* text;
  const char* sgr;
};

Glyph tile_glyph(TileState t) {
  switch (t) {
    case TileState::todo: return {"·", "2"};
    case TileState::masked: return {" ", ""};
    case TileState::on_chip: return {"@", "1;30;43"};
    case TileState::done_first: return {"#", "1;32"};
    case TileState::done_reread: return {"+", "36"};
  }
  return {"?", ""};
}

std::string cell(Glyph g, std::size_t width, const TermStyle& st) {
  std::string core = std::string(g.text);
  if (width >= 3) core += g.text;  // two glyphs and a gap in wide cells
  std::string out = *g.sgr ? paint(core, g.sgr, st) : core;
  const std::size_t used = width >= 3 ? 2 : 1;
  return out + std::string(width - used, ' ');
}

std::string bar(std::uint64_t part, std::uint64_t whole, std::size_t width, const TermStyle& st) {
  const std::size_t filled =
      whole == 0 ? width
                 : static_cast<std::size_t>(static_cast<long double>(part) * width / whole);
  std::string done(std::min(filled, width), '#');
  std::string rest(width - std::min(filled, width), '.');
  return "[" + paint(done, part == whole ? "1;32" : "32", st) + rest + "]";
}

std::string status_line(const WalkFrame& f) {
  const bool fa2 = f.order == LoopOrder::fa2;
  const bool many = f.shape.batch * f.shape.heads > 1;
  std::string where;
  if (many)
    where = " (batch " + std::to_string(f.batch + 1) + "/" + std::to_string(f.shape.batch) +
            ", head " + std::to_string(f.head + 1) + "/" + std::to_string(f.shape.heads) + ")";
  if (!f.has_current)
    return "All " + grouped(f.steps) + " tiles done" + where +
           ": each counter has reached its closed form.";
  const auto& ev = f.current;
  const std::string i = std::to_string(ev.q_block), j = std::to_string(ev.k_block);
  std::string s = "Tile " + grouped(f.step) + "/" + grouped(f.steps) + where + ": query block " +
                  i + ", key block " + j + "; ";
  if (fa2)
    s += "K_" + j + ", V_" + j + (ev.kv_first_visit ? " read from HBM" : " re-read (L2 hit if cached)");
  else
    s += "in Q_" + i + " O_" + i + " l_" + i + " m_" + i + ", out O_" + i + " l_" + i + " m_" + i +
         (ev.q_first_visit ? "" : " (re-read)");
  return s;
}

std::vector<std::string> grid_lines(const WalkFrame& f, const TermStyle& st) {
  std::vector<std::string> lines;
  const std::size_t cw = f.k_blocks <= 24 ? 3 : f.k_blocks <= 60 ? 2 : 1;
  if (f.k_blocks > 150 || f.q_blocks > 48) {
    lines.push_back("(The grid of " + grouped(f.q_blocks) + " x " + grouped(f.k_blocks) +
                    " tiles does not fit a terminal: counters only. Try larger --block-rows "
                    "and --block-cols.)");
    return lines;
  }
  const bool fa2 = f.order == LoopOrder::fa2;
  const std::size_t idx_w = std::to_string(f.q_blocks - 1).size();
  // "query block NN" and, in FA1 order, the Q_i/O_i strip "  #".
  const std::string q_label = "query block ";
  const std::size_t left = q_label.size() + idx_w + (fa2 ? 0 : 3) + 3;

  std::string labels(left, ' ');
  {
    std::string row;
    for (std::uint64_t j = 0; j < f.k_blocks; ++j) {
      const std::string n = std::to_string(j);
      if (cw >= 3) {
        row += pad_right(n, cw);
      } else if (j % 10 == 0 && row.size() <= j * cw) {
        row += std::string(j * cw - row.size(), ' ') + n;
      }
    }
    labels += row;
  }
  lines.push_back(std::string(left, ' ') + "key block j ->");
  if (!fa2) labels.replace(q_label.size() + idx_w + 1, 3, "Q,O");
  lines.push_back(labels);
  if (fa2) {
    std::string strip = pad_right("K_j, V_j read", left);
    for (std::uint64_t j = 0; j < f.k_blocks; ++j)
      strip += cell(f.streamed_read[j] ? Glyph{"#", "1;32"} : Glyph{"·", "2"}, cw, st);
    lines.push_back(strip);
  }
  for (std::uint64_t i = 0; i < f.q_blocks; ++i) {
    std::string row = q_label + pad_left(std::to_string(i), idx_w);
    if (!fa2)
      row += "  " + (f.streamed_read[i] ? paint("#", "1;32", st) : paint("·", "2", st));
    row += "   ";
    for (std::uint64_t j = 0; j < f.k_blocks; ++j) row += cell(tile_glyph(f.tile(i, j)), cw, st);
    while (!row.empty() && row.back() == ' ') row.pop_back();
    lines.push_back(row);
  }
  return lines;
}

// The frame's lines, then a small table with its columns aligned (right
// where `right` says), trailing blanks trimmed: one string.
std::string with_table(std::vector<std::string> lines, const std::vector<std::vector<std::string>>& table,
                       const std::vector<bool>& right) {
  std::vector<std::size_t> w(right.size(), 0);
  for (const auto& row : table)
    for (std::size_t c = 0; c < row.size(); ++c) w[c] = std::max(w[c], display_width(row[c]));
  for (const auto& row : table) {
    std::string line;
    for (std::size_t c = 0; c < row.size(); ++c) {
      if (c) line += "  ";
      line += right[c] ? pad_left(row[c], w[c]) : pad_right(row[c], w[c]);
    }
    lines.push_back(line);
  }
  std::string out;
  for (auto& l : lines) {
    while (!l.empty() && l.back() == ' ') l.pop_back();
    out += l + "\n";
  }
  return out;
}

}  // namespace

std::string render_walk_frame(const WalkFrame& f, const TermStyle& st) {
  const bool fa2 = f.order == LoopOrder::fa2;
  std::vector<std::string> lines;
  lines.push_back(paint(fa2 ? "FlashAttention-2 order: query blocks outer (a CTA each), key blocks inner"
                            : "FlashAttention-1 order: key/value blocks outer, query blocks inner",
                        "1", st));
  lines.push_back(describe(f.shape));
  lines.push_back(status_line(f));
  lines.push_back("");
  for (auto& l : grid_lines(f, st)) lines.push_back(std::move(l));
  lines.push_back("");
  const std::string what = fa2 ? "K_j, V_j" : "Q_i, O_i, l_i, m_i";
  lines.push_back(cell(tile_glyph(TileState::on_chip), 2, st) + "on chip   " +
                  cell(tile_glyph(TileState::todo), 2, st) + "to come" +
                  (!f.shape.causal            ? std::string()
                   : f.shape.window != 0      ? "   (blank) hidden by the causal mask and the window of " +
                                              std::to_string(f.shape.window)
                   : f.shape.chunk != 0       ? "   (blank) hidden by the causal mask and the chunks of " +
                                              std::to_string(f.shape.chunk)
                                              : std::string("   (blank) hidden by the causal mask")));
  lines.push_back(cell(tile_glyph(TileState::done_first), 2, st) + "done: first read of " + what +
                  "   " + cell(tile_glyph(TileState::done_reread), 2, st) + "done: " +
                  (fa2 ? what + " " : std::string()) + "re-read (L2 hit if cached)");
  lines.push_back("");

  // Counters beside their closed forms, as a small table.
  const std::string moved_name = fa2 ? "flash_no_l2" : "flash1_no_l2";
  const std::vector<std::vector<std::string>> table = {
      {"Bytes", "so far", "", "closed form", "", ""},
      {"Moved, no L2 reuse", grouped(f.moved) + " B", "of", grouped(f.moved_total) + " B",
       moved_name, bar(f.moved, f.moved_total, 12, st)},
      {"Every value once", grouped(f.once) + " B", "of", grouped(f.once_total) + " B", "floor",
       bar(f.once, f.once_total, 12, st)},
  };
  return with_table(std::move(lines), table, {false, true, false, true, false, false});
}

// ---------------------------------------------------------------- softmax

namespace {

std::string range_label(std::size_t begin, std::size_t end) {
  return end - begin == 1 ? "x[" + std::to_string(begin) + "]"
                          : "x[" + std::to_string(begin) + ".." + std::to_string(end - 1) + "]";
}

std::string values(const SoftmaxTrace& t, std::size_t begin, std::size_t end) {
  std::string s;
  for (std::size_t i = begin; i < end; ++i) s += (i == begin ? "" : "  ") + num(t.x[i]);
  return s;
}

// A bar of width * v columns, in eighths of a column.
std::string term_bar(double v, std::size_t width) {
  static const char* const eighths[] = {"", "▏", "▎", "▍", "▌", "▋", "▊", "▉"};
  const double cols = std::clamp(v, 0.0, 1.0) * static_cast<double>(width);
  const auto total = static_cast<std::size_t>(std::lround(cols * 8));
  std::string s;
  for (std::size_t k = 0; k < total / 8; ++k) s += "█";
  return s + eighths[total % 8];
}

}  // namespace

std::string render_softmax_header(const SoftmaxTrace& t, const TermStyle& st) {
  std::string s = paint("Online softmax of " + std::to_string(t.x.size()) +
                            (t.x.size() == 1 ? " value" : " values") + " in blocks of " +
                            std::to_string(t.block) + " (double precision)",
                        "1", st) +
                  "\n";
  s += "x = " + values(t, 0, t.x.size()) + "\n";
  s += "Keep a running maximum m and a running sum l of e^(x - m); when a block raises the\n"
       "maximum to m', multiply l by e^(m - m'): every term already in l shrinks by that factor.\n";
  return s;
}

std::string render_softmax_step(const SoftmaxTrace& t, std::size_t k, const TermStyle& st) {
  const SoftmaxTraceStep& step = t.steps[k];
  const auto& u = step.update;
  std::string s = "\n" +
                  paint("Block " + std::to_string(k + 1) + " of " + std::to_string(t.steps.size()) +
                            ": " + range_label(step.begin, step.end) + " = " +
                            values(t, step.begin, step.end),
                        "1", st) +
                  "\n";
  if (u.m_after > u.m_before) {
    s += "  block max " + num(step.block_max) + " > m = " + num(u.m_before) + ": m becomes " +
         num(u.m_after) + "\n";
    if (step.rescaled)
      s += "  " + paint("rescale", "1;33", st) + ": l x e^(m - m') = " + num(u.l_before) +
           " x e^(" + num(u.m_before) + " - " + num(u.m_after) + ") = " + num(u.l_before) +
           " x " + num(u.scale) + "\n";
  } else {
    s += "  block max " + num(step.block_max) + " <= m = " + num(u.m_before) +
         ": m stays, no rescale (e^(m - m') = 1)\n";
  }
  s += "  l = " + num(u.l_before) + (step.rescaled ? " x " + num(u.scale) : std::string()) +
       " + " + num(step.block_sum) + " (the block's e^(x - m')) = " + num(u.l_after) + "\n";
  s += "  terms e^(x - m) in l, m = " + num(u.m_after) + ":\n";
  std::size_t xw = 0;
  for (std::size_t i = 0; i < step.end; ++i) xw = std::max(xw, num(t.x[i]).size());
  const std::size_t iw = std::to_string(step.end - 1).size();
  for (std::size_t i = 0; i < step.end; ++i) {
    const double v = step.terms[i];
    const bool fresh = i >= step.begin;
    std::string line = "    x[" + pad_left(std::to_string(i), iw) + "] = " +
                       pad_left(num(t.x[i]), xw) + "   " + pad_right(num(v, 6), 12) + " ";
    const std::string b = term_bar(v, 40);
    line += paint(b, fresh ? "32" : step.rescaled ? "33" : "", st);
    if (!fresh && step.rescaled)
      // The earlier value comes from the earlier step: v / scale is 0/0 once the scale underflows.
      line += "  (x " + num(u.scale, 3) + ", was " + num(t.steps[k - 1].terms[i], 3) + ")";
    if (fresh) line += "  new";
    s += line + "\n";
  }
  return s;
}

std::string render_softmax_result(const SoftmaxTrace& t, const TermStyle& st) {
  const auto& last = t.steps.back().update;
  std::string s = "\n" + paint("Result", "1", st) + ": m = " + num(last.m_after) +
                  ", l = " + num(last.l_after, 17) + "; p = e^(x - m) / l\n";
  const std::size_t iw = std::max<std::size_t>(1, std::to_string(t.x.size() - 1).size());
  std::size_t xw = 1;
  for (double v : t.x) xw = std::max(xw, num(v).size());
  s += "  " + pad_left("i", iw) + "  " + pad_left("x", xw) + "   " +
       pad_right("online softmax", 24) + "  " + pad_right("two-pass safe softmax", 24) +
       "  |difference|\n";
  for (std::size_t i = 0; i < t.x.size(); ++i)
    s += "  " + pad_left(std::to_string(i), iw) + "  " + pad_left(num(t.x[i]), xw) + "   " +
         pad_right(num(t.online[i], 17), 24) + "  " + pad_right(num(t.two_pass[i], 17), 24) +
         "  " + num(std::fabs(t.online[i] - t.two_pass[i]), 3) + "\n";
  s += "Largest difference: " + paint(num(t.max_difference, 3), "1", st);
  if (t.max_difference > 0) s += " at x[" + std::to_string(t.max_difference_at) + "]";
  s += t.max_difference == 0 ? ": identical to the last bit this time.\n" : ".\n";
  s += "The two are equal in exact arithmetic; in double they differ only by the rounding\n"
       "of a different order of operations (of order 1e-16).\n";
  return s;
}

std::string render_softmax(const SoftmaxTrace& t, const TermStyle& st) {
  std::string s = render_softmax_header(t, st);
  for (std::size_t k = 0; k < t.steps.size(); ++k) s += render_softmax_step(t, k, st);
  return s + render_softmax_result(t, st);
}

// ---------------------------------------------------------------- players

namespace {

// A frame that cannot be written ends the animation with an error.
void write_all(std::FILE* out, const std::string& s) {
  if (out == stdout) return write_stdout(s);
  if (std::fwrite(s.data(), 1, s.size(), out) != s.size() || std::fflush(out) != 0)
    throw Error(std::string("writing the animation: ") + std::strerror(errno));
}

std::size_t count_lines(const std::string& s) {
  return static_cast<std::size_t>(std::count(s.begin(), s.end(), '\n'));
}

std::size_t widest_line(const std::string& s) {
  std::size_t w = 0, start = 0;
  while (start < s.size()) {
    std::size_t end = s.find('\n', start);
    if (end == std::string::npos) end = s.size();
    w = std::max(w, display_width(std::string_view(s).substr(start, end - start)));
    start = end + 1;
  }
  return w;
}

// Each line cleared to its end, so a shorter line leaves no trace of the last frame's.
std::string with_clear_eol(const std::string& frame) {
  std::string out;
  for (char c : frame) {
    if (c == '\n') out += "\x1b[K";
    out += c;
  }
  return out;
}

void pause(unsigned ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

}  // namespace

void play_walk(const Shape& s, LoopOrder order, const Playback& p, std::FILE* out) {
  if (!p.animate) {
    std::string frame;
    walk_frames(s, order, false, [&](const WalkFrame& f) { frame = render_walk_frame(f, p.style); });
    write_all(out, frame);
    return;
  }
  std::size_t previous_lines = 0;
  bool first = true;
  const std::uint64_t every = p.every == 0 ? 1 : p.every;
  walk_frames(s, order, true, [&](const WalkFrame& f) {
    if (!f.final && f.step % every != 0) return;
    const std::string frame = render_walk_frame(f, p.style);
    const std::size_t lines = count_lines(frame);
    // Redraw in place when the frame fits the terminal; otherwise start each
    // frame at the top of a cleared screen.
    const bool fits = (p.term_rows == 0 || static_cast<int>(lines) < p.term_rows) &&
                      (p.term_cols == 0 || static_cast<int>(widest_line(frame)) <= p.term_cols);
    std::string prefix;
    if (!first) {
      if (fits)
        prefix = "\x1b[" + std::to_string(previous_lines) + "A\r";
      else
        prefix = "\x1b[H\x1b[J";
      pause(p.delay_ms);
    } else if (!fits) {
      prefix = "\x1b[H\x1b[2J";
    }
    write_all(out, prefix + with_clear_eol(frame));
    previous_lines = lines;
    first = false;
  });
}

void play_softmax(const SoftmaxTrace& t, const Playback& p, std::FILE* out) {
  if (!p.animate) {
    write_all(out, render_softmax(t, p.style));
    return;
  }
  write_all(out, render_softmax_header(t, p.style));
  for (std::size_t k = 0; k < t.steps.size(); ++k) {
    pause(p.delay_ms);
    write_all(out, render_softmax_step(t, k, p.style));
  }
  pause(p.delay_ms);
  write_all(out, render_softmax_result(t, p.style));
}

}  // namespace hbmscope

// ---------------------------------------------------------------- walk --decode

namespace hbmscope {

namespace {

std::string decode_variant_title(DecodeVariant v) {
  switch (v) {
    case DecodeVariant::split:
      return "Split-KV decode (flash-decoding), GQA packed: one CTA per kv head and split reads its keys once";
    case DecodeVariant::split_unpacked:
      return "Split-KV decode, one CTA per query head: each kv head's keys read by its G query heads";
    case DecodeVariant::paged:
      return "Paged split-KV decode: each split CTA reads its pages whole, through the block table";
    case DecodeVariant::floor: break;
  }
  return "Decode";
}

// One split's strip: a cell per key block (or per several, to keep it short).
std::string split_strip(const DecodeWalkFrame& f, const KeyRange& r, const TermStyle& st) {
  constexpr std::uint64_t max_cells = 48;
  const std::uint64_t per_cell = (f.blocks_per_split + max_cells - 1) / max_cells;
  const std::uint64_t bc = f.shape.block_cols;
  const std::uint64_t blocks = r.empty() ? 0 : (r.end - r.begin + bc - 1) / bc;
  const std::uint64_t split_steps = std::min(f.step, f.blocks_per_split);
  std::string s;
  for (std::uint64_t c = 0; c * per_cell < f.blocks_per_split; ++c) {
    const std::uint64_t first = c * per_cell;
    if (first >= blocks) {
      s += " ";
      continue;
    }
    const std::uint64_t last = std::min(blocks, first + per_cell) - 1;
    if (f.phase == DecodePhase::split && split_steps > first && split_steps - 1 <= last && split_steps - 1 >= first)
      s += cell({"@", "1;30;43"}, 1, st);
    else if (split_steps > last)
      s += cell({"#", "1;32"}, 1, st);
    else
      s += cell({"·", "2"}, 1, st);
  }
  return "[" + s + "]";
}

}  // namespace

std::string render_decode_walk_frame(const DecodeWalkFrame& f, const TermStyle& st) {
  std::vector<std::string> lines;
  lines.push_back(paint(decode_variant_title(f.variant), "1", st));
  lines.push_back(describe(f.shape) + "; " + std::to_string(f.splits) + (f.splits == 1 ? " split" : " splits") +
                  " of " + std::to_string(f.blocks_per_split) + " key blocks");
  std::string status;
  if (f.phase == DecodePhase::split)
    status = "step " + std::to_string(f.step) + " of " + std::to_string(f.steps) +
             ": every split CTA reads its next key block (K and V)";
  else if (f.splits > 1)
    status = "done: the combine kernel read the " + std::to_string(f.splits) +
             " fp32 partials of every row, O = sum_j exp(LSE_j - LSE) O_j, and wrote O";
  else
    status = "done: one split, so no partials and no combine";
  lines.push_back(status);
  lines.push_back("");
  const std::uint64_t len = context_length(f.shape, f.sequence);
  lines.push_back("Sequence " + std::to_string(f.sequence) + " (" + std::to_string(len) + " keys), kv head 0:");
  constexpr std::size_t max_lines = 24;
  const std::size_t shown = std::min<std::size_t>(f.ranges.size(), max_lines);
  const std::size_t width = std::to_string(f.ranges.size() - 1).size();
  for (std::size_t j = 0; j < shown; ++j) {
    const KeyRange& r = f.ranges[j];
    std::string keys = r.empty() ? "no keys" : "keys " + std::to_string(r.begin) + ".." + std::to_string(r.end - 1);
    const bool finished = r.empty() || f.step * f.shape.block_cols >= r.end - r.begin;
    std::string tail = f.splits == 1 ? (finished ? "-> O" : "") : (finished ? "-> partial O, LSE" : "");
    if (f.final && f.splits > 1) tail = "-> combined";
    lines.push_back("  split " + pad_left(std::to_string(j), width) + "  " + split_strip(f, r, st) + "  " +
                    pad_right(keys, 22) + tail);
  }
  if (shown < f.ranges.size())
    lines.push_back("  ... " + std::to_string(f.ranges.size() - shown) + " more splits");
  lines.push_back("");
  lines.push_back(cell({"@", "1;30;43"}, 2, st) + "on chip   " + cell({"#", "1;32"}, 2, st) + "read   " +
                  cell({"·", "2"}, 2, st) + "to come   (a cell: " +
                  std::to_string((f.blocks_per_split + 47) / 48) + " key block(s) of " +
                  std::to_string(f.shape.block_cols) + ")");
  lines.push_back("");
  const std::string id(decode_variant_id(f.variant));
  std::vector<std::vector<std::string>> table = {
      {"Bytes, whole row", "so far", "", "closed form", ""},
      {"K, V read", grouped(f.moved.kv) + " B", "of", grouped(f.total.kv) + " B", bar(f.moved.kv, f.total.kv, 12, st)},
      {"Q read", grouped(f.moved.q) + " B", "of", grouped(f.total.q) + " B", bar(f.moved.q, f.total.q, 12, st)},
  };
  if (f.total.partials > 0)
    table.push_back({"Partials written + read", grouped(f.moved.partials) + " B", "of",
                     grouped(f.total.partials) + " B", bar(f.moved.partials, f.total.partials, 12, st)});
  if (f.total.block_table > 0)
    table.push_back({"Block table read", grouped(f.moved.block_table) + " B", "of",
                     grouped(f.total.block_table) + " B", bar(f.moved.block_table, f.total.block_table, 12, st)});
  table.push_back({"O written", grouped(f.moved.o) + " B", "of", grouped(f.total.o) + " B",
                   bar(f.moved.o, f.total.o, 12, st)});
  table.push_back({"Total (" + id + ")", grouped(f.moved.total) + " B", "of", grouped(f.total.total) + " B",
                   bar(f.moved.total, f.total.total, 12, st)});
  table.push_back({"Floor (decode_floor)", "", "", grouped(f.floor_total) + " B", ""});
  return with_table(std::move(lines), table, {false, true, false, true, false});
}

void play_decode_walk(const Shape& s, DecodeVariant v, std::uint64_t splits, const Playback& p, std::FILE* out) {
  if (!p.animate) {
    std::string frame;
    decode_walk_frames(s, v, splits, false, [&](const DecodeWalkFrame& f) { frame = render_decode_walk_frame(f, p.style); });
    write_all(out, frame);
    return;
  }
  std::size_t previous_lines = 0;
  bool first = true;
  const std::uint64_t every = p.every == 0 ? 1 : p.every;
  decode_walk_frames(s, v, splits, true, [&](const DecodeWalkFrame& f) {
    if (!f.final && f.step % every != 0) return;
    const std::string frame = render_decode_walk_frame(f, p.style);
    const std::size_t lines = count_lines(frame);
    const bool fits = (p.term_rows == 0 || static_cast<int>(lines) < p.term_rows) &&
                      (p.term_cols == 0 || static_cast<int>(widest_line(frame)) <= p.term_cols);
    std::string prefix;
    if (!first) {
      prefix = fits ? "\x1b[" + std::to_string(previous_lines) + "A\r" : "\x1b[H\x1b[J";
      pause(p.delay_ms);
    } else if (!fits) {
      prefix = "\x1b[H\x1b[2J";
    }
    write_all(out, prefix + with_clear_eol(frame));
    previous_lines = lines;
    first = false;
  });
}

}  // namespace hbmscope
