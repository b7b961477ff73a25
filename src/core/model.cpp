#include "hbmscope/model.hpp"

#include <initializer_list>

#include "hbmscope/checked.hpp"
#include "hbmscope/mask.hpp"

namespace hbmscope {

namespace {

__extension__ typedef unsigned __int128 u128;

std::uint64_t to_u64(u128 v, std::string_view what) {
  if (v > ~std::uint64_t{0}) throw_overflow(what);
  return static_cast<std::uint64_t>(v);
}

// Sums byte terms with every step checked.
struct Total {
  std::string_view what;
  std::uint64_t value = 0;
  template <typename... Ts>
  void add(std::uint64_t first, Ts... rest) {
    value = checked_add(value, checked_product(what, first, rest...), what);
  }
};

// Element sizes and head dims of the operands (docs/model.md, "Operand
// shapes"): Q, O, S, P (and their gradients) in dtype, K and V in kv_dtype; Q
// and K of head_dim d, V and O of DV; a latent KV (MLA) is one tensor of d
// values per token that serves as K and, by its first DV values, as V.
struct Operands {
  std::uint64_t e, ek, d, dv;
  std::uint64_t dkv;  // values of K and V per key and kv head: d + DV, or d for a latent KV
};

Operands operands(const Shape& s) {
  const std::uint64_t d = s.head_dim, dv = value_head_dim(s);
  return {elem_bytes(s.dtype), elem_bytes(key_value_dtype(s)), d, dv, s.latent_kv ? d : d + dv};
}

// per_sequence(nq, nkv) summed over the batch: the dense shape's one sequence
// times batch, or each distinct sequence of a ragged batch times its count.
template <class F>
std::uint64_t over_sequences(const Shape& s, std::string_view what, F&& per_sequence) {
  if (!ragged_prefill(s)) return checked_mul(per_sequence(s.seq_q, s.seq_kv), s.batch, what);
  std::uint64_t total = 0;
  for (const SeqGroup& g : s.seq_lens.groups())
    total = checked_add(total, checked_mul(per_sequence(g.item.q, g.item.kv), g.count, what), what);
  return total;
}

// With GQA the kernels write dK and dV per query head; a reduction then reads
// those and writes the kv head's sum (docs/model.md).
void add_gqa_reduction(Total& t, const Shape& s, const Operands& o, std::uint64_t nkv) {
  if (s.heads == s.kv_heads) return;
  t.add(o.ek, s.heads, nkv, o.d + o.dv);     // read per-query-head dK, dV
  t.add(o.ek, s.kv_heads, nkv, o.d + o.dv);  // write the group sums
}

}  // namespace

std::uint64_t visited_tiles(const Shape& s) {
  validate(s);
  return visited_tiles(s, s.seq_q, s.seq_kv);
}

std::uint64_t streamed_query_rows(const Shape& s) {
  validate(s);
  return streamed_query_rows(s, s.seq_q, s.seq_kv);
}

std::uint64_t streamed_key_columns(const Shape& s) {
  validate(s);
  return streamed_key_columns(s, s.seq_q, s.seq_kv);
}

std::uint64_t visible_pairs_per_head(const Shape& s) {
  validate(s);
  return visible_pairs(s, s.seq_q, s.seq_kv);
}

std::uint64_t batch_visited_tiles(const Shape& s) {
  validate(s);
  return over_sequences(s, "visited tiles", [&](std::uint64_t nq, std::uint64_t nkv) {
    return visited_tiles(s, nq, nkv);
  });
}

std::uint64_t batch_visible_pairs(const Shape& s) {
  validate(s);
  return over_sequences(s, "visible (query, key) pairs", [&](std::uint64_t nq, std::uint64_t nkv) {
    return visible_pairs(s, nq, nkv);
  });
}

std::uint64_t standard_bytes(const Shape& s) {
  validate(s);
  const Operands o = operands(s);
  return over_sequences(s, "standard attention bytes", [&](std::uint64_t nq, std::uint64_t nkv) {
    Total t{"standard attention bytes"};
    t.add(o.e, s.heads, nq, o.d + o.dv);    // read Q, write O
    t.add(o.ek, s.heads, nkv, o.d + o.dv);  // read K and V (a latent's first DV), per query head
    t.add(4, o.e, s.heads, nq, nkv);        // write S, read S, write P, read P: whatever the mask
    return t.value;
  });
}

std::uint64_t flash_no_l2_bytes(const Shape& s) {
  validate(s);
  const Operands o = operands(s);
  return over_sequences(s, "FlashAttention bytes", [&](std::uint64_t nq, std::uint64_t nkv) {
    Total t{"FlashAttention bytes"};
    t.add(o.e, s.heads, nq, o.d + o.dv);  // read Q, write O
    t.add(o.ek, o.dkv, s.heads, streamed_key_columns(s, nq, nkv));
    return t.value;
  });
}

std::uint64_t floor_bytes(const Shape& s) {
  validate(s);
  const Operands o = operands(s);
  return over_sequences(s, "floor bytes", [&](std::uint64_t nq, std::uint64_t nkv) {
    Total t{"floor bytes"};
    t.add(o.e, s.heads, nq, o.d + o.dv);
    t.add(o.ek, s.kv_heads, o.dkv, nkv - first_seen_key(s, nq, nkv));  // each key some query sees
    return t.value;
  });
}

std::uint64_t flash1_no_l2_bytes(const Shape& s) {
  validate(s);
  const Operands o = operands(s);
  return over_sequences(s, "FlashAttention-1 bytes", [&](std::uint64_t nq, std::uint64_t nkv) {
    Total t{"FlashAttention-1 bytes"};
    const std::uint64_t H = s.heads;
    t.add(o.e, H, nq, o.dv);  // O initialised to 0
    t.add(8, H, nq);          // l = 0 and m = -inf initialised (fp32)
    t.add(o.ek, o.dkv, H, visited_key_columns(s, nq, nkv));  // K_j, V_j once per (query head, visited key block)
    const std::uint64_t r = streamed_query_rows(s, nq, nkv);
    t.add(o.e, o.d + 2 * o.dv, H, r);  // per tile: read Q_i, read O_i, write O_i
    t.add(16, H, r);                   // per tile: read and write l_i, m_i (fp32)
    return t.value;
  });
}

std::uint64_t standard_bwd_bytes(const Shape& s) {
  validate(s);
  const Operands o = operands(s);
  return over_sequences(s, "standard attention backward bytes", [&](std::uint64_t nq, std::uint64_t nkv) {
    Total t{"standard attention backward bytes"};
    const std::uint64_t H = s.heads;
    // dV = P^T dO: read P, read dO, write dV.
    // dP = dO V^T: read dO, read V, write dP.
    // dS = P o (dP - rowsum(dP o P)): read P, read dP, write dS.
    // dQ = scale dS K: read dS, read K, write dQ.
    // dK = scale dS^T Q: read dS, read Q, write dK.
    t.add(7, o.e, H, nq, nkv);              // P twice, dP twice, dS three times
    t.add(2, o.e, H, nq, o.d + o.dv);       // dO twice (DV), Q and dQ (d)
    t.add(2, o.ek, H, nkv, o.d + o.dv);     // V and dV (DV), K and dK (d)
    add_gqa_reduction(t, s, o, nkv);
    return t.value;
  });
}

std::uint64_t flash_bwd_no_l2_bytes(const Shape& s) {
  validate(s);
  const Operands o = operands(s);
  return over_sequences(s, "FlashAttention backward bytes", [&](std::uint64_t nq, std::uint64_t nkv) {
    Total t{"FlashAttention backward bytes"};
    const std::uint64_t H = s.heads, d = o.d;
    // Preprocessing: read dO and O, write D (fp32), zero the fp32 dQ accumulator.
    t.add(2, o.e, H, nq, o.dv);
    t.add(4, H, nq);
    t.add(4, H, nq, d);
    // Main loop, one CTA per (query head, key block): K_j, V_j read once where
    // some query block visits the block, dK_j, dV_j written for every block
    // (zeros where none does); per visited tile Q_i, dO_i (e), LSE_i, D_i
    // (fp32) read and the fp32 dQ_i tile read and written by the atomic adds.
    t.add(o.ek, H, o.d + o.dv, visited_key_columns(s, nq, nkv));
    t.add(o.ek, H, o.d + o.dv, nkv);
    const std::uint64_t r = streamed_query_rows(s, nq, nkv);
    t.add(o.e, o.d + o.dv, H, r);
    t.add(8, H, r);
    t.add(8, d, H, r);
    // dQ conversion: read the fp32 accumulator, write dQ.
    t.add(4, H, nq, d);
    t.add(o.e, H, nq, d);
    add_gqa_reduction(t, s, o, nkv);
    return t.value;
  });
}

std::uint64_t floor_bwd_bytes(const Shape& s) {
  validate(s);
  const Operands o = operands(s);
  return over_sequences(s, "backward floor bytes", [&](std::uint64_t nq, std::uint64_t nkv) {
    Total t{"backward floor bytes"};
    t.add(2, o.e, s.heads, nq, o.d + o.dv);  // read Q, O, dO; write dQ
    t.add(o.ek, s.kv_heads, o.d + o.dv, nkv - first_seen_key(s, nq, nkv));  // read K, V some query sees
    t.add(o.ek, s.kv_heads, o.d + o.dv, nkv);  // write dK, dV whole
    t.add(4, s.heads, nq);                     // read the log-sum-exp (fp32)
    return t.value;
  });
}

std::uint64_t pass_flops(const Shape& s) {
  validate(s);
  // Per visible (query, key) pair and head: forward 2d (QK^T) + 2DV (PV);
  // backward 6d + 4DV (S recomputed, dQ, dK; dP, dV), 2.5x the forward when
  // DV = d; both 8d + 6DV. Summed in 128 bits and checked on the final count,
  // so that a count that fits is not refused for an intermediate product.
  const u128 d = s.head_dim, dv = value_head_dim(s);
  const u128 k = s.pass == Pass::fwd ? 2 * d + 2 * dv : s.pass == Pass::bwd ? 6 * d + 4 * dv : 8 * d + 6 * dv;
  u128 pairs = 0;
  if (!ragged_prefill(s)) {
    pairs = static_cast<u128>(visible_pairs(s, s.seq_q, s.seq_kv)) * s.batch;
  } else {
    for (const SeqGroup& g : s.seq_lens.groups())
      pairs += static_cast<u128>(visible_pairs(s, g.item.q, g.item.kv)) * g.count;
  }
  u128 f = pairs;
  for (const u128 x : {k, static_cast<u128>(s.heads)})
    if (__builtin_mul_overflow(f, x, &f)) throw_overflow("FLOPs");
  return to_u64(f, "FLOPs");
}

std::uint64_t attention_flops(const Shape& s) {
  Shape f = s;
  f.pass = Pass::fwd;
  return pass_flops(f);
}

std::uint64_t standard_resident_bytes(const Shape& s) {
  validate(s);
  const Operands o = operands(s);
  // One sequence's bytes, saturating at 2^128 - 1 (and the total at 2^64 - 1:
  // it is compared with a device's memory, never added to a count).
  constexpr u128 all = ~u128{0};
  auto mul = [&](std::initializer_list<u128> xs) {
    u128 r = 1;
    for (const u128 x : xs)
      if (__builtin_mul_overflow(r, x, &r)) return all;
    return r;
  };
  auto sum = [&](u128 a, u128 b) { return __builtin_add_overflow(a, b, &a) ? all : a; };
  auto one = [&](u128 nq, u128 nkv) -> u128 {
    const u128 H = s.heads, Hkv = s.kv_heads, passes = s.pass == Pass::fwd ? 1 : 2;
    // S, P (forward) or P, dP, dS (backward); Q, K, V, O (a latent KV once),
    // with their gradients in the backward.
    const u128 matrices = mul({s.pass == Pass::fwd ? u128{2} : u128{3}, o.e, H, nq, nkv});
    const u128 q_o = mul({passes, o.e, H, nq, o.d + o.dv});
    const u128 k_v = mul({passes, o.ek, Hkv, nkv, o.dkv});
    return sum(matrices, sum(q_o, k_v));
  };
  u128 total = 0;
  auto add = [&](u128 bytes, u128 count) { total = sum(total, mul({bytes, count})); };
  if (!ragged_prefill(s)) add(one(s.seq_q, s.seq_kv), s.batch);
  else
    for (const SeqGroup& g : s.seq_lens.groups()) add(one(g.item.q, g.item.kv), g.count);
  return total > ~std::uint64_t{0} ? ~std::uint64_t{0} : static_cast<std::uint64_t>(total);
}

std::uint64_t forward_lse_bytes(const Shape& s) {
  validate(s);
  return over_sequences(s, "log-sum-exp bytes",
                        [&](std::uint64_t nq, std::uint64_t) { return checked_product("log-sum-exp bytes", 4, s.heads, nq); });
}

ModelBytes evaluate(const Shape& s) {
  const std::uint64_t flops = pass_flops(s);
  if (s.pass == Pass::fwd) return {standard_bytes(s), flash_no_l2_bytes(s), floor_bytes(s), flops};
  const ModelBytes bwd{standard_bwd_bytes(s), flash_bwd_no_l2_bytes(s), floor_bwd_bytes(s), flops};
  if (s.pass == Pass::bwd) return bwd;
  constexpr std::string_view what = "forward + backward bytes";
  // A training forward pass writes the log-sum-exp that FlashAttention's
  // backward (and its floor) reads; standard attention's backward reads P instead.
  const std::uint64_t lse = forward_lse_bytes(s);
  return {checked_add(standard_bytes(s), bwd.standard, what),
          checked_add(checked_add(flash_no_l2_bytes(s), lse, what), bwd.flash_no_l2, what),
          checked_add(checked_add(floor_bytes(s), lse, what), bwd.floor, what), flops};
}

}  // namespace hbmscope
