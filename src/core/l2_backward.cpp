// The backward pass through the simulated L2 (docs/model.md, "The backward
// pass in the L2 simulation"): its grid, and its trace enumerated access by
// access. Its closed form in waves is in l2_backward_waves.cpp.
#include "l2_backward.hpp"

#include <algorithm>
#include <limits>
#include <string>

#include "hbmscope/checked.hpp"
#include "hbmscope/error.hpp"
#include "l2_list.hpp"
#include "l2_stack.hpp"

namespace hbmscope::l2 {

BackwardGrid::BackwardGrid(const Shape& s, Rasterization order)
    : s_(s), order_(order), fwd_(s, order), ob_(operand_bytes(s)) {
  constexpr std::string_view what = "L2 simulation";
  if (fwd_.dense()) {
    ctas_ = checked_product(what, s.batch, s.heads, fwd_.sequence(0).k_blocks);
    // Every sequence and head alike: each key block's query blocks once
    // (two searches each), where the grid has many more CTAs than key blocks.
    const std::uint64_t k_blocks = fwd_.sequence(0).k_blocks;
    if (ctas_ >= 4 * k_blocks && k_blocks <= (std::uint64_t{1} << 20)) {
      std::vector<KeyRange> seeing(k_blocks);
      for (std::uint64_t j = 0; j < k_blocks; ++j) seeing[j] = query_blocks_seeing(0, j);
      seeing_ = std::move(seeing);
    }
    return;
  }
  for (std::uint64_t b = 0; b < s.batch; ++b) {
    first_cta_.push_back(ctas_);
    ctas_ = checked_add(ctas_, checked_mul(s.heads, fwd_.sequence(b).k_blocks, what), what);
  }
}

KeyRange BackwardGrid::query_blocks_seeing(std::uint64_t b, std::uint64_t j) const {
  if (!seeing_.empty()) return seeing_[j];
  const FlashSeq& f = fwd_.sequence(b);
  // The visited key blocks [begin(i), end(i)) of query block i are
  // non-decreasing in i at both ends, so the blocks that see j are a range.
  std::uint64_t lo = 0, hi = f.q_blocks;  // first i with end(i) > j
  while (lo < hi) {
    const std::uint64_t mid = lo + (hi - lo) / 2;
    if (visible_key_blocks(f.shape, mid).end > j) hi = mid;
    else lo = mid + 1;
  }
  std::uint64_t lo2 = lo, hi2 = f.q_blocks;  // first i >= lo with begin(i) > j
  while (lo2 < hi2) {
    const std::uint64_t mid = lo2 + (hi2 - lo2) / 2;
    if (visible_key_blocks(f.shape, mid).begin > j) hi2 = mid;
    else lo2 = mid + 1;
  }
  return {lo, std::max(lo, lo2)};
}

namespace {
std::uint32_t narrow(std::uint64_t v) {
  if (v > std::numeric_limits<std::uint32_t>::max())
    throw Error("L2 simulation: the backward grid takes fewer than 2^32 sequences, heads and blocks");
  return static_cast<std::uint32_t>(v);
}
}  // namespace

BackwardCta BackwardGrid::cta(std::uint64_t id) const {
  std::uint64_t b = 0, local = id;
  if (first_cta_.empty()) {
    const std::uint64_t per = s_.heads * fwd_.sequence(0).k_blocks;
    b = id / per;
    local = id % per;
  } else {
    b = static_cast<std::uint64_t>(std::upper_bound(first_cta_.begin(), first_cta_.end(), id) - first_cta_.begin()) - 1;
    local = id - first_cta_[b];
  }
  const FlashSeq& f = fwd_.sequence(b);
  std::uint64_t head = 0, k_block = 0;
  if (order_ == Rasterization::query_block_major) {
    k_block = local % f.k_blocks;
    head = local / f.k_blocks;
  } else {
    head = local % s_.heads;
    k_block = local / s_.heads;
  }
  fits(b);
  return make(b, head, k_block, query_blocks_seeing(b, k_block));
}

// Sequence b's counts in 32 bits: it, its blocks, its heads' and kv heads' keys.
void BackwardGrid::fits(std::uint64_t b) const {
  const FlashSeq& f = fwd_.sequence(b);
  narrow(b);
  narrow(f.k_blocks);
  narrow(f.q_blocks);
  narrow(b * s_.heads + s_.heads - 1);
  narrow(b * s_.kv_heads + s_.kv_heads - 1);
}

BackwardCta BackwardGrid::make(std::uint64_t b, std::uint64_t head, std::uint64_t k_block, KeyRange q) const {
  BackwardCta c{};
  c.seq = static_cast<std::uint32_t>(b);
  c.head = static_cast<std::uint32_t>(head);
  c.k_block = static_cast<std::uint32_t>(k_block);
  c.cols = std::min(s_.block_cols, fwd_.sequence(b).shape.seq_kv - k_block * s_.block_cols);
  c.first = static_cast<std::uint32_t>(q.begin);
  c.end = static_cast<std::uint32_t>(q.end);
  c.head_key = static_cast<std::uint32_t>(b * s_.heads + head);
  return c;
}

void BackwardGrid::all(BackwardCta* out) const {
  // (make's fields by key block and by head, each made once: millions of CTAs)
  std::vector<BackwardCta> by_block, by_head(s_.heads);
  for (std::uint64_t b = 0; b < s_.batch; ++b) {
    const FlashSeq& f = fwd_.sequence(b);
    fits(b);
    if (b == 0 || !fwd_.dense()) {
      by_block.resize(f.k_blocks);
      for (std::uint64_t j = 0; j < f.k_blocks; ++j) by_block[j] = make(b, 0, j, query_blocks_seeing(b, j));
    }
    for (std::uint64_t h = 0; h < s_.heads; ++h) by_head[h] = make(b, h, 0, {0, 0});
    auto cta = [&](std::uint64_t h, std::uint64_t j) {
      BackwardCta c = by_block[j];
      c.seq = by_head[h].seq;
      c.head = by_head[h].head;
      c.head_key = by_head[h].head_key;
      return c;
    };
    if (order_ == Rasterization::query_block_major) {
      for (std::uint64_t h = 0; h < s_.heads; ++h)
        for (std::uint64_t j = 0; j < f.k_blocks; ++j) *out++ = cta(h, j);
    } else {
      for (std::uint64_t j = 0; j < f.k_blocks; ++j)
        for (std::uint64_t h = 0; h < s_.heads; ++h) *out++ = cta(h, j);
    }
  }
}

namespace {

// Object ids of the enumeration: per (sequence, head, query block) its Q with
// LSE, dO, D and dQ accumulator; per (sequence, kv head, key block) its K, V;
// per (sequence, head, key block) its dK, dV when GQA sums them afterwards.
struct BackwardIds {
  std::vector<std::uint64_t> row_base, key_base, pair_key_base;  // per sequence
  std::uint64_t rows = 0, keys = 0, pair_keys = 0;
  std::uint64_t objects() const { return 4 * rows + pair_keys + keys; }
  std::uint32_t ql(std::uint64_t r) const { return static_cast<std::uint32_t>(r); }
  std::uint32_t d_o(std::uint64_t r) const { return static_cast<std::uint32_t>(rows + r); }
  std::uint32_t dd(std::uint64_t r) const { return static_cast<std::uint32_t>(2 * rows + r); }
  std::uint32_t acc(std::uint64_t r) const { return static_cast<std::uint32_t>(3 * rows + r); }
  std::uint32_t kv(std::uint64_t k) const { return static_cast<std::uint32_t>(4 * rows + k); }
  std::uint32_t dkv(std::uint64_t k) const { return static_cast<std::uint32_t>(4 * rows + pair_keys + k); }
};

template <class Sink>
FlashStats run_backward(const Shape& s, const L2SimConfig& c, Sink& l2) {
  constexpr std::string_view what = "L2 simulation";
  const BackwardGrid g(s, c.order);
  const FlashGrid& fg = g.forward();
  const std::uint64_t H = s.heads, G = fg.group();
  const bool gqa = H != s.kv_heads;
  const bool qo = c.q_o_allocate;
  BackwardIds ids;
  for (std::uint64_t b = 0; b < s.batch; ++b) {
    const FlashSeq& f = fg.sequence(b);
    ids.row_base.push_back(ids.rows);
    ids.pair_key_base.push_back(ids.pair_keys);
    ids.key_base.push_back(ids.keys);
    ids.rows = checked_add(ids.rows, checked_mul(H, f.q_blocks, what), what);
    ids.pair_keys = checked_add(ids.pair_keys, checked_mul(s.kv_heads, f.k_blocks, what), what);
    if (gqa) ids.keys = checked_add(ids.keys, checked_mul(H, f.k_blocks, what), what);
  }
  if (ids.objects() >= (std::uint64_t{1} << 28))
    throw Error("shape " + describe(s) + ": the backward L2 enumeration would track " + std::to_string(ids.objects()) +
                " objects (at most " + std::to_string(std::uint64_t{1} << 28) + "); " +
                (backward_in_waves(s) || segments_backward_work(s, c, c.l2_bytes) <= max_l2_sim_work ? "use --l2-method runs"
                                                                                : "use bigger --block-rows/--block-cols"));
  l2.reserve_objects(static_cast<std::size_t>(ids.objects()));
  auto rows_of = [&](std::uint64_t b, std::uint64_t i) {
    return std::min(s.block_rows, fg.sequence(b).shape.seq_q - i * s.block_rows);
  };
  auto row_id = [&](std::uint64_t b, std::uint64_t h, std::uint64_t i) {
    return ids.row_base[b] + h * fg.sequence(b).q_blocks + i;
  };

  // 1. Preprocessing: D = rowsum(dO o O) and the zeroed fp32 dQ accumulator.
  for (std::uint64_t b = 0; b < s.batch; ++b)
    for (std::uint64_t h = 0; h < H; ++h)
      for (std::uint64_t i = 0; i < fg.sequence(b).q_blocks; ++i) {
        const std::uint64_t r = row_id(b, h, i), rows = rows_of(b, i);
        l2.read(ids.d_o(r), g.do_row() * rows);
        l2.read(none, g.o_row() * rows, qo);
        l2.write_dirty(ids.dd(r), 4 * rows);
        l2.write_dirty(ids.acc(r), g.acc_row() * rows);
      }

  // 2. Main loop: CTAs in launch order onto the slots, one query block a step.
  const std::uint64_t ctas = g.ctas();
  const std::uint64_t slots = std::uint64_t{c.sm_count} * c.ctas_per_sm;
  struct Cta {
    BackwardCta t;
    std::uint64_t next_i;
    bool started;
  };
  Occupancy heads(fg.heads()), kv_heads(fg.pairs());
  std::uint64_t launched = 0;
  auto launch = [&]() {
    Cta t{g.cta(launched++), 0, false};
    t.next_i = t.t.first;
    heads.enter(static_cast<std::size_t>(t.t.head_key));
    kv_heads.enter(static_cast<std::size_t>(g.pair(t.t)));
    return t;
  };
  FlashStats st;
  st.waves = ceil_div(ctas, slots);
  std::vector<Cta> resident, next;
  while (launched < ctas && resident.size() < slots) resident.push_back(launch());
  double heads_sum = 0, kv_sum = 0;
  while (!resident.empty()) {
    ++st.steps;
    heads_sum += static_cast<double>(heads.distinct);
    kv_sum += static_cast<double>(kv_heads.distinct);
    next.clear();
    for (Cta& t : resident) {
      const std::uint64_t b = t.t.seq, j = t.t.k_block;
      if (!t.started) {
        l2.read(ids.kv(ids.pair_key_base[b] + t.t.head / G * fg.sequence(b).k_blocks + j),
                g.kv_col() * t.t.cols);
        t.started = true;
      }
      if (t.next_i < t.t.end) {
        const std::uint64_t i = t.next_i++;
        const std::uint64_t r = row_id(b, t.t.head, i), rows = rows_of(b, i);
        l2.read(ids.ql(r), g.ql_row() * rows);
        l2.read(ids.d_o(r), g.do_row() * rows);
        l2.read(ids.dd(r), 4 * rows);
        l2.read(ids.acc(r), g.acc_row() * rows);  // the atomic adds: read, then write
        l2.write_dirty(ids.acc(r), g.acc_row() * rows);
      }
      if (t.next_i < t.t.end) {
        next.push_back(t);
        continue;
      }
      if (gqa) l2.write_dirty(ids.dkv(ids.key_base[b] + t.t.head * fg.sequence(b).k_blocks + j), g.kv_col() * t.t.cols);
      else l2.write(none, g.kv_col() * t.t.cols, qo);
      heads.leave(static_cast<std::size_t>(t.t.head_key));
      kv_heads.leave(static_cast<std::size_t>(g.pair(t.t)));
    }
    while (launched < ctas && next.size() < slots) next.push_back(launch());
    resident.swap(next);
  }
  st.heads = heads_sum / static_cast<double>(st.steps);
  st.kv_heads = kv_sum / static_cast<double>(st.steps);
  for (std::uint64_t r = 0; r < ids.rows; ++r) l2.forget(ids.dd(r));  // D is dead after the main loop

  // 3. dQ conversion: the fp32 accumulator read, dQ written.
  for (std::uint64_t b = 0; b < s.batch; ++b)
    for (std::uint64_t h = 0; h < H; ++h)
      for (std::uint64_t i = 0; i < fg.sequence(b).q_blocks; ++i) {
        const std::uint64_t r = row_id(b, h, i), rows = rows_of(b, i);
        l2.read(ids.acc(r), g.acc_row() * rows);
        l2.forget(ids.acc(r));
        l2.write(none, g.dq_row() * rows, qo);
      }

  // 4. GQA: each kv head's dK, dV summed over the G query heads of its group.
  if (gqa)
    for (std::uint64_t b = 0; b < s.batch; ++b)
      for (std::uint64_t kvh = 0; kvh < s.kv_heads; ++kvh)
        for (std::uint64_t j = 0; j < fg.sequence(b).k_blocks; ++j) {
          const std::uint64_t cols = std::min(s.block_cols, fg.sequence(b).shape.seq_kv - j * s.block_cols);
          for (std::uint64_t h = kvh * G; h < (kvh + 1) * G; ++h) {
            const std::uint32_t id = ids.dkv(ids.key_base[b] + h * fg.sequence(b).k_blocks + j);
            l2.read(id, g.kv_col() * cols);
            l2.forget(id);
          }
          l2.write(none, g.kv_col() * cols, qo);
        }
  return st;
}

}  // namespace

FlashStats enumerate_backward(const Shape& s, const L2SimConfig& c, Tally& t) {
  return with_lru(t, [&](auto& l2) { return run_backward(s, c, l2); });
}

void trace_backward(const Shape& s, const L2SimConfig& c, const std::function<void(const L2Access&)>& f) {
  TraceSink sink{f};
  run_backward(s, c, sink);
}

namespace {
// Objects the enumeration tracks (four a row, K/V a kv head's key block, dK,
// dV a head's with GQA), as run_backward counts them; saturated.
std::uint64_t backward_objects(const Shape& s) {
  auto per = [&](const Shape& one, std::uint64_t count) {
    using F = long double;
    const F nqb = static_cast<F>(ceil_div(one.seq_q, one.block_rows)), nkb = static_cast<F>(ceil_div(one.seq_kv, one.block_cols));
    const F h = static_cast<F>(one.heads), kv = static_cast<F>(one.kv_heads);
    return (4 * h * nqb + kv * nkb + (one.heads != one.kv_heads ? h * nkb : 0)) * static_cast<F>(count);
  };
  long double n = 0;
  if (s.seq_lens.empty()) n = per(s, s.batch);
  else
    for (const SeqGroup& g : s.seq_lens.groups()) n += per(sequence_shape(s, g), g.count);
  return n >= 1.8e19L ? ~std::uint64_t{0} : static_cast<std::uint64_t>(n);
}

// The enumeration's LRU misses the caches once its objects outgrow them:
// about 30 ns an access at 2^21 objects and 55 ns at 2^24, against 10 to 14
// below 2^19 (1M x 64/8, window 128, d 64, batch 1 to 8;
// docs/l2-backward-progress-2026-12-05-06.md, seventh session), so an access
// counts up to five times the list's units.
std::uint64_t backward_enum_work(const Shape& s, std::size_t capacities) {
  const std::uint64_t objects = backward_objects(s);
  const int bits = objects == 0 ? 0 : 63 - __builtin_clzll(objects);
  const std::uint64_t scale = 1 + static_cast<std::uint64_t>(std::clamp(bits - 19, 0, 4));
  std::uint64_t w = 0;
  return __builtin_mul_overflow(backward_enum_accesses(s), enumeration_units(capacities) * scale, &w) ? ~std::uint64_t{0}
                                                                                                      : w;
}
}  // namespace

FlashStats flash_backward(const Shape& s, const L2SimConfig& c, Tally& t) {
  if (c.method == L2SimMethod::runs && backward_in_waves(s)) return waves_backward(s, c, t);
  // Not in lockstep: the segment engine where it costs less than the enumeration.
  if (c.method == L2SimMethod::runs &&
      segments_backward_work(s, c, t.capacities().empty() ? 0 : t.capacities().front()) <
          backward_enum_work(s, t.capacities().size()))
    return segments_backward(s, c, t);
  return enumerate_backward(s, c, t);
}

std::uint64_t backward_work(const Shape& s, const L2SimConfig& c) {
  if (c.method == L2SimMethod::runs && backward_in_waves(s)) return waves_backward_work(s, c);
  if (c.method == L2SimMethod::runs) return std::min(segments_backward_work(s, c, c.l2_bytes), backward_enum_work(s, 1));
  return backward_enum_work(s, 1);
}

std::uint64_t backward_enum_accesses(const Shape& s) {
  constexpr std::string_view what = "L2 simulation";
  // Per sequence and head: 4 preprocessing and 2 conversion accesses per query
  // block, a K/V read and a dK/dV write per key block, 5 per visited tile; with
  // GQA, per kv head and key block G reads and a write.
  auto per = [&](const Shape& one, std::uint64_t count) {
    const std::uint64_t nqb = ceil_div(one.seq_q, one.block_rows), nkb = ceil_div(one.seq_kv, one.block_cols);
    std::uint64_t head = checked_add(checked_mul(6, nqb, what), checked_mul(2, nkb, what), what);
    head = checked_add(head, checked_mul(5, visited_tiles_of(one), what), what);
    std::uint64_t n = checked_product(what, count, one.heads, head);
    if (one.heads != one.kv_heads)
      n = checked_add(n, checked_product(what, count, one.kv_heads, nkb, group_size(one) + 1), what);
    return n;
  };
  if (s.seq_lens.empty()) return per(s, s.batch);
  std::uint64_t total = 0;
  for (const SeqGroup& g : s.seq_lens.groups()) total = checked_add(total, per(sequence_shape(s, g), g.count), what);
  return total;
}

}  // namespace hbmscope::l2
