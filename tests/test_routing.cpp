// route_reference against a brute force written here: score every expert, sort all of
// them with an explicit (score desc, index asc) comparator, take the first k.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "fp4moe/format.h"
#include "reference/reference.hpp"

namespace fp4moe {
namespace {

struct Routed {
  std::vector<int32_t> ids;  // [T, k]
  std::vector<float> w;      // [T, k]
};

// logits [T, E] with a row stride of `ld` >= E (padding poisoned with NaN: never read)
Routed run(const std::vector<float>& logits, int64_t T, int64_t E, int64_t ld, int64_t k, const RoutingDesc& r,
           const std::vector<float>* bias) {
  Routed o;
  o.ids.assign(size_t(T * k), 0x7EADBEEF);
  o.w.assign(size_t(T * k), NAN);
  RouteArgs a;
  a.router_logits = TensorView::of(logits.data(), DType::f32, {T, E});
  a.router_logits.stride[0] = ld;
  if (bias) a.correction_bias = TensorView::of(bias->data(), DType::f32, {E});
  a.topk_ids = TensorView::of(o.ids.data(), DType::i32, {T, k});
  a.topk_weights = TensorView::of(o.w.data(), DType::f32, {T, k});
  a.top_k = k;
  a.routing = r;
  detail::route_reference(a);
  return o;
}

// Experts of `cand` in (score desc, index asc) order.
std::vector<int32_t> sorted_by_score(const std::vector<float>& score, std::vector<int32_t> cand) {
  std::sort(cand.begin(), cand.end(), [&](int32_t a, int32_t b) {
    if (score[a] != score[b]) return score[a] > score[b];
    return a < b;
  });
  return cand;
}

// Logits with many exact ties: values on a coarse grid.
std::vector<float> tied_logits(std::mt19937& rng, int64_t T, int64_t E, int64_t ld, float grid) {
  std::normal_distribution<float> n(0.0f, 2.0f);
  std::vector<float> l(size_t(T * ld), NAN);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t e = 0; e < E; ++e) l[t * ld + e] = grid > 0 ? std::round(n(rng) / grid) * grid : n(rng);
  return l;
}

void check_softmax(int64_t E, int64_t k, bool renorm, float grid, uint32_t seed) {
  std::mt19937 rng(seed);
  const int64_t T = 37, ld = E + 3;
  const auto logits = tied_logits(rng, T, E, ld, grid);
  RoutingDesc r;
  r.method = RoutingMethod::softmax;
  r.renormalize = renorm;
  const Routed got = run(logits, T, E, ld, k, r, nullptr);
  for (int64_t t = 0; t < T; ++t) {
    std::vector<float> l(logits.begin() + t * ld, logits.begin() + t * ld + E);
    std::vector<int32_t> all(E);
    std::iota(all.begin(), all.end(), 0);
    const auto order = sorted_by_score(l, all);
    const double mx = *std::max_element(l.begin(), l.end());
    double z = 0, zsel = 0;
    for (float v : l) z += std::exp(double(v) - mx);
    for (int64_t j = 0; j < k; ++j) zsel += std::exp(double(l[order[j]]) - mx);
    double wsum = 0;
    for (int64_t j = 0; j < k; ++j) {
      ASSERT_EQ(got.ids[t * k + j], order[j]) << "token " << t << " slot " << j;
      const double want = std::exp(double(l[order[j]]) - mx) / (renorm ? zsel : z);
      EXPECT_NEAR(got.w[t * k + j], want, 2e-6 * want + 1e-30) << "token " << t << " slot " << j;
      wsum += got.w[t * k + j];
    }
    if (renorm) EXPECT_NEAR(wsum, 1.0, 1e-5);
    else EXPECT_LE(wsum, 1.0 + 1e-5);
  }
}

TEST(Routing, SoftmaxRenormalizedMatchesBruteForce) { check_softmax(128, 8, true, 0.0f, 1); }
TEST(Routing, SoftmaxWithTiesGoesToLowerIndex) { check_softmax(128, 8, true, 0.5f, 2); }
TEST(Routing, SoftmaxWithoutRenormalize) { check_softmax(64, 4, false, 0.25f, 3); }
TEST(Routing, SoftmaxTopOneAndAll) {
  check_softmax(16, 1, true, 0.5f, 4);
  check_softmax(16, 16, false, 0.5f, 5);
}

// Grouped brute force: group scores from each group's sorted b, groups sorted, experts of
// the kept groups sorted.
void check_grouped(int64_t E, int64_t k, int n_group, int topk_group, float scale, bool with_bias, bool renorm,
                   float grid, uint32_t seed) {
  std::mt19937 rng(seed);
  const int64_t T = 29;
  const auto logits = tied_logits(rng, T, E, E, grid);
  std::vector<float> bias(E);
  std::uniform_real_distribution<float> ub(-0.3f, 0.3f);
  // ties in the bias too: a coarse grid
  for (float& b : bias) b = grid > 0 ? std::round(ub(rng) / 0.1f) * 0.1f : ub(rng);
  RoutingDesc r;
  r.method = RoutingMethod::sigmoid_grouped;
  r.renormalize = renorm;
  r.n_group = n_group;
  r.topk_group = topk_group;
  r.routed_scaling_factor = scale;
  const Routed got = run(logits, T, E, E, k, r, with_bias ? &bias : nullptr);
  const int64_t per = E / n_group;
  for (int64_t t = 0; t < T; ++t) {
    std::vector<float> s(E), b(E);
    for (int64_t e = 0; e < E; ++e) {
      s[e] = portable_sigmoidf(logits[t * E + e]);  // the SPEC's sigmoid, bit for bit
      b[e] = with_bias ? s[e] + bias[e] : s[e];
    }
    std::vector<float> gscore(n_group);
    for (int g = 0; g < n_group; ++g) {
      std::vector<float> mine(b.begin() + g * per, b.begin() + (g + 1) * per);
      std::sort(mine.begin(), mine.end(), std::greater<float>());
      gscore[g] = per >= 2 ? mine[0] + mine[1] : mine[0];
    }
    std::vector<int32_t> groups(n_group);
    std::iota(groups.begin(), groups.end(), 0);
    groups = sorted_by_score(gscore, groups);
    std::vector<int32_t> cand;
    for (int i = 0; i < topk_group; ++i)
      for (int64_t e = groups[i] * per; e < (groups[i] + 1) * per; ++e) cand.push_back(int32_t(e));
    const auto order = sorted_by_score(b, cand);
    double ssum = 0;
    for (int64_t j = 0; j < k; ++j) ssum += s[order[j]];
    double wsum = 0;
    for (int64_t j = 0; j < k; ++j) {
      ASSERT_EQ(got.ids[t * k + j], order[j]) << "token " << t << " slot " << j;
      const double want = (renorm ? s[order[j]] / ssum : s[order[j]]) * scale;
      EXPECT_NEAR(got.w[t * k + j], want, 2e-6 * want) << "token " << t << " slot " << j;
      wsum += got.w[t * k + j];
    }
    if (renorm) EXPECT_NEAR(wsum, scale, 1e-5 * scale);
  }
}

TEST(Routing, DeepSeekV3GroupedWithBias) { check_grouped(256, 8, 8, 4, 2.5f, true, true, 0.0f, 10); }
TEST(Routing, DeepSeekV3GroupedWithTies) { check_grouped(256, 8, 8, 4, 2.5f, true, true, 0.25f, 11); }
TEST(Routing, KimiK2OneGroup) { check_grouped(384, 8, 1, 1, 2.827f, true, true, 0.0f, 12); }
TEST(Routing, KimiK2OneGroupTiesNoBias) { check_grouped(384, 8, 1, 1, 2.827f, false, true, 0.5f, 13); }
TEST(Routing, GroupedWithoutRenormalize) { check_grouped(64, 4, 4, 2, 1.0f, true, false, 0.25f, 14); }
TEST(Routing, GroupsOfOneExpert) { check_grouped(16, 3, 16, 5, 1.0f, true, true, 0.5f, 15); }

// A grouped selection must never pick from a group that was not kept, even when that
// group holds the single best expert.
TEST(Routing, GroupedIgnoresBestExpertOfDroppedGroup) {
  const int64_t E = 16, k = 2;
  std::vector<float> logits(E, -4.0f);
  logits[0] = 8.0f;                  // best expert, alone in group 0 (group score = b0 + b1)
  for (int64_t e = 4; e < 8; ++e) logits[e] = 3.0f;  // group 1: a strong pair
  RoutingDesc r;
  r.method = RoutingMethod::sigmoid_grouped;
  r.n_group = 4;
  r.topk_group = 1;
  const Routed got = run(logits, 1, E, E, k, r, nullptr);
  EXPECT_EQ(got.ids[0], 4);
  EXPECT_EQ(got.ids[1], 5);
  EXPECT_NEAR(got.w[0] + got.w[1], 1.0f, 1e-6f);
}

}  // namespace
}  // namespace fp4moe
