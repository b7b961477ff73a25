// Options of `walk` and `softmax`, the design note's two animations.
#include <fmt/format.h>

#include <algorithm>

#include "hbmscope/checked.hpp"
#include "hbmscope/error.hpp"
#include "hbmscope/model.hpp"
#include "hbmscope/softmax_trace.hpp"
#include "options.hpp"

namespace hbmscope::cli {

const char* const walk_help = R"(Draws the grid of (query block i x key block j) tiles of one head and steps
through FlashAttention's loop order, as the design note's first animation does:
  @  the tile on chip: S = Q_i K_j^T, the online softmax, O_i += P V_j
  #  a tile done whose streamed operands came from HBM for the first time
  +  a tile done whose operands were re-read: an L2 hit if they stayed cached
     (K_j, V_j in FA2 order; Q_i, O_i and the fp32 l_i, m_i in FA1 order)
  ·  a tile still to come; blank: a tile the causal mask hides entirely
The strip above the grid (FA2) or left of it (FA1) marks the K_j, V_j (or Q_i, O_i)
read at least once. Two counters run beside their closed forms and reach them on
the last frame: bytes moved with no L2 reuse (flash_no_l2, or flash1_no_l2 with
--order fa1) and bytes if every value moved once (floor).

The shape options are model's, for one shape, with other defaults here: --seq 1024
and --head-dim 64 (not the note's rows), blocks of 128, the forward pass.

On a terminal the frames are redrawn in place, one per tile, --delay MS apart
(a walk that would take over a minute draws one tile in N instead, with a note);
piped, or with --no-animate, only the final frame is printed. Colour only on a
terminal, and never when NO_COLOR is set.

Examples:
  hbmscope walk                                 1024 x 64, blocks of 128, FA2 order
  hbmscope walk --order fa1 --delay 50          FlashAttention-1's order
  hbmscope walk --seq 1000 --causal --block-rows 64
  hbmscope walk --seq 512 --seq-kv 1024 --heads 4 --kv-heads 2 --no-animate

With --decode, the splits of one decode row instead (docs/model.md, "Decode attention"):
every split CTA reads one key block a step, in lockstep; each writes its fp32 partial O
and log-sum-exp; then the combine kernel reads them all and writes O. One line per
split of the longest sequence; counters for the whole row (K and V, Q, partials,
block table, O) reach decode_bytes on the last frame. --variant picks decode_split
(GQA packed, the default), decode_split_unpacked or decode_paged; --splits N or
FlashAttention's heuristic on --sms SMs (default 132).
  hbmscope walk --decode --seq-kv 64K --heads 16 --kv-heads 2
  hbmscope walk --decode --context-lengths 3000,20000,65536 --heads 32 --kv-heads 8 --splits 6
  hbmscope walk --decode --seq-kv 5000 --variant decode_paged --page-size 7 --splits 3)";

const char* const softmax_help = R"(Steps through online softmax block by block, as the design note's second
animation does: for each block, the running maximum m, the running sum l of
e^(x - m), the rescale factor e^(m - m') when the block raises the maximum, and a
bar per term e^(x - m) so far (new ones marked "new"; at a rescale every earlier
bar shrinks by the same factor). Then the probabilities beside the two-pass safe
softmax and their largest difference, in double (of order 1e-16).

Values are decimal numbers (or -inf), separated by spaces or commas; negative
numbers may be given as they are, but -inf needs `--` before the values.

Examples:
  hbmscope softmax 3 1 4 1 5 9 2 6 --block 3
  hbmscope softmax --random 12 --seed 7 --block 4
  hbmscope softmax --block 2 -- -1 -inf 2.5 0)";

void add_walk_options(CLI::App& app, WalkOptions& o) {
  app.add_option("--order", o.order,
                 "Loop order: fa2 (query blocks outer, FlashAttention-2) or fa1 (key/value "
                 "blocks outer, FlashAttention-1) [default: fa2]")
      ->type_name("fa2|fa1");
  app.add_flag("--animate,!--no-animate", o.animate,
               "Step through the tiles on a terminal (the default there); --no-animate prints "
               "the final frame only, as piped output always does");
  app.add_option("--delay", o.delay_ms, "Milliseconds between frames, e.g. 20 [default: 100]; with --animate")
      ->type_name("MS")
      ->check(integer_in(0, 60000));
  app.add_option("--variant", o.variant,
                 "With --decode: decode_split (GQA packed), decode_split_unpacked or decode_paged "
                 "[default: decode_split]")
      ->type_name("ID");
  app.add_option("--sms", o.sms, "With --decode: SMs of the split heuristic, e.g. 108 [default: 132]")
      ->type_name("N");
}

void add_softmax_options(CLI::App& app, SoftmaxOptions& o) {
  app.add_option("values", o.values, "The logits x, e.g. 3 1 4 1 5 9 2 6")->type_name("X...");
  app.add_option("--block", o.block, "Values per block, e.g. 3 [default: 3]")->type_name("N");
  app.add_option("--random", o.random,
                 "Trace N random values from [-4, 4) instead, e.g. 10 (at most 200)")
      ->type_name("N");
  app.add_option("--seed", o.seed, "Seed of --random, e.g. 7 [default: 1]; with --random")->type_name("S");
  app.add_flag("--animate,!--no-animate", o.animate,
               "Pause --delay MS between blocks on a terminal (the default there); piped output "
               "is printed at once");
  app.add_option("--delay", o.delay_ms, "Milliseconds between blocks, e.g. 200 [default: 500]")
      ->type_name("MS")
      ->check(integer_in(0, 60000));
}

Shape walk_shape(ShapeOptions o) {
  const bool decode = o.decode || o.context_lengths;
  if (o.seq_lens)
    throw UsageError("walk draws one sequence; --seq-lens gives a ragged batch (walk one of its sequences "
                     "with --seq and --seq-kv)");
  if (!o.seq && !decode) o.seq = "1024";
  if (!o.head_dim && !decode && !o.mla) o.head_dim = "64";
  const auto shapes = expand(to_axes(o));
  if (shapes.size() != 1)
    throw UsageError("walk draws one shape; the options give " + std::to_string(shapes.size()));
  if (shapes.front().pass != Pass::fwd)
    throw UsageError("--pass: walk steps through the forward pass only, not --pass " +
                     std::string(pass_name(shapes.front().pass)));
  return shapes.front();
}

void check_walk_options(const Shape& s, const ShapeOptions& shape, const WalkOptions& o) {
  // Options that would do nothing in this walk are refused, not ignored.
  if (o.delay_ms && !o.animate) throw UsageError("--delay: the frames are not animated (--no-animate)");
  if (!s.decode) {
    if (o.sms || o.variant) throw UsageError(std::string(o.sms ? "--sms" : "--variant") + ": applies to walk --decode");
    return;
  }
  if (o.order) throw UsageError("--order: applies to the prefill walk, not walk --decode");
  if (shape.page_size && walk_decode_variant(o) != DecodeVariant::paged)
    throw UsageError("--page-size: applies to --variant decode_paged (the walked variant is " +
                     o.variant.value_or("decode_split") + ")");
}

DecodeVariant walk_decode_variant(const WalkOptions& o) {
  const std::string id = o.variant.value_or("decode_split");
  const auto v = parse_decode_variant(id);
  if (!v || *v == DecodeVariant::floor)
    throw UsageError("--variant: '" + id + "' is not one of decode_split, decode_split_unpacked, decode_paged");
  return *v;
}

std::uint64_t walk_decode_splits(const Shape& s, const WalkOptions& o) {
  std::uint64_t sms = default_decode_sm_count;
  if (o.sms) {
    const auto v = parse_int_axis(*o.sms, "sms");
    if (v.size() != 1 || v.front() > max_sm_count)
      throw UsageError("--sms: '" + *o.sms + "' is not one SM count from 1 to " + std::to_string(max_sm_count));
    sms = v.front();
  }
  return decode_splits(s, walk_decode_variant(o), sms);
}

std::uint64_t decode_walk_stride(const Shape& s, std::uint64_t splits, unsigned delay_ms) {
  const std::uint64_t steps = blocks_per_split(s, splits) + 1;
  const std::uint64_t frames =
      std::max<std::uint64_t>(1, std::min<std::uint64_t>(walk_max_frames, walk_budget_ms / std::max(delay_ms, 1u)));
  return steps <= frames ? 1 : (steps + frames - 1) / frames;
}

LoopOrder parse_order(const std::string& s) {
  if (s == "fa2") return LoopOrder::fa2;
  if (s == "fa1") return LoopOrder::fa1;
  throw UsageError("--order: '" + s + "' is not one of fa2, fa1");
}

namespace {
// One positive integer, with the sweep axes' syntax and errors (K suffix...).
std::uint64_t one_count(const std::string& text, const char* option) {
  const auto v = parse_int_axis(text, option);
  if (v.size() != 1) throw UsageError(std::string("--") + option + ": '" + text + "' is not one number");
  return v.front();
}
}  // namespace

std::size_t softmax_block(const SoftmaxOptions& o) { return one_count(o.block, "block"); }

std::vector<double> softmax_values(const SoftmaxOptions& o) {
  softmax_block(o);  // a bad --block is named before anything else
  if (o.delay_ms && !o.animate) throw UsageError("--delay: the blocks are not animated (--no-animate)");
  if (o.seed && !o.random) throw UsageError("--seed: applies to --random (the values are given)");
  if (o.random) {
    const std::uint64_t n = one_count(*o.random, "random");
    if (!o.values.empty()) throw UsageError("softmax: give values or --random N, not both");
    if (n > max_softmax_values)
      throw UsageError("--random: '" + *o.random + "' is more than " +
                  std::to_string(max_softmax_values) + " values");
    const std::string seed = o.seed.value_or("1");
    const bool digits = !seed.empty() && seed.size() <= 19 && seed.find_first_not_of("0123456789") == std::string::npos;
    if (!digits) throw UsageError("--seed: '" + seed + "' is not a non-negative integer");
    return random_logits(n, std::stoull(seed));
  }
  std::vector<double> x;
  for (const auto& arg : o.values) {
    std::size_t pos = 0;
    while (pos <= arg.size()) {
      const std::size_t comma = std::min(arg.find(',', pos), arg.size());
      x.push_back(parse_logit(arg.substr(pos, comma - pos)));
      pos = comma + 1;
    }
  }
  if (x.empty())
    throw UsageError("softmax: no values (e.g. `hbmscope softmax 3 1 4 1 5`, or --random N)");
  return x;
}

}  // namespace hbmscope::cli

