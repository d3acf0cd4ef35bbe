#include "cpu/cpu_codes.hpp"

#include <algorithm>

#include "parallel.hpp"

namespace fp4moe::detail {
namespace {

constexpr int64_t kGroupBytes = 16;  // 32 weights

// One group of 16 bytes: canonical weights w[0..31] (w[2j] low, w[2j + 1] high in byte j) ->
// byte j = w[j] | w[16 + j] << 4, or back.
void group_to_cpu(uint8_t* g) {
  uint8_t w[32];
  for (int j = 0; j < 16; ++j) w[2 * j] = g[j] & 15, w[2 * j + 1] = g[j] >> 4;
  for (int j = 0; j < 16; ++j) g[j] = uint8_t(w[j] | w[16 + j] << 4);
}
void group_to_canonical(uint8_t* g) {
  uint8_t w[32];
  for (int j = 0; j < 16; ++j) w[j] = g[j] & 15, w[16 + j] = g[j] >> 4;
  for (int j = 0; j < 16; ++j) g[j] = uint8_t(w[2 * j] | w[2 * j + 1] << 4);
}

template <class Group>
void each_group(uint8_t* rows, int64_t n, int64_t K, const Group& group) {
  const int64_t groups = K / 32;
  for (int64_t r = 0; r < n; ++r)
    for (int64_t g = 0; g < groups; ++g) group(rows + r * (K / 2) + g * kGroupBytes);
}

// Rows of one matrix set ((rows, K/2) bytes) on host_threads() threads, in pieces of rows.
void rows_to_cpu(HostBytes& bytes, int64_t rows, int64_t K) {
  constexpr int64_t kPiece = 256;  // rows a work item
  parallel_for((rows + kPiece - 1) / kPiece, host_threads(), [&](int64_t i, int) {
    const int64_t r0 = i * kPiece;
    cpu_codes_from_canonical(bytes.data() + r0 * (K / 2), std::min(kPiece, rows - r0), K);
  });
}

}  // namespace

void cpu_codes_from_canonical(uint8_t* rows, int64_t n, int64_t K) { each_group(rows, n, K, group_to_cpu); }
void canonical_from_cpu_codes(uint8_t* rows, int64_t n, int64_t K) { each_group(rows, n, K, group_to_canonical); }

void to_cpu_codes(HostWeights& w) {
  if (w.codes == CodeLayout::cpu) return;
  const int64_t H = w.H(), I = w.I(), EL = w.num_local;
  rows_to_cpu(w.w13, EL * 2 * I, H);
  rows_to_cpu(w.w2, EL * H, I);
  w.codes = CodeLayout::cpu;
}

std::shared_ptr<const HostWeights> with_cpu_codes(std::shared_ptr<const HostWeights> w) {
  if (w->codes == CodeLayout::cpu) return w;
  auto copy = std::make_shared<HostWeights>(*w);
  to_cpu_codes(*copy);
  return copy;
}

}  // namespace fp4moe::detail
