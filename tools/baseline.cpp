#include "baseline.hpp"

#include <algorithm>
#include <cstdio>

#if defined(FP4MOE_WITH_CUDA)
#include "baseline_kernels.hpp"
#include "fp4moe/format.h"
#include "cublas.hpp"
#include "cuda/common/check.hpp"
#include "gpu.hpp"
#endif

namespace fp4moe::cli {

size_t Bf16Baseline::expert_bytes(const LayerDesc& d, bool biases) {
  const size_t H = size_t(d.hidden), I = size_t(d.intermediate);
  return (2 * I * H + H * I) * 2 + (biases ? (2 * I + H) * 2 : 0);
}

#if !defined(FP4MOE_WITH_CUDA)

struct Bf16Baseline::Impl {};
Bf16Baseline::Bf16Baseline(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Bf16Baseline::~Bf16Baseline() = default;
std::unique_ptr<Bf16Baseline> Bf16Baseline::create(const Synthetic&, int, int, size_t, std::string* why) {
  if (why) *why = "this build has no CUDA";
  return nullptr;
}
int Bf16Baseline::copies() const { return 0; }
void Bf16Baseline::set_variants(int64_t, const std::vector<BaselineVariant>&) {}
void Bf16Baseline::run(int, void*) const {}
std::vector<uint16_t> Bf16Baseline::output() const { return {}; }

#else

namespace {

// One grouped-GEMM call's per-group arguments (host arrays, as cuBLAS wants them) and its
// pointer arrays (device arrays, one entry per group since every group holds one GEMM).
struct GroupedGemm {
  std::vector<cublasOperation_t> ta, tb;
  std::vector<int> m, n, k, lda, ldb, ldc, size;
  std::vector<float> alpha, beta;
  Buffer ptrs;  // (3, G) void*: A, then B, then C

  void add(int m_, int n_, int k_, int lda_, int ldb_, int ldc_) {
    ta.push_back(CUBLAS_OP_T);  // row-major (n_out, K) weights read as column-major K x n_out
    tb.push_back(CUBLAS_OP_N);
    m.push_back(m_), n.push_back(n_), k.push_back(k_);
    lda.push_back(lda_), ldb.push_back(ldb_), ldc.push_back(ldc_);
    size.push_back(1);
    alpha.push_back(1.0f), beta.push_back(0.0f);
  }
  int groups() const { return int(m.size()); }
};

struct Variant {
  int64_t T = 0, rows = 0;  // rows: slots with an expert
  const int32_t* ids = nullptr;
  const float* weights = nullptr;
  const uint16_t* hidden = nullptr;
  GroupedGemm gemm1, gemm2;
};

}  // namespace

struct Bf16Baseline::Impl {
  LayerDesc d;
  int device = 0;
  const CublasApi* api = nullptr;
  std::unique_ptr<CublasHandle> handle;
  std::vector<Buffer> w13, w2;  // per copy: (E, 2I, H) and (E, H, I) bf16, checkpoint row order
  Buffer b13, b2;               // (E, 2I), (E, H) bf16 or empty
  // Workspace for T tokens, shared by the variants (they run one after another on one stream).
  Buffer row_of_slot, expert_of_row, xp, gu, h, y, out;
  std::vector<Variant> variants;

  void grouped(const GroupedGemm& g, cudaDataType_t t, const char* what) const {
    if (g.groups() == 0) return;
    const void* const* p = static_cast<const void* const*>(g.ptrs.data());
    const size_t G = size_t(g.groups());
    check_cublas(api->gemm_grouped_batched_ex(handle->get(), g.ta.data(), g.tb.data(), g.m.data(), g.n.data(),
                                              g.k.data(), g.alpha.data(), p, t, g.lda.data(), p + G, t,
                                              g.ldb.data(), g.beta.data(),
                                              const_cast<void* const*>(p + 2 * G), t, g.ldc.data(), g.groups(),
                                              g.size.data(), CUBLAS_COMPUTE_32F),
                 what);
  }
};

Bf16Baseline::Bf16Baseline(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Bf16Baseline::~Bf16Baseline() = default;
int Bf16Baseline::copies() const { return int(impl_->w13.size()); }

std::unique_ptr<Bf16Baseline> Bf16Baseline::create(const Synthetic& ckpt, int device, int copies,
                                                   size_t reserve_bytes, std::string* why) {
  const LayerDesc& d = ckpt.desc;
  const int64_t E = int64_t(ckpt.experts.size()), H = d.hidden, I = d.intermediate;
  auto fail = [&](const std::string& w) -> std::unique_ptr<Bf16Baseline> {
    if (why) *why = w;
    return nullptr;
  };
  if (E != d.num_experts) return fail("the baseline needs every expert of the checkpoint");
  if (E > 1024) return fail("the baseline's sort handles E <= 1024");
  if (H % 8 != 0) return fail("the baseline's gather needs H % 8 == 0");
  std::string cublas_why;
  const CublasApi* api = load_cublas(&cublas_why);
  if (!api) return fail(cublas_why);
  if (!api->gemm_grouped_batched_ex)
    return fail(api->library + " has no cublasGemmGroupedBatchedEx (needs cuBLAS >= 12.5)");

  const bool biases = !ckpt.w13_bias.empty();
  const size_t copy_bytes = size_t(E) * (expert_bytes(d, false));
  size_t free_b = 0, total_b = 0;
  if (!cuda_mem_info(device, &free_b, &total_b)) return fail("cudaMemGetInfo failed");
  const size_t usable = free_b > reserve_bytes ? free_b - reserve_bytes : 0;
  const int fit = int(std::min<size_t>(usable / std::max<size_t>(copy_bytes, 1), size_t(copies)));
  if (fit < 1) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "bf16 weights need %.1f GiB of GPU memory, %.1f GiB free after the FP4 layer",
                  double(copy_bytes) / (1 << 30), double(usable) / (1 << 30));
    return fail(buf);
  }

  auto impl = std::make_unique<Impl>();
  impl->d = d;
  impl->device = device;
  impl->api = api;
  impl->handle = std::make_unique<CublasHandle>(*api, device);
  const DeviceType cuda = DeviceType::cuda;
  impl->w13.emplace_back(cuda, device, size_t(E * 2 * I * H) * 2);
  impl->w2.emplace_back(cuda, device, size_t(E * H * I) * 2);

  // Expert by expert through a staging buffer: the FP4 bytes go up, bf16 is made on the GPU.
  const bool mx = d.weight_format == WeightFormat::mxfp4;
  const int64_t block = mx ? kMxfp4Block : kNvfp4Block;
  const size_t d13 = size_t(2 * I * H / 2), s13 = size_t(2 * I * H / block);
  const size_t d2 = size_t(H * I / 2), s2 = size_t(H * I / block);
  Buffer stage(cuda, device, d13 + s13 + d2 + s2);
  uint8_t* st = static_cast<uint8_t*>(stage.data());
  for (int64_t e = 0; e < E; ++e) {
    FP4MOE_CUDA_CHECK(cudaMemcpy(st, ckpt.w13.data() + size_t(e) * d13, d13, cudaMemcpyHostToDevice));
    FP4MOE_CUDA_CHECK(cudaMemcpy(st + d13, ckpt.w13_scale.data() + size_t(e) * s13, s13, cudaMemcpyHostToDevice));
    FP4MOE_CUDA_CHECK(cudaMemcpy(st + d13 + s13, ckpt.w2.data() + size_t(e) * d2, d2, cudaMemcpyHostToDevice));
    FP4MOE_CUDA_CHECK(
        cudaMemcpy(st + d13 + s13 + d2, ckpt.w2_scale.data() + size_t(e) * s2, s2, cudaMemcpyHostToDevice));
    const float dq13 = mx ? 1.0f : ckpt.w13_scale_2[size_t(e)], dq2 = mx ? 1.0f : ckpt.w2_scale_2[size_t(e)];
    uint16_t* o13 = static_cast<uint16_t*>(impl->w13[0].data()) + size_t(e * 2 * I * H);
    uint16_t* o2 = static_cast<uint16_t*>(impl->w2[0].data()) + size_t(e * H * I);
    FP4MOE_CUDA_CHECK(kernels::dequant_fp4_bf16(st, st + d13, dq13, mx, 2 * I, H, o13, nullptr));
    FP4MOE_CUDA_CHECK(kernels::dequant_fp4_bf16(st + d13 + s13, st + d13 + s13 + d2, dq2, mx, H, I, o2, nullptr));
    FP4MOE_CUDA_CHECK(cudaDeviceSynchronize());  // the staging buffer is reused next
  }
  for (int c = 1; c < fit; ++c) {
    impl->w13.emplace_back(cuda, device, impl->w13[0].size());
    impl->w2.emplace_back(cuda, device, impl->w2[0].size());
    FP4MOE_CUDA_CHECK(cudaMemcpy(impl->w13[size_t(c)].data(), impl->w13[0].data(), impl->w13[0].size(),
                                 cudaMemcpyDeviceToDevice));
    FP4MOE_CUDA_CHECK(cudaMemcpy(impl->w2[size_t(c)].data(), impl->w2[0].data(), impl->w2[0].size(),
                                 cudaMemcpyDeviceToDevice));
  }
  if (biases) {
    impl->b13 = Buffer(cuda, device, ckpt.w13_bias.size() * 2);
    impl->b13.upload(ckpt.w13_bias.data(), ckpt.w13_bias.size() * 2);
    impl->b2 = Buffer(cuda, device, ckpt.w2_bias.size() * 2);
    impl->b2.upload(ckpt.w2_bias.data(), ckpt.w2_bias.size() * 2);
  }
  FP4MOE_CUDA_CHECK(cudaDeviceSynchronize());
  return std::unique_ptr<Bf16Baseline>(new Bf16Baseline(std::move(impl)));
}

void Bf16Baseline::set_variants(int64_t T, const std::vector<BaselineVariant>& in) {
  Impl& m = *impl_;
  const int64_t H = m.d.hidden, I = m.d.intermediate, E = m.d.num_experts, k = m.d.top_k;
  const int64_t slots = T * k;
  const DeviceType cuda = DeviceType::cuda;
  m.variants.clear();
  // Free the previous token count's workspace before allocating this one's.
  for (Buffer* b : {&m.row_of_slot, &m.expert_of_row, &m.xp, &m.gu, &m.h, &m.y, &m.out}) *b = Buffer();
  m.row_of_slot = Buffer(cuda, m.device, size_t(slots) * 4);
  m.expert_of_row = Buffer(cuda, m.device, size_t(slots) * 4);
  m.xp = Buffer(cuda, m.device, size_t(slots * H) * 2);   // (T*k, H) permuted x
  m.gu = Buffer(cuda, m.device, size_t(slots * 2 * I) * 2);  // (T*k, 2I) gate | up
  m.h = Buffer(cuda, m.device, size_t(slots * I) * 2);    // (T*k, I)
  m.y = Buffer(cuda, m.device, size_t(slots * H) * 2);    // (T*k, H) per-slot expert outputs
  m.out = Buffer(cuda, m.device, size_t(T * H) * 2);      // (T, H)
  const auto* xp = static_cast<uint16_t*>(m.xp.data());
  const auto* gu = static_cast<uint16_t*>(m.gu.data());
  const auto* hh = static_cast<uint16_t*>(m.h.data());
  const auto* yy = static_cast<uint16_t*>(m.y.data());

  for (const BaselineVariant& bv : in) {
    Variant v;
    v.T = T;
    v.ids = static_cast<const int32_t*>(bv.ids.data);
    v.weights = static_cast<const float*>(bv.weights.data);
    v.hidden = static_cast<const uint16_t*>(bv.hidden.data);
    std::vector<int64_t> count(size_t(E), 0);
    for (int64_t s = 0; s < slots; ++s) {
      const int32_t e = bv.host_ids[s];
      if (e >= 0 && e < E) ++count[size_t(e)];
    }
    const auto* w13 = static_cast<const uint16_t*>(m.w13[size_t(bv.copy)].data());
    const auto* w2 = static_cast<const uint16_t*>(m.w2[size_t(bv.copy)].data());
    std::vector<const void*> p1[3], p2[3];
    int64_t off = 0;
    for (int64_t e = 0; e < E; ++e) {
      const int64_t n = count[size_t(e)];
      if (n == 0) continue;
      // gu (n, 2I) = xp (n, H) . w13_e (2I, H)^T, and y (n, H) = h (n, I) . w2_e (H, I)^T,
      // as column-major C^T = op_T(W) . X^T.
      v.gemm1.add(int(2 * I), int(n), int(H), int(H), int(H), int(2 * I));
      p1[0].push_back(w13 + e * 2 * I * H), p1[1].push_back(xp + off * H), p1[2].push_back(gu + off * 2 * I);
      v.gemm2.add(int(H), int(n), int(I), int(I), int(I), int(H));
      p2[0].push_back(w2 + e * H * I), p2[1].push_back(hh + off * I), p2[2].push_back(yy + off * H);
      off += n;
    }
    v.rows = off;
    for (auto [g, p] : {std::pair{&v.gemm1, p1}, std::pair{&v.gemm2, p2}}) {
      std::vector<const void*> all;
      for (int i = 0; i < 3; ++i) all.insert(all.end(), p[i].begin(), p[i].end());
      g->ptrs = Buffer(cuda, m.device, std::max<size_t>(all.size(), 1) * sizeof(void*));
      g->ptrs.upload(all.data(), all.size() * sizeof(void*));
    }
    m.variants.push_back(std::move(v));
  }
}

void Bf16Baseline::run(int vi, void* stream_) const {
  const Impl& m = *impl_;
  const Variant& v = m.variants.at(size_t(vi));
  const auto stream = static_cast<cudaStream_t>(stream_);
  const int64_t H = m.d.hidden, I = m.d.intermediate, E = m.d.num_experts, k = m.d.top_k;
  auto i32 = [](const Buffer& b) { return static_cast<int32_t*>(b.data()); };
  auto u16 = [](const Buffer& b) { return static_cast<uint16_t*>(b.data()); };
  m.handle->bind(stream);
  FP4MOE_CUDA_CHECK(kernels::sort_slots(v.ids, v.T * k, E, i32(m.row_of_slot), i32(m.expert_of_row), stream));
  FP4MOE_CUDA_CHECK(kernels::gather_rows(v.hidden, i32(m.row_of_slot), v.T * k, k, H, u16(m.xp), stream));
  m.grouped(v.gemm1, CUDA_R_16BF, "cublasGemmGroupedBatchedEx(gate/up)");
  FP4MOE_CUDA_CHECK(kernels::gated_act(u16(m.gu), i32(m.expert_of_row), m.b13.data() ? u16(m.b13) : nullptr, v.rows,
                                       I, m.d.gate_up == GateUpLayout::interleaved,
                                       m.d.activation == Activation::swiglu_oai, m.d.swiglu_limit, m.d.swiglu_alpha,
                                       u16(m.h), stream));
  m.grouped(v.gemm2, CUDA_R_16BF, "cublasGemmGroupedBatchedEx(down)");
  FP4MOE_CUDA_CHECK(kernels::combine(u16(m.y), i32(m.row_of_slot), v.ids, v.weights,
                                     m.b2.data() ? u16(m.b2) : nullptr, v.T, k, H, u16(m.out), stream));
}

std::vector<uint16_t> Bf16Baseline::output() const {
  std::vector<uint16_t> o(impl_->out.size() / 2);
  impl_->out.download(o.data(), o.size() * 2);
  return o;
}

#endif

}  // namespace fp4moe::cli
