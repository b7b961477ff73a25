// The plugin's one exported symbol (the rest of libhbmscope_cuda.so is
// hidden): a C factory that hbmscope finds with dlsym.
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <exception>
#include <string>

#include "plugin.hpp"

namespace {
void put(char* error, std::size_t size, const std::string& text) {
  if (error == nullptr || size == 0) return;
  const std::size_t n = std::min(text.size(), size - 1);
  std::memcpy(error, text.data(), n);
  error[n] = '\0';
}
}  // namespace

extern "C" __attribute__((visibility("default"))) hbmscope::Backend* hbmscope_cuda_backend(
    const char* abi, int device_index, char* error, std::size_t error_size) noexcept {
  using namespace hbmscope;
  try {
    const std::string own = plugin::abi_tag();
    if (abi == nullptr || own != abi) {
      put(error, error_size, "it was built for another hbmscope (" + own + ")");
      return nullptr;
    }
    return plugin::make_cuda_backend(device_index).release();
  } catch (const std::exception& e) {
    put(error, error_size, e.what());
  } catch (...) {
    put(error, error_size, "unknown error");
  }
  return nullptr;
}
