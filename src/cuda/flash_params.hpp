#pragma once
// The flash kernel's arguments, shared by the kernel (flash_attention.cuh) and
// the host code that fills them (cuda_backend.cpp).
#include <cuda_bf16.h>

#include "flash_layout.hpp"

namespace hbmscope::flash {

struct FlashParams {
  const __nv_bfloat16* q;  // [batch][heads][seq_q][d]
  const __nv_bfloat16* k;  // [batch][kv_heads][seq_kv][d]
  const __nv_bfloat16* v;
  __nv_bfloat16* o;        // [batch][heads][seq_q][d]
  float* lse;              // [batch][heads][seq_q], natural log
  int heads, kv_heads, seq_q, seq_kv;
  FastDiv group_div;       // fast_div(heads / kv_heads): query head -> kv head without a divide
  int causal;
  int causal_offset;       // seq_kv - seq_q: row r sees key c iff c <= r + offset
  int window;              // causal only: row r also needs c > r + offset - window; 0: none
  float scale;             // softmax scale (1/sqrt(d))
  float scale_log2;        // scale * log2(e): exp(x*scale) = exp2(x*scale_log2)
};

}  // namespace hbmscope::flash
