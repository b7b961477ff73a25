// The head-dim-64 instantiations of the flash kernel, v1 layout (see launch_plan.cpp's table).
#include "flash_launch.cuh"

namespace hbmscope::cuda {

bool launch_flash_d64(const FlashConfig& c, const flash::FlashParams& p, const LaunchGeometry& g,
                      cudaStream_t stream) {
  return launch_flash_among<FlashConfig{64, 64, 64, 1}, FlashConfig{64, 128, 64, 1},
                            FlashConfig{64, 128, 128, 1}>(c, p, g, stream);
}

}  // namespace hbmscope::cuda
