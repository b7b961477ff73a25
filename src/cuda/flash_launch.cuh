#pragma once
// Launching one flash instantiation: raise its dynamic shared-memory limit
// (over 48 KiB needs the opt-in), launch, check the launch.
#include "check.hpp"
#include "flash_attention.cuh"
#include "hbmscope/launch_plan.hpp"

namespace hbmscope::cuda {

template <int D, int Br, int Bc>
void launch_flash_instance(const flash::FlashParams& p, const LaunchGeometry& g, cudaStream_t stream) {
  using Sh = flash::FlashShape<D, Br, Bc>;
  static_assert(Sh::threads <= 1024);
  auto* kernel = &flash::flash_forward_kernel<D, Br, Bc>;
  // Once per process (hbmscope uses one device): a host call per launch would
  // leave gaps between the back-to-back launches of the "warm" figure.
  static const bool smem_limit_raised = [kernel] {
    HBMSCOPE_CUDA_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Sh::smem_bytes));
    return true;
  }();
  (void)smem_limit_raised;
  kernel<<<dim3(g.grid_x, g.grid_y, g.grid_z), Sh::threads, Sh::smem_bytes, stream>>>(p);
  HBMSCOPE_CUDA_CHECK(cudaGetLastError());
}

// Launches the instantiation among Configs... that equals `c`; false if none does.
template <FlashConfig... Configs>
bool launch_flash_among(const FlashConfig& c, const flash::FlashParams& p, const LaunchGeometry& g,
                        cudaStream_t stream) {
  return ((c == Configs ? (launch_flash_instance<Configs.head_dim, Configs.block_rows, Configs.block_cols>(
                               p, g, stream),
                           true)
                        : false) ||
          ...);
}

}  // namespace hbmscope::cuda
