// Probe: does an AMX-BF16 tile product cost less with fewer rows or columns?
//
// Question (notes v73): the CPU backend's AMX path (src/cpu/cpu_amx.cpp) multiplies 16 weight rows
// (tile A) by blocks of 16 tokens (tile B, VNNI pairs), padding an expert's last block with zero
// tokens; an expert of 4-7 rows is one block of mostly padding, and v72 measured the tiles no
// faster than AVX-512 from 4 rows. Would a tile config with fewer rows (A and C: M < 16) or fewer
// columns (B and C: N < 16) for the short block make its TDPBF16PS cheaper?
//
// Method: one thread, a tile config per (M, N); A tiles M x 32 bf16, B tiles 16 x N pairs, C tiles
// M x N fp32. Throughput: 4 independent C tiles, 4 products per loop; latency: 1 C tile, each
// product dependent on the last. ns per product, best of 3 runs of 2M loops. The sums are
// checked (all-ones inputs: each C element 32 * loops) so that a config that did not apply shows.
//
// Build and run (x86-64 Linux with AMX-BF16):
//   g++ -O2 -std=c++20 -o /tmp/amx_rows bench/probes/amx_rows.cpp && /tmp/amx_rows
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <initializer_list>

namespace {
struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};
TileConfig config;  // a global object: GCC 13 drops the stores to a local one before LDTILECFG

#define AMX __attribute__((target("amx-tile,amx-bf16")))

// ns per product; false in ok when a C element is not 32 * loops
AMX double run(int M, int N, bool dependent, long loops, bool& ok) {
  config = TileConfig{};
  for (int t = 0; t < 4; ++t) config.colsb[t] = uint16_t(N * 4), config.rows[t] = uint8_t(M);  // C
  config.colsb[4] = config.colsb[6] = 64, config.rows[4] = config.rows[6] = uint8_t(M);     // A
  config.colsb[5] = config.colsb[7] = uint16_t(N * 4), config.rows[5] = config.rows[7] = 16;  // B
  _tile_loadconfig(&config);
  alignas(64) static uint16_t ones[16 * 32];
  std::fill(ones, ones + 16 * 32, uint16_t(0x3F80));  // bf16 1.0
  _tile_loadd(4, ones, 64);  // (the tile intrinsics are statements: no comma expressions)
  _tile_loadd(5, ones, 64);
  _tile_loadd(6, ones, 64);
  _tile_loadd(7, ones, 64);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  const auto t0 = std::chrono::steady_clock::now();
  if (dependent) {
    for (long i = 0; i < loops; ++i) {
      _tile_dpbf16ps(0, 4, 5);
      _tile_dpbf16ps(0, 6, 7);
      _tile_dpbf16ps(0, 4, 7);
      _tile_dpbf16ps(0, 6, 5);
    }
  } else {
    for (long i = 0; i < loops; ++i) {
      _tile_dpbf16ps(0, 4, 5);
      _tile_dpbf16ps(1, 4, 7);
      _tile_dpbf16ps(2, 6, 5);
      _tile_dpbf16ps(3, 6, 7);
    }
  }
  const auto t1 = std::chrono::steady_clock::now();
  alignas(64) static float c[16 * 16];
  std::fill(c, c + 256, -1.0f);
  _tile_stored(0, c, 64);
  _tile_release();
  const float want = float(dependent ? 4 * 32 : 32) * float(loops);
  ok = true;
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) ok = ok && c[m * 16 + n] == want;
  return std::chrono::duration<double, std::nano>(t1 - t0).count() / double(loops * 4);
}
}  // namespace

int main() {
  constexpr long kReqXcompPerm = 0x1023, kXtileData = 18;
  if (syscall(SYS_arch_prctl, kReqXcompPerm, kXtileData) != 0) {
    std::puts("no AMX tile permission");
    return 1;
  }
  std::puts("  M   N   independent ns   dependent ns   sums");
  for (int M : {16, 8, 4, 2, 1})
    for (int N : {16, 8, 4, 1}) {
      double ind = 1e30, dep = 1e30;
      bool ok_all = true;
      for (int rep = 0; rep < 3; ++rep) {
        bool ok1 = false, ok2 = false;
        // loops: 2^20 keeps the fp32 sums exact (at most 2^27 for the dependent chain)
        ind = std::min(ind, run(M, N, false, 1L << 20, ok1));
        dep = std::min(dep, run(M, N, true, 1L << 20, ok2));
        ok_all = ok_all && ok1 && ok2;
      }
      std::printf(" %2d  %2d   %14.2f   %12.2f   %s\n", M, N, ind, dep, ok_all ? "ok" : "WRONG");
    }
}
