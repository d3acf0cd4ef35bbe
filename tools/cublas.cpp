#if defined(FP4MOE_WITH_CUDA)
#include "cublas.hpp"

#include <dlfcn.h>

#include <mutex>

#include "cuda/common/check.hpp"

namespace fp4moe::cli {
namespace {

// Large enough for the biggest GEMM kernels' split-K scratch on Hopper (cuBLAS asks 32 MiB).
constexpr size_t kWorkspaceBytes = size_t(64) << 20;

}  // namespace

const CublasApi* load_cublas(std::string* why) {
  static CublasApi api;
  static std::string error;
  static bool loaded = false;
  static std::once_flag once;
  std::call_once(once, [] {
    void* lib = nullptr;
    for (const char* name : {"libcublas.so.13", "libcublas.so.12", "libcublas.so"}) {
      lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
      if (lib) {
        api.library = name;
        break;
      }
    }
    if (!lib) {
      const char* e = dlerror();
      error = std::string("cannot load libcublas.so.13 / .12 / .so (") + (e ? e : "not found") + ")";
      return;
    }
    auto sym = [&](auto& fn, const char* name, bool required) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
      if (!fn && required && error.empty()) error = api.library + " has no " + name;
    };
    sym(api.create, "cublasCreate_v2", true);
    sym(api.destroy, "cublasDestroy_v2", true);
    sym(api.set_stream, "cublasSetStream_v2", true);
    sym(api.set_workspace, "cublasSetWorkspace_v2", true);
    sym(api.get_version, "cublasGetVersion_v2", true);
    sym(api.gemm_ex, "cublasGemmEx", true);
    sym(api.gemm_grouped_batched_ex, "cublasGemmGroupedBatchedEx", false);
    if (!error.empty()) return;
    // The library's version needs no handle when given a null one in cuBLAS >= 10.
    cublasHandle_t h = nullptr;
    if (api.create(&h) == CUBLAS_STATUS_SUCCESS) {
      api.get_version(h, &api.version);
      api.destroy(h);
    }
    loaded = true;
  });
  if (!loaded && why) *why = error;
  return loaded ? &api : nullptr;
}

void check_cublas(cublasStatus_t s, const char* call) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw Error(ErrorKind::device, std::string(call) + " failed: cuBLAS status " + std::to_string(int(s)));
}

CublasHandle::CublasHandle(const CublasApi& api, int device) : api_(api) {
  FP4MOE_CUDA_CHECK(cudaSetDevice(device));
  check_cublas(api_.create(&handle_), "cublasCreate");
  const cudaError_t e = cudaMalloc(&workspace_, kWorkspaceBytes);
  if (e != cudaSuccess) {
    api_.destroy(handle_);
    FP4MOE_CUDA_CHECK(e);
  }
}

CublasHandle::~CublasHandle() {
  if (handle_) api_.destroy(handle_);
  if (workspace_) cudaFree(workspace_);
}

void CublasHandle::bind(cudaStream_t stream) const {
  check_cublas(api_.set_stream(handle_, stream), "cublasSetStream");
  // cublasSetStream resets the workspace to the default pool: give ours again.
  check_cublas(api_.set_workspace(handle_, workspace_, kWorkspaceBytes), "cublasSetWorkspace");
}

}  // namespace fp4moe::cli
#endif  // FP4MOE_WITH_CUDA
