// The CUDA backend: device information, buffers, validation against the CPU
// reference, and event timing with an L2 flush before every sample.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "check.hpp"
#include "device_buffer.hpp"
#include "decode_backend.hpp"
#include "dram_counters.hpp"
#include "hbmscope/backend.hpp"
#include "hbmscope/error.hpp"
#include "hbmscope/measure.hpp"
#include "hbmscope/printers.hpp"
#include "hbmscope/reference.hpp"
#include "kernels.hpp"
#include "plugin.hpp"

namespace hbmscope {

namespace {

using cuda::check;

using cuda::DeviceBuffer;

struct Buffers {
  DeviceBuffer q, k, v, o, lse, s, p;
};

constexpr double bf16_threshold = 1e-2;

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(int index) {
    HBMSCOPE_CUDA_CHECK(cudaSetDevice(index));
    info_.index = index;
    cudaDeviceProp prop{};
    HBMSCOPE_CUDA_CHECK(cudaGetDeviceProperties(&prop, index));
    info_.name = prop.name;
    auto attr = [&](cudaDeviceAttr a) {
      int v = 0;
      HBMSCOPE_CUDA_CHECK(cudaDeviceGetAttribute(&v, a, index));
      return v;
    };
    info_.cc_major = attr(cudaDevAttrComputeCapabilityMajor);
    info_.cc_minor = attr(cudaDevAttrComputeCapabilityMinor);
    info_.sm_count = attr(cudaDevAttrMultiProcessorCount);
    info_.l2_bytes = static_cast<std::uint64_t>(attr(cudaDevAttrL2CacheSize));
    info_.memory_clock_khz = static_cast<std::uint64_t>(attr(cudaDevAttrMemoryClockRate));
    info_.bus_width_bits = attr(cudaDevAttrGlobalMemoryBusWidth);
    info_.peak_bandwidth = 2.0 * static_cast<double>(info_.memory_clock_khz) * 1e3 *
                           static_cast<double>(info_.bus_width_bits) / 8.0;
    HBMSCOPE_CUDA_CHECK(cudaDriverGetVersion(&info_.driver_version));
    HBMSCOPE_CUDA_CHECK(cudaRuntimeGetVersion(&info_.runtime_version));
    refresh_memory();
    HBMSCOPE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    HBMSCOPE_CUDA_CHECK(cublasCreate(&blas_));
    HBMSCOPE_CUDA_CHECK(cublasSetStream(blas_, stream_));
    HBMSCOPE_CUDA_CHECK(cudaEventCreate(&start_));
    HBMSCOPE_CUDA_CHECK(cudaEventCreate(&stop_));
  }

  ~CudaBackend() override {
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
    cublasDestroy(blas_);
    cudaStreamDestroy(stream_);
  }

  bool available() const override { return true; }
  std::string unavailable_reason() const override { return {}; }
  DeviceInfo device() const override { return info_; }

