// The enumeration of the forward pass: every tile access of the schedule, in
// order, through the stack-distance LRU (docs/model.md, "The L2 simulation").
#include <algorithm>
#include <string>

#include "hbmscope/checked.hpp"
#include "hbmscope/error.hpp"
#include "l2_flash.hpp"
#include "l2_list.hpp"
#include "l2_stack.hpp"

namespace hbmscope::l2 {

namespace {

// CTAs in launch order onto sm_count * ctas_per_sm slots, lockstep one key
// block per step, feeding the L2.
template <class Sink>
FlashStats run_flash(const Shape& s, const L2SimConfig& c, Sink& l2) {
  const FlashGrid grid(s, c.order);
  const std::uint64_t ctas = grid.ctas();
  const std::uint64_t nkb = grid.max_key_blocks();
  const std::uint64_t group = grid.group();
  const std::uint64_t slots = std::uint64_t{c.sm_count} * c.ctas_per_sm;

  struct Cta {
    FlashCta t;
    std::uint64_t next_j;
    std::uint32_t kv_slot;  // pool slot holding this kv head's K/V object ids
    std::uint64_t full;     // bytes of a full key block's K/V, and the last block's
    std::uint64_t last_j, last_bytes;
  };
  std::vector<std::uint64_t> remaining(grid.pairs());  // CTAs left per kv head
  for (std::uint64_t p = 0; p < grid.pairs(); ++p) remaining[p] = group * grid.sequence(p / s.kv_heads).q_blocks;
  std::vector<std::uint32_t> slot_of(grid.pairs(), none);
  std::vector<std::uint32_t> free_slots;
  std::uint32_t pool = 0;
  Occupancy heads(grid.heads()), kv_heads(grid.pairs());

  std::uint64_t launched = 0;
  auto launch = [&]() {
    Cta t{grid.cta(launched++), 0, 0, 0, 0, 0};
    t.next_j = t.t.first;
    t.full = grid.kv_bytes(t.t.seq, 0);
    t.last_j = grid.sequence(t.t.seq).k_blocks - 1;
    t.last_bytes = grid.kv_bytes(t.t.seq, t.last_j);
    const std::size_t pair = static_cast<std::size_t>(t.t.pair);
    if (slot_of[pair] == none) {
      if (free_slots.empty()) {
        if ((std::uint64_t{pool} + 1) * nkb >= none)
          throw Error("shape " + describe(s) + ": too many K/V tiles in flight to simulate");
        slot_of[pair] = pool++;
        l2.reserve_objects(static_cast<std::size_t>(pool) * nkb);
      } else {
        slot_of[pair] = free_slots.back();
        free_slots.pop_back();
      }
    }
    t.kv_slot = slot_of[pair];
    heads.enter(static_cast<std::size_t>(t.t.head_key));
    kv_heads.enter(pair);
    return t;
  };

  FlashStats st;
  st.waves = ceil_div(ctas, slots);
  std::vector<Cta> resident;
  resident.reserve(static_cast<std::size_t>(std::min(slots, ctas)));
  while (launched < ctas && resident.size() < slots) resident.push_back(launch());
  double heads_sum = 0, kv_sum = 0;
  const bool qo = c.q_o_allocate;
  while (!resident.empty()) {
    ++st.steps;
    heads_sum += static_cast<double>(heads.distinct);
    kv_sum += static_cast<double>(kv_heads.distinct);
    std::size_t kept = 0;  // the resident CTAs that go on, in launch order
    for (std::size_t r = 0; r < resident.size(); ++r) {
      Cta& t = resident[r];
      if (t.next_j == t.t.first) l2.read(none, grid.q_bytes(t.t.rows), qo);
      if (t.next_j < t.t.end) {
        const std::uint64_t j = t.next_j++;
        l2.read(static_cast<std::uint32_t>(t.kv_slot * nkb + j), j == t.last_j ? t.last_bytes : t.full);
      }
      if (t.next_j < t.t.end) {
        if (kept != r) resident[kept] = t;
        ++kept;
        continue;
      }
      l2.write(none, grid.o_bytes(t.t.rows), qo);
      heads.leave(static_cast<std::size_t>(t.t.head_key));
      kv_heads.leave(static_cast<std::size_t>(t.t.pair));
      if (--remaining[t.t.pair] == 0) {  // its K/V will not be read again
        for (std::uint64_t j = 0; j < nkb; ++j) l2.forget(static_cast<std::uint32_t>(t.kv_slot * nkb + j));
        free_slots.push_back(t.kv_slot);
        slot_of[t.t.pair] = none;
      }
    }
    // Freed slots take the next CTAs in launch order, from the next step on.
    resident.resize(kept);
    while (launched < ctas && resident.size() < slots) resident.push_back(launch());
  }
  st.heads = heads_sum / static_cast<double>(st.steps);
  st.kv_heads = kv_sum / static_cast<double>(st.steps);
  return st;
}

}  // namespace

FlashStats enumerate_flash(const Shape& s, const L2SimConfig& c, Tally& t) {
  return with_lru(t, [&](auto& l2) { return run_flash(s, c, l2); });
}

void trace_flash(const Shape& s, const L2SimConfig& c, const std::function<void(const L2Access&)>& f) {
  TraceSink sink{f};
  run_flash(s, c, sink);
}

std::uint64_t flash_enum_accesses(const Shape& s) {
  constexpr std::string_view what = "L2 simulation";
  // Per sequence: Q and O per CTA, one read per visited tile (closed forms:
  // a loop over query blocks would take minutes on a shape refused anyway).
  auto per = [&](const Shape& one, std::uint64_t count) {
    const std::uint64_t tiles = visited_tiles_of(one);
    return checked_product(what, count, one.heads,
                           checked_add(tiles, checked_mul(2, ceil_div(one.seq_q, one.block_rows), what), what));
  };
  if (s.seq_lens.empty()) return per(s, s.batch);
  std::uint64_t total = 0;
  for (const SeqGroup& g : s.seq_lens.groups()) total = checked_add(total, per(sequence_shape(s, g), g.count), what);
  return total;
}

}  // namespace hbmscope::l2
