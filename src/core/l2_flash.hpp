#pragma once
// The FlashAttention-2 forward grid of the L2 simulation (docs/model.md, "The
// FlashAttention schedule"): its CTAs in launch order, what each reads, and
// the tile sizes; shared by the enumeration (l2_flash_enum.cpp) and the runs
// (l2_flash_runs.cpp). Internal to src/core.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "hbmscope/l2_sim.hpp"
#include "hbmscope/mask.hpp"
#include "hbmscope/shape.hpp"
#include "hbmscope/tile_bytes.hpp"
#include "big_array.hpp"
#include "l2_tally.hpp"

namespace hbmscope::l2 {

struct FlashCta {
  std::uint64_t seq = 0;      // batch element (a sequence of a ragged batch)
  std::uint64_t head = 0;     // query head
  std::uint64_t q_block = 0;  // query block of its sequence
  std::uint64_t rows = 0;     // real rows of the query block
  std::uint64_t first = 0;    // visited key blocks [first, end); first == end: none
  std::uint64_t end = 0;
  std::uint64_t head_key = 0;  // (sequence, head), dense
  std::uint64_t pair = 0;      // (sequence, kv head), dense: names its K/V objects
  std::uint64_t blocks() const { return end - first; }
  std::uint64_t steps() const { return end > first ? end - first : 1; }
};

// One sequence's geometry (every sequence of a dense batch is the same).
struct FlashSeq {
  Shape shape;                 // dense, batch 1: the mask functions' view of it
  std::uint64_t q_blocks = 0;  // ceil(q / Br)
  std::uint64_t k_blocks = 0;  // ceil(kv / Bc)
  std::uint64_t first_cta = 0; // launch index of its first CTA
  std::uint64_t first_pair = 0, first_head = 0;
};

class FlashGrid {
 public:
  FlashGrid(const Shape& s, Rasterization order);

  std::uint64_t ctas() const { return ctas_; }
  std::uint64_t pairs() const { return pairs_; }
  std::uint64_t heads() const { return heads_; }
  // The CTA launched id-th (0-based).
  FlashCta cta(std::uint64_t id) const;
  const FlashSeq& sequence(std::uint64_t b) const { return seqs_.size() == 1 ? seqs_[0] : seqs_[b]; }
  std::uint64_t sequences() const { return sequences_; }
  bool dense() const { return seqs_.size() == 1; }
  std::uint64_t max_key_blocks() const { return max_kb_; }

  // Bytes of K_j and V_j (one object) of sequence b, of a Q and an O tile of
  // `rows` rows.
  std::uint64_t kv_bytes(std::uint64_t b, std::uint64_t j) const;
  std::uint64_t q_bytes(std::uint64_t rows) const { return ob_.q_row * rows; }
  std::uint64_t o_bytes(std::uint64_t rows) const { return ob_.o_row * rows; }
  const Shape& shape() const { return s_; }
  Rasterization order() const { return order_; }
  std::uint64_t group() const { return group_; }

