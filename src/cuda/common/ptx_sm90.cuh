// PTX wrappers of the Hopper warpgroup MMA (PTX ISA 8.x, "Asynchronous Warpgroup Level
// Matrix Multiply-Accumulate Instructions"), each named after its instruction. They exist on
// sm_90a only: call them from code compiled under FP4MOE_SM90A (below); on any other target
// they are not declared.
//
// Facts relied on (PTX ISA, wgmma "Register Fragments" and "Matrix Descriptor Format"; the
// same layouts as CUTLASS cute/atom/mma_traits_sm90_gmma.hpp ALayout_64x16 and CLayout_64xN,
// the descriptor bit fields as cute/arch/mma_sm90_desc.hpp GmmaDescriptor):
//  - A from registers (m64nNk16, .bf16): warp w of the warpgroup holds rows 16w..16w+15 in
//    4 x .b32, exactly the A fragment of mma.m16n8k16 (ptx.cuh): with g = lane / 4,
//    t = lane % 4, register j holds row (g, g+8, g, g+8)[j], k = 2t + (j >= 2 ? 8 : 0) + {0, 1},
//    the lower k in the low half.
//  - D (f32, N/2 registers): warp w holds rows 16w + g (d[4i], d[4i+1]) and 16w + g + 8
//    (d[4i+2], d[4i+3]) of columns 8i + 2t + {0, 1}: the mma.m16n8k16 C layout repeated over
//    the N/8 n8 tiles, i = 0..N/8-1.
//  - B, and in the SS form A too, from shared memory through a 64-bit matrix descriptor
//    (wgmma_desc_kmajor_sw128).
//  - wgmma reads shared memory through the async proxy: generic-proxy writes (cp.async,
//    st.shared) need fence.proxy.async before a wgmma may read them ("Memory Consistency
//    Model: Proxies"); its register operands follow the wgmma.fence / commit_group /
//    wait_group rules noted at each wrapper.
#pragma once

#include <cstdint>

#include "cuda/common/ptx.cuh"  // reg_fence

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 900 && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define FP4MOE_SM90A 1
#endif

namespace fp4moe::cuda::ptx {

#if defined(FP4MOE_SM90A)

// wgmma.fence.sync.aligned: orders this warpgroup's earlier register writes (accumulators,
// A fragments) before the wgmma.mma_async that read them. Needed before the first wgmma and
// after any non-wgmma write of a register that a later wgmma reads.
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
// wgmma.commit_group.sync.aligned: the wgmma issued since the last commit form one group.
__device__ __forceinline__ void wgmma_commit_group() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
// wgmma.wait_group.sync.aligned N: wait until at most N groups are pending. Only then may
// their accumulators be read, their A registers be rewritten, their shared memory be reused.
template <int N>
__device__ __forceinline__ void wgmma_wait_group() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// fence.proxy.async.shared::cta ("membar/fence"): makes this thread's generic-proxy writes of
// shared memory (cp.async, st.shared) visible to the async proxy, which wgmma reads B through.
__device__ __forceinline__ void fence_proxy_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

#endif  // FP4MOE_SM90A


// Matrix descriptor ("Matrix Descriptor Format") of a K-major bf16 operand in the 128-byte swizzle layout:
// rows (tokens of B, weight rows of A) of 64 bf16 = 128 bytes, 8-row atoms of 1024 bytes one after another,
// the 16-byte chunk c of row r stored at chunk c ^ (r % 8) (the hardware XORs address bits
// 4-6 with bits 7-9, so the atoms must be 1024-byte aligned: base offset 0).
//   bits  0-13  start address >> 4 (shared window offset; k-step kk starts 32 * kk bytes in)
//   bits 16-29  leading byte offset >> 4: unused by swizzled K-major layouts (set to 1)
//   bits 32-45  stride byte offset >> 4: 1024 bytes from one 8-row atom to the next
//   bits 49-51  base offset: 0 (atoms 1024-byte aligned)
//   bits 62-63  swizzle mode: 1 = 128-byte swizzle
__device__ __forceinline__ uint64_t wgmma_desc_kmajor_sw128(uint32_t smem_addr) {
  return uint64_t((smem_addr & 0x3FFFFu) >> 4) | (uint64_t(1) << 16) | (uint64_t(1024 >> 4) << 32) |
         (uint64_t(1) << 62);
}

#if defined(FP4MOE_SM90A)

// The accumulator operands of one wgmma: the "+f" list of d[NT][4] (d[i][c] is operand 4i + c)
// and its register list in the instruction, for n64 (32 registers) and n128 (64). The other
// operands follow, numbered from 32 or 64.
#define FP4MOE_WGMMA_D32_REGS \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"
#define FP4MOE_WGMMA_D64_REGS \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}"
#define FP4MOE_WGMMA_D32(d) \
  "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), \
  "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3]), \
  "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), \
  "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]), \
  "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]), \
  "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), \
  "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), \
  "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3])
