// The CPU backend's layout of the packed e2m1 weights ("cpu codes"), and its conversion from
// HostWeights' canonical layout (SPEC §3: K/2 bytes a row, weight 2j in the low nibble of byte
// j, weight 2j + 1 in its high nibble).
//
// A row of K weights (K a multiple of 16) keeps its K/2 bytes and its place; inside it, each
// group of 32 weights (16 bytes, g = k / 32) holds
//   byte 16g + j:  weight 32g + j in the low nibble, weight 32g + 16 + j in the high nibble
// for j = 0..15, and a final 16 weights (K % 32 == 16) stay as in the canonical layout. Why:
// one 16-byte load widened to 16 lanes of 32 bits gives weights 32g..32g+15 in k order from the
// low nibbles (a permute reads only a lane's low 4 bits) and 32g+16..32g+31 from the same lanes
// shifted right by 4; from the canonical layout every 16 weights cost a byte shuffle, a widening
// and a variable shift (the AVX-512 decode: 5 -> 3 vector instructions per 16 weights).
// The scales keep their canonical layout: weights 32g..32g+15 are one NVFP4 block, and
// 32g+16..32g+31 the next.
#pragma once

#include <cstdint>
#include <memory>

#include "backend.hpp"

namespace fp4moe::detail {

// Where weight k of a cpu-codes row of K weights is: byte `byte` of the row, bits
// [shift, shift + 4).
struct CpuCodeAt {
  int64_t byte;
  int shift;
};
inline CpuCodeAt cpu_code_at(int64_t k, int64_t K) {
  if (k >= K / 32 * 32) return {k / 2, int(k % 2) * 4};  // the final 16: canonical
  return {k / 32 * 16 + k % 16, int(k % 32 / 16) * 4};
}

// n rows of K weights, canonical -> cpu codes and back, in place (rows K/2 bytes apart).
void cpu_codes_from_canonical(uint8_t* rows, int64_t n, int64_t K);
void canonical_from_cpu_codes(uint8_t* rows, int64_t n, int64_t K);

// w's packed weights (w13, w2) rewritten in place as cpu codes, on host_threads() threads, and
// w.codes set to say so; nothing when they already are.
void to_cpu_codes(HostWeights& w);

// Weights in cpu codes for the CPU backend: `w` itself when they are, else a copy converted
// (weights shared with another backend, as the tests share them).
std::shared_ptr<const HostWeights> with_cpu_codes(std::shared_ptr<const HostWeights> w);

}  // namespace fp4moe::detail
