#pragma once
// One cudaMalloc allocation owned by a host object (nothing for 0 bytes),
// shared by the CUDA backend's kernel families.
#include <cuda_runtime.h>

#include <cstdint>
#include <utility>

#include "check.hpp"

namespace hbmscope::cuda {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::uint64_t bytes) : bytes_(bytes) {
    if (bytes) HBMSCOPE_CUDA_CHECK(cudaMalloc(&ptr_, bytes));
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) { o.ptr_ = nullptr; }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    std::swap(ptr_, o.ptr_);
    std::swap(bytes_, o.bytes_);
    return *this;
  }
  ~DeviceBuffer() {
    if (ptr_) cudaFree(ptr_);  // nothing useful to do with an error here
  }
  template <class T = void>
  T* get() const {
    return static_cast<T*>(ptr_);
  }
  std::uint64_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  std::uint64_t bytes_ = 0;
};

}  // namespace hbmscope::cuda