#define FP4MOE_WGMMA_D64(d) \
  FP4MOE_WGMMA_D32(d), \
  "+f"(d[8][0]), "+f"(d[8][1]), "+f"(d[8][2]), "+f"(d[8][3]), \
  "+f"(d[9][0]), "+f"(d[9][1]), "+f"(d[9][2]), "+f"(d[9][3]), \
  "+f"(d[10][0]), "+f"(d[10][1]), "+f"(d[10][2]), "+f"(d[10][3]), \
  "+f"(d[11][0]), "+f"(d[11][1]), "+f"(d[11][2]), "+f"(d[11][3]), \
  "+f"(d[12][0]), "+f"(d[12][1]), "+f"(d[12][2]), "+f"(d[12][3]), \
  "+f"(d[13][0]), "+f"(d[13][1]), "+f"(d[13][2]), "+f"(d[13][3]), \
  "+f"(d[14][0]), "+f"(d[14][1]), "+f"(d[14][2]), "+f"(d[14][3]), \
  "+f"(d[15][0]), "+f"(d[15][1]), "+f"(d[15][2]), "+f"(d[15][3])

// wgmma.mma_async.sync.aligned.m64n{8*NT}k16.f32.bf16.bf16 d, {a0..a3}, b_desc, 1, 1, 1, 0:
// D += A * B with A (64 x 16) from registers, B (16 x 8NT) K-major from shared memory (trans-b
// 0), scale-d 1 (accumulate), no negation. d[i][c] is D register 4i + c (see above). NT is 2-8,
// 10, 12, 14 or 16 (the widths the kernels issue: gemm_sm90.cu's 64- and 128-token tiles, rsws4's
// narrow widths and the wide widths of rsws's last tiles); the wgmma reads B's first 8NT rows.
template <int NT>
__device__ __forceinline__ void wgmma_m64k16_bf16_rs(float (&d)[NT][4], const uint32_t (&a)[4], uint64_t b_desc);

// The "+f" operands of d[i][0..3].
#define FP4MOE_WGMMA_D4(d, i) "+f"(d[i][0]), "+f"(d[i][1]), "+f"(d[i][2]), "+f"(d[i][3])
// The specialization for NT n8 tiles: N (8NT, a string), the D register list, the A registers
// and the descriptor ("{%a, ..}, %desc"), the scale-d flag's operand number (a string), then
// the D operands.
#define FP4MOE_WGMMA_RS(NT, N, DREGS, A_DESC, SCALE_D, ...)                                              \
  template <>                                                                                             \
  __device__ __forceinline__ void wgmma_m64k16_bf16_rs<NT>(float(&d)[NT][4], const uint32_t(&a)[4],       \
                                                           uint64_t b_desc) {                             \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" SCALE_D ", 0;\n"                                     \
                 "wgmma.mma_async.sync.aligned.m64n" N "k16.f32.bf16.bf16 " DREGS ", " A_DESC ", p, 1, 1, 0;\n}\n" \
                 : __VA_ARGS__                                                                            \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc), "n"(1));                     \
  }

FP4MOE_WGMMA_RS(2, "16", "{%0, %1, %2, %3, %4, %5, %6, %7}",
                "{%8, %9, %10, %11}, %12", "13",
                FP4MOE_WGMMA_D4(d, 0), FP4MOE_WGMMA_D4(d, 1))
