#include "hbmscope/decode_walk.hpp"

#include <algorithm>
#include <string>

#include "hbmscope/checked.hpp"
#include "hbmscope/error.hpp"

namespace hbmscope {

namespace {

// Pages a CTA has read once it has read keys [begin, end): those the range touches.
std::uint64_t pages_touched(std::uint64_t begin, std::uint64_t end, std::uint64_t page) {
  return end <= begin ? 0 : (end - 1) / page - begin / page + 1;
}

}  // namespace

void decode_walk_frames(const Shape& s, DecodeVariant v, std::uint64_t splits, bool every_step,
                        const std::function<void(const DecodeWalkFrame&)>& on_frame) {
  validate(s);
  if (!s.decode) throw Error("walk --decode: not a decode shape");
  if (v == DecodeVariant::floor)
    throw Error("walk --decode: decode_floor is a bound, not a kernel; walk decode_split, decode_split_unpacked "
                "or decode_paged");
  const char* what = "decode walk";
  DecodeWalkFrame f;
  f.shape = s;
  f.variant = v;
  f.splits = splits;
  f.total = decode_bytes(s, v, splits);
  f.floor_total = decode_bytes(s, DecodeVariant::floor, 1).total;
  f.blocks_per_split = blocks_per_split(s, splits);
  f.steps = f.blocks_per_split + (splits > 1 ? 1 : 0);
  // Sequences: distinct lengths with their counts (a dense batch is one).
  std::vector<std::pair<std::uint64_t, std::uint64_t>> seqs;
  if (s.context_lengths.empty()) seqs.emplace_back(s.seq_kv, s.batch);
  else
    for (const SeqGroup& g : s.context_lengths.groups()) seqs.emplace_back(g.item.kv, g.count);
  const std::uint64_t work = checked_product(what, seqs.size(), splits, f.blocks_per_split);
  if (work > max_decode_walk_work)
    throw Error("walk --decode: " + std::to_string(work) + " (sequence, split, key block) steps to count (at most " +
                std::to_string(max_decode_walk_work) + "); use fewer sequences or splits, or bigger --block-cols");
  while (f.sequence < s.batch && context_length(s, f.sequence) != s.seq_kv) ++f.sequence;
  for (std::uint64_t j = 0; j < splits; ++j) f.ranges.push_back(split_key_range(s, splits, f.sequence, j));

  const std::uint64_t e = elem_bytes(s.dtype), d = s.head_dim, dv = value_head_dim(s);
  // One token's K and V (a latent KV's d values serve as both) in the cache's type.
  const std::uint64_t kv_token = checked_mul(s.latent_kv ? d : d + dv, elem_bytes(key_value_dtype(s)), what);
  const std::uint64_t readers = checked_mul(s.kv_heads, decode_kv_readers(s, v), what);  // CTAs per kv range
  const std::uint64_t q_split = checked_product(what, s.heads, s.seq_q, d, e);
  const std::uint64_t part_split = checked_product(what, s.heads, s.seq_q, checked_add(4 * dv, 4, what));
  const std::uint64_t o_seq = checked_product(what, s.heads, s.seq_q, dv, e);
  const std::uint64_t bc = s.block_cols;
  auto add = [&](std::uint64_t& x, std::uint64_t a, std::uint64_t b = 1, std::uint64_t c = 1) {
    x = checked_add(x, checked_product(what, a, b, c), what);
  };
  for (std::uint64_t k = 0; k < f.blocks_per_split; ++k) {
    for (const auto& [len, count] : seqs) {
      for (std::uint64_t j = 0; j < splits; ++j) {
        // The split's share, from the first key a new token sees (window, chunk).
        const std::uint64_t begin = std::max(j * f.blocks_per_split * bc, first_seen_key(s, s.seq_q, len));
        const std::uint64_t end = std::min(len, (j + 1) * f.blocks_per_split * bc);
        if (begin >= end) {  // no keys: the CTA writes its empty partial at once
          if (k == 0 && splits > 1) add(f.moved.partials, part_split, count);
          continue;
        }
        const std::uint64_t from = begin + k * bc;
        if (from >= end) continue;  // this split finished earlier
        const std::uint64_t to = std::min(end, from + bc);
        if (k == 0) add(f.moved.q, q_split, count);
        if (v == DecodeVariant::paged) {
          const std::uint64_t fresh = pages_touched(begin, to, s.page_size) - pages_touched(begin, from, s.page_size);
          add(f.moved.kv, checked_product(what, fresh, s.page_size, kv_token), readers, count);
          add(f.moved.block_table, checked_mul(fresh, 4, what), readers, count);
        } else {
          add(f.moved.kv, checked_product(what, to - from, kv_token), readers, count);
        }
        if (to == end) {  // the split's last key block: its partial (or, unsplit, O) goes out
          if (splits > 1) add(f.moved.partials, part_split, count);
          else add(f.moved.o, o_seq, count);
        }
      }
    }
    f.step = k + 1;
    f.moved.total = f.moved.kv + f.moved.q + f.moved.o + f.moved.partials + f.moved.block_table;
    const bool last = f.step == f.steps;
    f.final = last;
    f.phase = last ? DecodePhase::done : DecodePhase::split;
    if (every_step || last) on_frame(f);
  }
  if (splits > 1) {  // the combine kernel reads every partial and writes O
    add(f.moved.partials, part_split, s.batch, splits);
    add(f.moved.o, o_seq, s.batch);
    f.step = f.steps;
    f.phase = DecodePhase::done;
    f.final = true;
    f.moved.total = f.moved.kv + f.moved.q + f.moved.o + f.moved.partials + f.moved.block_table;
    on_frame(f);
  }
}

}  // namespace hbmscope
