// NCCL, loaded at run time. The library never links libnccl: the GPU machines ship it in
// the Python nvidia-nccl package, not next to the CUDA toolkit, so it is found with
// dlopen: FP4MOE_NCCL_LIB, then libnccl.so.2 on the loader path (or already loaded, e.g.
// by PyTorch), then the pip package's nvidia/nccl/lib under PYTHONPATH, VIRTUAL_ENV,
// CONDA_PREFIX and the usual site-packages directories. nccl.h gives the types
// and the prototypes that the function pointers below are declared from.
#pragma once

#include <nccl.h>

#include <string>

namespace fp4moe::ep {

struct NcclApi {
  decltype(&ncclGetVersion) GetVersion;
  decltype(&ncclGetUniqueId) GetUniqueId;
  decltype(&ncclCommInitRank) CommInitRank;
  decltype(&ncclCommInitAll) CommInitAll;
  decltype(&ncclCommDestroy) CommDestroy;
  decltype(&ncclCommCount) CommCount;
  decltype(&ncclCommUserRank) CommUserRank;
  decltype(&ncclCommCuDevice) CommCuDevice;
  decltype(&ncclGetErrorString) GetErrorString;
  decltype(&ncclGroupStart) GroupStart;
  decltype(&ncclGroupEnd) GroupEnd;
  decltype(&ncclSend) Send;
  decltype(&ncclRecv) Recv;
  decltype(&ncclAllReduce) AllReduce;
};

// The loaded API, or nullptr with `why` set. Loads once per process (thread-safe).
const NcclApi* nccl_api(std::string* why = nullptr);

// The API or Error(unsupported) naming what was tried.
const NcclApi& nccl();

// Throws Error(device) "NCCL error in <what>: <string>" unless r is ncclSuccess.
void nccl_check(ncclResult_t r, const char* what);

}  // namespace fp4moe::ep

#define FP4MOE_NCCL_CHECK(call) ::fp4moe::ep::nccl_check((call), #call)