FP4MOE_WGMMA_RS(3, "24", "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11}",
                "{%12, %13, %14, %15}, %16", "17",
                FP4MOE_WGMMA_D4(d, 0), FP4MOE_WGMMA_D4(d, 1), FP4MOE_WGMMA_D4(d, 2))
FP4MOE_WGMMA_RS(4, "32", "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}",
                "{%16, %17, %18, %19}, %20", "21",
                FP4MOE_WGMMA_D4(d, 0), FP4MOE_WGMMA_D4(d, 1), FP4MOE_WGMMA_D4(d, 2), FP4MOE_WGMMA_D4(d, 3))
FP4MOE_WGMMA_RS(5, "40", "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                "%16, %17, %18, %19}",
                "{%20, %21, %22, %23}, %24", "25",
                FP4MOE_WGMMA_D4(d, 0), FP4MOE_WGMMA_D4(d, 1), FP4MOE_WGMMA_D4(d, 2), FP4MOE_WGMMA_D4(d, 3),
                FP4MOE_WGMMA_D4(d, 4))
FP4MOE_WGMMA_RS(6, "48", "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                "%16, %17, %18, %19, %20, %21, %22, %23}",
                "{%24, %25, %26, %27}, %28", "29",
                FP4MOE_WGMMA_D4(d, 0), FP4MOE_WGMMA_D4(d, 1), FP4MOE_WGMMA_D4(d, 2), FP4MOE_WGMMA_D4(d, 3),
                FP4MOE_WGMMA_D4(d, 4), FP4MOE_WGMMA_D4(d, 5))
FP4MOE_WGMMA_RS(7, "56", "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27}",
                "{%28, %29, %30, %31}, %32", "33",
                FP4MOE_WGMMA_D4(d, 0), FP4MOE_WGMMA_D4(d, 1), FP4MOE_WGMMA_D4(d, 2), FP4MOE_WGMMA_D4(d, 3),
                FP4MOE_WGMMA_D4(d, 4), FP4MOE_WGMMA_D4(d, 5), FP4MOE_WGMMA_D4(d, 6))
FP4MOE_WGMMA_RS(8, "64", "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}",
                "{%32, %33, %34, %35}, %36", "37",
                FP4MOE_WGMMA_D4(d, 0), FP4MOE_WGMMA_D4(d, 1), FP4MOE_WGMMA_D4(d, 2), FP4MOE_WGMMA_D4(d, 3),
                FP4MOE_WGMMA_D4(d, 4), FP4MOE_WGMMA_D4(d, 5), FP4MOE_WGMMA_D4(d, 6), FP4MOE_WGMMA_D4(d, 7))
FP4MOE_WGMMA_RS(10, "80", "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
                "%32, %33, %34, %35, %36, %37, %38, %39}",
                "{%40, %41, %42, %43}, %44", "45",
                FP4MOE_WGMMA_D4(d, 0), FP4MOE_WGMMA_D4(d, 1), FP4MOE_WGMMA_D4(d, 2), FP4MOE_WGMMA_D4(d, 3),
                FP4MOE_WGMMA_D4(d, 4), FP4MOE_WGMMA_D4(d, 5), FP4MOE_WGMMA_D4(d, 6), FP4MOE_WGMMA_D4(d, 7),
                FP4MOE_WGMMA_D4(d, 8), FP4MOE_WGMMA_D4(d, 9))
FP4MOE_WGMMA_RS(12, "96", "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
                "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47}",
                "{%48, %49, %50, %51}, %52", "53",
                FP4MOE_WGMMA_D4(d, 0), FP4MOE_WGMMA_D4(d, 1), FP4MOE_WGMMA_D4(d, 2), FP4MOE_WGMMA_D4(d, 3),
                FP4MOE_WGMMA_D4(d, 4), FP4MOE_WGMMA_D4(d, 5), FP4MOE_WGMMA_D4(d, 6), FP4MOE_WGMMA_D4(d, 7),
                FP4MOE_WGMMA_D4(d, 8), FP4MOE_WGMMA_D4(d, 9), FP4MOE_WGMMA_D4(d, 10), FP4MOE_WGMMA_D4(d, 11))
