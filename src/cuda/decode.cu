// The decode kernels' instantiations (d 64 and 128; 1, 2 or 4 m-tiles;
// contiguous or paged cache) and their launch: the split kernel, then the
// combine kernel when there is more than one split.
#include "check.hpp"
#include "decode_attention.cuh"
#include "hbmscope/error.hpp"
#include "decode_launch.hpp"

namespace hbmscope::cuda {

namespace {

template <int D, int MTiles, bool Paged>
void launch_split(const decode::DecodeParams& p, const LaunchGeometry& g, cudaStream_t stream) {
  using Sh = decode::DecodeShape<D, MTiles>;
  auto* kernel = &decode::decode_split_kernel<D, MTiles, Paged>;
  // Once per process, as for the flash kernel: no host call between launches.
  static const bool smem_limit_raised = [kernel] {
    HBMSCOPE_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Sh::smem_bytes));
    return true;
  }();
  (void)smem_limit_raised;
  if (g.smem_bytes != static_cast<std::size_t>(Sh::smem_bytes) || g.threads != decode::threads)
    throw Error("decode kernel: the plan's shared memory or block size does not match the instantiation");
  kernel<<<dim3(g.grid_x, g.grid_y, g.grid_z), decode::threads, Sh::smem_bytes, stream>>>(p);
  HBMSCOPE_CUDA_CHECK(cudaGetLastError());
}

template <int D, bool Paged>
void launch_split_m(int m_tiles, const decode::DecodeParams& p, const LaunchGeometry& g, cudaStream_t stream) {
  switch (m_tiles) {
    case 1: return launch_split<D, 1, Paged>(p, g, stream);
    case 2: return launch_split<D, 2, Paged>(p, g, stream);
    case 4: return launch_split<D, 4, Paged>(p, g, stream);
    default: throw Error("decode kernel: no instantiation for " + std::to_string(m_tiles) + " m-tiles");
  }
}

template <int D>
void launch_combine(const decode::DecodeParams& p, const DecodePlan& plan, cudaStream_t stream) {
  decode::decode_combine_kernel<D><<<plan.combine.grid_x, decode::threads, 0, stream>>>(
      p, static_cast<long long>(plan.rows));
  HBMSCOPE_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void launch_decode(const DecodePlan& plan, const decode::DecodeParams& p, cudaStream_t stream) {
  const int m = static_cast<int>(plan.m_tiles);
  if (plan.head_dim == 128) {
    plan.paged ? launch_split_m<128, true>(m, p, plan.split, stream) : launch_split_m<128, false>(m, p, plan.split, stream);
    if (plan.splits > 1) launch_combine<128>(p, plan, stream);
  } else if (plan.head_dim == 64) {
    plan.paged ? launch_split_m<64, true>(m, p, plan.split, stream) : launch_split_m<64, false>(m, p, plan.split, stream);
    if (plan.splits > 1) launch_combine<64>(p, plan, stream);
  } else {
    throw Error("decode kernel: head dim " + std::to_string(plan.head_dim) + " is not compiled (64 and 128 are)");
  }
}

}  // namespace hbmscope::cuda
