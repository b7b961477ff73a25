#pragma once
// The CUDA backend lives in a plugin, libhbmscope_cuda.so, that hbmscope opens
// with dlopen only when it measures: loading cuBLAS and the CUDA runtime costs
// tens of milliseconds and hundreds of MiB that `model` and friends never use.
// The plugin exports one C factory; this header is shared by both sides.
#include <cstddef>
#include <memory>
#include <string>

#include "hbmscope/backend.hpp"
#include "hbmscope/config.hpp"
#include "hbmscope/measurement.hpp"

namespace hbmscope::plugin {

inline constexpr const char* file_name = "libhbmscope_cuda.so";
inline constexpr const char* factory_symbol = "hbmscope_cuda_backend";
// Names a plugin file to use instead of searching (tests, relocated installs).
inline constexpr const char* path_variable = "HBMSCOPE_CUDA_PLUGIN";

// Both sides pass C++ objects (Backend, std::string) across the boundary, so
// a plugin from another version or build must be refused, not called: the tag
// holds the version and the sizes of the types that cross.
inline std::string abi_tag() {
  return std::string("hbmscope ") + config::version + " backend/1 " + std::to_string(sizeof(Backend)) + "." +
         std::to_string(sizeof(MeasureOptions)) + "." + std::to_string(sizeof(KernelMeasurement)) + "." +
         std::to_string(sizeof(DeviceInfo)) + "." + std::to_string(sizeof(Shape)) + "." +
         std::to_string(sizeof(std::string));
}

// The factory's type. Returns a backend the caller owns: the CUDA one, or the
// no-GPU one with the reason when there is no usable device. Returns nullptr
// with a one-line message in `error` (cut to error_size) when `abi` is not the
// plugin's own tag or the backend failed to start. Never throws.
using Factory = Backend* (*)(const char* abi, int device_index, char* error, std::size_t error_size);

// Plugin side: the CUDA backend for a device, or the no-GPU backend saying why.
std::unique_ptr<Backend> make_cuda_backend(int device_index);

}  // namespace hbmscope::plugin
