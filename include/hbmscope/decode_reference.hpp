#pragma once
// CPU reference decode attention: the oracle of the decode kernels
// (docs/cuda.md, "Decode"). A decode shape (decode.hpp) has seq_q new tokens
// per sequence and context lengths L_b (seq_kv when not ragged).
// Layouts: Q and O [batch][heads][seq_q][d]; LSE [batch][heads][seq_q]
// (natural log; -inf and O = 0 for a row that sees no key).
//   contiguous cache: K, V [batch][kv_heads][seq_kv][d], sequence b using its
//     first L_b token rows;
//   paged cache: K, V pools [pages][kv_heads][page_size][d] and a block table
//     [batch][max_pages] of int32 page indices: token t of sequence b is slot
//     t % P of page block_table[b][t / P].
// Token t of the Nq new ones sits at position L_b - Nq + t; with s.causal it
// sees keys 0 .. L_b - Nq + t (with s.window or s.chunk only the last of
// them, mask.hpp), otherwise all L_b.
#include <cstdint>
#include <span>
#include <vector>

#include "hbmscope/mask.hpp"
#include "hbmscope/shape.hpp"

namespace hbmscope {

// Keys [begin, end) row `token` of sequence b sees, and how many.
KeyRange decode_visible_range(const Shape& s, std::uint64_t b, std::uint64_t token);
std::uint64_t decode_visible_keys(const Shape& s, std::uint64_t b, std::uint64_t token);

void decode_attention_reference(const Shape& s, float scale, std::span<const float> q, std::span<const float> k,
                                std::span<const float> v, std::span<float> o, std::span<float> lse);

// Paged; k_pool and v_pool hold `pages` pages, and every entry of the block
// table that a sequence's tokens use must name one (Error otherwise).
void decode_attention_paged_reference(const Shape& s, float scale, std::span<const float> q,
                                      std::span<const float> k_pool, std::span<const float> v_pool,
                                      std::span<const std::int32_t> block_table, std::uint64_t max_pages,
                                      std::span<float> o, std::span<float> lse);

// The contiguous cache [batch][kv_heads][seq_kv][d] a paged one stands for
// (token rows past L_b are 0).
std::vector<float> gather_pages(const Shape& s, std::span<const float> pool, std::span<const std::int32_t> block_table,
                                std::uint64_t max_pages);

}  // namespace hbmscope
