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

// A command line that is not well formed: an unknown option value, a malformed
// list or range, an option without the one it needs. The program exits 2 for
// it, and 1 for any other Error (a valid value the model refuses).
class UsageError : public Error {
 public:
  using Error::Error;
};

}  // namespace hbmscope