#include <sys/ioctl.h>
#include <unistd.h>

#include <cstdlib>

namespace hbmscope::cli {

std::uint64_t walk_stride(const Shape& s, unsigned delay_ms, std::FILE* note) {
  // One frame per tile: 64K x 64K at 100 ms would take 7 hours, and drawing a
  // 512-wide grid 262144 times is slow even with no delay.
  const std::uint64_t tiles = checked_product("walked tiles", visited_tiles(s), s.heads, s.batch);
  const std::uint64_t frames =
      std::max<std::uint64_t>(1, std::min<std::uint64_t>(walk_max_frames, walk_budget_ms / std::max(delay_ms, 1u)));
  if (tiles <= frames) return 1;
  const std::uint64_t every = (tiles + frames - 1) / frames;
  const double full_s = static_cast<double>(tiles) * delay_ms / 1000.0;
  const std::string full = full_s >= 3600 ? fmt::format("{:.1f} h", full_s / 3600)
                           : full_s >= 60 ? fmt::format("{:.1f} min", full_s / 60)
                                          : fmt::format("{:.1f} s", full_s);
  std::fprintf(note, "hbmscope: note: %llu tiles at %u ms a frame would take %s; drawing one tile in %llu\n",
               static_cast<unsigned long long>(tiles), delay_ms, full.c_str(),
               static_cast<unsigned long long>(every));
  return every;
}

Playback playback(bool animate, unsigned delay_ms) {
  Playback p;
  const bool tty = ::isatty(STDOUT_FILENO) == 1;
  const char* term = std::getenv("TERM");
  const bool dumb = term != nullptr && std::string(term) == "dumb";
  const char* no_color = std::getenv("NO_COLOR");
  p.animate = tty && animate && !dumb;
  p.delay_ms = delay_ms;
  p.style.color = tty && !dumb && (no_color == nullptr || *no_color == '\0');
  winsize ws{};
  if (tty && ::ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0) {
    p.term_rows = ws.ws_row;
    p.term_cols = ws.ws_col;
  }
  return p;
}

}  // namespace hbmscope::cli
