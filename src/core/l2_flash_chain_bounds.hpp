#pragma once
// Bounds on all of a CTA's re-reads' distances in the chains
// (docs/l2-chains.md, "Counting without evaluating"): each slot's window of
// CTAs, counts of their gaps, the quick bound, runs and refinements
// (l2_flash_chain_bounds.cpp). Internal to src/core.
#include <array>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "l2_flash_chains.hpp"

namespace hbmscope::l2::chains {

// Bounds on all of a CTA's re-reads' distances (l2_flash_chain_bounds.cpp).
struct Bounds {
  u64 lo = 0, hi = 0;
  u64 qo = 0;  // of hi: the Q and O tiles (every one started or ended in the window)
  bool valid = false;
};
class ChainBounds {
 public:
  // (wide: the starts kept in 8 bytes even where 4 hold them, as the tests
  // take both.)
  explicit ChainBounds(const ChainGrid& g, bool wide = false);
  // CTA i's bounds (its re-reads of what P read), O(log) a CTA amortized.
  // Calls in launch order; those with P = i - 1 and the others each move
  // windows of their own, forward (a call whose P starts before its kind's
  // last one gets none).
  Bounds of(u64 i, u64 P);
  // Bounds on CTA i's re-reads where they all lie at or below `first` (the
  // smallest capacity), from g alone (every slot's last g + 1 steps) and the
  // Q and O tiles of the window: O(1) amortized, and the call's windows
  // stay where they are. Where such calls fail, they are tried less often
  // (each kind, as of()'s, backs off).
  bool quick(u64 i, u64 P, u64 first, Bounds& b) {
    Quick& k = quick_[P + 1 == i ? 0 : 1];
    return !k.back_off.pass_over() && quick(k, i, P, first, b);
  }
  // Bounds on the re-reads of a run of CTAs [a, b), each of its
  // predecessor's blocks (query-block-major order: of one head; head-major:
  // each with a predecessor), that hold for its counted CTAs: those whose g
  // is at least g_lo (and, near_only, whose P is i - 1). The windows' over
  // the union of theirs, with their smallest g below and their largest
  // above: at most each counted CTA's lower bound, at least its upper one.
  // O(slots) a call (each slot's window found from where the last call's
  // was); none where a CTA of the run has none, or none is counted.
  Bounds of_run(u64 a, u64 b, i64 g_lo, bool near_only = false);
  // Tighter bounds, O(slots), right after of(i, P), whose state they use:
  // below, only the slots that count one access less at a time (those whose
  // first CTA launched from i on has just started; P = i - 1) rather than
  // every slot; above, the Q and O tiles of the densest g + 1 steps rather
  // than all of them.
  // refine_lo returns at once where lo cannot reach `reach` (where no
  // refinement would put both bounds in one bucket).
  void refine_lo(u64 i, u64 P, Bounds& b, u64 reach) const;
  void refine_hi(u64 i, u64 P, Bounds& b) const;
  // The same from the densest steps of wider windows, each counted once for
  // the CTAs whose windows lie within it: the last one's where this CTA's
  // does (g at most its width), else this CTA's widened ahead by a slot's
  // worth of starts and ends and its width by g / 16 + 2 steps. At least
  // refine_hi's: for the CTAs that may hold the largest distance, whose
  // upper bounds mostly clear it by far, in place of a count each.
  void refine_hi_ahead(u64 i, u64 P, Bounds& b);
  // The most Q tiles started, and O tiles ended, within width of each other
  // among ids [q_from, q_to) and finish order [o_from, o_to).
  std::pair<u64, u64> densest_tiles(u64 q_from, u64 q_to, u64 o_from, u64 o_to, i64 width) const;
  // An upper bound on the largest distance of CTA i's re-reads, resolved in
  // time (any call order, O(neighbours)): each slot's CTAs whose gap is short
  // next to g at most min(g, their largest gap) + 1 accesses, the others
  // exactly their steps among the last min(g, G) at the worst read.
  u64 peak_hi(u64 i, u64 P);

