#pragma once
// Launching one flash instantiation: raise its dynamic shared-memory limit
// (over 48 KiB needs the opt-in), launch, check the launch.
#include "check.hpp"
#include "flash_attention.cuh"
#include "flash_attention_v2.cuh"
#include "hbmscope/error.hpp"
#include "hbmscope/launch_plan.hpp"

#include <type_traits>

namespace hbmscope::cuda {

template <int Version, int D, int Br, int Bc>
void launch_flash_instance(const flash::FlashParams& p, const LaunchGeometry& g, cudaStream_t stream) {
  using Sh = std::conditional_t<Version == 2, flash::FlashShapeV2<D, Br, Bc>, flash::FlashShape<D, Br, Bc>>;
  static_assert(Sh::threads <= 1024);
  void (*kernel)(flash::FlashParams) = nullptr;
  if constexpr (Version == 2)
    kernel = &flash::flash_forward_v2_kernel<D, Br, Bc>;
  else
    kernel = &flash::flash_forward_kernel<D, Br, Bc>;
  // Once per process (hbmscope uses one device): a host call per launch would
  // leave gaps between the back-to-back launches of the "warm" figure.
  static const bool smem_limit_raised = [kernel] {
    HBMSCOPE_CUDA_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Sh::smem_bytes));
    // v2 counts on two CTAs per SM (2 x 97 KiB at d = 128): ask for the
    // largest shared-memory carveout rather than leave it to the driver's
    // choice (the kernel's loads bypass L1, cp.async.cg).
    if constexpr (Version == 2)
      HBMSCOPE_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                               cudaSharedmemCarveoutMaxShared));
    return true;
  }();
  (void)smem_limit_raised;
  if (g.threads != static_cast<std::uint32_t>(Sh::threads) || g.smem_bytes != static_cast<std::size_t>(Sh::smem_bytes))
    throw Error("flash kernel: launch geometry does not match the instantiation (launch_plan.cpp)");
  kernel<<<dim3(g.grid_x, g.grid_y, g.grid_z), Sh::threads, Sh::smem_bytes, stream>>>(p);
  HBMSCOPE_CUDA_CHECK(cudaGetLastError());
}

// Launches the instantiation among Configs... that equals `c`; false if none does.
template <FlashConfig... Configs>
bool launch_flash_among(const FlashConfig& c, const flash::FlashParams& p, const LaunchGeometry& g,
                        cudaStream_t stream) {
  return ((c == Configs ? (launch_flash_instance<Configs.version, Configs.head_dim, Configs.block_rows,
                                                 Configs.block_cols>(p, g, stream),
                           true)
                        : false) ||
          ...);
}

}  // namespace hbmscope::cuda
