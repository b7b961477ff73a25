#include "hbmscope/launch_plan.hpp"

#include <algorithm>
#include <array>
#include <climits>

#include "hbmscope/checked.hpp"
#include "hbmscope/decode.hpp"
#include "hbmscope/decode_plan.hpp"
#include "hbmscope/error.hpp"
#include "hbmscope/mask.hpp"
#include "hbmscope/measure.hpp"
#include "hbmscope/reference.hpp"

namespace hbmscope {

namespace {

// Keep in step with the explicit instantiations in src/cuda/flash_*d*.cu
// (the GPU tests run every entry). Registers: ptxas for sm_90 (docs/cuda.md).
struct ConfigEntry {
  FlashConfig config;
  int registers;
};
constexpr std::array<ConfigEntry, 10> entries{{
    {{64, 64, 64, 1}, 157},
    {{64, 128, 64, 1}, 144},
    {{64, 128, 128, 1}, 201},  // v1 default for d = 64 (80 KiB of shared memory): 1 CTA per SM
    {{128, 64, 64, 1}, 205},
    {{128, 128, 64, 1}, 189},  // v1 default for d = 128 (96 KiB): 1 CTA per SM (8 warps x 192)
    {{128, 128, 128, 1}, 247},
    {{64, 64, 64, 2}, 238},
    {{64, 128, 64, 2}, 238},
    {{64, 128, 128, 2}, 255},  // default for d = 64: 80 KiB, 2 CTAs per SM
    {{128, 128, 64, 2}, 255},  // default for d = 128: 96 KiB, 2 CTAs per SM
    // No v2 64 x 64 or 128 x 128 at d = 128: ptxas spills (flash_v2_d128.cu).
}};
constexpr std::array<FlashConfig, entries.size()> configs = [] {
  std::array<FlashConfig, entries.size()> a{};
  for (std::size_t i = 0; i < entries.size(); ++i) a[i] = entries[i].config;
  return a;
}();

constexpr std::uint64_t max_grid_yz = 65535;

std::uint64_t next_pow2(std::uint64_t x) {
  std::uint64_t p = 1;
  while (p < x) p <<= 1;
  return p;
}

}  // namespace

std::span<const FlashConfig> flash_configs() { return configs; }

bool flash_supports(std::uint64_t head_dim) { return head_dim == 64 || head_dim == 128; }

FlashConfig default_flash_config(std::uint64_t head_dim, int version) {
  if (version != 1 && version != 2)
    throw Error("flash kernel: version " + std::to_string(version) + " does not exist (1 and 2 do)");
  if (head_dim == 64) return {64, 128, 128, version};
  if (head_dim == 128) return {128, 128, 64, version};
  throw Error("flash kernel: head dim " + std::to_string(head_dim) +
              " is not compiled (64 and 128 are)");
}

std::string describe(const FlashConfig& c) {
  std::string t = "d=" + std::to_string(c.head_dim) + " Br=" + std::to_string(c.block_rows) +
                  " Bc=" + std::to_string(c.block_cols);
  if (c.version != 1) t += " v" + std::to_string(c.version) + " (" + std::to_string(flash_warps(c)) + " warps)";
  return t;
}

FlashConfig choose_flash_config(std::uint64_t head_dim, std::optional<std::uint64_t> block_rows,
                                std::optional<std::uint64_t> block_cols, int version) {
  const FlashConfig def = default_flash_config(head_dim, version);
  const std::uint64_t br = block_rows.value_or(static_cast<std::uint64_t>(def.block_rows));
  const std::uint64_t bc = block_cols.value_or(static_cast<std::uint64_t>(def.block_cols));
  for (const auto& c : configs)
    if (static_cast<std::uint64_t>(c.head_dim) == head_dim &&
        static_cast<std::uint64_t>(c.block_rows) == br &&
        static_cast<std::uint64_t>(c.block_cols) == bc && c.version == version)
      return c;
  std::string have;
  for (const auto& c : configs)
    if (static_cast<std::uint64_t>(c.head_dim) == head_dim && c.version == version)
      have += (have.empty() ? "" : ", ") + std::to_string(c.block_rows) + "x" +
              std::to_string(c.block_cols);
  throw Error(std::string(version == 1 ? "flash_v1" : "flash") + " kernel: blocks " + std::to_string(br) + "x" +
              std::to_string(bc) + " are not compiled for head dim " + std::to_string(head_dim) + " (have " +
              have + ")");
}

int flash_warps(const FlashConfig& c) { return c.block_rows / (c.version == 2 ? 32 : 16); }

int flash_threads(const FlashConfig& c) { return flash_warps(c) * 32; }

std::size_t flash_smem_bytes(const FlashConfig& c) {
  const auto d = static_cast<std::size_t>(c.head_dim);
  return (static_cast<std::size_t>(c.block_rows) * d + 4 * static_cast<std::size_t>(c.block_cols) * d) *
         2;
}

int flash_registers(const FlashConfig& c) {
  for (const auto& e : entries)
    if (e.config == c) return e.registers;
  return 0;
}

SmLimits sm_limits_for_device(std::string_view name) {
  // By the device's name (a preset and its exported file share it).
  const auto has = [&](std::string_view w) { return name.find(w) != std::string_view::npos; };
  SmLimits l;
  if (has("A100")) l.smem_per_sm = 164 * 1024;
  if (has("L40S") || has("RTX 4090")) {
    l.smem_per_sm = 100 * 1024;
    l.threads_per_sm = 1536;
    l.ctas_per_sm = 24;
  }
  return l;
}

namespace {

std::uint32_t ctas_by_resources(std::uint64_t smem, std::uint32_t threads, int registers, const SmLimits& lim) {
  std::uint64_t n = lim.ctas_per_sm;
  n = std::min<std::uint64_t>(n, lim.threads_per_sm / std::max<std::uint32_t>(threads, 1));
  n = std::min<std::uint64_t>(n, lim.smem_per_sm / (smem + lim.smem_reserved_per_cta));
  if (registers > 0) {
    // Registers are allocated per warp, 8 per thread at a time, in units of 256.
    const std::uint64_t per_thread = ceil_div(static_cast<std::uint64_t>(registers), 8) * 8;
    const std::uint64_t per_warp = ceil_div(per_thread * 32, 256) * 256;
    const std::uint64_t warps = ceil_div(threads, 32);
    n = std::min<std::uint64_t>(n, lim.registers_per_sm / (per_warp * warps));
  }
  return static_cast<std::uint32_t>(std::max<std::uint64_t>(n, 1));
}

}  // namespace

std::uint32_t flash_ctas_per_sm(const FlashConfig& c, const SmLimits& lim) {
  return ctas_by_resources(flash_smem_bytes(c), static_cast<std::uint32_t>(flash_threads(c)), flash_registers(c),
                           lim);
}

std::uint32_t shape_ctas_per_sm(const Shape& s, const SmLimits& lim) {
  const auto br = static_cast<int>(std::min<std::uint64_t>(s.block_rows, 1u << 20));
  const auto bc = static_cast<int>(std::min<std::uint64_t>(s.block_cols, 1u << 20));
  for (int version : {2, 1})
    for (const auto& c : configs)
      if (static_cast<std::uint64_t>(c.head_dim) == s.head_dim && c.block_rows == br && c.block_cols == bc &&
          c.version == version)
        return flash_ctas_per_sm(c, lim);
  // No compiled kernel: a v2-like CTA (32 rows per warp) of the shape's blocks.
  const std::uint64_t e = elem_bytes(s.dtype);
  const std::uint64_t smem = (s.block_rows + 4 * s.block_cols) * std::min<std::uint64_t>(s.head_dim, 1u << 20) * e;
  const std::uint64_t threads = std::max<std::uint64_t>(32, ceil_div(s.block_rows, 32) * 32);
  if (threads > 1024 || smem > lim.smem_per_sm) return 1;
  return ctas_by_resources(smem, static_cast<std::uint32_t>(threads), 0, lim);
}

LaunchGeometry flash_geometry(const Shape& s, const FlashConfig& c) {
  if (s.head_dim != static_cast<std::uint64_t>(c.head_dim))
    throw Error("flash kernel: shape head dim " + std::to_string(s.head_dim) +
                " does not match the instantiation " + describe(c));
  LaunchGeometry g;
  const std::uint64_t qb = ceil_div(s.seq_q, static_cast<std::uint64_t>(c.block_rows));
  if (qb > static_cast<std::uint64_t>(INT_MAX) || s.seq_q > static_cast<std::uint64_t>(INT_MAX) ||
      s.seq_kv > static_cast<std::uint64_t>(INT_MAX))
    throw Error("flash kernel: sequence length too long for 32-bit indices: " + describe(s));
  if (s.heads > max_grid_yz)
    throw Error("flash kernel: " + std::to_string(s.heads) + " heads exceed the grid's 65535");
  if (s.batch > max_grid_yz)
    throw Error("flash kernel: batch " + std::to_string(s.batch) + " exceeds the grid's 65535");
  g.grid_x = static_cast<std::uint32_t>(qb);
  g.grid_y = static_cast<std::uint32_t>(s.heads);
  g.grid_z = static_cast<std::uint32_t>(s.batch);
  g.threads = static_cast<std::uint32_t>(flash_threads(c));
  g.smem_bytes = flash_smem_bytes(c);
  return g;
}

std::uint64_t score_row_stride(const Shape& s) { return ceil_div(s.seq_kv, 8) * 8; }

SoftmaxPlan softmax_plan(const Shape& s) {
  SoftmaxPlan p;
  const std::uint64_t chunks = score_row_stride(s) / 8;
  p.rows = checked_product("softmax rows", s.batch, s.heads, s.seq_q);
  if (chunks <= 256) {
    p.threads = static_cast<std::uint32_t>(std::max<std::uint64_t>(32, next_pow2(chunks)));
    p.chunks_per_thread = 1;
  } else if (chunks <= 8 * 256) {
    p.threads = 256;
    p.chunks_per_thread = static_cast<std::uint32_t>(next_pow2(ceil_div(chunks, 256)));
  } else {
    p.threads = 1024;
    p.chunks_per_thread = 8;
    p.single_pass = false;
  }
  if (p.rows > static_cast<std::uint64_t>(INT_MAX))
    throw Error("softmax kernel: " + std::to_string(p.rows) + " rows exceed the grid's limit");
  return p;
}

FloorPlan floor_plan(const Shape& s, int sm_count) {
  FloorPlan p;
  p.q_chunks = checked_product("floor chunks", s.batch, s.heads, s.seq_q, s.head_dim) / 8;
  p.kv_chunks = checked_product("floor chunks", s.batch, s.kv_heads, s.seq_kv, s.head_dim) / 8;
  const std::uint64_t n = std::max(p.q_chunks, p.kv_chunks);
  const std::uint64_t per_block = static_cast<std::uint64_t>(p.threads) * p.unroll;
  const std::uint64_t wanted = ceil_div(n, per_block);
  // Enough CTAs for every SM to hold several; the grid-stride loop does the rest.
  const std::uint64_t cap = static_cast<std::uint64_t>(std::max(sm_count, 1)) * 8;
  p.blocks = static_cast<std::uint32_t>(std::max<std::uint64_t>(1, std::min(wanted, cap)));
  return p;
}

std::uint64_t device_footprint(const Shape& s, KernelKind k) {
  const std::uint64_t e = elem_bytes(s.dtype);
  const std::uint64_t q = checked_product("footprint", s.batch, s.heads, s.seq_q, s.head_dim, e);
  const std::uint64_t kv = checked_product("footprint", s.batch, s.kv_heads, s.seq_kv, s.head_dim, e);
  const std::uint64_t qkvo = checked_add(checked_mul(q, 2, "footprint"), checked_mul(kv, 2, "footprint"),
                                         "footprint");
  switch (k) {
    case KernelKind::softmax:
    case KernelKind::standard: {
      const std::uint64_t sp =
          checked_product("footprint", s.batch, s.heads, s.seq_q, score_row_stride(s), e);
      return checked_add(qkvo, checked_mul(sp, 2, "footprint"), "footprint");
    }
    case KernelKind::flash:
    case KernelKind::flash_v1:
      return checked_add(qkvo, checked_product("footprint", s.batch, s.heads, s.seq_q, 4), "footprint");
    case KernelKind::floor: return qkvo;
    case KernelKind::copy: return 0;  // the copy probe has its own fixed buffers
    case KernelKind::decode:
    case KernelKind::decode_paged: {
      const bool paged = k == KernelKind::decode_paged;
      const std::uint64_t splits =
          s.splits ? s.splits : decode_splits(s, paged ? DecodeVariant::paged : DecodeVariant::split, default_decode_sm_count);
      return decode_footprint(s, decode_plan(s, paged, splits));
    }
  }
  return qkvo;
}

std::optional<std::string> unsupported_reason(const Shape& s, KernelKind k) {
  if (k == KernelKind::copy) return std::nullopt;
  if (k == KernelKind::decode || k == KernelKind::decode_paged) return decode_unsupported_reason(s);
  if (s.decode)
    return std::string("a decode row runs the decode kernels (--kernels decode,decode_paged)");
  if (s.dtype != Dtype::bf16)
    return "the kernels are BF16 only (shape is " + std::string(dtype_name(s.dtype)) + ")";
  if (s.head_dim % 8 != 0)
    return "head dim " + std::to_string(s.head_dim) + " is not a multiple of 8 (16-byte accesses)";
  switch (k) {
    case KernelKind::flash:
    case KernelKind::flash_v1:
      if (!flash_supports(s.head_dim))
        return "flash kernel compiled for head dim 64 and 128 only (shape has " +
               std::to_string(s.head_dim) + ")";
      break;
    case KernelKind::floor:
      // The floor kernel reads every key; the floor the model counts reads
      // only the keys some query sees (row 0 sees the first of them).
      if (const KeyRange first = visible_keys(s, 0); !first.empty() && first.begin > 0)
        return "the floor kernel reads every key, and keys 0 to " + std::to_string(first.begin - 1) +
               " are seen by no query under this mask";
      break;
    case KernelKind::softmax:
    case KernelKind::standard: {
      const std::uint64_t rows = s.heads / s.kv_heads * s.seq_q;
      if (rows > static_cast<std::uint64_t>(INT_MAX) || score_row_stride(s) > static_cast<std::uint64_t>(INT_MAX) ||
          s.batch * s.kv_heads > static_cast<std::uint64_t>(INT_MAX))
        return "sizes exceed cuBLAS's 32-bit GEMM dimensions";
      break;
    }
    default: break;
  }
  return std::nullopt;
}

std::optional<std::string> measure_refusal(const Shape& s, KernelKind k) {
  if (k == KernelKind::copy) return std::nullopt;
  if (s.latent_kv) return "a latent KV (MLA): they read K and V heads of their own";
  if (s.head_dim_v != 0 && s.head_dim_v != s.head_dim)
    return "a V head dim other than --head-dim (--head-dim-v " + std::to_string(s.head_dim_v) + " against " +
           std::to_string(s.head_dim) + ")";
  if (s.kv_dtype && *s.kv_dtype != Dtype::bf16)
    return "K and V in a dtype of their own (--kv-dtype " + std::string(dtype_name(*s.kv_dtype)) +
           "; they read bf16)";
  if (!s.seq_lens.empty()) return "ragged prefill batches (--seq-lens; one length per launch)";
  if (s.chunk != 0 && (k == KernelKind::flash || k == KernelKind::flash_v1))
    return "chunked attention (--chunk) in the flash kernels (the standard path and the decode kernels run it)";
  return std::nullopt;
}

void check_measurable(const Shape& s, std::span<const KernelKind> kinds) {
  for (const KernelKind k : kinds)
    if (auto why = measure_refusal(s, k))
      throw Error("measure: our kernels do not run " + *why + " (kernel " + std::string(kernel_name(k)) + ", shape " +
                  describe(s) + "); `hbmscope model` counts it");
}

bool fits_in_memory(std::uint64_t need, std::uint64_t free_bytes) {
  const std::uint64_t margin = std::max<std::uint64_t>(free_bytes / 20, 256ull << 20);
  return free_bytes > margin && need <= free_bytes - margin;
}

std::uint64_t cut_band(std::uint64_t band, std::uint64_t keys, std::uint64_t cut_keys) {
  if (band == 0 || band >= keys || band < cut_keys) return band;
  return std::max<std::uint64_t>(1, cut_keys / 2);
}

Shape validation_shape(const Shape& s) {
  const auto cost = [](const Shape& x) {
    return static_cast<double>(x.batch) * static_cast<double>(x.heads) * static_cast<double>(x.seq_q) *
           static_cast<double>(x.seq_kv) * static_cast<double>(x.head_dim);
  };
  if (cost(s) <= static_cast<double>(validation_budget)) return s;
  Shape v = s;
  const std::uint64_t group = s.heads / s.kv_heads;
  v.batch = std::min<std::uint64_t>(s.batch, 2);
  v.kv_heads = std::min<std::uint64_t>(s.kv_heads, 2);
  v.heads = v.kv_heads * std::min<std::uint64_t>(group, 2);
  constexpr std::uint64_t cap = 1024, cut = 1000;
  v.seq_q = s.seq_q <= cap ? s.seq_q : cut;
  v.seq_kv = s.seq_kv <= cap ? s.seq_kv : cut;
  // Keep the sign of Nkv - Nq (it decides which rows the causal mask hides).
  const auto sign = [](const Shape& x) { return (x.seq_kv > x.seq_q) - (x.seq_kv < x.seq_q); };
  if (sign(v) != sign(s)) {
    if (s.seq_kv > s.seq_q) v.seq_kv = v.seq_q + 24;
    else v.seq_q = v.seq_kv + 24;
  }
  v.window = cut_band(s.window, s.seq_kv, v.seq_kv);
  v.chunk = cut_band(s.chunk, s.seq_kv, v.seq_kv);
  return v;
}

std::uint64_t flush_bytes(std::uint64_t l2_bytes) {
  const std::uint64_t mib = 1ull << 20;
  return std::max<std::uint64_t>(ceil_div(checked_mul(l2_bytes, 2, "flush size"), mib) * mib, mib);
}

}  // namespace hbmscope
