// PTX wrappers, each named after its instruction (PTX ISA 8.x sections cited), plus the
// bit tricks that turn e2m1 codes into bf16 operands. Everything here exists on sm_80,
// sm_90 and sm_100 alike.
#pragma once

#include <cstdint>

namespace fp4moe::cuda::ptx {

// Compiler-only fences (no instruction): the register counts as read and written here, so
// the compiler keeps accesses to it on their side of the neighbouring asm volatile (e.g. a
// wgmma_fence before, a wgmma_wait_group after: ptx_sm90.cuh).
__device__ __forceinline__ void reg_fence(float& r) { asm volatile("" : "+f"(r)::"memory"); }
__device__ __forceinline__ void reg_fence(uint32_t& r) { asm volatile("" : "+r"(r)::"memory"); }

// mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 (§9.7.14.5.8): D = A * B + D.
// A: 4 regs of bf16x2 (rows g / g+8, k 2t.. and 2t+8..), B: 2 regs (k 2t.., 2t+8..; col g),
// C/D: rows g (c0, c1) and g+8 (c2, c3), cols 2t, 2t+1; g = lane / 4, t = lane % 4.
__device__ __forceinline__ void mma_m16n8k16_bf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                                  uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// ldmatrix.sync.aligned.m8n8.x4.shared.b16 (§9.7.14.5.15): lanes 8i..8i+7 give the row
// addresses of matrix i; register i receives row lane/4, elements 2*(lane%4), +1 of matrix i.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* smem_row) {
  const uint32_t a = uint32_t(__cvta_generic_to_shared(smem_row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
}

// cp.async.cg.shared.global [dst], [src], 16, src_size (§9.7.9.25) to a 32-bit shared-memory
// address: src_size 0 fills zeros.
__device__ __forceinline__ void cp_async_16(uint32_t smem, const void* gmem, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem), "l"(gmem), "r"(valid ? 16 : 0));
}
// The same to a generic pointer into shared memory.
__device__ __forceinline__ void cp_async_16(void* smem, const void* gmem, bool valid) {
  cp_async_16(uint32_t(__cvta_generic_to_shared(smem)), gmem, valid);
}
// cp.async.ca.shared.global [dst], [src], 8, src_size (8-byte copies may not use .cg).
__device__ __forceinline__ void cp_async_8(void* smem, const void* gmem, bool valid) {
  const uint32_t d = uint32_t(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(d), "l"(gmem), "r"(valid ? 8 : 0));
}
// Loads from a 32-bit shared-memory address (ld.shared; `volatile` keeps them after the
// waits before them, which the compiler sees only as other volatile statements).
__device__ __forceinline__ uint4 ld_shared_v4(uint32_t a) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(a));
  return v;
}
__device__ __forceinline__ uint2 ld_shared_v2(uint32_t a) {
  uint2 v;
  asm volatile("ld.shared.v2.u32 {%0, %1}, [%2];\n" : "=r"(v.x), "=r"(v.y) : "r"(a));
  return v;
}
__device__ __forceinline__ uint32_t ld_shared_u32(uint32_t a) {
  uint32_t v;
  asm volatile("ld.shared.u32 %0, [%1];\n" : "=r"(v) : "r"(a));
  return v;
}
// The inclusive sum of v over the 32 lanes of a warp, by shuffles (every lane calls it; lane is
// the caller's lane).
__device__ __forceinline__ int warp_inclusive_sum(int v, int lane) {
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const int u = __shfl_up_sync(0xFFFFFFFFu, v, o);
    if (lane >= o) v += u;
  }
  return v;
}
// Programmatic dependent launch (sm_90+; PTX "griddepcontrol"; no-ops elsewhere):
// grid_dependency_wait blocks until the grids this one depends on have completed and their
// memory is visible (immediately when it was not launched as a dependent);
// grid_dependency_trigger lets a grid launched as this one's dependent start early.
__device__ __forceinline__ void grid_dependency_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void grid_dependency_trigger() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}
// v as per-thread data, given a run-time 0 that the compiler cannot see (WeightMatrix::zero):
// v | (threadIdx.x & zero). A warp-uniform value used by many instructions that take only
// vector registers (PRMT's first table register) is otherwise kept in a uniform register and
// copied into a vector register before each use; this one is computed once and kept.
__device__ __forceinline__ uint32_t per_thread(uint32_t v, uint32_t zero) { return v | (threadIdx.x & zero); }
__device__ __forceinline__ void cp_async_commit_group() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait_group() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// fma.rn.bf16x2 d, a, b, -0 (§9.7.4.1; subnormals are supported, no flush): the exact
// product when it is representable, which is how it is used here.
__device__ __forceinline__ uint32_t mul_bf16x2(uint32_t a, uint32_t b) {
  uint32_t d;
  asm("fma.rn.bf16x2 %0, %1, %2, %3;\n" : "=r"(d) : "r"(a), "r"(b), "r"(0x80008000u));
  return d;
}

