#pragma once
// CPU reference attention: the oracle every GPU kernel is checked against.
// Layout [batch, heads, seq, head_dim]; K and V have kv_heads heads (GQA).
#include <cstdint>
#include <span>
#include <vector>

#include "hbmscope/shape.hpp"

namespace hbmscope {

struct AttentionBuffers {
  std::vector<float> q, k, v;  // inputs, already rounded to the shape's dtype
};

std::size_t q_elements(const Shape& s);   // batch*heads*seq_q*head_dim (also O)
std::size_t kv_elements(const Shape& s);  // batch*kv_heads*seq_kv*head_dim (each of K, V)
std::size_t lse_elements(const Shape& s); // batch*heads*seq_q

// Random inputs in [-1, 1), deterministic in seed, rounded to the shape's dtype.
AttentionBuffers random_inputs(const Shape& s, std::uint64_t seed);

// 1/sqrt(head_dim), the usual softmax scale.
float default_scale(const Shape& s);

// Naive attention: materialises each row of S and P. o has q_elements, lse has
// lse_elements (natural log of the row's sum of e^s; -inf and O = 0 for a row
// the causal mask hides completely).
void attention_naive(const Shape& s, float scale, std::span<const float> q,
                     std::span<const float> k, std::span<const float> v, std::span<float> o,
                     std::span<float> lse);

// FlashAttention-2 on the CPU: Br x Bc tiles from the shape, online softmax,
// never a whole row of S. Equal to attention_naive within rounding.
void attention_tiled(const Shape& s, float scale, std::span<const float> q,
                     std::span<const float> k, std::span<const float> v, std::span<float> o,
                     std::span<float> lse);

// ||out - ref|| / ||ref||; NaN (never passes a threshold) if either holds NaN or inf.
double relative_l2_error(std::span<const float> out, std::span<const float> ref);
// The same for a row log-sum-exp: a row the mask hides completely is -inf in
// the reference and must be -inf in out (else NaN); the other rows compare by
// relative L2.
double lse_relative_error(std::span<const float> out, std::span<const float> ref);

// Round-to-nearest-even conversions for the 16-bit storage formats.
std::uint16_t float_to_bf16_bits(float x);
float bf16_bits_to_float(std::uint16_t b);
float round_to_dtype(float x, Dtype d);
// Whole buffers, as the kernels take and give them.
std::vector<std::uint16_t> to_bf16_bits(std::span<const float> x);
std::vector<float> from_bf16_bits(std::span<const std::uint16_t> x);

}  // namespace hbmscope
