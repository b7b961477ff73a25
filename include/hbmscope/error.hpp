#pragma once
// The one error type of hbmscope: every refusal (bad input, overflow, a failed
// CUDA call) is an Error whose what() is a single line fit for stderr.
#include <stdexcept>
#include <string>

namespace hbmscope {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace hbmscope
