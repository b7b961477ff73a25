#include "decode_backend.hpp"

#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "check.hpp"
#include "device_buffer.hpp"
#include "decode_launch.hpp"
#include "hbmscope/decode.hpp"
#include "hbmscope/decode_plan.hpp"
#include "hbmscope/decode_reference.hpp"
#include "hbmscope/error.hpp"
#include "hbmscope/measure.hpp"
#include "hbmscope/printers.hpp"
#include "hbmscope/reference.hpp"
#include "kernels.hpp"

namespace hbmscope::cuda {

namespace {

constexpr double bf16_threshold = 1e-2;


// K/V elements the kernel's cache holds: B*Hkv*seq_kv*d contiguous, or the
// page pool.
std::uint64_t cache_elements(const Shape& s, const DecodePlan& plan) {
  return plan.paged ? plan.pages * s.kv_heads * plan.page_size * s.head_dim : kv_elements(s);
}

struct DecodeBuffers {
  DeviceBuffer q, k, v, o, lse, o_part, lse_part, seq_lens, block_table;
  std::vector<std::int32_t> table;  // host copy of the block table (paged)

  DecodeBuffers(const Shape& s, const DecodePlan& plan, std::uint64_t seed, cudaStream_t stream) {
    const std::uint64_t cache = cache_elements(s, plan) * 2;
    q = DeviceBuffer(q_elements(s) * 2);
    o = DeviceBuffer(q_elements(s) * 2);
    k = DeviceBuffer(cache);
    v = DeviceBuffer(cache);
    lse = DeviceBuffer(plan.rows * 4);
    if (plan.splits > 1) {
      o_part = DeviceBuffer(plan.rows * plan.splits * s.head_dim * 4);
      lse_part = DeviceBuffer(plan.rows * plan.splits * 4);
    }
    if (!s.context_lengths.empty()) {
      std::vector<std::int32_t> lens;
      for (const SeqLen& l : s.context_lengths) lens.push_back(static_cast<std::int32_t>(l.kv));
      seq_lens = DeviceBuffer(lens.size() * 4);
      upload(seq_lens, lens.data(), lens.size() * 4, stream);
    }
    if (plan.paged) {
      table = decode_block_table(s, plan, seed);
      block_table = DeviceBuffer(table.size() * 4);
      upload(block_table, table.data(), table.size() * 4, stream);
    }
  }

  // Synchronises so that `host` may go away.
  static void upload(DeviceBuffer& dst, const void* host, std::uint64_t bytes, cudaStream_t stream) {
    HBMSCOPE_CUDA_CHECK(cudaMemcpyAsync(dst.get(), host, bytes, cudaMemcpyHostToDevice, stream));
    HBMSCOPE_CUDA_CHECK(cudaStreamSynchronize(stream));
  }