FP4MOE_WGMMA_RS(14, "112", "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
                "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
                "%48, %49, %50, %51, %52, %53, %54, %55}",
                "{%56, %57, %58, %59}, %60", "61",
                FP4MOE_WGMMA_D4(d, 0), FP4MOE_WGMMA_D4(d, 1), FP4MOE_WGMMA_D4(d, 2), FP4MOE_WGMMA_D4(d, 3),
                FP4MOE_WGMMA_D4(d, 4), FP4MOE_WGMMA_D4(d, 5), FP4MOE_WGMMA_D4(d, 6), FP4MOE_WGMMA_D4(d, 7),
                FP4MOE_WGMMA_D4(d, 8), FP4MOE_WGMMA_D4(d, 9), FP4MOE_WGMMA_D4(d, 10), FP4MOE_WGMMA_D4(d, 11),
                FP4MOE_WGMMA_D4(d, 12), FP4MOE_WGMMA_D4(d, 13))
FP4MOE_WGMMA_RS(16, "128", "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
                "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
                "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}",
                "{%64, %65, %66, %67}, %68", "69",
                FP4MOE_WGMMA_D4(d, 0), FP4MOE_WGMMA_D4(d, 1), FP4MOE_WGMMA_D4(d, 2), FP4MOE_WGMMA_D4(d, 3),
                FP4MOE_WGMMA_D4(d, 4), FP4MOE_WGMMA_D4(d, 5), FP4MOE_WGMMA_D4(d, 6), FP4MOE_WGMMA_D4(d, 7),
                FP4MOE_WGMMA_D4(d, 8), FP4MOE_WGMMA_D4(d, 9), FP4MOE_WGMMA_D4(d, 10), FP4MOE_WGMMA_D4(d, 11),
                FP4MOE_WGMMA_D4(d, 12), FP4MOE_WGMMA_D4(d, 13), FP4MOE_WGMMA_D4(d, 14), FP4MOE_WGMMA_D4(d, 15))

#undef FP4MOE_WGMMA_RS
#undef FP4MOE_WGMMA_D4

// wgmma.mma_async.sync.aligned.m64n{8*NT}k16.f32.bf16.bf16 d, a_desc, b_desc, 1, 1, 1, 0, 0
// (the SS form): D += A * B with A (64 x 16) and B (16 x 8NT) both K-major in shared memory
// (trans-a 0, trans-b 0), scale-d 1 (accumulate), no negation. Both operands are read through
// the async proxy while the group is pending: neither may be rewritten before wgmma_wait_group
// says the group is done, and generic-proxy writes of them need fence_proxy_async_shared first.
template <int NT>
__device__ __forceinline__ void wgmma_m64k16_bf16_ss(float (&d)[NT][4], uint64_t a_desc, uint64_t b_desc);

template <>
__device__ __forceinline__ void wgmma_m64k16_bf16_ss<8>(float (&d)[8][4], uint64_t a_desc, uint64_t b_desc) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
      FP4MOE_WGMMA_D32_REGS ", "
      "%32, %33, p, 1, 1, 0, 0;\n"
      "}\n"
      : FP4MOE_WGMMA_D32(d)
      : "l"(a_desc), "l"(b_desc), "n"(1));
}

template <>
__device__ __forceinline__ void wgmma_m64k16_bf16_ss<16>(float (&d)[16][4], uint64_t a_desc, uint64_t b_desc) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
      FP4MOE_WGMMA_D64_REGS ", "
      "%64, %65, p, 1, 1, 0, 0;\n"
      "}\n"
      : FP4MOE_WGMMA_D64(d)
      : "l"(a_desc), "l"(b_desc), "n"(1));
}