  KernelMeasurement run(const Shape& shape, KernelKind kind, const MeasureOptions& opt) override {
    check_measurable(shape, std::span<const KernelKind>(&kind, 1));  // as the no-GPU backend
    if (kind == KernelKind::decode || kind == KernelKind::decode_paged) {
      cuda::DecodeContext ctx;
      ctx.stream = stream_;
      ctx.sm_count = info_.sm_count;
      ctx.free_memory = [this] {
        refresh_memory();
        return info_.free_memory;
      };
      ctx.time = [this, &opt](const std::function<void()>& launch) { return time(launch, opt); };
      ctx.count = [this, &opt](const std::function<void()>& launch, KernelMeasurement& m) {
        count_dram(launch, m, opt);
      };
      return cuda::run_decode(shape, kind, opt, ctx);
    }
    KernelMeasurement m;
    m.kernel = std::string(kernel_name(kind));
    m.variant = std::string(kernel_variant(kind));
    if (auto why = unsupported_reason(shape, kind)) {
      m.status = MeasureStatus::skipped;
      m.reason = *why;
      return m;
    }
    FlashConfig cfg{};
    if (kind == KernelKind::flash || kind == KernelKind::flash_v1) {
      try {
        cfg = choose_flash_config(shape.head_dim, shape.block_rows, shape.block_cols,
                                  kind == KernelKind::flash ? 2 : 1);
      } catch (const Error& e) {  // blocks that are not compiled: nothing to run
        m.status = MeasureStatus::skipped;
        m.reason = e.what();
        return m;
      }
      m.block_rows = static_cast<std::uint64_t>(cfg.block_rows);
      m.block_cols = static_cast<std::uint64_t>(cfg.block_cols);
      m.warps = static_cast<std::uint64_t>(flash_warps(cfg));
    }
    if (auto why = memory_shortfall(shape, kind)) {
      m.status = MeasureStatus::skipped;
      m.reason = *why;
      return m;
    }
    if (opt.validate) {
      const Shape vs = opt.validate_full_shape ? shape : validation_shape(shape);
      m.validated_on = describe(vs);
      if (auto why = memory_shortfall(vs, kind)) {
        m.status = MeasureStatus::skipped;
        m.reason = "validation shape: " + *why;
        return m;
      }
      // The softmax is checked as part of the standard path it belongs to.
      validate(vs, kind == KernelKind::softmax ? KernelKind::standard : kind, cfg, opt.seed, m);
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
      Buffers b = allocate(shape, kind);
      fill_inputs(shape, b, opt.seed);
      std::function<void()> launch = [&] { enqueue(shape, kind, cfg, b); };
      if (kind == KernelKind::softmax) {
        enqueue_scores(shape, b);  // a real S to normalise
        launch = [&] { enqueue_softmax(shape, b); };
      }
      if (opt.repeats > 0) m.timing = time(launch, opt);
      if (opt.counters) count_dram(launch, m, opt);
    }
    m.status = MeasureStatus::ok;
    return m;
  }

  KernelMeasurement copy_probe(const MeasureOptions& opt) override {
    KernelMeasurement m;
    m.kernel = "copy";
    m.variant = "copy";
    refresh_memory();
    const std::uint64_t size =
        std::min<std::uint64_t>(opt.copy_bytes, info_.free_memory / 4) / (1ull << 20) * (1ull << 20);
    if (size < 4 * info_.l2_bytes) {
      m.status = MeasureStatus::skipped;
      m.reason = "not enough free device memory for a copy of 4x the L2 size";
      return m;
    }
    DeviceBuffer src(size), dst(size);
    cuda::launch_fill_random(src.get<__nv_bfloat16>(), size / 2, opt.seed, stream_);
    m.validated_on = "not validated (a runtime copy)";
    m.timing = time(
        [&] { HBMSCOPE_CUDA_CHECK(cudaMemcpyAsync(dst.get(), src.get(), size, cudaMemcpyDeviceToDevice, stream_)); },
        opt);
    m.model_bytes = 2 * size;
    m.status = MeasureStatus::ok;
    return m;
  }

 private:
  void refresh_memory() {
    std::size_t free_b = 0, total_b = 0;
    HBMSCOPE_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    info_.free_memory = free_b;
    info_.total_memory = total_b;
  }

  std::optional<std::string> memory_shortfall(const Shape& s, KernelKind kind) {
    refresh_memory();
    const std::uint64_t need = device_footprint(s, kind);
    if (fits_in_memory(need, info_.free_memory)) return std::nullopt;
    return "needs " + format_bytes(need, Units::decimal) + " of device memory, " +
           format_bytes(info_.free_memory, Units::decimal) + " free";
  }

  Buffers allocate(const Shape& s, KernelKind kind) {
    Buffers b;
    const std::uint64_t q = q_elements(s) * 2, kv = kv_elements(s) * 2;
    b.q = DeviceBuffer(q);
    b.k = DeviceBuffer(kv);
    b.v = DeviceBuffer(kv);
    b.o = DeviceBuffer(q);
    if (kind == KernelKind::flash || kind == KernelKind::flash_v1) b.lse = DeviceBuffer(lse_elements(s) * 4);
    if (kind == KernelKind::standard || kind == KernelKind::softmax) {
      const std::uint64_t sp = s.batch * s.heads * s.seq_q * score_row_stride(s) * 2;
      b.s = DeviceBuffer(sp);
      b.p = DeviceBuffer(sp);
    }
    return b;
  }

