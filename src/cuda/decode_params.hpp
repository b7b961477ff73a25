#pragma once
// The decode kernels' arguments, shared by the kernels (decode_attention.cuh)
// and the host code that fills them (cuda_backend.cpp).
#include <cuda_bf16.h>

namespace hbmscope::decode {

struct DecodeParams {
  const __nv_bfloat16* q;  // [batch][heads][seq_q][d]
  // Contiguous: [batch][kv_heads][kv_stride][d]. Paged: [pages][kv_heads][page_size][d].
  const __nv_bfloat16* k;
  const __nv_bfloat16* v;
  __nv_bfloat16* o;        // [batch][heads][seq_q][d]
  float* lse;              // [batch][heads][seq_q], natural log
  float* o_part;           // [batch*heads*seq_q][splits][d] (splits > 1 only)
  float* lse_part;         // [batch*heads*seq_q][splits]
  const int* seq_lens;     // [batch] context lengths; nullptr: all seq_kv
  const int* block_table;  // [batch][max_pages] page indices (paged only)
  int heads, kv_heads, seq_q;
  int seq_kv;              // the longest context length
  long long kv_stride;     // contiguous: token rows per (batch, kv head)
  int page_size, max_pages;
  int splits;
  long long split_tokens;  // tokens per split of the visible keys (DecodePlan::split_tokens)
  int row_blocks;          // CTAs per kv head along the packed rows
  int causal;
  int window;              // causal: token at position q sees keys c > q - window; 0: none
  int chunk;               // causal: token at position q sees keys c >= floor(q / chunk) * chunk; 0: none
  float scale;             // softmax scale (1/sqrt(d))
  float scale_log2;        // scale * log2(e)
};

}  // namespace hbmscope::decode
