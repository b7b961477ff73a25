#include "check.hpp"

#include <string>

#include "hbmscope/error.hpp"

namespace hbmscope::cuda {

namespace {
[[noreturn]] void fail(const char* call, const char* file, int line, const std::string& what) {
  std::string f = file;
  if (const auto slash = f.rfind("/src/"); slash != std::string::npos) f = f.substr(slash + 1);
  throw Error(std::string(call) + " failed at " + f + ":" + std::to_string(line) + ": " + what);
}
}  // namespace

void check(cudaError_t status, const char* call, const char* file, int line) {
  if (status == cudaSuccess) return;
  fail(call, file, line, std::string(cudaGetErrorName(status)) + ": " + cudaGetErrorString(status));
}

void check(cublasStatus_t status, const char* call, const char* file, int line) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  fail(call, file, line, std::string(cublasGetStatusName(status)) + ": " + cublasGetStatusString(status));
}

}  // namespace hbmscope::cuda
