// The probes' CUDA error check: CK(call) prints the call, its file and line and the error, and
// exits (a probe has nothing to recover). Included by each probe in this folder; nvcc finds it
// beside the probe, so each still builds with nvcc alone.
#pragma once

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#define CK(x)                                                                                 \
  do {                                                                                        \
    cudaError_t e_ = (x);                                                                     \
    if (e_ != cudaSuccess) {                                                                  \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                           \
    }                                                                                         \
  } while (0)