// ---------------------------------------------------------------------------
// Synchronization of warp-specialized kernels (PTX ISA "Parallel Synchronization and
// Communication Instructions": mbarrier, bar, setmaxnreg). Facts relied on:
//  - An mbarrier (8 bytes, 8-byte aligned shared memory) counts down `count` arrivals per
//    phase; when they are all in (and no transaction bytes are pending) the phase completes
//    and the next begins with the same count. Phases are told apart by their parity only.
//  - mbarrier.arrive has .release.cta semantics by default, mbarrier.try_wait .acquire.cta:
//    a thread that sees phase P complete sees every shared memory write (and read) that an
//    arriving thread made before its arrive of phase P.
//  - try_wait.parity(P) is true once the phase of parity P has completed, i.e. while the
//    current phase has the other parity. On a freshly initialized barrier (current phase 0)
//    parity 1 counts as complete: a producer's first wait on an "empty" barrier passes.
//    Waiting is only unambiguous when the waiter cannot be two phases behind; each kernel
//    says why it cannot.
//  - cp.async.mbarrier.arrive.noinc: an arrive on the barrier, made by the hardware once all
//    cp.async the thread issued before it have completed; .noinc: the arrival counts against
//    the barrier's `count` (it is one of the `count` arrivals the init expected).
// ---------------------------------------------------------------------------

// mbarrier.init.shared::cta.b64 [bar], count. Before any other thread uses the barrier, a
// CTA-wide barrier (__syncthreads) must make the initialization visible.
__device__ __forceinline__ void mbarrier_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
// mbarrier.arrive.shared::cta.b64 _, [bar]: one arrival (release semantics, see above).
__device__ __forceinline__ void mbarrier_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
// mbarrier.try_wait.parity.shared::cta.b64: true once the phase of parity `parity` has
// completed (acquire semantics); it may suspend the thread for a while before answering false.
__device__ __forceinline__ bool mbarrier_try_wait_parity(uint32_t bar, uint32_t parity) {
  uint32_t done;
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
      "selp.u32 %0, 1, 0, p;\n"
      "}\n"
      : "=r"(done)
      : "r"(bar), "r"(parity)
      : "memory");
  return done != 0;
}
__device__ __forceinline__ void mbarrier_wait_parity(uint32_t bar, uint32_t parity) {
  while (!mbarrier_try_wait_parity(bar, parity)) {
  }
}
// cp.async.mbarrier.arrive.noinc.shared::cta.b64 [bar]: the arrival made when this thread's
// earlier cp.async have landed (see above). Their data are then visible to a thread that
// waited on the phase, through the generic proxy.
__device__ __forceinline__ void cp_async_mbarrier_arrive_noinc(uint32_t bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
}
// mbarrier.expect_tx: the current phase also waits for `bytes` more bytes of bulk copies
// (complete_tx). One thread's expect_tx before its own arrival keeps the phase open for them.
__device__ __forceinline__ void mbarrier_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
// TMA: the box of a 5-d tensor map (a __grid_constant__ kernel parameter's address) at element
// coordinates {c0, .., c4} -> shared memory at smem (16-byte aligned), complete_tx of the box's
// bytes on `bar` (elements out of bounds arrive as zeros and count). The waiters of the phase
// then see the data. Issued by one thread: the operands live in uniform registers.
__device__ __forceinline__ void tma_load_5d(uint32_t smem, const void* map, int c0, int c1, int c2, int c3, int c4,
                                            uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.5d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5, "
      "%6}], [%7];\n" ::"r"(smem),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4), "r"(bar)
      : "memory");
}
// bar.sync id, count: a barrier among `count` threads (whole warps) that use the same id;
// id 0 is __syncthreads'. Orders the participants' shared memory accesses like __syncthreads.
__device__ __forceinline__ void named_barrier_sync(int id, int count) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}
// setmaxnreg.{dec,inc}.sync.aligned.u32 N: every thread of the warpgroup (all four warps must
// execute it) gives registers back to the CTA's pool down to N, or waits until the pool can
// grant it N. N in [24, 256], a multiple of 8. ptxas allocates the code after it within N.
template <int N>
__device__ __forceinline__ void setmaxnreg_dec() {
  static_assert(N >= 24 && N <= 256 && N % 8 == 0, "setmaxnreg: 24..256, a multiple of 8");
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
}
template <int N>
__device__ __forceinline__ void setmaxnreg_inc() {
  static_assert(N >= 24 && N <= 256 && N % 8 == 0, "setmaxnreg: 24..256, a multiple of 8");
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
}

#endif  // FP4MOE_SM90A

}  // namespace fp4moe::cuda::ptx