 private:
  // Counts and sums of one value a slot (capped), for sums of min(g, value).
  struct Sums {
    static constexpr i64 cap = i64{1} << 12;  // gaps from cap - 1 on are not told apart (looser bounds)
    // Counts per value, per 16 values and per 256 (with their sums): O(1)
    // to change, at most 45 counts to sum (values change more often than
    // sums are asked for).
    std::vector<std::int32_t> count;
    std::vector<i64> count16, sum16, count256, sum256;
    i64 total = 0;
    void reset();
    void add(i64 value, i64 sign);
    // How many values of each of t lie below g (< cap), and their sum: one walk a level.
    template <std::size_t N>
    static void below(const std::array<const Sums*, N>& t, i64 g, std::array<i64, N>& c, std::array<i64, N>& s);
    i64 capped(i64 g) const;     // the sum over slots of min(g, value), g < cap
    i64 capped_lo(i64 g) const;  // at most that sum, any g
    i64 capped_hi(i64 g) const;  // at least that sum, any g
    // capped(g) of a and of b at once (g < cap: one walk over the counts).
    static void capped_both(const Sums& a, const Sums& b, i64 g, i64& sa, i64& sb);
  };
  struct SlotCta {  // a slot's CTAs in order: their gaps to their blocks' next access (0 to cap)
    std::uint16_t gap_lo, gap_hi;
  };
  static_assert(Sums::cap <= 0xffff);
  struct Window {  // a slot's CTAs that run in the current window: [lo, hi) of slot_cta_
    u64 lo = 0, hi = 0;
    i64 gmin = 0, gmax = 0;
    u64 seen_lo = 0, seen_hi = 0;  // the CTAs gmin and gmax were taken over
  };
  // The moving part: each slot's window, the trees over their gaps, pointers.
  struct Cursor {
    std::vector<Window> win;
    Sums min, max;
    u64 started = 0, ended = 0;  // ids started by Thi; CTAs (finish order) ended before X
    u64 ended_by = 0;            // CTAs (finish order) ended by Thi
    u64 from = 0;                // the first id started at X (with Q and O tiles in the L2)
    u64 alive = 0;               // the first id that can run at X (started within the longest CTA's steps)
    u64 alive_seq = 0;           // its sequence (rising_)
    i64 last_x = never;
  };
  void move_to(Cursor& cu, i64 X, i64 Thi);
  struct Span {  // CTA i's re-reads of P's blocks: g, P's start X, the last read's step Thi
    i64 g, X, Thi;
  };
  // Where the bounds hold for them (every slot busy through the reads), else none.
  std::optional<Span> reread_span(u64 i, u64 P) const {
    if (!usable_ || P == no_cta || c_.e[P] == 0) return std::nullopt;
    const Span w{c_.s[i] - c_.s[P], c_.s[P], c_.s[i] + static_cast<i64>(c_.e[P]) - 1};
    if (w.Thi > c_.s[c_.n - 1]) return std::nullopt;
    return w;
  }
  // Slot v's window for [X, Thi], searched from where lo and hi (places of
  // slot_cta_) were: a slot's CTAs start and end in its order, so those
  // ended before X come first, then those started by Thi.
  void seek(u64 v, i64 X, i64 Thi, u64& lo, u64& hi) const {
    const u64 a = slot_start_[v], b = slot_start_[v + 1];
    // (A slot's next CTA starts the step after its CTA's last: the last
    // steps from the starts, in place order, but the slot's last CTA's.)
    auto start = [&](u64 j) { return wide_ ? place_s_[j] : static_cast<i64>(place_s32_[j]); };
    lo = first_not_from(lo, a, b, [&](u64 j) { return (j + 1 < b ? start(j + 1) - 1 : slot_last_[v]) < X; });
    hi = std::max(lo, first_not_from(std::max(hi, lo), a, b, [&](u64 j) { return start(j) <= Thi; }));
  }
  void touch(u64 v) {  // slot v's window changed (once a move)
    if (!dirty_[v]) dirty_[v] = 1, touched_[ntouched_++] = v;
  }
  // The bytes of the K/V blocks CTAs [a, b) can read, a in sequence q0 (rising_).
  u64 kv_of(u64 q0, u64 b) const;

  bool usable_ = false;
  const ChainGrid& c_;
  std::vector<u64> slot_start_;
  Array<SlotCta> slot_cta_;
  Array<std::uint32_t> pos_;      // each CTA's place among its slot's
  // The start of the CTA at each place of slot_cta_: in 4 bytes where every
  // step fits (wide_: in 8), and per slot its last CTA's last step.
  Array<std::uint32_t> place_s32_;
  Array<i64> place_s_;
  bool wide_ = false;
  std::vector<i64> slot_last_;
  Cursor cursor_[2];                // P = i - 1, and the others
  const Cursor* at_ = nullptr;      // the last call's
  std::vector<std::uint8_t> dirty_;
  std::vector<u64> touched_;  // [0, ntouched_): the slots touched, each once
  u64 ntouched_ = 0;
  std::vector<i64> short_gap_;                 // peak_hi: per slot (-1: none), and the slots set
  std::vector<u64> short_slots_;
  std::vector<u64> events_;                  // peak_hi: slope changes past the first read, as sort keys
  u64 zhi_ = 0, zlo_ = 0, qmax_ = 0, omax_ = 0;
  struct Densest {  // refine_hi_ahead's: the windows (ids started, finish order ended), width, counts
    u64 q_from = 1, q_to = 0, o_from = 1, o_to = 0;
    i64 width = -1;
    u64 q = 0, o = 0;
  } ahead_;
  struct Quick {
    std::array<u64, 4> at{};  // ids started before X and by Thi, CTAs (finish order) ended before X and by Thi
    BackOff back_off;
  };
  std::vector<u64> run_lo_, run_hi_;  // of_run: each slot's window at the last call (places of slot_cta_)
  Quick quick_[2];  // P = i - 1, and the others
  bool quick(Quick& k, u64 i, u64 P, u64 first, Bounds& b);
  bool rising_ = false;  // head-major, a dense batch whose e rises along a sequence
};

}  // namespace hbmscope::l2::chains
