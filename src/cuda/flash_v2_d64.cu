// The head-dim-64 instantiations of the v2 flash kernel (see launch_plan.cpp's table).
#include "flash_launch.cuh"

namespace hbmscope::cuda {

bool launch_flash_v2_d64(const FlashConfig& c, const flash::FlashParams& p, const LaunchGeometry& g,
                         cudaStream_t stream) {
  return launch_flash_among<FlashConfig{64, 64, 64, 2}, FlashConfig{64, 128, 64, 2},
                            FlashConfig{64, 128, 128, 2}>(c, p, g, stream);
}

}  // namespace hbmscope::cuda
