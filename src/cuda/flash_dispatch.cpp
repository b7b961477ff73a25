// Picks the translation unit that holds the instantiation (one per kernel
// version and head dim, so that nvcc compiles them in parallel).
#include "hbmscope/error.hpp"
#include "kernels.hpp"

namespace hbmscope::cuda {

bool launch_flash_d64(const FlashConfig&, const flash::FlashParams&, const LaunchGeometry&, cudaStream_t);
bool launch_flash_d128(const FlashConfig&, const flash::FlashParams&, const LaunchGeometry&, cudaStream_t);
bool launch_flash_v2_d64(const FlashConfig&, const flash::FlashParams&, const LaunchGeometry&, cudaStream_t);
bool launch_flash_v2_d128(const FlashConfig&, const flash::FlashParams&, const LaunchGeometry&, cudaStream_t);

void launch_flash(const FlashConfig& config, const flash::FlashParams& p, const LaunchGeometry& g,
                  cudaStream_t stream) {
  bool launched = false;
  if (config.version == 2)
    launched = config.head_dim == 64    ? launch_flash_v2_d64(config, p, g, stream)
               : config.head_dim == 128 ? launch_flash_v2_d128(config, p, g, stream)
                                        : false;
  else
    launched = config.head_dim == 64    ? launch_flash_d64(config, p, g, stream)
               : config.head_dim == 128 ? launch_flash_d128(config, p, g, stream)
                                        : false;
  if (!launched) throw Error("flash kernel: no compiled instantiation " + describe(config));
}

}  // namespace hbmscope::cuda
