// Routing on the CPU (SPEC §4), the oracle of the GPU router.
//
// Selection is k passes of "best remaining candidate" with an explicit tie rule, not a
// sort: it is obviously deterministic, it is O(k·E) which is nothing next to the layer,
// and a NaN logit cannot break a comparator's ordering contract (it just never wins).
#include <vector>

#include "fp4moe/format.h"
#include "reference/reference.hpp"

namespace fp4moe::detail {
namespace {

// Index of the largest score among candidates (ties: the lower index), or -1 when no
// candidate is left.
int64_t best_of(const float* score, const std::vector<char>& candidate, int64_t n) {
  int64_t best = -1;
  for (int64_t e = 0; e < n; ++e)
    if (candidate[e] && (best < 0 || score[e] > score[best])) best = e;
  return best;
}

// ids (k) = the k best candidates in descending score; -1 when candidates run out.
// Consumes `candidate`.
void top_k(const float* score, std::vector<char>& candidate, int64_t n, int64_t k, int32_t* ids) {
  for (int64_t j = 0; j < k; ++j) {
    const int64_t e = best_of(score, candidate, n);
    ids[j] = int32_t(e);
    if (e >= 0) candidate[e] = 0;
  }
}

}  // namespace

void route_reference(const RouteArgs& a) {
  const TensorView& L = a.router_logits;  // [T, E] f32
  const int64_t T = L.shape[0], E = L.shape[1], k = a.top_k;
  const RoutingDesc& r = a.routing;
  const bool has_bias = a.correction_bias.present();

  std::vector<float> logit(E), score(E), sig(E);
  std::vector<char> candidate(E);
  std::vector<int32_t> ids(k);
  std::vector<float> wts(k);
  for (int64_t t = 0; t < T; ++t) {
    const float* row = static_cast<const float*>(L.data) + t * L.stride[0];
    for (int64_t e = 0; e < E; ++e) logit[e] = row[e * L.stride[1]];

    if (r.method == RoutingMethod::softmax) {
      // exp is monotone, so the top-k of the softmax are the top-k of the logits; taking
      // them on the logits keeps the choice exact.
      candidate.assign(E, 1);
      top_k(logit.data(), candidate, E, k, ids.data());
      float mx = logit[0];
      for (int64_t e = 1; e < E; ++e) mx = logit[e] > mx ? logit[e] : mx;
      float sum = 0.0f;
      for (int64_t e = 0; e < E; ++e) sum += portable_expf(logit[e] - mx);
      float sel = 0.0f;
      for (int64_t j = 0; j < k; ++j) {
        wts[j] = ids[j] < 0 ? 0.0f : portable_expf(logit[ids[j]] - mx) / sum;
        sel += wts[j];
      }
      if (r.renormalize)
        for (int64_t j = 0; j < k; ++j) wts[j] = wts[j] / sel;
    } else {
      // sigmoid_grouped: select on b = s + bias, weigh with the unbiased s.
      const float* bias = static_cast<const float*>(a.correction_bias.data);
      for (int64_t e = 0; e < E; ++e) {
        sig[e] = portable_sigmoidf(logit[e]);
        score[e] = has_bias ? sig[e] + bias[e * a.correction_bias.stride[0]] : sig[e];
      }
      const int64_t G = r.n_group, per = E / G;
      // group score = sum of the two largest b of the group (the one b of a 1-expert group)
      std::vector<float> gscore(G);
      std::vector<char> gcand(G, 1);
      for (int64_t g = 0; g < G; ++g) {
        candidate.assign(E, 0);
        for (int64_t e = g * per; e < (g + 1) * per; ++e) candidate[e] = 1;
        int32_t two[2];
        top_k(score.data(), candidate, E, per >= 2 ? 2 : 1, two);
        gscore[g] = per >= 2 ? score[two[0]] + score[two[1]] : score[two[0]];
      }
      std::vector<int32_t> kept(r.topk_group);
      top_k(gscore.data(), gcand, G, r.topk_group, kept.data());
      candidate.assign(E, 0);
      for (int32_t g : kept)
        if (g >= 0)
          for (int64_t e = g * per; e < (g + 1) * per; ++e) candidate[e] = 1;
      top_k(score.data(), candidate, E, k, ids.data());
      float sum = 0.0f;
      for (int64_t j = 0; j < k; ++j) {
        wts[j] = ids[j] < 0 ? 0.0f : sig[ids[j]];
        sum += wts[j];
      }
      for (int64_t j = 0; j < k; ++j) {
        const float w = r.renormalize ? wts[j] / (sum + 1e-20f) : wts[j];
        wts[j] = w * r.routed_scaling_factor;
      }
    }

    int32_t* out_ids = static_cast<int32_t*>(a.topk_ids.data) + t * a.topk_ids.stride[0];
    float* out_w = static_cast<float*>(a.topk_weights.data) + t * a.topk_weights.stride[0];
    for (int64_t j = 0; j < k; ++j) {
      out_ids[j * a.topk_ids.stride[1]] = ids[j];
      out_w[j * a.topk_weights.stride[1]] = wts[j];
    }
  }
}

}  // namespace fp4moe::detail
