#include "hbmscope/reference.hpp"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <limits>
#include <random>
#include <thread>

#include "hbmscope/checked.hpp"
#include "hbmscope/error.hpp"
#include "hbmscope/mask.hpp"
#include "hbmscope/tile_walk.hpp"

namespace hbmscope {

namespace {

constexpr float neg_inf = -std::numeric_limits<float>::infinity();

std::size_t elements(std::string_view what, std::uint64_t a, std::uint64_t b, std::uint64_t c,
                     std::uint64_t d) {
  return static_cast<std::size_t>(checked_product(what, a, b, c, d));
}

// Runs fn(batch, head) for every pair on up to hardware_concurrency threads.
template <class Fn>
void for_each_head(const Shape& s, Fn fn) {
  const std::uint64_t pairs = s.batch * s.heads;
  const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  const unsigned workers = static_cast<unsigned>(std::min<std::uint64_t>(hw, pairs));
  std::atomic<std::uint64_t> next{0};
  auto work = [&] {
    for (std::uint64_t p = next++; p < pairs; p = next++) fn(p / s.heads, p % s.heads);
  };
  std::vector<std::thread> threads;
  for (unsigned t = 1; t < workers; ++t) threads.emplace_back(work);
  work();
  for (auto& t : threads) t.join();
}

struct HeadView {
  const float* q;  // [seq_q][d]
  const float* k;  // [seq_kv][d]
  const float* v;  // [seq_kv][d]
  float* o;        // [seq_q][d]
  float* lse;      // [seq_q]
};

HeadView head_view(const Shape& s, std::uint64_t b, std::uint64_t h, std::span<const float> q,
                   std::span<const float> k, std::span<const float> v, std::span<float> o,
                   std::span<float> lse) {
  const std::uint64_t d = s.head_dim;
  const std::uint64_t kvh = h / group_size(s);
  const std::size_t qoff = ((b * s.heads + h) * s.seq_q) * d;
  const std::size_t kvoff = ((b * s.kv_heads + kvh) * s.seq_kv) * d;
  return {q.data() + qoff, k.data() + kvoff, v.data() + kvoff, o.data() + qoff,
          lse.data() + (b * s.heads + h) * s.seq_q};
}

float dot(const float* a, const float* b, std::uint64_t n) {
  float acc[8] = {};
  std::uint64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int u = 0; u < 8; ++u) acc[u] += a[i + u] * b[i + u];
  float r = 0.f;
  for (; i < n; ++i) r += a[i] * b[i];
  for (float x : acc) r += x;
  return r;
}

void check_sizes(const Shape& s, std::span<const float> q, std::span<const float> k,
                 std::span<const float> v, std::span<float> o, std::span<float> lse) {
  validate(s);
  if (q.size() != q_elements(s) || o.size() != q_elements(s) || k.size() != kv_elements(s) ||
      v.size() != kv_elements(s) || lse.size() != lse_elements(s))
    throw Error("reference attention: buffer sizes do not match the shape");
}

}  // namespace

std::size_t q_elements(const Shape& s) {
  return elements("Q elements", s.batch, s.heads, s.seq_q, s.head_dim);
}
std::size_t kv_elements(const Shape& s) {
  return elements("K elements", s.batch, s.kv_heads, s.seq_kv, s.head_dim);
}
std::size_t lse_elements(const Shape& s) {
  return elements("LSE elements", s.batch, s.heads, s.seq_q, 1);
}

float default_scale(const Shape& s) { return 1.0f / std::sqrt(static_cast<float>(s.head_dim)); }

std::uint16_t float_to_bf16_bits(float x) {
  const auto u = std::bit_cast<std::uint32_t>(x);
  if (std::isnan(x)) return static_cast<std::uint16_t>((u >> 16) | 0x40);  // keep it a NaN
  const std::uint32_t rounding = 0x7fff + ((u >> 16) & 1);
  return static_cast<std::uint16_t>((u + rounding) >> 16);
}

float bf16_bits_to_float(std::uint16_t b) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16);
}