  // Random bf16 in [-1, 1] generated on the device (random data, not zeros:
  // an element may still round to 0), and no host-side generation for shapes
  // of gigabytes.
  void fill_inputs(const Shape& s, Buffers& b, std::uint64_t seed) {
    cuda::launch_fill_random(b.q.get<__nv_bfloat16>(), q_elements(s), seed * 3 + 1, stream_);
    cuda::launch_fill_random(b.k.get<__nv_bfloat16>(), kv_elements(s), seed * 3 + 2, stream_);
    cuda::launch_fill_random(b.v.get<__nv_bfloat16>(), kv_elements(s), seed * 3 + 3, stream_);
    HBMSCOPE_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }

  // On stream_, which does not wait for the legacy default stream; the
  // synchronisation keeps `bits` alive until the copy has landed.
  void upload(DeviceBuffer& dst, const std::vector<float>& x) {
    const auto bits = to_bf16_bits(x);
    HBMSCOPE_CUDA_CHECK(
        cudaMemcpyAsync(dst.get(), bits.data(), bits.size() * 2, cudaMemcpyHostToDevice, stream_));
    HBMSCOPE_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }

  void validate(const Shape& s, KernelKind kind, const FlashConfig& cfg, std::uint64_t seed,
                KernelMeasurement& m) {
    const AttentionBuffers in = random_inputs(s, seed);
    Buffers b = allocate(s, kind);
    upload(b.q, in.q);
    upload(b.k, in.k);
    upload(b.v, in.v);
    // Poison the outputs (all-ones bytes: bf16 and fp32 NaN) so that an
    // element the kernel never writes cannot pass.
    HBMSCOPE_CUDA_CHECK(cudaMemsetAsync(b.o.get(), 0xff, b.o.bytes(), stream_));
    if (b.lse.bytes()) HBMSCOPE_CUDA_CHECK(cudaMemsetAsync(b.lse.get(), 0xff, b.lse.bytes(), stream_));
    enqueue(s, kind, cfg, b);
    HBMSCOPE_CUDA_CHECK(cudaStreamSynchronize(stream_));
    std::vector<std::uint16_t> o_bits(q_elements(s));
    HBMSCOPE_CUDA_CHECK(cudaMemcpy(o_bits.data(), b.o.get(), o_bits.size() * 2, cudaMemcpyDeviceToHost));
    const std::vector<float> o = from_bf16_bits(o_bits);

    std::vector<float> ref(q_elements(s)), ref_lse(lse_elements(s));
    if (kind == KernelKind::floor) {
      ref = floor_reference(s, in.q, in.k, in.v);
    } else {
      attention_naive(s, default_scale(s), in.q, in.k, in.v, ref, ref_lse);
    }
    m.rel_error = relative_l2_error(o, ref);
    if (kind == KernelKind::flash || kind == KernelKind::flash_v1) {
      std::vector<float> lse(lse_elements(s));
      HBMSCOPE_CUDA_CHECK(cudaMemcpy(lse.data(), b.lse.get(), lse.size() * 4, cudaMemcpyDeviceToHost));
      m.lse_rel_error = lse_relative_error(lse, ref_lse);
    }
  }

  void enqueue(const Shape& s, KernelKind kind, const FlashConfig& cfg, Buffers& b) {
    using bf16 = __nv_bfloat16;
    switch (kind) {
      case KernelKind::flash:
      case KernelKind::flash_v1: {
        flash::FlashParams p{};
        p.q = b.q.get<bf16>();
        p.k = b.k.get<bf16>();
        p.v = b.v.get<bf16>();
        p.o = b.o.get<bf16>();
        p.lse = b.lse.get<float>();
        p.heads = static_cast<int>(s.heads);
        p.kv_heads = static_cast<int>(s.kv_heads);
        p.group_div = flash::fast_div(p.heads / p.kv_heads);
        p.seq_q = static_cast<int>(s.seq_q);
        p.seq_kv = static_cast<int>(s.seq_kv);
        p.causal = s.causal ? 1 : 0;
        p.causal_offset = static_cast<int>(causal_offset(s));
        // No chunk: measure refuses chunked shapes for the flash kernels.
        p.window = flash::make_key_mask(p.seq_q, p.seq_kv, s.causal, static_cast<long long>(s.window), 0).window;
        p.scale = default_scale(s);
        p.scale_log2 = p.scale * 1.4426950408889634f;
        cuda::launch_flash(cfg, p, flash_geometry(s, cfg), stream_);
        break;
      }
      case KernelKind::standard:
        enqueue_scores(s, b);
        enqueue_softmax(s, b);
        enqueue_output(s, b);
        break;
      case KernelKind::floor:
        cuda::launch_floor(floor_plan(s, info_.sm_count), b.q.get<bf16>(), b.k.get<bf16>(),
                           b.v.get<bf16>(), b.o.get<bf16>(), stream_);
        break;
      case KernelKind::softmax: enqueue_softmax(s, b); break;
      case KernelKind::copy: throw Error("the copy probe is not a kernel of a shape");
      case KernelKind::decode:
      case KernelKind::decode_paged: throw Error("the decode kernels run through cuda::run_decode");
    }
  }