  decode::DecodeParams params(const Shape& s, const DecodePlan& plan) const {
    decode::DecodeParams p{};
    p.q = q.get<__nv_bfloat16>();
    p.k = k.get<__nv_bfloat16>();
    p.v = v.get<__nv_bfloat16>();
    p.o = o.get<__nv_bfloat16>();
    p.lse = lse.get<float>();
    p.o_part = o_part.get<float>();
    p.lse_part = lse_part.get<float>();
    p.seq_lens = seq_lens.get<const int>();
    p.block_table = block_table.get<const int>();
    p.heads = static_cast<int>(s.heads);
    p.kv_heads = static_cast<int>(s.kv_heads);
    p.seq_q = static_cast<int>(s.seq_q);
    p.seq_kv = static_cast<int>(s.seq_kv);
    p.kv_stride = static_cast<long long>(plan.kv_stride);
    p.page_size = static_cast<int>(plan.page_size);
    p.max_pages = static_cast<int>(plan.max_pages);
    p.splits = static_cast<int>(plan.splits);
    p.split_tokens = static_cast<long long>(plan.split_tokens);
    p.row_blocks = static_cast<int>(plan.row_blocks);
    p.causal = s.causal ? 1 : 0;
    // A window or a chunk of at least the longest context hides nothing (and may not fit an int).
    p.window = s.window < s.seq_kv ? static_cast<int>(s.window) : 0;
    p.chunk = s.chunk < s.seq_kv ? static_cast<int>(s.chunk) : 0;
    p.scale = default_scale(s);
    p.scale_log2 = p.scale * 1.4426950408889634f;
    return p;
  }
};

std::optional<std::string> shortfall(const Shape& s, const DecodePlan& plan, const DecodeContext& ctx) {
  const std::uint64_t need = decode_footprint(s, plan), free_b = ctx.free_memory();
  if (fits_in_memory(need, free_b)) return std::nullopt;
  return "needs " + format_bytes(need, Units::decimal) + " of device memory, " +
         format_bytes(free_b, Units::decimal) + " free";
}

// Random inputs from the CPU, every output poisoned (all-ones bytes: NaN in
// bf16 and fp32, so an element never written fails), one run, then the CPU
// reference: contiguous, or through the same block table for the paged cache.
void validate(const Shape& s, const DecodePlan& plan, std::uint64_t seed, const DecodeContext& ctx,
              KernelMeasurement& m) {
  DecodeBuffers b(s, plan, seed, ctx.stream);
  const AttentionBuffers in = random_inputs(s, seed);  // Q, and K/V of the contiguous layout
  std::vector<float> k = in.k, v = in.v;
  if (plan.paged) {
    std::mt19937_64 rng(seed ^ 0x5eed);
    std::uniform_real_distribution<float> dist(-1.f, 1.f);
    k.resize(cache_elements(s, plan));
    v.resize(k.size());
    for (auto* x : {&k, &v})
      for (float& e : *x) e = round_to_dtype(dist(rng), Dtype::bf16);
  }
  const auto qb = to_bf16_bits(in.q), kb = to_bf16_bits(k), vb = to_bf16_bits(v);
  DecodeBuffers::upload(b.q, qb.data(), qb.size() * 2, ctx.stream);
  DecodeBuffers::upload(b.k, kb.data(), kb.size() * 2, ctx.stream);
  DecodeBuffers::upload(b.v, vb.data(), vb.size() * 2, ctx.stream);
  for (DeviceBuffer* out : {&b.o, &b.lse, &b.o_part, &b.lse_part})
    if (out->bytes()) HBMSCOPE_CUDA_CHECK(cudaMemsetAsync(out->get(), 0xff, out->bytes(), ctx.stream));
  launch_decode(plan, b.params(s, plan), ctx.stream);
  HBMSCOPE_CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
  std::vector<std::uint16_t> o_bits(q_elements(s));
  std::vector<float> lse(lse_elements(s));
  HBMSCOPE_CUDA_CHECK(cudaMemcpy(o_bits.data(), b.o.get(), o_bits.size() * 2, cudaMemcpyDeviceToHost));
  HBMSCOPE_CUDA_CHECK(cudaMemcpy(lse.data(), b.lse.get(), lse.size() * 4, cudaMemcpyDeviceToHost));
  std::vector<float> o(o_bits.size());
  for (std::size_t i = 0; i < o.size(); ++i) o[i] = bf16_bits_to_float(o_bits[i]);

  std::vector<float> ref(q_elements(s)), ref_lse(lse_elements(s));
  if (plan.paged)
    decode_attention_paged_reference(s, default_scale(s), in.q, k, v, b.table, plan.max_pages, ref, ref_lse);
  else
    decode_attention_reference(s, default_scale(s), in.q, k, v, ref, ref_lse);
  m.rel_error = relative_l2_error(o, ref);
  m.lse_rel_error = lse_relative_error(lse, ref_lse);
}

}  // namespace

KernelMeasurement run_decode(const Shape& shape, KernelKind kind, const MeasureOptions& opt, const DecodeContext& ctx) {
  KernelMeasurement m;
  m.kernel = std::string(kernel_name(kind));
  m.variant = std::string(kernel_variant(kind));
  const bool paged = kind == KernelKind::decode_paged;
  if (auto why = decode_unsupported_reason(shape)) {
    m.status = MeasureStatus::skipped;
    m.reason = *why;
    return m;
  }
  Shape s = shape;
  DecodePlan plan;
  try {
    if (s.splits == 0)
      s.splits = decode_splits(shape, paged ? DecodeVariant::paged : DecodeVariant::split,
                               static_cast<std::uint64_t>(ctx.sm_count));
    plan = decode_plan(s, paged, s.splits);
  } catch (const Error& e) {  // past the kernels' limits: nothing to run
    m.status = MeasureStatus::skipped;
    m.reason = e.what();
    return m;
  }
  m.splits = plan.splits;
  m.page_size = paged ? plan.page_size : 0;
  if (auto why = shortfall(s, plan, ctx)) {
    m.status = MeasureStatus::skipped;
    m.reason = *why;
    return m;
  }
  if (opt.validate) {
    const Shape vs = opt.validate_full_shape ? s : decode_validation_shape(s);
    const DecodePlan vplan = decode_plan(vs, paged, vs.splits);
    m.validated_on = describe(vs);
    if (auto why = shortfall(vs, vplan, ctx)) {
      m.status = MeasureStatus::skipped;
      m.reason = "validation shape: " + *why;
      return m;
    }
    validate(vs, vplan, opt.seed, ctx, m);
    if (!(m.rel_error < bf16_threshold) || !(m.lse_rel_error < bf16_threshold)) {
      m.status = MeasureStatus::failed;
      char buf[160];
      std::snprintf(buf, sizeof buf, "wrong result: relative L2 error %.3g (O), %.3g (LSE), threshold %.0e",
                    m.rel_error, m.lse_rel_error, bf16_threshold);
      m.reason = buf;
      return m;
    }
  }
  if (opt.repeats > 0 || opt.counters) {
    DecodeBuffers b(s, plan, opt.seed, ctx.stream);
    // Random data generated on the device, not zeros (see docs/cuda.md).
    launch_fill_random(b.q.get<__nv_bfloat16>(), q_elements(s), opt.seed * 3 + 1, ctx.stream);
    launch_fill_random(b.k.get<__nv_bfloat16>(), cache_elements(s, plan), opt.seed * 3 + 2, ctx.stream);
    launch_fill_random(b.v.get<__nv_bfloat16>(), cache_elements(s, plan), opt.seed * 3 + 3, ctx.stream);
    HBMSCOPE_CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
    const decode::DecodeParams p = b.params(s, plan);
    const auto launch = [&] { launch_decode(plan, p, ctx.stream); };
    if (opt.repeats > 0) m.timing = ctx.time(launch);
    if (opt.counters && ctx.count) ctx.count(launch, m);
  }
  m.status = MeasureStatus::ok;
  return m;
}

}  // namespace hbmscope::cuda