namespace {
// fp8 e4m3 (the "fn" variant: max 448, 3 mantissa bits, subnormal step 2^-9).
float round_to_e4m3(float x) {
  if (std::isnan(x)) return x;
  const float ax = std::fabs(x);
  float r;
  if (ax < 0x1p-6f) {
    r = std::nearbyint(ax * 0x1p9f) * 0x1p-9f;
  } else {
    int exp = 0;
    const float mant = std::frexp(ax, &exp);          // ax = mant * 2^exp, mant in [0.5, 1)
    r = std::ldexp(std::nearbyint(mant * 16.f), exp - 4);  // 4 significant bits
  }
  r = std::min(r, 448.f);
  return std::copysign(r, x);
}

// IEEE binary16, round to nearest even, in plain float arithmetic: _Float16 is
// not available on every x86-64 compiler (clang 14 has none).
float round_to_fp16(float x) {
  if (std::isnan(x)) return x;
  const float ax = std::fabs(x);
  float r;
  if (ax < 0x1p-14f) {
    r = std::nearbyint(ax * 0x1p24f) * 0x1p-24f;  // subnormals: steps of 2^-24
  } else {
    int exp = 0;
    const float mant = std::frexp(ax, &exp);
    r = std::ldexp(std::nearbyint(mant * 2048.f), exp - 11);  // 11 significant bits
  }
  if (r > 65504.f) r = std::numeric_limits<float>::infinity();  // past the largest half
  return std::copysign(r, x);
}
}  // namespace

float round_to_dtype(float x, Dtype d) {
  switch (d) {
    case Dtype::fp32: return x;
    case Dtype::bf16: return bf16_bits_to_float(float_to_bf16_bits(x));
    case Dtype::fp16: return round_to_fp16(x);
    case Dtype::fp8: return round_to_e4m3(x);
  }
  return x;
}

AttentionBuffers random_inputs(const Shape& s, std::uint64_t seed) {
  validate(s);
  AttentionBuffers buf;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  auto fill = [&](std::vector<float>& x, std::size_t n) {
    x.resize(n);
    for (float& e : x) e = round_to_dtype(dist(rng), s.dtype);
  };
  fill(buf.q, q_elements(s));
  fill(buf.k, kv_elements(s));
  fill(buf.v, kv_elements(s));
  return buf;
}

void attention_naive(const Shape& s, float scale, std::span<const float> q,
                     std::span<const float> k, std::span<const float> v, std::span<float> o,
                     std::span<float> lse) {
  check_sizes(s, q, k, v, o, lse);
  const std::uint64_t d = s.head_dim;
  for_each_head(s, [&](std::uint64_t b, std::uint64_t h) {
    const HeadView hv = head_view(s, b, h, q, k, v, o, lse);
    std::vector<float> p(s.seq_kv);
    std::vector<float> acc(d);
    for (std::uint64_t r = 0; r < s.seq_q; ++r) {
      const KeyRange vis = visible_keys(s, r);
      float* out = hv.o + r * d;
      if (vis.empty()) {
        std::fill(out, out + d, 0.f);
        hv.lse[r] = neg_inf;
        continue;
      }
      float m = neg_inf;
      for (std::uint64_t c = vis.begin; c < vis.end; ++c) {
        p[c] = scale * dot(hv.q + r * d, hv.k + c * d, d);
        m = std::max(m, p[c]);
      }
      double l = 0.0;
      std::fill(acc.begin(), acc.end(), 0.f);
      for (std::uint64_t c = vis.begin; c < vis.end; ++c) {
        const float pc = std::exp(p[c] - m);
        l += pc;
        const float* vc = hv.v + c * d;
        for (std::uint64_t x = 0; x < d; ++x) acc[x] += pc * vc[x];
      }
      const float inv_l = static_cast<float>(1.0 / l);
      for (std::uint64_t x = 0; x < d; ++x) out[x] = acc[x] * inv_l;
      hv.lse[r] = m + static_cast<float>(std::log(l));
    }
  });
}

