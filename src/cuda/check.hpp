#pragma once
// Every CUDA runtime and cuBLAS call goes through HBMSCOPE_CUDA_CHECK: a failure
// throws hbmscope::Error naming the call, where it was made, and the library's
// own error string.
#include <cublas_v2.h>
#include <cuda_runtime.h>

namespace hbmscope::cuda {

void check(cudaError_t status, const char* call, const char* file, int line);
void check(cublasStatus_t status, const char* call, const char* file, int line);

}  // namespace hbmscope::cuda

#define HBMSCOPE_CUDA_CHECK(call) ::hbmscope::cuda::check((call), #call, __FILE__, __LINE__)
