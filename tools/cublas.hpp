// cuBLAS, loaded at run time: the ceilings' GEMM and the bf16 baseline use it, but the CLI
// must run where it is missing (a toolkit without static cuBLAS, a machine without the
// library), so no symbol of it is linked. Only CUDA builds include this header.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <string>

namespace fp4moe::cli {

// The entries the CLI calls, resolved by name from libcublas.so.13 (or libcublas.so).
struct CublasApi {
  decltype(&cublasCreate_v2) create = nullptr;
  decltype(&cublasDestroy_v2) destroy = nullptr;
  decltype(&cublasSetStream_v2) set_stream = nullptr;
  decltype(&cublasSetWorkspace_v2) set_workspace = nullptr;
  decltype(&cublasGetVersion_v2) get_version = nullptr;
  // cublas_api.h overloads cublasGemmEx for C++ (a cudaDataType compute type): name the C one.
  using GemmEx = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*,
                                    const void*, cudaDataType, int, const void*, cudaDataType, int, const void*,
                                    void*, cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);
  GemmEx gemm_ex = nullptr;
  // cuBLAS >= 12.5; nullptr in older libraries (the baseline is then skipped).
  decltype(&cublasGemmGroupedBatchedEx) gemm_grouped_batched_ex = nullptr;
  std::string library;  // the file that was loaded
  int version = 0;      // e.g. 130000
};

// Loads once per process. nullptr when no library or a required entry is missing; *why
// then says which.
const CublasApi* load_cublas(std::string* why);

// Throws fp4moe::Error(device) naming the call when `s` is not CUBLAS_STATUS_SUCCESS.
void check_cublas(cublasStatus_t s, const char* call);

// A handle bound to one device with its own workspace, so that calls can be captured in
// a CUDA graph (cuBLAS must not allocate during capture).
class CublasHandle {
 public:
  CublasHandle(const CublasApi& api, int device);
  ~CublasHandle();
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;

  cublasHandle_t get() const { return handle_; }
  const CublasApi& api() const { return api_; }
  void bind(cudaStream_t stream) const;  // cublasSetStream + the workspace again

 private:
  const CublasApi& api_;
  cublasHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
};

}  // namespace fp4moe::cli
