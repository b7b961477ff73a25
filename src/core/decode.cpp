#include "hbmscope/decode.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "hbmscope/checked.hpp"
#include "hbmscope/error.hpp"

namespace hbmscope {

std::string_view decode_variant_id(DecodeVariant v) {
  switch (v) {
    case DecodeVariant::floor: return "decode_floor";
    case DecodeVariant::split: return "decode_split";
    case DecodeVariant::split_unpacked: return "decode_split_unpacked";
    case DecodeVariant::paged: return "decode_paged";
  }
  return "?";
}

std::optional<DecodeVariant> parse_decode_variant(std::string_view id) {
  for (DecodeVariant v : all_decode_variants)
    if (id == decode_variant_id(v)) return v;
  return std::nullopt;
}

bool gqa_packed(DecodeVariant v) { return v != DecodeVariant::split_unpacked; }

std::uint64_t context_length(const Shape& s, std::uint64_t b) {
  return s.context_lengths.empty() ? s.seq_kv : s.context_lengths.at(static_cast<std::size_t>(b)).kv;
}

std::uint64_t total_context(const Shape& s) {
  if (s.context_lengths.empty()) return checked_mul(s.batch, s.seq_kv, "decode context tokens");
  const auto sum = s.context_lengths.total_kv();
  if (!sum) throw_overflow("decode context tokens");
  return *sum;
}

bool ragged(const Shape& s) { return !s.context_lengths.empty() && !s.context_lengths.uniform(); }

std::uint64_t num_splits_heuristic(std::uint64_t ctas, std::uint64_t sm_slots, std::uint64_t n_blocks,
                                   std::uint64_t max_splits) {
  // FlashAttention's own precision (float, with a double 0.85), so that ties round the same way.
  if (static_cast<float>(ctas) >= 0.8f * static_cast<float>(sm_slots)) return 1;
  max_splits = std::min({max_splits, sm_slots, n_blocks});
  if (max_splits <= 1) return 1;
  auto eligible = [&](std::uint64_t n) {
    return n == 1 || ceil_div(n_blocks, n) != ceil_div(n_blocks, n - 1);
  };
  std::vector<float> efficiency(max_splits + 1, 0.0f);
  float best = 0.0f;
  for (std::uint64_t n = 1; n <= max_splits; ++n) {
    if (!eligible(n)) continue;
    const float waves = static_cast<float>(ctas * n) / static_cast<float>(sm_slots);
    efficiency[n] = waves / std::ceil(waves);
    best = std::max(best, efficiency[n]);
  }
  for (std::uint64_t n = 1; n <= max_splits; ++n)
    if (eligible(n) && static_cast<double>(efficiency[n]) >= 0.85 * static_cast<double>(best)) return n;
  return 1;
}

std::uint64_t decode_ctas_per_split(const Shape& s, DecodeVariant v) {
  if (gqa_packed(v))
    return checked_product("decode CTAs", s.batch, s.kv_heads,
                           ceil_div(checked_mul(s.seq_q, group_size(s), "decode CTAs"), decode_block_m));
  return checked_product("decode CTAs", s.batch, s.heads, ceil_div(s.seq_q, decode_block_m));
}

std::uint64_t decode_kv_readers(const Shape& s, DecodeVariant v) {
  if (v == DecodeVariant::floor) return 1;
  if (gqa_packed(v)) return ceil_div(checked_mul(s.seq_q, group_size(s), "decode CTAs"), decode_block_m);
  return checked_mul(group_size(s), ceil_div(s.seq_q, decode_block_m), "decode CTAs");
}

std::uint64_t decode_splits(const Shape& s, DecodeVariant v, std::uint64_t sm_count) {
  if (v == DecodeVariant::floor) return 1;
  if (s.splits != 0) return s.splits;
  if (sm_count == 0) throw Error("decode split heuristic: the SM count must be positive");
  // FA2 passes twice the SM count: two 128-thread CTAs fit on one SM.
  return num_splits_heuristic(decode_ctas_per_split(s, v), checked_mul(sm_count, 2, "SM slots"),
                              ceil_div(s.seq_kv, s.block_cols), max_heuristic_splits);
}

std::uint64_t blocks_per_split(const Shape& s, std::uint64_t splits) {
  if (splits == 0) throw Error("decode: the split count must be positive");
  return ceil_div(ceil_div(s.seq_kv, s.block_cols), splits);
}

namespace {
// Split j's share of a sequence of len keys, cut to the keys its new tokens
// see (a window's last keys, the current chunk): [max(j*beta*Bc, first seen), ...).
KeyRange split_key_range_of(const Shape& s, std::uint64_t splits, std::uint64_t len, std::uint64_t j) {
  const std::uint64_t keys = checked_mul(blocks_per_split(s, splits), s.block_cols, "decode split keys");
  // j * keys can pass 2^64 only for splits far beyond the sequence: then empty.
  std::uint64_t begin = 0;
  if (__builtin_mul_overflow(j, keys, &begin) || begin >= len) return {len, len};
  const std::uint64_t end = begin + std::min(keys, len - begin);
  begin = std::max(begin, first_seen_key(s, s.seq_q, len));
  return begin < end ? KeyRange{begin, end} : KeyRange{end, end};
}
}  // namespace

KeyRange split_key_range(const Shape& s, std::uint64_t splits, std::uint64_t b, std::uint64_t j) {
  return split_key_range_of(s, splits, context_length(s, b), j);
}

std::uint64_t context_pages(const Shape& s, std::uint64_t b) {
  return ceil_div(context_length(s, b), s.page_size);
}

namespace {

// Splits of a sequence of len keys that read at least one key: the shares
// from the one holding its first seen key to the one holding its last key.
std::uint64_t nonempty_splits(const Shape& s, std::uint64_t splits, std::uint64_t len) {
  const std::uint64_t keys = checked_mul(blocks_per_split(s, splits), s.block_cols, "decode split keys");
  return std::min(splits, ceil_div(len, keys)) - first_seen_key(s, s.seq_q, len) / keys;
}

// Calls f(L, count) for each context length: once with count = batch when the
// batch is not ragged (batch may be huge), else once per distinct length with
// the sequences that have it.
template <class F>
void for_each_length(const Shape& s, F&& f) {
  if (s.context_lengths.empty()) {
    f(s.seq_kv, s.batch);
    return;
  }
  for (const SeqGroup& g : s.context_lengths.groups()) f(g.item.kv, g.count);
}

}  // namespace

DecodeBytes decode_bytes(const Shape& s, DecodeVariant v, std::uint64_t splits) {
  const char* what = "decode bytes";
  // Q of head_dim d and O of DV in dtype; the cache in kv_dtype, d + DV values
  // per token and kv head, or d for a latent KV that serves as K and V (MLA).
  const std::uint64_t e = elem_bytes(s.dtype), d = s.head_dim, dv = value_head_dim(s);
  const std::uint64_t kv_row = checked_product(what, s.kv_heads, s.latent_kv ? d : d + dv,
                                               elem_bytes(key_value_dtype(s)));  // one token's cache
  const std::uint64_t q_all = checked_product(what, s.batch, s.heads, s.seq_q, d, e);
  DecodeBytes r;
  r.o = checked_product(what, s.batch, s.heads, s.seq_q, dv, e);
  if (v == DecodeVariant::floor) {
    std::uint64_t seen = 0;  // the keys some new token sees, each once
    for_each_length(s, [&](std::uint64_t len, std::uint64_t count) {
      seen = checked_add(seen, checked_mul(len - first_seen_key(s, s.seq_q, len), count, what), what);
    });
    r.kv = checked_mul(kv_row, seen, what);
    r.q = q_all;
  } else {
    if (splits == 0) throw Error("decode: the split count must be positive");
    // Q rows of one (sequence, split): all H heads' Nq rows, whichever CTAs hold them.
    const std::uint64_t q_split = checked_product(what, s.heads, s.seq_q, d, e);
    std::uint64_t kv_tokens = 0, q_reads = 0, table_entries = 0;
    for_each_length(s, [&](std::uint64_t len, std::uint64_t count) {
      q_reads = checked_add(q_reads, checked_mul(nonempty_splits(s, splits, len), count, what), what);
      if (v == DecodeVariant::paged) {
        // Each split CTA reads whole every page its key range touches, with the
        // page's block-table entry: the last page's slots past L_b too, and a
        // page that straddles two splits once by each.
        std::uint64_t pages = 0;
        for (std::uint64_t j = 0; j < splits; ++j) {
          const KeyRange k = split_key_range_of(s, splits, len, j);
          if (k.empty()) continue;
          pages = checked_add(pages, (k.end - 1) / s.page_size - k.begin / s.page_size + 1, what);
        }
        kv_tokens = checked_add(kv_tokens, checked_product(what, pages, s.page_size, count), what);
        table_entries = checked_add(table_entries, checked_mul(pages, count, what), what);
      } else {
        kv_tokens = checked_add(kv_tokens, checked_mul(len - first_seen_key(s, s.seq_q, len), count, what), what);
      }
    });
    // Each CTA of a split reads its keys: per kv head, the G query heads' CTAs
    // unpacked, the ceil(G*Nq/64) row blocks packed (one when G*Nq <= 64).
    const std::uint64_t readers = decode_kv_readers(s, v);
    r.kv = checked_product(what, kv_row, kv_tokens, readers);
    r.q = checked_mul(q_split, q_reads, what);
    // Every CTA that reads a page reads its block-table entry.
    r.block_table = checked_product(what, table_entries, s.kv_heads, readers, 4);
    if (splits > 1)  // fp32 partial O (DV) and LSE (1) per split and query row, written then read
      r.partials = checked_product(what, 2, splits, s.batch, s.heads, s.seq_q,
                                   checked_add(checked_mul(4, dv, what), 4, what));
  }
  r.total = checked_add(checked_add(checked_add(r.kv, r.q, what), checked_add(r.o, r.partials, what), what),
                        r.block_table, what);
  return r;
}

std::uint64_t decode_flops(const Shape& s) {
  const char* what = "decode FLOPs";
  // The Nq new tokens of a sequence of L keys are its last Nq rows: the
  // prefill mask's visible pairs (mask.hpp) of Nq queries against L keys.
  std::uint64_t pairs = 0;
  for_each_length(s, [&](std::uint64_t len, std::uint64_t count) {
    pairs = checked_add(pairs, checked_mul(visible_pairs(s, s.seq_q, len), count, what), what);
  });
  // 2d (QK^T) + 2DV (PV) per pair and query head.
  const std::uint64_t per_pair = checked_add(checked_mul(2, s.head_dim, what), checked_mul(2, value_head_dim(s), what), what);
  return checked_product(what, per_pair, s.heads, pairs);
}

}  // namespace hbmscope
