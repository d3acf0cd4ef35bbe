// The wgmma path (FP4MOE_GEMM=sm90; sm_90a only): its config (choose_sm90_config), the device check,
// and GEMM 1. The kernels and their launches: gemm_sm90_kernel.cuh; GEMM 2: gemm_sm90_gemm2.cu.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <map>
#include <mutex>
#include <string>

#include "cuda/gemm_sm90_kernel.cuh"

namespace fp4moe::cuda {

namespace {

// The width split's narrow width (Sm90Config::narrow_width) for last tiles of `mean` rows on
// average (an expert's rows ~ normal with standard deviation `sd`: Poisson counts, uniform
// routing): the width of least expected MMA width per last tile, a tile of more than 8 w rows
// at 64; 8 (none) unless that saves a tenth. kimi-k2 T = 768 / 1024 / 2048 (16 / 22 / 43
// rows): 3 / 4 / 6; T = 8192 (171 = 128 + 43, sd 13): 6; qwen3-235b T = 512 (32): 5.
// saved: the expected fraction of a 64-wide last tile's MMA width that width saves (16 / 24 /
// 32 / 48 rows: 0.61 / 0.48 / 0.35 / 0.13).
struct NarrowWidth {
  int width = 8;
  double saved = 0;
  double past = 0;  // the expected fraction of experts past 8 * width rows
};
NarrowWidth narrow_width_of(double mean, double sd) {
  sd = std::max(sd, 1.0);
  NarrowWidth best;
  double best_cost = 64.0 * 0.9;
  for (int w = kMinNarrowWidth; w <= kMaxNarrowWidth; ++w) {
    const double fits = 0.5 * std::erfc(-(8.0 * w + 0.5 - mean) / (sd * std::sqrt(2.0)));  // P(rows <= 8 w)
    const double cost = fits * 8.0 * w + (1.0 - fits) * 64.0;
    if (cost < best_cost) best = {w, 1.0 - cost / 64.0, 1.0 - fits}, best_cost = cost;
  }
  return best;
}

// The split's wide width (Sm90Config::wide_width) for `mean` rows per expert (normal with
// standard deviation `sd`, as above) whose last tiles of at most 8 * narrow rows run at that
// width: the one of kWideWidths with the least expected MMA width per expert (rows / 128 wide
// tiles at 128, then the last tile of rows % 128: none at 0, 8 narrow up to 8 narrow rows, 64
// up to 64, 8 v up to 8 v, else 128), summed over the row counts; 16 (none) unless that saves
// a 25th of it (the extra launch ends on its own tail). kimi-k2 T = 4096 / 16384 (86 / 342
// rows): 12; deepseek-v3 and gpt-oss-120b T = 2048 (64): 10; none at kimi-k2 T = 2048 / 8192
// (43 / 171: hardly a last tile over 64 rows) or qwen3-235b T = 2048 (128: ~120 or few).
int wide_width_of(double mean, double sd, int narrow) {
  sd = std::max(sd, 1.0);
  const int lo = std::max(0, int(std::floor(mean - 6 * sd))), hi = int(std::ceil(mean + 6 * sd));
  auto width = [&](int rows, int v) {  // the MMA width of an expert's tiles
    const int rest = rows % kSplitWideTile;
    const int last = rest == 0                  ? 0
                     : rest <= 8 * narrow       ? 8 * narrow
                     : rest <= kSplitNarrowTile ? kSplitNarrowTile
                     : rest <= 8 * v            ? 8 * v
                                                : kSplitWideTile;
    return double(rows - rest + last);
  };
  // Expected width unnormalized (all share the weights' sum): none, then each of kWideWidths.
  constexpr int kWide = int(std::size(kWideWidths));
  double none = 0, cost[kWide] = {};
  for (int rows = lo; rows <= hi; ++rows) {
    const double z = (rows - mean) / sd, pr = std::exp(-0.5 * z * z);
    none += pr * width(rows, 16);
    for (int i = 0; i < kWide; ++i) cost[i] += pr * width(rows, kWideWidths[i]);
  }
  int best = 16;
  double best_cost = none * (1.0 - 1.0 / 25);
  for (int i = 0; i < kWide; ++i)
    if (cost[i] < best_cost) best = kWideWidths[i], best_cost = cost[i];
  return best;
}

// A threshold, or the environment's value of `var` where set to a positive integer (A/B runs
// of the thresholds: FP4MOE_SM90_SPLIT_WAVES, FP4MOE_SM90_WIDTH_WAVES, FP4MOE_SM90_MIN_ROWS,
// FP4MOE_SM90_MIN_ROWS_MX).
int env_threshold(const char* var, int fallback) {
  const int n = env_int(var, 0);
  return n > 0 ? n : fallback;
}

}  // namespace

Sm90Config choose_sm90_config(const Sm90Problem& p) {
  Sm90Config c;
  c.grid_x = (p.N + kSm90RowTile - 1) / kSm90RowTile;
  if (p.rows_bound <= 0 || p.N <= 0) {
    c.why = "no work";
    return c;
  }
  const int64_t active = std::max<int64_t>(1, std::min(p.num_experts, p.rows_bound));
  const int64_t per_expert = (p.rows_bound + active - 1) / active;  // rows per active expert if spread evenly
  const bool mx = p.block == kMxfp4Block;
  const int64_t sms = std::max(p.num_sms, 1);
  const double waves = double(c.grid_x * active) / double(sms);  // of units: row tiles of each active expert
  const int min_rows = env_threshold(mx ? "FP4MOE_SM90_MIN_ROWS_MX" : "FP4MOE_SM90_MIN_ROWS",
                                     sm90_min_rows(p.block, waves));
  if (per_expert < min_rows) {
    char at[32];
    std::snprintf(at, sizeof at, "%.1f", waves);
    c.why = "fewer than " + std::to_string(min_rows) + " rows per active expert" + (mx ? " (MXFP4)" : "") + " at " +
            at + " waves: the fast path's smaller token tiles waste less";
    return c;
  }
  // One launch (a forced kernel, or few rows per expert): 128-token tiles read each weight tile
  // half as often as 64-token ones; but when an odd number of 64-token tiles covers the
  // average expert, 128 would pad a whole 64 more.
  const int64_t t64 = (per_expert + 63) / 64;
  c.token_tile = (t64 % 2 == 1 && per_expert <= 256) ? 64 : 128;
  c.use = true;
  // sum_e ceil(count_e / tile) <= rows_bound / tile + E, and <= rows_bound (a tile has a row).
  c.tiles = std::min<int64_t>((p.rows_bound + c.token_tile - 1) / c.token_tile + p.num_experts, p.rows_bound);
  c.grid_y = std::min<int64_t>(c.tiles, 65535);
  // The split: the 128-token kernel's efficiency, and fewer than 64 padded rows per expert.
  // kimi-k2 T = 8192 (171 rows per expert): a 128-token and a 64-token tile each instead of
  // three of 64 (H200: 13.46 ms against 15.73). Where the launches are short it is not worth
  // a second one (kSm90SplitMinWaves), unless its wide width applies (kSm90SplitWideMinWaves).
  // The environment's thresholds (A/B runs) replace these rules by a threshold alone.
  const int split_waves_env = env_threshold("FP4MOE_SM90_SPLIT_WAVES", 0);
  const int width_waves_env = env_threshold("FP4MOE_SM90_WIDTH_WAVES", 0);
  const int64_t wide_units = p.rows_bound / kSplitWideTile * c.grid_x;
  c.wide_tiles = std::min<int64_t>(p.rows_bound / kSplitWideTile + p.num_experts, p.rows_bound);
  c.narrow_tiles = std::min<int64_t>(p.num_experts, p.rows_bound);
  c.folded_tiles = std::min<int64_t>(p.num_experts + p.rows_bound / (8 * kMinNarrowWidth), p.rows_bound);
  // The widths: on rsws4's 64-token tiles below 64 rows per expert, or on the split's narrow
  // tiles (the last per_expert % 128 rows, when at most 64) and its last tiles of 65..8v rows,
  // with enough waves of units.
  const double sd = std::sqrt(double(per_expert));
  const int64_t rest = per_expert % kSplitWideTile;
  const bool many_waves = waves >= (width_waves_env > 0 ? width_waves_env : kSm90WidthSplitMinWaves);
  const bool split_widths = waves >= (width_waves_env > 0 ? width_waves_env : kSm90SplitWidthMinWaves);
  const int split_narrow = split_widths && rest <= kSplitNarrowTile ? narrow_width_of(double(rest), sd).width : 8;
  const int split_wide = split_widths ? wide_width_of(double(per_expert), sd, split_narrow) : 16;
  c.split = split_waves_env > 0 ? wide_units >= split_waves_env * sms
                                : wide_units >= kSm90SplitMinWaves * sms ||
                                      (wide_units >= kSm90SplitWideMinWaves * sms && split_wide < 16);
  if (c.split) c.narrow_width = split_narrow, c.wide_width = split_wide;
  if (!c.split && c.token_tile == 64 && per_expert < 64) {
    // rsws4's last tiles are an expert's only tile: below kSm90WidthSplitMinWaves the width
    // split still pays where it saves enough of the GEMM's MMA width (kSm90WidthSplitMinGain).
    const NarrowWidth nw = narrow_width_of(double(per_expert), sd);
    if (many_waves || (width_waves_env == 0 && nw.saved * waves >= kSm90WidthSplitMinGain)) c.narrow_width = nw.width;
    if (c.narrow_width < 8 && nw.past * waves <= kSm90FoldMaxExtraWaves) c.narrow_fold = fold_most(c.narrow_width);
  }
  c.why = std::to_string(per_expert) + " rows per active expert: wgmma, " +
          (c.split ? "128-token tiles and 64-token last tiles (split; unsplit: " + std::to_string(c.token_tile) +
                         " tokens per CTA)"
                   : std::to_string(c.token_tile) + " tokens per CTA (too few tiles to split)") +
          (c.narrow_width < 8 ? "; last tiles of <= " + std::to_string(8 * c.narrow_width) +
                                    " rows at that wgmma width (width split" +
                                    (c.narrow_fold > 1 ? ", folded: up to " +
                                                             std::to_string(8 * c.narrow_width * c.narrow_fold) +
                                                             " rows as " + std::to_string(c.narrow_fold) + " such tiles"
                                                       : "") +
                                    ")"
                              : "") +
          (c.wide_width < 16 ? "; last tiles of 65.." + std::to_string(8 * c.wide_width) +
                                   " rows at that wgmma width (wide width)"
                             : "");
  return c;
}

Sm90Staging sm90_staging(int64_t rows_bound, int64_t row_space, int64_t num_experts, int64_t H, int64_t I,
                         int block, int num_sms) {
  Sm90Staging st;
  // GEMM 1 (N = 2I, K = H) and GEMM 2 (N = H, K = I) decide on the rows per expert and each its
  // own waves: where only one takes the wgmma kernels, nothing is staged (staging_refusal).
  st.use = choose_sm90_config({.rows_bound = rows_bound, .num_experts = num_experts, .N = int(2 * I), .K = int(H),
                               .num_sms = num_sms, .block = block})
               .use &&
           choose_sm90_config({.rows_bound = rows_bound, .num_experts = num_experts, .N = int(H), .K = int(I),
                               .num_sms = num_sms, .block = block})
               .use;
  if (!st.use) return st;
  st.a_bf16 = 0;
  st.h_bf16 = a_staging_bytes(row_space, H, I);
  st.bytes = st.h_bf16 + (size_t(std::max<int64_t>(row_space, 0)) * size_t(kperm_row(I)) * 2 + 255) / 256 * 256;
  return st;
}

size_t a_staging_bytes(int64_t row_space, int64_t H, int64_t I) {
  // x logical ([*, H]) or h k-permuted ([*, kperm_row(I)])
  return (size_t(std::max<int64_t>(row_space, 0)) * size_t(std::max(H, kperm_row(I))) * 2 + 255) / 256 * 256;
}

namespace sm90_detail {

std::atomic<int64_t> g_launches{0}, g_ws_launches{0}, g_rsws_launches{0}, g_rsws4_launches{0},
    g_width_split_launches{0}, g_wide_width_launches{0}, g_folded_launches{0};
// Tests: the width split's narrow width (set_sm90_narrow_width; 0: the config's) and the
// split's wide width (set_sm90_wide_width).
std::atomic<int> g_narrow_width{0}, g_wide_width{0};
// Tests: rsws4's width split's fold (set_sm90_narrow_fold; 0: the config's).
std::atomic<int> g_narrow_fold{0};

// The kernel choice: -1 until first asked, then an Sm90Kernel.
std::atomic<int> g_kernel{-1};
// Tests: at most this many CTAs for the warp-specialized kernels (0: one per SM).
std::atomic<int> g_ws_grid_limit{0};

}  // namespace sm90_detail

namespace {

std::string check_device(int device) {
  const int cc = compute_capability(device);
  if (cc != 90) return "device " + std::to_string(device) + " is sm_" + std::to_string(cc) + ", wgmma needs sm_90";
  if (std::string(compiled_archs()).find("sm_90a") == std::string::npos)
    return std::string("this build has no sm_90a code (compiled: ") + compiled_archs() + ")";
  DeviceGuard guard(device);
  for (const std::string& why : {prepare_gemm<true>(), prepare_gemm2()})
    if (!why.empty()) return why;
  return "";
}

// FP4MOE_LOG=1: print each choice once per shape.
void log_choice(const char* which, const Sm90Problem& pb, const Sm90Config& c, bool staged,
                const std::string& refused) {
  if (!gemm_log_on()) return;
  const bool runs = c.use && refused.empty();
  const Sm90Kernel k = sm90_kernel_for(c);
  const char* tiles = !runs                   ? "fast path"
                      : k == Sm90Kernel::split ? "wgmma, 128 tokens + 64-token last tiles"
                      : c.token_tile == 64    ? "wgmma, 64 tokens"
                                              : "wgmma, 128 tokens";
  const char* kernel = !runs                   ? ""
                       : k == Sm90Kernel::split ? ", RS warp-specialized (2 and 4 consumer warpgroups)"
                       : k == Sm90Kernel::ws    ? ", SS warp-specialized"
                       : k == Sm90Kernel::rsws  ? ", RS warp-specialized"
                       : k == Sm90Kernel::rsws4 ? ", RS warp-specialized, 4 consumer warpgroups"
                                                : ", RS";
  // c.why names the config's width split; an override (a test, the environment, a forced kernel
  // without one) says so here.
  const int width = runs && (k == Sm90Kernel::rsws4 || k == Sm90Kernel::split) ? narrow_width_for(c) : 8;
  const std::string split_at =
      width == c.narrow_width ? ""
      : width < 8             ? ", width split overridden: last tiles of <= " + std::to_string(8 * width) + " rows"
                              : ", width split off";
  const bool foldable = k == Sm90Kernel::rsws4 && width < 8;  // launch_width_split
  const int fold = foldable ? narrow_fold_for(c, width) : 1;
  const std::string fold_at = fold == (foldable ? config_fold(c, width) : 1) ? ""
                              : fold > 1 ? ", fold overridden: up to " + std::to_string(fold) + " narrow tiles"
                                         : ", fold off";
  const int wide = runs && k == Sm90Kernel::split ? wide_width_for(c) : 16;
  const std::string wide_at =
      wide == c.wide_width ? ""
      : wide < 16          ? ", wide width overridden: last tiles of 65.." + std::to_string(8 * wide) + " rows"
                           : ", wide width off";
  char line[1024];
  std::snprintf(line, sizeof line, "%s sm90 rows_bound=%lld E=%lld N=%d K=%d%s -> %s%s%s%s%s%s (%s%s%s)", which,
                (long long)pb.rows_bound, (long long)pb.num_experts, pb.N, pb.K, staged ? " NVFP4" : "", tiles, kernel,
                split_at.c_str(), fold_at.c_str(), wide_at.c_str(), runs && staged ? " via bf16 staging" : "",
                c.why.c_str(), refused.empty() ? "" : "; ", refused.c_str());
  gemm_log(line);
}

bool misaligned(const void* p, uintptr_t to) { return reinterpret_cast<uintptr_t>(p) % to != 0; }

// "" when the staging of one GEMM can run: the scratch is there and large enough, the staged
// rows can be addressed in it, and the outputs are aligned for the staging kernels' vector
// accesses. Else why not (the GEMM then runs the fast path).
std::string staging_refusal(const Sm90Staging& st, const float* scratch, size_t scratch_bytes, int64_t num_experts) {
  // choose_sm90_config declined this GEMM too, or only the other one (each decides on its waves)
  if (!st.use) return "the wgmma kernels do not take GEMM 2 at these rows: nothing is staged (sm90_staging)";
  if (!scratch || scratch_bytes < st.bytes)
    return "NVFP4 activations are staged through bf16: the scratch has " + std::to_string(scratch ? scratch_bytes : 0) +
           " bytes, needs " + std::to_string(st.bytes) + " (gemm_scratch_bytes)";
  if (misaligned(scratch, 16)) return "the staging scratch is not 16-byte aligned";
  if (num_experts > kStageMaxExperts)
    return "more than " + std::to_string(kStageMaxExperts) + " experts for the staging kernels";
  return "";
}

}  // namespace

Sm90Config sm90_detail::plan(const char* which, const CudaWeights& cw, const WeightMatrix& w,
                              const ExpertRows& rows, bool staged, const std::string& staging_refused) {
  const Sm90Problem pb{rows.rows_bound, w.num_experts, w.N, w.K, multiprocessor_count(cw.device), w.block};
  Sm90Config c = choose_sm90_config(pb);
  std::string refused;
  if (c.use) {
    refused = why_no_sm90(cw.device);
    if (refused.empty() && staged) refused = staging_refused;
  }
  log_choice(which, pb, c, staged, refused);
  if (!refused.empty()) c.use = false;
  return c;
}

std::string why_no_sm90(int device) {
  static std::mutex mu;
  static std::map<int, std::string> known;
  std::lock_guard<std::mutex> lock(mu);
  auto it = known.find(device);
  if (it == known.end()) it = known.emplace(device, check_device(device)).first;
  return it->second;
}

int64_t sm90_launches() { return g_launches.load(std::memory_order_relaxed); }
int64_t sm90_ws_launches() { return g_ws_launches.load(std::memory_order_relaxed); }
int64_t sm90_rsws_launches() { return g_rsws_launches.load(std::memory_order_relaxed); }
int64_t sm90_rsws4_launches() { return g_rsws4_launches.load(std::memory_order_relaxed); }

Sm90Kernel sm90_kernel() {
  return Sm90Kernel(choice_once(g_kernel, [] {
    const char* v = std::getenv("FP4MOE_SM90_KERNEL");
    const Sm90Kernel asked = !v                          ? Sm90Kernel::automatic
                             : std::strcmp(v, "ws") == 0    ? Sm90Kernel::ws
                             : std::strcmp(v, "rs") == 0    ? Sm90Kernel::rs
                             : std::strcmp(v, "rsws") == 0  ? Sm90Kernel::rsws
                             : std::strcmp(v, "rsws4") == 0 ? Sm90Kernel::rsws4
                             : std::strcmp(v, "split") == 0 ? Sm90Kernel::split
                                                            : Sm90Kernel::automatic;
    return int(asked);
  }));
}

void set_sm90_kernel(Sm90Kernel k) { g_kernel.store(int(k), std::memory_order_relaxed); }

Sm90Kernel sm90_kernel_for(const Sm90Config& c) {
  const Sm90Kernel k = sm90_kernel();
  // The split where the config has enough tiles for it (v9), or when asked for.
  if (k == Sm90Kernel::split || (k == Sm90Kernel::automatic && c.split)) return Sm90Kernel::split;
  // rsws measured fastest at both tiles (notes v4), its wide variant rsws4 at 64 tokens (v6).
  // rsws4 has 64-token tiles only: rsws takes the 128-token ones, also when rsws4 is asked for.
  const Sm90Kernel want = k != Sm90Kernel::automatic ? k : Sm90Kernel::rsws4;
  return want == Sm90Kernel::rsws4 && c.token_tile != 64 ? Sm90Kernel::rsws : want;
}
void set_sm90_ws_grid_limit(int ctas) { g_ws_grid_limit.store(ctas, std::memory_order_relaxed); }
void set_sm90_narrow_width(int width) { g_narrow_width.store(width, std::memory_order_relaxed); }
void set_sm90_narrow_fold(int fold) { g_narrow_fold.store(fold, std::memory_order_relaxed); }
int64_t sm90_width_split_launches() { return g_width_split_launches.load(std::memory_order_relaxed); }
int64_t sm90_folded_launches() { return g_folded_launches.load(std::memory_order_relaxed); }
void set_sm90_wide_width(int width) { g_wide_width.store(width, std::memory_order_relaxed); }
int64_t sm90_wide_width_launches() { return g_wide_width_launches.load(std::memory_order_relaxed); }

bool sm90_gemm1_takes(const CudaWeights& cw, int64_t rows_bound) {
  const WeightMatrix& w = cw.w13;
  return why_no_sm90(cw.device).empty() &&
         choose_sm90_config({.rows_bound = rows_bound, .num_experts = w.num_experts, .N = w.N, .K = w.K,
                             .num_sms = multiprocessor_count(cw.device), .block = w.block})
             .use;
}

// GEMM 1 on bf16 A. NVFP4 h: the kernel writes bf16 h (the caller's h_bf16 if given, else the
// scratch's h_bf16), then it is requantized into h_fp4 / h_scale.
bool sm90_gemm1(const CudaWeights& cw, const Gemm1Args& a, cudaStream_t stream) {
  const int64_t H = cw.w13.K, I = cw.w13.N / 2, E = cw.w13.num_experts;
  const Sm90Staging st =
      sm90_staging(a.rows.rows_bound, a.rows.row_space, E, H, I, cw.w13.block, multiprocessor_count(cw.device));
  std::string refused;
  if (a.a_fp4) {
    refused = kUnstagedA;
  } else if (!a.a_kperm) {
    refused = "A is logical: the wgmma kernels read it k-permuted (Gemm1Args::a_kperm)";
  } else if (a.h_fp4) {
    refused = staging_refusal(st, a.partials, a.partials_bytes, E);
    if (refused.empty() && (misaligned(a.h_fp4, 4) || (a.h_bf16 && misaligned(a.h_bf16, 16))))
      refused = "h_fp4 not 4-byte or h_bf16 not 16-byte aligned for the requantization";
  }
  const Sm90Config c = plan("gemm1", cw, cw.w13, a.rows, a.a_fp4 || a.h_fp4 || a.h_values, refused);
  if (!c.use) return false;
  // NVFP4 h as values (h_values, 16-byte aligned: gemm1 checked): the bf16 h goes there, then
  // is requantized in place.
  uint16_t* h = a.h_values ? a.h_values : a.h_bf16;
  if (a.h_fp4 && !h) h = reinterpret_cast<uint16_t*>(reinterpret_cast<uint8_t*>(a.partials) + st.h_bf16);
  Params p = base_params(c, cw.w13, a.rows, a.a_bf16, a.a_dq);
  p.a_gather = a.a_gather;
  p.epi.act = cw.desc.activation;
  p.epi.alpha = cw.desc.swiglu_alpha;
  p.epi.limit = cw.desc.swiglu_limit;
  p.epi.h_bf16 = h;
  launch<true>(c, p, cw.device, stream);
  if (a.h_fp4) stage_bf16_to_nvfp4(h, I, a.rows, E, a.h_gs, a.h_fp4, a.h_scale, stream);
  if (a.h_values) stage_bf16_to_nvfp4_values(a.h_values, I, a.rows, E, a.h_gs, stream);
  return true;
}

}  // namespace fp4moe::cuda
