// gemm_path(), and gemm1 / gemm2: check what the kernels rely on, then route to the
// naive kernels (gemm_naive.cu), the mma.sync kernels (gemm_sm80_kernel.cuh), the
// register-streamed decode kernels (gemm_decode.cu) or the wgmma kernels (gemm_sm90.cu), or
// on request the split-K (gemm_splitk.cu) or weight-streaming (gemm_stream.cu) kernels for
// decode shapes; a path that declines runs mma.sync.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <string>

#include "cuda/common/device.hpp"
#include "cuda/gemm_internal.hpp"

namespace fp4moe::cuda {

GemmPath gemm_path() {
  const char* v = std::getenv("FP4MOE_GEMM");
  if (v && std::strcmp(v, "naive") == 0) return GemmPath::naive;
  if (v && std::strcmp(v, "splitk") == 0) return GemmPath::splitk;
  if (v && std::strcmp(v, "stream") == 0) return GemmPath::stream;
  if (v && std::strcmp(v, "fast") == 0) return GemmPath::fast;
  if (v && std::strcmp(v, "decode") == 0) return GemmPath::decode;
  return GemmPath::sm90;  // decode kernels, else wgmma where it accepts the shape and device, else fast
}

bool gemm_log_on() {
  static const bool on = env_switch("FP4MOE_LOG", '1');  // read once: logging is not an A/B switch
  return on;
}

void gemm_log(const std::string& line) {
  static std::mutex mu;
  static std::set<std::string> seen;
  std::lock_guard<std::mutex> lock(mu);
  if (seen.insert(line).second) std::fprintf(stderr, "fp4moe: %s\n", line.c_str());
}

namespace {

// W4A4 on the default (sm90) and decode paths: NVFP4 activations are dequantized once, exactly
// (nvfp4_value_bf16), into the scratch's a_bf16 section, and every kernel then runs its bf16-A
// code. Measured on the H200 (kimi-k2 W4A4, notes of 2026-11-30): the fast path's in-kernel
// NVFP4-A decode, repeated by every CTA of a row, made W4A4 27-52% slower than W4A16 at
// 1-512 tokens. The section is the sm90 staging's (gemm_internal.hpp Sm90Staging: offset 0,
// row_space x max(H, I) bf16), so the wgmma kernels' h staging after it is unchanged.
bool stages_activations(GemmPath path, const CudaWeights& w) {
  return (path == GemmPath::sm90 || path == GemmPath::decode) && w.desc.act_quant == ActQuant::nvfp4 &&
         w.w13.num_experts <= kStageMaxExperts;
}
// `a` with its NVFP4 A (K columns) replaced by a bf16 copy in the scratch; unchanged when the
// path does not stage or the copy cannot be made (no or too small or misaligned scratch, or A
// read through a gather with its row count unknown): then the kernels decode NVFP4 A.
// `in`: the NVFP4 A's k order (GEMM 1's x logical, GEMM 2's h k-permuted); `out`: the staged
// copy's (k-permuted for the wgmma kernels and for h, rows of kperm_row(K)).
template <class Args>
Args with_staged_activations(const Args& a, GemmPath path, const CudaWeights& w, int64_t K, const int32_t* gather,
                             int64_t a_rows, KOrder in, KOrder out_order, cudaStream_t stream) {
  if (!a.a_fp4 || !stages_activations(path, w)) return a;
  const int64_t H = w.w13.K, I = w.w13.N / 2;
  if (!a.partials || reinterpret_cast<uintptr_t>(a.partials) % 16 ||
      a.partials_bytes < a_staging_bytes(a.rows.row_space, H, I))
    return a;
  if (gather && (a_rows <= 0 || a_rows > a.rows.row_space)) return a;
  Args s = a;
  uint16_t* out = reinterpret_cast<uint16_t*>(a.partials);
  stage_nvfp4_to_bf16(a.a_fp4, a.a_scale, K, a.rows, w.w13.num_experts, gather ? a_rows : 0, out, stream, in,
                      out_order);
  s.a_bf16 = out;
  s.a_fp4 = nullptr;
  s.a_scale = nullptr;
  return s;
}

}  // namespace

bool gemm1_reads_kperm(const DeviceWeights& dw, GemmPath path, int64_t rows_bound) {
  const auto& w = static_cast<const CudaWeights&>(dw);
  return path == GemmPath::sm90 && rows_bound > 0 && !decode_gemm1_takes(w, rows_bound) &&
         sm90_gemm1_takes(w, rows_bound);
}

bool gemm_stages_activations(const DeviceWeights& dw, GemmPath path) {
  return stages_activations(path, static_cast<const CudaWeights&>(dw));
}

size_t gemm_scratch_bytes(const DeviceWeights& dw, GemmPath path, int64_t rows_bound, int64_t row_space) {
  if (path == GemmPath::splitk) return splitk_partials_bytes(dw, rows_bound, row_space);
  const auto& w = static_cast<const CudaWeights&>(dw);
  if (path == GemmPath::stream && rows_bound > 0) return stream_scratch_bytes(w.w13.num_experts);
  if (!stages_activations(path, w) || rows_bound <= 0) return 0;
  const int64_t H = w.w13.K, I = w.w13.N / 2;
  size_t bytes = a_staging_bytes(row_space, H, I);
  // sm90: also the bf16 h of GEMM 1, where the wgmma kernels will take the shape (the same
  // choose_sm90_config and device check as sm90_gemm1/2 at these rows)
  if (path == GemmPath::sm90) {
    const Sm90Staging st =
        sm90_staging(rows_bound, row_space, w.w13.num_experts, H, I, w.w13.block, multiprocessor_count(w.device));
    if (st.use && why_no_sm90(w.device).empty()) bytes = std::max(bytes, st.bytes);
  }
  return bytes;
}

void gemm_prepare_rows(const DeviceWeights& dw, GemmPath path, ExpertRows& rows, float* scratch,
                       size_t scratch_bytes, cudaStream_t stream) {
  if (path != GemmPath::stream || rows.rows_bound <= 0 || !scratch) return;
  const auto& w = static_cast<const CudaWeights&>(dw);
  if (scratch_bytes < stream_scratch_bytes(w.w13.num_experts))
    detail::fail_arg("gemm_prepare_rows: scratch_bytes: got " + std::to_string(scratch_bytes) + ", need >= " +
                     std::to_string(stream_scratch_bytes(w.w13.num_experts)) + " (gemm_scratch_bytes)");
  int32_t* active = reinterpret_cast<int32_t*>(scratch);
  stream_list_active(rows, w.w13.num_experts, active, stream);
  rows.active = active;
}

namespace {

void check_rows(const char* fn, const ExpertRows& rows) {
  if (rows.rows_bound < 0 || rows.row_space < 0)
    detail::fail_arg(std::string(fn) + ": rows: got rows_bound " + std::to_string(rows.rows_bound) +
                     ", row_space " + std::to_string(rows.row_space) + ", need >= 0");
  if (rows.rows_bound > 0 && (!rows.begin || !rows.count))
    detail::fail_arg(std::string(fn) + ": rows.begin/rows.count: got a null pointer, need device arrays [E_local]");
}

// The A operand: bf16 rows, or NVFP4 data + scales; never both, never neither.
void check_a(const char* fn, const uint16_t* bf16, const uint8_t* fp4, const uint8_t* scale, float dq,
             GemmPath path) {
  const std::string f = fn;
  if ((bf16 != nullptr) == (fp4 != nullptr))
    detail::fail_arg(f + ": a_bf16/a_fp4: got " + (bf16 ? "both" : "neither") + ", need exactly one");
  if (fp4 && !scale) detail::fail_arg(f + ": a_scale: got nullptr with a_fp4, need e4m3 scales [*, K/16]");
  if (!std::isfinite(dq) || dq <= 0.0f) detail::fail_arg(f + ": a_dq: got " + std::to_string(dq) + ", need finite > 0");
  // The mma.sync paths copy A with 16-byte (bf16) or 8-byte (NVFP4 data) cp.async.
  if (path != GemmPath::naive) {
    if (bf16 && reinterpret_cast<uintptr_t>(bf16) % 16)
      detail::fail_arg(f + ": a_bf16: got an address not 16-byte aligned, need 16-byte alignment");
    if (fp4 && reinterpret_cast<uintptr_t>(fp4) % 8)
      detail::fail_arg(f + ": a_fp4: got an address not 8-byte aligned, need 8-byte alignment");
  }
}

}  // namespace

void gemm1(const DeviceWeights& dw, const Gemm1Args& a, GemmPath path, cudaStream_t stream) {
  const auto& w = static_cast<const CudaWeights&>(dw);
  check_rows("gemm1", a.rows);
  check_a("gemm1", a.a_bf16, a.a_fp4, a.a_scale, a.a_dq, path);
  if (a.a_rows < 0) detail::fail_arg("gemm1: a_rows: got " + std::to_string(a.a_rows) + ", need >= 0 (0: unknown)");
  if (a.h_values) {
    if (a.h_bf16 || a.h_fp4)
      detail::fail_arg("gemm1: h_values: got it with h_bf16/h_fp4, need it alone (it is the NVFP4 h as bf16 values)");
    if (!stages_activations(path, w))
      detail::fail_arg("gemm1: h_values: this path and layer do not run NVFP4 activations as bf16 values "
                       "(gemm_stages_activations is false), need h_fp4/h_scale");
    if (reinterpret_cast<uintptr_t>(a.h_values) % 16)
      detail::fail_arg("gemm1: h_values: got an address not 16-byte aligned, need 16-byte alignment");
  } else if (!a.h_bf16 && !a.h_fp4) {
    detail::fail_arg("gemm1: h_bf16/h_fp4/h_values: got none, need at least one output");
  }
  if ((a.h_fp4 || a.h_values) && !(std::isfinite(a.h_gs) && a.h_gs > 0.0f))
    detail::fail_arg("gemm1: h_gs: got " + std::to_string(a.h_gs) + ", need a finite h_gs > 0");
  if (a.h_fp4 && (!a.h_scale || !std::isfinite(a.h_gs) || a.h_gs <= 0.0f))
    detail::fail_arg("gemm1: h_scale/h_gs: got " + std::string(a.h_scale ? "" : "no h_scale, ") + "h_gs " +
                     std::to_string(a.h_gs) + ", need e4m3 scales [row_space, I/16] and a finite h_gs > 0");
  if (a.one_token.topk_ids && (!a.one_token.expert_map || !a.one_token.slot_row || a.one_token.k <= 0 ||
                               a.one_token.num_experts <= 0))
    detail::fail_arg("gemm1: one_token: got topk_ids without expert_map/slot_row or with k " +
                     std::to_string(a.one_token.k) + ", num_experts " + std::to_string(a.one_token.num_experts) +
                     ", need all three pointers and k, num_experts > 0");
  if (a.a_kperm && !a.a_bf16) detail::fail_arg("gemm1: a_kperm: got it with NVFP4 A, need bf16 A (a_bf16)");
  if (a.rows.rows_bound == 0) return;
  if (a.a_kperm) {  // k-permuted A: the wgmma kernels' alone
    if (!(path == GemmPath::sm90 && sm90_gemm1(w, a, stream)))
      detail::fail_arg("gemm1: a_kperm: got k-permuted A, but the wgmma kernels do not take this GEMM "
                       "(gemm1_reads_kperm is false), need logical A");
    return;
  }
  // NVFP4 A staged for the wgmma kernels: k-permuted, and they run it (as with a_kperm)
  const bool kperm = a.a_fp4 && gemm1_reads_kperm(w, path, a.rows.rows_bound);
  Gemm1Args s = with_staged_activations(a, path, w, w.w13.K, a.a_gather, a.a_rows, KOrder::logical,
                                        kperm ? KOrder::kperm : KOrder::logical, stream);
  if (kperm && s.a_bf16) {
    s.a_kperm = true;
    if (sm90_gemm1(w, s, stream)) return;
    // declined for its NVFP4 h (no staging for it where GEMM 2 does not take the wgmma
    // kernels): A again, logical, for the kernels below
    s = with_staged_activations(a, path, w, w.w13.K, a.a_gather, a.a_rows, KOrder::logical, KOrder::logical, stream);
  }
  if (path == GemmPath::naive) naive_gemm1(w, s, stream);
  else if (!(path == GemmPath::splitk && splitk_gemm1(w, s, stream)) &&
           !(path == GemmPath::stream && stream_gemm1(w, s, stream)) &&
           !((path == GemmPath::sm90 || path == GemmPath::decode) && decode_gemm1(w, s, stream)) &&
           !(path == GemmPath::sm90 && sm90_gemm1(w, s, stream)))
    sm80_gemm1(w, s, stream);
}

bool gemm2(const DeviceWeights& dw, const Gemm2Args& a, GemmPath path, cudaStream_t stream) {
  const auto& w = static_cast<const CudaWeights&>(dw);
  check_rows("gemm2", a.rows);
  check_a("gemm2", a.a_bf16, a.a_fp4, a.a_scale, a.a_dq, path);
  if (!a.y) detail::fail_arg("gemm2: y: got nullptr, need fp32 [row_space, H]");
  if (a.rows.rows_bound == 0) return false;
  const Gemm2Args s = with_staged_activations(a, path, w, w.w2.K, nullptr, 0, KOrder::kperm, KOrder::kperm, stream);
  if (path == GemmPath::naive) naive_gemm2(w, s, stream);
  else if ((path == GemmPath::sm90 || path == GemmPath::decode) && decode_gemm2(w, s, stream))
    return decode_pdl(w.device);  // the decode kernel triggers its dependents after its k loop
  else if (!(path == GemmPath::splitk && splitk_gemm2(w, s, stream)) &&
           !(path == GemmPath::stream && stream_gemm2(w, s, stream)) &&
           !(path == GemmPath::sm90 && sm90_gemm2(w, s, stream)))
    return sm80_gemm2(w, s, stream);
  return false;
}

}  // namespace fp4moe::cuda