// cvt.rn.bf16x2.f32 d, hi, lo (§9.7.9.21): both values rounded to nearest even into one register,
// lo in bits 0-15. One F2FP instead of the ~7 integer instructions of a bf16 rounding by bits.
// What it makes of a NaN is not format.h's quiet NaN with its payload: callers that need those
// bits (bf16x2_from_f32, gemm_internal.hpp) test for NaN themselves.
__device__ __forceinline__ uint32_t cvt_bf16x2_rn(float lo, float hi) {
  uint32_t d;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(d) : "f"(hi), "f"(lo));
  return d;
}

// {s.low, s.low} and {s.high, s.high}, written as PTX moves through .b16 registers, which ptxas
// folds into the operand selector (.H0_H0, .H1_H1) of the f16x2 / bf16x2 instruction that reads
// them: no instruction of their own.
__device__ __forceinline__ uint32_t halves_low(uint32_t s) {
  uint32_t b;
  asm("{\n.reg .b16 l, h;\nmov.b32 {l, h}, %1;\nmov.b32 %0, {l, l};\n}\n" : "=r"(b) : "r"(s));
  return b;
}
__device__ __forceinline__ uint32_t halves_high(uint32_t s) {
  uint32_t b;
  asm("{\n.reg .b16 l, h;\nmov.b32 {l, h}, %1;\nmov.b32 %0, {h, h};\n}\n" : "=r"(b) : "r"(s));
  return b;
}
// a * {s.low, s.low} and a * {s.high, s.high}: one HMUL2 each, like mul_bf16x2.
__device__ __forceinline__ uint32_t mul_bf16x2_low(uint32_t a, uint32_t s) { return mul_bf16x2(a, halves_low(s)); }
__device__ __forceinline__ uint32_t mul_bf16x2_high(uint32_t a, uint32_t s) { return mul_bf16x2(a, halves_high(s)); }
// x's upper 16 bits in its lower 16 (and its upper) by an f16x2 multiply of {x.high, x.high} by
// one: `HMUL2 R, R.H1_H1, 1, 1`, on the FMA pipe where `x >> 16` takes the ALU pipe. Exact when
// x.high is not a NaN: normals, zeros, infinities, and subnormals, which fma.rn.f16x2 does not
// flush (tests: CudaGemmLayout.HighHalfByF16MultiplyIsExact, over every upper half).
__device__ __forceinline__ uint32_t high_half_by_f16_mul(uint32_t x) {
  uint32_t d;
  asm("fma.rn.f16x2 %0, %1, %2, %3;\n" : "=r"(d) : "r"(halves_high(x)), "r"(0x3C003C00u), "r"(0x80008000u));
  return d;
}

// Two e2m1 codes, at bits 12-15 and 28-31 of q, as a bf16x2 (low half from bits 12-15)
// with values e2m1 * 2^-126: sign to bit 15, the 3 magnitude bits (exponent 2, mantissa 1)
// to bits 8-6, i.e. the low exponent bits and the top mantissa bit of a bf16. Code 1 lands
// as the subnormal 2^-127, codes 2..7 as normals (1 + m/2) * 2^(e-1-126).
__device__ __forceinline__ uint32_t e2m1x2_top_nibbles_to_bf16x2(uint32_t q) {
  return (q & 0x80008000u) | ((q & 0x70007000u) >> 6);
}

// An e4m3 code as the bf16 e4m3 * 2^118 (exact: < 2^127, >= 2^109). The code's 7 value
// bits placed under the fp32 sign make e4m3 * 2^-120 (subnormal codes included, as fp32
// subnormals); two exact power-of-two scalings give * 2^238.
__device__ __forceinline__ float e4m3_times_2p118(uint32_t code) {
  const float v = __uint_as_float(((code & 0x7Fu) << 20) | ((code & 0x80u) << 24));
  return (v * 0x1p120f) * 0x1p118f;
}
__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
  uint32_t d;  // cvt.rn.bf16x2.f32 d, hi, lo (§9.7.9.21): first source goes to the upper half
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(d) : "f"(hi), "f"(lo));
  return d;
}

}  // namespace fp4moe::cuda::ptx
