#include "hbmscope/decode_reference.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "hbmscope/checked.hpp"
#include "hbmscope/decode.hpp"
#include "hbmscope/error.hpp"
#include "hbmscope/mask.hpp"
#include "hbmscope/reference.hpp"

namespace hbmscope {

namespace {

constexpr float neg_inf = -std::numeric_limits<float>::infinity();

// Naive attention of every (sequence, head, token) row: scores, max, then
// exp-sum in double. row_of(b, kv_head, key) is the element offset of a key's
// K/V row in k and v.
template <class RowOf>
void decode_naive(const Shape& s, float scale, std::span<const float> q, std::span<const float> k,
                  std::span<const float> v, std::span<float> o, std::span<float> lse, RowOf row_of) {
  const std::uint64_t d = s.head_dim, group = group_size(s);
  const std::uint64_t pairs = s.batch * s.heads;
  const unsigned workers =
      static_cast<unsigned>(std::min<std::uint64_t>(std::max(1u, std::thread::hardware_concurrency()), pairs));
  std::atomic<std::uint64_t> next{0};
  auto work = [&] {
    std::vector<float> p;
    std::vector<double> acc(d);
    for (std::uint64_t pair = next++; pair < pairs; pair = next++) {
      const std::uint64_t b = pair / s.heads, h = pair % s.heads, kvh = h / group;
      for (std::uint64_t t = 0; t < s.seq_q; ++t) {
        const std::uint64_t row = pair * s.seq_q + t;
        const float* qr = q.data() + row * d;
        float* out = o.data() + row * d;
        const KeyRange vis = decode_visible_range(s, b, t);
        if (vis.empty()) {
          std::fill(out, out + d, 0.f);
          lse[row] = neg_inf;
          continue;
        }
        p.resize(vis.size());
        float m = neg_inf;
        for (std::uint64_t c = vis.begin; c < vis.end; ++c) {
          const float* kr = k.data() + row_of(b, kvh, c);
          float dot = 0.f;
          for (std::uint64_t x = 0; x < d; ++x) dot += qr[x] * kr[x];
          p[c - vis.begin] = scale * dot;
          m = std::max(m, p[c - vis.begin]);
        }
        double l = 0.0;
        std::fill(acc.begin(), acc.end(), 0.0);
        for (std::uint64_t c = vis.begin; c < vis.end; ++c) {
          const double pc = std::exp(static_cast<double>(p[c - vis.begin] - m));
          l += pc;
          const float* vr = v.data() + row_of(b, kvh, c);
          for (std::uint64_t x = 0; x < d; ++x) acc[x] += pc * vr[x];
        }
        for (std::uint64_t x = 0; x < d; ++x) out[x] = static_cast<float>(acc[x] / l);
        lse[row] = m + static_cast<float>(std::log(l));
      }
    }
  };
  std::vector<std::thread> threads;
  for (unsigned i = 1; i < workers; ++i) threads.emplace_back(work);
  work();
  for (auto& th : threads) th.join();
}

void check_q(const Shape& s, std::span<const float> q, std::span<float> o, std::span<float> lse) {
  if (!s.decode) throw Error("decode reference: not a decode shape: " + describe(s));
  validate(s);
  if (q.size() != q_elements(s) || o.size() != q_elements(s) || lse.size() != lse_elements(s))
    throw Error("decode reference: Q, O or LSE size does not match the shape");
}

std::uint64_t pool_pages(const Shape& s, std::size_t pool_elements) {
  return pool_elements / checked_product("decode pool", s.kv_heads, s.page_size, s.head_dim);
}

// Element offset of token c of sequence b in a paged pool, checked against
// the pool and the table.
std::uint64_t paged_offset(const Shape& s, std::span<const std::int32_t> table, std::uint64_t max_pages,
                           std::uint64_t pages, std::uint64_t b, std::uint64_t kvh, std::uint64_t c) {
  const std::int32_t page = table[b * max_pages + c / s.page_size];
  if (page < 0 || static_cast<std::uint64_t>(page) >= pages)
    throw Error("decode reference: block table entry " + std::to_string(page) + " of sequence " +
                std::to_string(b) + " is not a page of the pool (" + std::to_string(pages) + " pages)");
  return ((static_cast<std::uint64_t>(page) * s.kv_heads + kvh) * s.page_size + c % s.page_size) * s.head_dim;
}

void check_table(const Shape& s, std::span<const std::int32_t> table, std::uint64_t max_pages,
                 std::uint64_t pages) {
  if (max_pages < ceil_div(s.seq_kv, s.page_size) || table.size() != s.batch * max_pages)
    throw Error("decode reference: the block table does not have batch x ceil(seq_kv / page size) entries");
  for (std::uint64_t b = 0; b < s.batch; ++b)
    for (std::uint64_t j = 0; j < context_pages(s, b); ++j)
      (void)paged_offset(s, table, max_pages, pages, b, 0, j * s.page_size);
}

}  // namespace

KeyRange decode_visible_range(const Shape& s, std::uint64_t b, std::uint64_t token) {
  return visible_keys(s, s.seq_q, context_length(s, b), token);
}

std::uint64_t decode_visible_keys(const Shape& s, std::uint64_t b, std::uint64_t token) {
  return decode_visible_range(s, b, token).size();
}

void decode_attention_reference(const Shape& s, float scale, std::span<const float> q, std::span<const float> k,
                                std::span<const float> v, std::span<float> o, std::span<float> lse) {
  check_q(s, q, o, lse);
  if (k.size() != kv_elements(s) || v.size() != kv_elements(s))
    throw Error("decode reference: K or V size is not batch x kv-heads x seq-kv x head-dim");
  decode_naive(s, scale, q, k, v, o, lse, [&](std::uint64_t b, std::uint64_t kvh, std::uint64_t c) {
    return ((b * s.kv_heads + kvh) * s.seq_kv + c) * s.head_dim;
  });
}

void decode_attention_paged_reference(const Shape& s, float scale, std::span<const float> q,
                                      std::span<const float> k_pool, std::span<const float> v_pool,
                                      std::span<const std::int32_t> block_table, std::uint64_t max_pages,
                                      std::span<float> o, std::span<float> lse) {
  check_q(s, q, o, lse);
  if (k_pool.size() != v_pool.size()) throw Error("decode reference: K and V pools differ in size");
  const std::uint64_t pages = pool_pages(s, k_pool.size());
  check_table(s, block_table, max_pages, pages);
  decode_naive(s, scale, q, k_pool, v_pool, o, lse, [&](std::uint64_t b, std::uint64_t kvh, std::uint64_t c) {
    return paged_offset(s, block_table, max_pages, pages, b, kvh, c);
  });
}

std::vector<float> gather_pages(const Shape& s, std::span<const float> pool, std::span<const std::int32_t> block_table,
                                std::uint64_t max_pages) {
  const std::uint64_t pages = pool_pages(s, pool.size());
  check_table(s, block_table, max_pages, pages);
  std::vector<float> kv(kv_elements(s), 0.f);
  for (std::uint64_t b = 0; b < s.batch; ++b)
    for (std::uint64_t kvh = 0; kvh < s.kv_heads; ++kvh)
      for (std::uint64_t c = 0; c < context_length(s, b); ++c) {
        const std::uint64_t src = paged_offset(s, block_table, max_pages, pages, b, kvh, c);
        std::copy_n(pool.data() + src, s.head_dim, kv.data() + ((b * s.kv_heads + kvh) * s.seq_kv + c) * s.head_dim);
      }
  return kv;
}

}  // namespace hbmscope
