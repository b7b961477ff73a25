// The head-dim-128 instantiations of the flash kernel, v1 layout (see launch_plan.cpp's table).
#include "flash_launch.cuh"

namespace hbmscope::cuda {

bool launch_flash_d128(const FlashConfig& c, const flash::FlashParams& p, const LaunchGeometry& g,
                       cudaStream_t stream) {
  return launch_flash_among<FlashConfig{128, 64, 64, 1}, FlashConfig{128, 128, 64, 1},
                            FlashConfig{128, 128, 128, 1}>(c, p, g, stream);
}

}  // namespace hbmscope::cuda
