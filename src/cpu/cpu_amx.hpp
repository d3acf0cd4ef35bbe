// AMX-BF16 tiles for the cpu backend's large experts (Sapphire Rapids and later x86 CPUs).
//
// The dots of an expert with many rows: its weights, dequantized once per work item to bf16
// (e2m1 * block scale: at most 6 significant bits, exact), times its activations in bf16 (exact:
// the GEMM inputs are bf16 values, or e2m1 * block scale under W4A4), by TDPBF16PS into fp32
// tiles. Every product is exact; the sums are fp32 in the tile unit's order (each k pair in
// turn, k increasing), fixed by the shapes, so the results are deterministic but not the other
// SIMD levels' bits. The unit reads subnormal inputs as zero and flushes subnormal products and
// sums to zero (measured, v72): the backend takes this path only where no activation is below
// 2^-100 in magnitude (amx_vnni_block reports it), so that every product of an NVFP4 weight
// (at least 2^-10 when not zero) is normal; what can still differ from IEEE sums is a sum that
// cancels below 2^-126 (it reads 0), or a product with an MXFP4 weight of a scale below 2^-16.
#pragma once

#include <cstdint>

namespace fp4moe::detail {

// Whether this CPU and OS run AMX-BF16 tiles: the CPUID bits, and the process's permission for
// the tile data state (arch_prctl ARCH_REQ_XCOMP_PERM, asked once). Never throws.
bool amx_usable();

// K rounded up to the tiles' 32 k values a step.
constexpr int64_t amx_k_padded(int64_t K) { return (K + 31) / 32 * 32; }

// Up to 16 activation rows (fp32 holding bf16 values) -> one VNNI block: (Kp / 2) rows of 16
// token pairs, block[(k / 2) * 32 + 2 * c + (k & 1)] = bf16(rows[c][k]), zero for c >= n and for
// k >= K. Returns false (and the block is not usable) when a row holds a value of magnitude below
// kAmxSmallest but not zero (a subnormal the unit would read as zero, or one whose products
// with small weights would be).
constexpr float kAmxSmallest = 0x1p-100f;
bool amx_vnni_block(const float* const* rows, int n, int64_t K, uint16_t* block);

// c[t][r][j] = sum_k w[r][k] * x_t[k][j] over Kp (a multiple of 32), for RB = 1 or 2 blocks of
// 16 weight rows (w: RB * 16 rows of Kp bf16, row stride Kp) and nt token blocks x_t =
// blocks + t * Kp * 16 (amx_vnni_block's layout); c is (nt, RB * 16, 16) fp32.
void amx_dots(const uint16_t* w, int RB, int64_t Kp, const uint16_t* blocks, int nt, float* c);

}  // namespace fp4moe::detail
