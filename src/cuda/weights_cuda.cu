// upload_weights: HostWeights (canonical layout, SPEC §3) -> CudaWeights (the fragment
// layout of gemm_internal.hpp, where the layout and its index functions are written down).
// Load time: builds the layout on the host, then one cudaMemcpy per array.
#include <algorithm>
#include <exception>
#include <vector>

#include "cuda/common/check.hpp"
#include "cuda/gemm_internal.hpp"
#include "parallel.hpp"

namespace fp4moe::cuda {
namespace {

// The stored word's bits of one checkpoint byte (two e2m1 codes, low nibble first) in byte
// slot j of a fragment word: frag_word_store of the byte's stored codes at bits 8j.. 8j+7.
// frag_word_store moves every bit on its own, so a word is the OR of its four bytes' images.
struct ByteWords {
  uint32_t w[4][256];
  ByteWords() {
    for (int j = 0; j < 4; ++j)
      for (uint32_t b = 0; b < 256; ++b)
        w[j][b] = frag_word_store((frag_stored_code(b & 15u) | frag_stored_code(b >> 4) << 4) << (8 * j));
  }
};
const ByteWords kByteWords;

}  // namespace

CudaWeights::~CudaWeights() {
  int prev = 0;
  const bool have_prev = cudaGetDevice(&prev) == cudaSuccess;
  if (cudaSetDevice(device) == cudaSuccess)
    for (void* p : allocations)
      if (p) cudaFree(p);  // a destructor cannot throw: errors here are dropped
  if (have_prev) cudaSetDevice(prev);
}

HostFragments build_fragments(const char* name, const detail::HostBytes& data, const detail::HostBytes& scale,
                              const std::vector<float>& dq, int64_t E, int N, int K, int block,
                              int64_t (*canonical_row)(int64_t, int64_t)) {
  const int Kp = (K + kFragK - 1) / kFragK * kFragK;
  const int64_t cols = K / block;
  HostFragments m;
  // A last group's rows past N: zero codes (written below) and zero scales (frag_block).
  m.q.resize(size_t(E * frag_expert_blocks(N, Kp)) * kFragWords);  // each thread's words: its first touch
  m.scale.assign(size_t(E * frag_expert_blocks(N, Kp)) * frag_scale_bytes(block), 0u);
  m.epi.resize(size_t(E));
  // Experts are independent (each writes its own q, scale and epi ranges): contiguous
  // chunks of experts on host_threads() threads (parallel.hpp). A failing expert's error is
  // rethrown after all threads end, the lowest expert's first, so the message does not
  // depend on the thread count.
  // folded: the thread's buffer for an expert's sign-folded codes (reused across its experts).
  auto build_expert = [&](int64_t e, std::vector<uint8_t>& folded) {
    const uint8_t* d = data.data() + e * N * (K / 2);
    const uint8_t* s = scale.data() + e * N * cols;
    // NVFP4: fold each block scale's sign into its 16 e2m1 signs and zero the codes of a
    // block whose scale is zero, so the prepared code is a magnitude (gemm_internal.hpp).
    if (block == 16) {
      folded.assign(d, d + N * (K / 2));
      for (int64_t r = 0; r < N; ++r)
        for (int64_t c = 0; c < cols; ++c) {
          const uint8_t code = s[r * cols + c];
          uint8_t* b = folded.data() + r * (K / 2) + c * 8;
          if ((code & 0x7F) == 0) std::fill_n(b, 8, uint8_t(0));
          else if (code & 0x80)
            for (int j = 0; j < 8; ++j) b[j] ^= 0x88;
        }
      d = folded.data();
    }
    // MXFP4 fold: largest and smallest code over blocks that hold a non-zero value.
    int cmax = -1, cmin = 256;
    auto block_nonzero = [&](int64_t r, int64_t c) {
      for (int64_t j = 0; j < block / 2; ++j)
        if (d[r * (K / 2) + c * (block / 2) + j] & 0x77) return true;
      return false;
    };
    if (block == 32)
      for (int64_t r = 0; r < N; ++r)
        for (int64_t c = 0; c < cols; ++c)
          if (block_nonzero(r, c)) {
            cmax = std::max<int>(cmax, s[r * cols + c]);
            cmin = std::min<int>(cmin, s[r * cols + c]);
          }
    if (block == 32 && cmax < 0) cmax = cmin = 127;  // all zero: any fold works
    if (block == 32 && cmax - cmin > kMxMaxSpan)
      detail::fail(ErrorKind::unsupported,
                   std::string(name) + "_scale: e8m0 codes of expert " + std::to_string(e) + " span [" +
                       std::to_string(cmin) + ", " + std::to_string(cmax) +
                       "], need at most 2^" + std::to_string(kMxMaxSpan) +
                       " between the smallest and largest non-zero block for the CUDA GEMMs");
    const int F = block == 16 ? kNvfp4Fold : cmax - 127;
    m.epi[e] = (exp2i(F / 2) * exp2i(F - F / 2)) * dq[e];
    // Word by word: word (lane, kk) of block (nb, kb) takes one byte (two consecutive k)
    // per register a_j from canonical row canon(n') (see gemm_internal.hpp): byte j from row
    // n0 + lane / 4 + 8 (j & 1) at logical k = kb * 64 + (lane % 4) * 16 + kk * 4 + 2 (j >> 1)
    // (kperm_position: MMA position kk * 16 + 8 (j >> 1) + (lane % 4) * 2). A lane whose block
    // starts past K (K is a multiple of 16) holds zero codes.
    const int KB = Kp / kFragK, NG = frag_groups(N);
    const uint8_t* rows[kFragRows];
    for (int64_t n0 = 0; n0 < N; n0 += kFragRows) {
      for (int r = 0; r < kFragRows; ++r) rows[r] = d + canonical_row(n0 + r, N) * (K / 2);
      for (int kb = 0; kb < KB; ++kb) {
        uint32_t* out = m.q.data() + frag_block(e, n0 / kFragRows, kb, NG, KB) * kFragWords;
        for (int lane = 0; lane < 32; ++lane)
          for (int kk = 0; kk < 4; ++kk) {
            const int64_t kl = int64_t(kb) * kFragK + (lane % 4) * 16;  // the lane's logical block
            uint32_t word = 0;
            if (kl < K) {
              const int64_t c = (kl + kk * 4) / 2;  // byte column of j = 0
              const uint8_t* lo = rows[lane / 4];
              const uint8_t* hi = rows[lane / 4 + 8];
              word = kByteWords.w[0][lo[c]] | kByteWords.w[1][hi[c]] | kByteWords.w[2][lo[c + 1]] |
                     kByteWords.w[3][hi[c + 1]];
            }
            out[lane * 4 + kk] = word;
          }
      }
    }
    for (int nb = N / kFragRows; nb < NG * kFragGroup; ++nb)  // a last group's rows past N: zero codes
      for (int kb = 0; kb < KB; ++kb)
        std::fill_n(m.q.data() + frag_block(e, nb, kb, NG, KB) * kFragWords, kFragWords, 0u);
    for (int64_t n = 0; n < N; ++n) {
      const int64_t r = canonical_row(n, N);
      for (int64_t c = 0; c < cols; ++c) {
        uint8_t code = s[r * cols + c];
        if (block == 32) code = uint8_t(std::max(int(code) - cmax + 253, 128));
        else code = (code & 0x7F) ? nvfp4_prepared_code(code) : uint8_t(0);
        m.scale[frag_scale(e, n, c * block, N, Kp, block)] = code;
      }
    }
  };
  const int64_t slices = std::min<int64_t>(detail::host_threads(), E);  // contiguous slices of experts, one per thread
  std::vector<std::exception_ptr> errors(static_cast<size_t>(slices));
  detail::parallel_for(slices, int(slices), [&](int64_t t, int) {
    try {
      std::vector<uint8_t> folded;
      for (int64_t e = E * t / slices; e < E * (t + 1) / slices; ++e) build_expert(e, folded);
    } catch (...) {
      errors[size_t(t)] = std::current_exception();
    }
  });
  for (const std::exception_ptr& err : errors)
    if (err) std::rethrow_exception(err);
  return m;
}

namespace {

// Inverse of w13_device_row: n' -> canonical row (gate i, or I + i for up i).
int64_t w13_row(int64_t n, int64_t N) {
  const int64_t i = (n / 16) * 8 + n % 8;
  return (n % 16) >= 8 ? N / 2 + i : i;
}
int64_t identity_row(int64_t r, int64_t) { return r; }

}  // namespace

std::unique_ptr<DeviceWeights> upload_weights(const detail::HostWeights& w, int device) {
  const int64_t E = w.num_local, H = w.H(), I = w.I();
  const int block = w.block;
  const std::string fn = "upload_weights: ";
  if (block != 16 && block != 32) detail::fail_arg(fn + "block: got " + std::to_string(block) + ", need 16 or 32");
  if (E <= 0) detail::fail_arg(fn + "num_local: got " + std::to_string(E) + ", need > 0");
  if (H <= 0 || H % block || I <= 0 || I % block || H > (1 << 20) || I > (1 << 20))
    detail::fail_arg(fn + "hidden, intermediate: got " + std::to_string(H) + ", " + std::to_string(I) +
                     ", need positive multiples of " + std::to_string(block) + " up to 2^20");
  auto need = [&](const char* name, size_t got, size_t want) {
    if (got != want)
      detail::fail_arg(fn + name + ": got " + std::to_string(got) + " elements, need " + std::to_string(want));
  };
  need("w13", w.w13.size(), size_t(E * 2 * I * H / 2));
  need("w13_scale", w.w13_scale.size(), size_t(E * 2 * I * H / block));
  need("w13_dq", w.w13_dq.size(), size_t(E));
  need("w2", w.w2.size(), size_t(E * H * I / 2));
  need("w2_scale", w.w2_scale.size(), size_t(E * H * I / block));
  need("w2_dq", w.w2_dq.size(), size_t(E));
  if (!w.w13_bias.empty()) need("w13_bias", w.w13_bias.size(), size_t(E * 2 * I));
  if (!w.w2_bias.empty()) need("w2_bias", w.w2_bias.size(), size_t(E * H));

  const HostFragments m13 =
      build_fragments("w13", w.w13, w.w13_scale, w.w13_dq, E, int(2 * I), int(H), block, w13_row);
  const HostFragments m2 = build_fragments("w2", w.w2, w.w2_scale, w.w2_dq, E, int(H), int(I), block, identity_row);

  auto out = std::make_unique<CudaWeights>();
  out->desc = w.desc;
  out->device = device;
  FP4MOE_CUDA_CHECK(cudaSetDevice(device));
  int slot = 0;
  auto upload = [&](const void* src, size_t bytes) -> void* {
    if (bytes == 0) return nullptr;
    void* p = nullptr;
    FP4MOE_CUDA_CHECK(cudaMalloc(&p, bytes));
    out->allocations[slot++] = p;
    out->bytes_ += bytes;
    FP4MOE_CUDA_CHECK(cudaMemcpy(p, src, bytes, cudaMemcpyHostToDevice));
    return p;
  };
  auto fill = [&](WeightMatrix& d, const HostFragments& h, const std::vector<float>& bias, int N, int K) {
    d.q = static_cast<const uint32_t*>(upload(h.q.data(), h.q.size() * 4));
    d.scale = static_cast<const uint8_t*>(upload(h.scale.data(), h.scale.size()));
    d.epi = static_cast<const float*>(upload(h.epi.data(), h.epi.size() * 4));
    d.bias = static_cast<const float*>(upload(bias.data(), bias.size() * 4));
    d.num_experts = E;
    d.N = N;
    d.K = K;
    d.Kp = (K + kFragK - 1) / kFragK * kFragK;
    d.groups = frag_groups(N);
    d.block = block;
  };
  fill(out->w13, m13, w.w13_bias, int(2 * I), int(H));
  fill(out->w2, m2, w.w2_bias, int(H), int(I));
  return out;
}

}  // namespace fp4moe::cuda