 private:
  const Shape& s_;
  Rasterization order_;
  OperandBytes ob_;
  std::uint64_t group_ = 1, ctas_ = 0, pairs_ = 0, heads_ = 0, sequences_ = 0, max_kb_ = 0;
  std::vector<FlashSeq> seqs_;  // one (dense) or one per sequence
};

struct FlashStats {
  double heads = 0, kv_heads = 0;
  std::uint64_t waves = 0, steps = 0;
  std::uint64_t repeated_heads = 0;  // the backward by rows: heads whose re-reads were an earlier head's
  std::uint64_t periodic_rows = 0;   // the masked backward: rows whose first reads came from the period
  std::uint64_t fan_reads = 0;       // the backward by rows: open reads evaluated as fans
  std::uint64_t stair_reads = 0;     // ... as staircases
};

// The enumeration of the forward pass into a tally (l2_flash_enum.cpp).
FlashStats enumerate_flash(const Shape& s, const L2SimConfig& c, Tally& t);
// The enumeration by units (l2_flash_units.cpp): in a dense batch, `per`
// CTAs one after another whose reads' predecessors lie in a known span: a kv
// pair's G heads (query-block-major order) or a sequence (head-major), whose
// K/V no other CTA reads; or finer: with GQA in query-block-major order a
// head, from its pair's previous head's first step, and in head-major order
// a query block, from block i - K's. The schedule; per unit its steps
// [first, last], the CTAs [lo, hi) that may run then, and the unit whose
// tally it takes (itself where it is enumerated); about how many accesses
// those enumerations make; the CTAs of a kv pair's (head-major: a
// sequence's) run.
struct FlashUnits {
  std::uint64_t per = 0, pair_ctas = 0, steps = 0, enumerated = 0;
  Array<std::uint64_t> start, length;  // per CTA
  std::vector<std::uint64_t> lo, hi, source;
  std::vector<std::int64_t> first, last;
  std::uint64_t units() const { return source.size(); }
  // Units of a query block (head-major order): their spans are compared
  // block by block, by what the blocks' CTAs read as well (per query block
  // of a sequence: its first and end key blocks and rows) and by their
  // starts' class (pattern: per query block of the grid, the first block
  // whose CTAs start alike).
  bool by_blocks = false;
  std::uint64_t heads = 0, group = 1, q_blocks = 0, k_blocks = 0;
  std::vector<std::uint64_t> q_first, q_end, q_rows, pattern;
};
// None where the batch is ragged, or holds one unit (or, asked for finer
// units, where they do not apply). Tests ask for either kind: whole (a kv
// pair, head-major a sequence) or finer (with GQA a head, head-major a
// query block).
enum class UnitsOf { cheaper, whole, finer };
inline constexpr std::uint64_t max_unit_ctas = std::uint64_t{1} << 25, max_units = std::uint64_t{1} << 21;
std::optional<FlashUnits> plan_flash_units(const FlashGrid& grid, std::uint64_t slots, UnitsOf of = UnitsOf::cheaper);
FlashStats units_flash(const Shape& s, const L2SimConfig& c, Tally& t, const FlashUnits& plan);
// Steps, waves, heads and kv heads in flight of a dense batch's schedule (per
// CTA its start and length), as the enumeration counts them.
FlashStats dense_schedule_stats(const FlashGrid& grid, const std::uint64_t* start, const std::uint64_t* length,
                                std::uint64_t steps, std::uint64_t slots);
// (tests: planned here; the enumeration where there is no plan)
FlashStats units_flash(const Shape& s, const L2SimConfig& c, Tally& t);
// The forward by heads (l2_flash_heads.cpp): a dense batch in
// query-block-major order with GQA (windows and chunks, mostly) where every
// re-read inside a head is a hit at the smallest capacity by its gap alone
// and a head's first reads follow its pair's previous head's last ones across
// a long gap, those in closed form. Nothing, with t untouched, where its
// conditions do not hold.
std::optional<FlashStats> heads_flash(const Shape& s, const L2SimConfig& c, Tally& t);
// Its cost in the budget's units where its plan holds at c.l2_bytes (the
// schedule, and the bound inside a head), else none; heads_flash may still
// decline on conditions only its pass over the spans checks.
std::optional<std::uint64_t> heads_flash_work(const Shape& s, const L2SimConfig& c);
// (tests) Its bound on a re-read's distance inside a head, where its grid
// and schedule are ones it takes: at that L2 size every such re-read must hit.
std::optional<std::uint64_t> heads_flash_bound(const Shape& s, const L2SimConfig& c);
void trace_flash(const Shape& s, const L2SimConfig& c, const std::function<void(const L2Access&)>& f);
// The runs of the forward pass (l2_flash_runs.cpp): identical results.
FlashStats runs_flash(const Shape& s, const L2SimConfig& c, Tally& t);
// Whether every CTA of the forward grid takes the same steps (no mask, one
// sequence length), so that waves of slots run in lockstep: the waves' closed
// form (l2_flash_waves.cpp) applies.
bool flash_in_waves(const Shape& s);
FlashStats waves_flash(const Shape& s, const L2SimConfig& c, Tally& t);
std::uint64_t waves_flash_work(const FlashGrid& grid, std::uint64_t slots);
// Whether every CTA reads key blocks [0, e) with e not decreasing within a
// head (query-block-major order) or along a kv pair's CTAs (head-major
// order): causal masks; ragged batches without a mask. Then the chains
// (l2_flash_chains.cpp) apply.
bool flash_in_chains(const FlashGrid& grid);
FlashStats chains_flash(const Shape& s, const L2SimConfig& c, Tally& t);
// The most CTAs the chains take: their schedule keeps ids in 23 bits.
inline constexpr unsigned chain_id_bits = 23;
inline constexpr std::uint64_t max_chain_ctas = std::uint64_t{1} << chain_id_bits;
// Mean over steps of the distinct keys among resident CTAs (heads per wave),
// from each of the n CTAs' key, first and last step: each key's steps are the
// union of its CTAs' steps [first, last], CTAs of one key starting in launch
// order. (KeySteps: one key's sum, CTA by CTA; count_in_flight: heads and kv
// heads in one pass.)
class KeySteps {
 public:
  explicit KeySteps(std::uint64_t keys) : until_(keys, 0) {}
  void add(std::uint64_t key, std::uint64_t first, std::uint64_t last) {
    std::uint64_t& u = until_[key];  // one past the last step covered
    if (last + 1 > u) {
      sum_ += last + 1 - std::max(first, u);
      u = last + 1;
    }
  }
  double mean(std::uint64_t steps) const { return static_cast<double>(sum_) / static_cast<double>(steps); }

 private:
  std::vector<std::uint64_t> until_;
  std::uint64_t sum_ = 0;
};
// A CTA as the heads in flight count it: its head key, its pair, its first
// and last step.
struct InFlight {
  std::uint64_t head, pair, first, last;
};
// st.heads and st.kv_heads over st.steps from of(0), ..., of(n - 1), asked in
// that order (a caller may walk its grid as it is asked).
template <class Of>
void count_in_flight(FlashStats& st, std::uint64_t n, std::uint64_t heads, std::uint64_t pairs, Of of) {
  KeySteps h(heads), p(pairs);
  for (std::uint64_t i = 0; i < n; ++i) {
    const InFlight x = of(i);
    h.add(x.head, x.first, x.last);
    p.add(x.pair, x.first, x.last);
  }
  st.heads = h.mean(st.steps);
  st.kv_heads = p.mean(st.steps);
}
// The segment engine alone on the forward pass (tests hold it against the
// enumeration on shapes where runs_flash would enumerate).
FlashStats segments_flash(const Shape& s, const L2SimConfig& c, Tally& t);
// Work of the runs on the forward pass (docs/model.md, "Cost").
std::uint64_t flash_runs_work(const Shape& s, const L2SimConfig& c);
// (query block, key block) tiles one head of a dense one-sequence shape visits.
std::uint64_t visited_tiles_of(const Shape& one);
// Accesses the enumeration of the forward pass makes.
std::uint64_t flash_enum_accesses(const Shape& s);

}  // namespace hbmscope::l2
