// The head-dim-128 instantiations of the v2 flash kernel (see launch_plan.cpp's table).
#include "flash_launch.cuh"

namespace hbmscope::cuda {

bool launch_flash_v2_d128(const FlashConfig& c, const flash::FlashParams& p, const LaunchGeometry& g,
                          cudaStream_t stream) {
  // Not 64 x 64 (2 warps): ptxas spills 8 bytes there at 255 registers.
  // Not 128 x 128: 64 S + 128 O accumulators per thread do not fit.
  return launch_flash_among<FlashConfig{128, 128, 64, 2}>(c, p, g, stream);
}

}  // namespace hbmscope::cuda
