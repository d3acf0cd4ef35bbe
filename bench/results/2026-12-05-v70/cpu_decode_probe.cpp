#include <immintrin.h>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <chrono>
#include <vector>
#include <sys/mman.h>
template <class T> struct HugeAlloc { using value_type = T; HugeAlloc() = default; template <class U> HugeAlloc(const HugeAlloc<U>&) {} T* allocate(size_t n) { size_t b = (n*sizeof(T) + (2u<<20) - 1) & ~size_t((2u<<20)-1); void* p = aligned_alloc(2u<<20, b); if (getenv("HUGE")) madvise(p, b, MADV_HUGEPAGE); return (T*)p; } void deallocate(T* p, size_t) { free(p); } template<class U> bool operator==(const HugeAlloc<U>&) const { return true; } };
static int PF = 8192;
#define AVX __attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi,fma"), always_inline)) inline
alignas(64) static float tab[256][16];
alignas(64) static float tab32[256][16];
AVX __m512 dec16(const uint8_t* codes, const float* table) {
  const __m128i twice = _mm_setr_epi8(0,0,1,1,2,2,3,3,4,4,5,5,6,6,7,7);
  const __m512i nib = _mm512_setr_epi32(0,4,0,4,0,4,0,4,0,4,0,4,0,4,0,4);
  const __m128i b = _mm_loadl_epi64((const __m128i*)codes);
  const __m512i c = _mm512_srlv_epi32(_mm512_cvtepu8_epi32(_mm_shuffle_epi8(b, twice)), nib);
  return _mm512_permutexvar_ps(c, _mm512_load_ps(table));
}
// current: 4 rows, 16 k per step
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi,fma"))) void cur(const uint8_t* q, const uint8_t* s, int n, int K, const float* a, float* out) {
  for (int r0 = 0; r0 < n; r0 += 4) {
    __m512 acc[4]; for (int r=0;r<4;++r) acc[r]=_mm512_setzero_ps();
    for (int k = 0; k < K; k += 16) {
      if ((k & 127) == 0) for (int r=0;r<4;++r) __builtin_prefetch(q + (r0+r)*(K/2) + (k+PF)/2);
      const __m512 av = _mm512_loadu_ps(a + k);
      for (int r=0;r<4;++r) acc[r] = _mm512_fmadd_ps(dec16(q + (int64_t)(r0+r)*(K/2) + k/2, tab[s[(int64_t)(r0+r)*(K/16) + k/16]]), av, acc[r]);
    }
    for (int r=0;r<4;++r) out[r0+r] = _mm512_reduce_add_ps(acc[r]);
  }
}
// new: 32 k per step, even/odd layout, activations pre-permuted (ae: per 32: evens then odds)
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi,fma"))) void nw(const uint8_t* q, const uint8_t* s, int n, int K, const float* ae, float* out) {
  const __m512i hib = _mm512_setr_epi32(0,0,0,0,0,0,0,0,16,16,16,16,16,16,16,16);
  for (int r0 = 0; r0 < n; r0 += 4) {
    __m512 acc[4][2]; for (int r=0;r<4;++r) acc[r][0]=acc[r][1]=_mm512_setzero_ps();
    const uint8_t* qr[4]; const uint8_t* sr[4];
    for (int r=0;r<4;++r) { qr[r] = q + (int64_t)(r0+r)*(K/2); sr[r] = s + (int64_t)(r0+r)*(K/16); }
    for (int k = 0; k < K; k += 32) {
      if ((k & 127) == 0) for (int r=0;r<4;++r) __builtin_prefetch(qr[r] + (k+PF)/2, 0, 2);
      const __m512 a0 = _mm512_loadu_ps(ae + k), a1 = _mm512_loadu_ps(ae + k + 16);
      for (int r=0;r<4;++r) {
        const __m512i x = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i*)(qr[r] + k/2)));
        const __m512i ie = _mm512_ternarylogic_epi32(x, _mm512_set1_epi32(15), hib, 0xEA);
        const __m512i io = _mm512_or_si512(_mm512_srli_epi32(x, 4), hib);
        const __m512 t0 = _mm512_load_ps(tab[sr[r][k/16]]), t1 = _mm512_load_ps(tab[sr[r][k/16+1]]);
        acc[r][0] = _mm512_fmadd_ps(_mm512_permutex2var_ps(t0, ie, t1), a0, acc[r][0]);
        acc[r][1] = _mm512_fmadd_ps(_mm512_permutex2var_ps(t0, io, t1), a1, acc[r][1]);
      }
    }
    for (int r=0;r<4;++r) out[r0+r] = _mm512_reduce_add_ps(_mm512_add_ps(acc[r][0],acc[r][1]));
  }
}
// vbmi: 32 k per step natural order: vpermb to dup bytes, multishift
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi,fma"))) void vb(const uint8_t* q, const uint8_t* s, int n, int K, const float* a, float* out) {
  for (int r0 = 0; r0 < n; r0 += 4) {
    __m512 acc[4][2]; for (int r=0;r<4;++r) acc[r][0]=acc[r][1]=_mm512_setzero_ps();
    const uint8_t* qr[4]; const uint8_t* sr[4];
    for (int r=0;r<4;++r) { qr[r] = q + (int64_t)(r0+r)*(K/2); sr[r] = s + (int64_t)(r0+r)*(K/16); }
    const __m512i nib = _mm512_setr_epi32(0,4,0,4,0,4,0,4,0,4,0,4,0,4,0,4);
    const __m512i i0 = _mm512_setr_epi32(0,0,1,1,2,2,3,3,4,4,5,5,6,6,7,7);
    const __m512i i1 = _mm512_setr_epi32(8,8,9,9,10,10,11,11,12,12,13,13,14,14,15,15);
    for (int k = 0; k < K; k += 32) {
      if ((k & 127) == 0) for (int r=0;r<4;++r) __builtin_prefetch(qr[r] + (k+PF)/2, 0, 2);
      const __m512 a0 = _mm512_loadu_ps(a + k), a1 = _mm512_loadu_ps(a + k + 16);
      for (int r=0;r<4;++r) {
        const __m512i x = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i*)(qr[r] + k/2)));
        const __m512i c0 = _mm512_srlv_epi32(_mm512_permutexvar_epi32(i0, x), nib);
        const __m512i c1 = _mm512_srlv_epi32(_mm512_permutexvar_epi32(i1, x), nib);
        acc[r][0] = _mm512_fmadd_ps(_mm512_permutexvar_ps(c0, _mm512_load_ps(tab[sr[r][k/16]])), a0, acc[r][0]);
        acc[r][1] = _mm512_fmadd_ps(_mm512_permutexvar_ps(c1, _mm512_load_ps(tab[sr[r][k/16+1]])), a1, acc[r][1]);
      }
    }
    for (int r=0;r<4;++r) out[r0+r] = _mm512_reduce_add_ps(_mm512_add_ps(acc[r][0],acc[r][1]));
  }
}

__attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi,fma"))) void lay(const uint8_t* q, const uint8_t* s, int n, int K, const float* a, float* out) {
  for (int r0 = 0; r0 < n; r0 += 4) {
    __m512 acc[4]; for (int r=0;r<4;++r) acc[r]=_mm512_setzero_ps();
    const uint8_t* qr[4]; const uint8_t* sr[4];
    for (int r=0;r<4;++r) { qr[r] = q + (int64_t)(r0+r)*(K/2); sr[r] = s + (int64_t)(r0+r)*(K/16); }
    for (int k = 0; k < K; k += 32) {
      if ((k & 127) == 0) for (int r=0;r<4;++r) __builtin_prefetch(qr[r] + (k+PF)/2, 0, 2);
      const __m512 a0 = _mm512_loadu_ps(a + k), a1 = _mm512_loadu_ps(a + k + 16);
      for (int r=0;r<4;++r) {
        const __m512i x = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i*)(qr[r] + k/2)));
        acc[r] = _mm512_fmadd_ps(_mm512_permutexvar_ps(x, _mm512_load_ps(tab[sr[r][k/16]])), a0, acc[r]);
        acc[r] = _mm512_fmadd_ps(_mm512_permutexvar_ps(_mm512_srli_epi32(x, 4), _mm512_load_ps(tab[sr[r][k/16+1]])), a1, acc[r]);
      }
    }
    for (int r=0;r<4;++r) out[r0+r] = _mm512_reduce_add_ps(acc[r]);
  }
}

__attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi,fma"))) void rd(const uint8_t* q, const uint8_t* s, int n, int K, const float* a, float* out) {
  __m512i acc = _mm512_setzero_si512();
  for (int64_t i = 0; i < (int64_t)n*K/2; i += 64) acc = _mm512_xor_si512(acc, _mm512_load_si512(q + i));
  out[0] = _mm512_reduce_add_epi32(acc);
}
int main(int argc, char** argv) {
  for (int s=0;s<256;++s) for(int c=0;c<16;++c) tab[s][c] = (c&8?-1:1)*(float)(c&7)*0.5f*(s+1);
  const int K = 2048, n = 1536; const int E = atoi(argv[1]); if (argc > 2) PF = atoi(argv[2]);
  std::vector<uint8_t, HugeAlloc<uint8_t>> q((size_t)E*n*K/2 + 64); std::vector<uint8_t, HugeAlloc<uint8_t>> s((size_t)E*n*K/16);
  for (auto& x : q) x = rand(); for (auto& x : s) x = rand();
  std::vector<float> a(K), out(n);
  for (auto& x : a) x = rand() / (float)RAND_MAX;
  for (int v = 0; v < 5; ++v) {
    auto best = 1e9;
    for (int rep = 0; rep < 5; ++rep) {
      auto t0 = std::chrono::steady_clock::now();
      for (int e = 0; e < E; ++e) {
        const uint8_t* qe = q.data() + (size_t)e*n*K/2; const uint8_t* se = s.data() + (size_t)e*n*K/16;
        if (v == 0) cur(qe, se, n, K, a.data(), out.data());
        else if (v == 1) nw(qe, se, n, K, a.data(), out.data());
        else if (v == 2) vb(qe, se, n, K, a.data(), out.data()); else if (v == 3) lay(qe, se, n, K, a.data(), out.data()); else rd(qe, se, n, K, a.data(), out.data());
      }
      double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (t < best) best = t;
    }
    printf("E=%d variant %d: %.2f GB/s codes+scales (%.3f ms)\n", E, v, E*(double)n*K*(0.5+1/16.)/best/1e9, best*1e3);
  }
}
