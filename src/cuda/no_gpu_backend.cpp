// The backend with no device: it answers what it is asked with the reason
// there is no device, so that `measure` can say it in one line.
#include <span>

#include "hbmscope/backend.hpp"
#include "hbmscope/error.hpp"

namespace hbmscope {

namespace {

class NoGpuBackend final : public Backend {
 public:
  explicit NoGpuBackend(std::string reason) : reason_(std::move(reason)) {}
  bool available() const override { return false; }
  std::string unavailable_reason() const override { return reason_; }
  DeviceInfo device() const override { return {}; }
  // A shape no kernel of ours runs is refused for that reason first, as the
  // CUDA backend refuses it.
  KernelMeasurement run(const Shape& s, KernelKind k, const MeasureOptions&) override {
    check_measurable(s, std::span<const KernelKind>(&k, 1));
    throw Error(reason_);
  }
  KernelMeasurement copy_probe(const MeasureOptions&) override { throw Error(reason_); }

 private:
  std::string reason_;
};

}  // namespace

std::unique_ptr<Backend> make_no_gpu_backend(std::string reason) {
  return std::make_unique<NoGpuBackend>(std::move(reason));
}

}  // namespace hbmscope