  // The standard path as cuBLAS sees it. One GEMM batch entry per (batch, kv
  // head): the group's query heads are contiguous in Q, so they form one
  // (group * Nq) x d matrix against the shared K (and P against the shared V).
  // Row-major [rows][d] is column-major d x rows, so S^T = K^T-op * Q^T etc.
  struct GemmDims {
    int d, nkv, rows, ld, batches;
    long long stride_kv, stride_q, stride_s;
  };
  static GemmDims gemm_dims(const Shape& s) {
    GemmDims g{};
    g.d = static_cast<int>(s.head_dim);
    g.nkv = static_cast<int>(s.seq_kv);
    g.rows = static_cast<int>(s.heads / s.kv_heads * s.seq_q);
    g.ld = static_cast<int>(score_row_stride(s));
    g.batches = static_cast<int>(s.batch * s.kv_heads);
    g.stride_kv = static_cast<long long>(s.seq_kv * s.head_dim);
    g.stride_q = static_cast<long long>(g.rows) * g.d;
    g.stride_s = static_cast<long long>(g.rows) * g.ld;
    return g;
  }

  // S = scale * Q K^T, BF16, rows padded to g.ld.
  void enqueue_scores(const Shape& s, Buffers& b) {
    const GemmDims g = gemm_dims(s);
    const float scale = default_scale(s), zero = 0.f;
    HBMSCOPE_CUDA_CHECK(cublasGemmStridedBatchedEx(
        blas_, CUBLAS_OP_T, CUBLAS_OP_N, g.nkv, g.rows, g.d, &scale, b.k.get(), CUDA_R_16BF, g.d, g.stride_kv,
        b.q.get(), CUDA_R_16BF, g.d, g.stride_q, &zero, b.s.get(), CUDA_R_16BF, g.ld, g.stride_s, g.batches,
        CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  }

  // P = softmax(S) row by row, causal mask applied here.
  void enqueue_softmax(const Shape& s, Buffers& b) {
    cuda::SoftmaxArgs a{};
    a.s = b.s.get<__nv_bfloat16>();
    a.p = b.p.get<__nv_bfloat16>();
    a.rows = s.batch * s.heads * s.seq_q;
    a.rows_per_head = static_cast<int>(s.seq_q);
    a.cols = static_cast<int>(s.seq_kv);
    a.row_stride = static_cast<int>(score_row_stride(s));
    a.causal = s.causal ? 1 : 0;
    a.causal_offset = static_cast<int>(causal_offset(s));
    const flash::KeyMask mask = flash::make_key_mask(a.cols, a.cols, s.causal, static_cast<long long>(s.window),
                                                     static_cast<long long>(s.chunk));
    a.window = mask.window;
    a.chunk = mask.chunk;
    cuda::launch_softmax(softmax_plan(s), a, stream_);
  }

  // O = P V.
  void enqueue_output(const Shape& s, Buffers& b) {
    const GemmDims g = gemm_dims(s);
    const float one = 1.f, zero = 0.f;
    HBMSCOPE_CUDA_CHECK(cublasGemmStridedBatchedEx(
        blas_, CUBLAS_OP_N, CUBLAS_OP_N, g.d, g.rows, g.nkv, &one, b.v.get(), CUDA_R_16BF, g.d, g.stride_kv,
        b.p.get(), CUDA_R_16BF, g.ld, g.stride_s, &zero, b.o.get(), CUDA_R_16BF, g.d, g.stride_q, g.batches,
        CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  }

  // Write then read a buffer of at least twice the L2: the read pass evicts
  // the dirty lines the write left, so the timed kernel is not charged for
  // their write-back.
  void flush_l2(const MeasureOptions& opt) {
    // Allocated at first use, at the size asked for (--flush-bytes).
    const std::uint64_t want = opt.flush_bytes ? opt.flush_bytes : flush_bytes(info_.l2_bytes);
    if (flush_.bytes() != want) {
      flush_ = DeviceBuffer();
      flush_ = DeviceBuffer(want);
    }
    HBMSCOPE_CUDA_CHECK(cudaMemsetAsync(flush_.get(), 0x5a, flush_.bytes(), stream_));
    cuda::launch_read_pass(flush_.get(), flush_.bytes(), info_.sm_count, stream_);
  }

  // One range around one launch, after the flush, as the timed samples. The
  // counter is made on first use; if it cannot be, every measurement says why.
  void count_dram(const std::function<void()>& launch, KernelMeasurement& m, const MeasureOptions& opt) {
    if (!counter_tried_) {
      counter_tried_ = true;
      HBMSCOPE_CUDA_CHECK(cudaStreamSynchronize(stream_));
      counter_ = cuda::make_dram_counter(info_.index, counter_why_);
    }
    if (!counter_) {
      m.counters = counter_why_;
      return;
    }
    const auto sync = [&] { HBMSCOPE_CUDA_CHECK(cudaStreamSynchronize(stream_)); };
    try {
      const cuda::DramCounts c = counter_->count(
          [&] {
            flush_l2(opt);
            sync();
          },
          launch, sync);
      m.dram_read_bytes = c.read_bytes;
      m.dram_write_bytes = c.write_bytes;
      m.counters = "ok";
    } catch (const Error& e) {
      m.counters = std::string("DRAM counters failed: ") + e.what();
    }
  }

  TimingStats time(const std::function<void()>& launch, const MeasureOptions& opt) {
    // At least one untimed launch: module loading, the shared-memory opt-in and
    // cuBLAS's workspace set-up stay out of the first sample.
    for (int i = 0; i < std::max(opt.warmup, 1); ++i) launch();
    HBMSCOPE_CUDA_CHECK(cudaStreamSynchronize(stream_));
    std::vector<double> samples;
    for (int r = 0; r < opt.repeats; ++r) {
      flush_l2(opt);
      HBMSCOPE_CUDA_CHECK(cudaEventRecord(start_, stream_));
      launch();
      HBMSCOPE_CUDA_CHECK(cudaEventRecord(stop_, stream_));
      HBMSCOPE_CUDA_CHECK(cudaEventSynchronize(stop_));
      float ms = 0.f;
      HBMSCOPE_CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
      samples.push_back(static_cast<double>(ms) * 1e-3);
    }
    // Warm: back-to-back launches, no flush; inputs may sit in L2.
    const int warm_runs = std::max(opt.repeats, 1);
    HBMSCOPE_CUDA_CHECK(cudaEventRecord(start_, stream_));
    for (int r = 0; r < warm_runs; ++r) launch();
    HBMSCOPE_CUDA_CHECK(cudaEventRecord(stop_, stream_));
    HBMSCOPE_CUDA_CHECK(cudaEventSynchronize(stop_));
    float ms = 0.f;
    HBMSCOPE_CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
    return summarize(std::move(samples), static_cast<double>(ms) * 1e-3 / warm_runs);
  }

  DeviceInfo info_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t blas_ = nullptr;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
  DeviceBuffer flush_;
  std::unique_ptr<cuda::DramCounter> counter_;
  bool counter_tried_ = false;
  std::string counter_why_;
};

}  // namespace

std::unique_ptr<Backend> plugin::make_cuda_backend(int device_index) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess)
    return make_no_gpu_backend(std::string("no CUDA device: cudaGetDeviceCount: ") + cudaGetErrorName(e) +
                               ": " + cudaGetErrorString(e));
  if (count == 0) return make_no_gpu_backend("no CUDA device: the driver reports 0 devices");
  if (device_index < 0 || device_index >= count)
    return make_no_gpu_backend("no CUDA device with index " + std::to_string(device_index) + " (the driver reports " +
                               std::to_string(count) + ")");
  return std::make_unique<CudaBackend>(device_index);
}

}  // namespace hbmscope
