// make_backend for a build without the CUDA backend (no nvcc at configure
// time, or -DHBMSCOPE_CUDA=OFF).
#include "hbmscope/backend.hpp"

namespace hbmscope {

std::unique_ptr<Backend> make_backend(int) {
  return make_no_gpu_backend(
      "no CUDA device: this hbmscope was built without the CUDA backend (no nvcc at configure time, or "
      "-DHBMSCOPE_CUDA=OFF); to measure, install the CUDA toolkit and reconfigure: cmake -S . -B build "
      "-DHBMSCOPE_CUDA=ON (with -DCMAKE_CUDA_COMPILER=PATH/nvcc if it is not in /usr/local/cuda), then rebuild");
}

}  // namespace hbmscope