void attention_tiled(const Shape& s, float scale, std::span<const float> q,
                     std::span<const float> k, std::span<const float> v, std::span<float> o,
                     std::span<float> lse) {
  check_sizes(s, q, k, v, o, lse);
  const std::uint64_t d = s.head_dim, Br = s.block_rows, Bc = s.block_cols;
  const std::uint64_t nqb = query_blocks(s);
  for_each_head(s, [&](std::uint64_t b, std::uint64_t h) {
    const HeadView hv = head_view(s, b, h, q, k, v, o, lse);
    std::vector<float> m(Br), l(Br), acc(Br * d), st(Bc);
    for (std::uint64_t i = 0; i < nqb; ++i) {
      const std::uint64_t r0 = i * Br, rows = std::min(Br, s.seq_q - r0);
      std::fill(m.begin(), m.end(), neg_inf);
      std::fill(l.begin(), l.end(), 0.f);
      std::fill(acc.begin(), acc.end(), 0.f);
      const KeyRange blocks = visible_key_blocks(s, i);
      for (std::uint64_t j = blocks.begin; j < blocks.end; ++j) {
        const std::uint64_t c0 = j * Bc, cols = std::min(Bc, s.seq_kv - c0);
        for (std::uint64_t rr = 0; rr < rows; ++rr) {
          const KeyRange vis = visible_keys(s, r0 + rr);
          float bmax = neg_inf;
          for (std::uint64_t cc = 0; cc < cols; ++cc) {
            st[cc] = vis.begin <= c0 + cc && c0 + cc < vis.end ? scale * dot(hv.q + (r0 + rr) * d, hv.k + (c0 + cc) * d, d)
                                   : neg_inf;
            bmax = std::max(bmax, st[cc]);
          }
          const float m_new = std::max(m[rr], bmax);
          if (m_new == neg_inf) continue;  // nothing visible yet in this row
          const float rescale = std::exp(m[rr] - m_new);
          float* a = acc.data() + rr * d;
          for (std::uint64_t x = 0; x < d; ++x) a[x] *= rescale;
          float sum = 0.f;
          for (std::uint64_t cc = 0; cc < cols; ++cc) {
            const float p = std::exp(st[cc] - m_new);
            sum += p;
            const float* vc = hv.v + (c0 + cc) * d;
            for (std::uint64_t x = 0; x < d; ++x) a[x] += p * vc[x];
          }
          l[rr] = l[rr] * rescale + sum;
          m[rr] = m_new;
        }
      }
      for (std::uint64_t rr = 0; rr < rows; ++rr) {
        float* out = hv.o + (r0 + rr) * d;
        if (l[rr] == 0.f) {
          std::fill(out, out + d, 0.f);
          hv.lse[r0 + rr] = neg_inf;
          continue;
        }
        for (std::uint64_t x = 0; x < d; ++x) out[x] = acc[rr * d + x] / l[rr];
        hv.lse[r0 + rr] = m[rr] + std::log(l[rr]);
      }
    }
  });
}

double relative_l2_error(std::span<const float> out, std::span<const float> ref) {
  if (out.size() != ref.size()) return std::numeric_limits<double>::quiet_NaN();
  double num = 0.0, den = 0.0;
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (!std::isfinite(out[i]) || !std::isfinite(ref[i]))
      return std::numeric_limits<double>::quiet_NaN();
    const double diff = static_cast<double>(out[i]) - ref[i];
    num += diff * diff;
    den += static_cast<double>(ref[i]) * ref[i];
  }
  if (den == 0.0) return num == 0.0 ? 0.0 : std::numeric_limits<double>::infinity();
  return std::sqrt(num / den);
}

double lse_relative_error(std::span<const float> out, std::span<const float> ref) {
  if (out.size() != ref.size()) return std::numeric_limits<double>::quiet_NaN();
  std::vector<float> a, b;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    if (std::isinf(ref[i]) && ref[i] < 0) {
      if (!(std::isinf(out[i]) && out[i] < 0)) return std::numeric_limits<double>::quiet_NaN();
      continue;
    }
    a.push_back(out[i]);
    b.push_back(ref[i]);
  }
  return relative_l2_error(a, b);
}

std::vector<std::uint16_t> to_bf16_bits(std::span<const float> x) {
  std::vector<std::uint16_t> r(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) r[i] = float_to_bf16_bits(x[i]);
  return r;
}

std::vector<float> from_bf16_bits(std::span<const std::uint16_t> x) {
  std::vector<float> r(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) r[i] = bf16_bits_to_float(x[i]);
  return r;
}

}  // namespace hbmscope
