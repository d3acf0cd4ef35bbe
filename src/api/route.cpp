// route(): router logits -> top-k ids and weights (SPEC §4), on the logits' device.
#include "api/validate.hpp"
#include "reference/reference.hpp"

#if defined(FP4MOE_WITH_CUDA)
#include "cuda/pipeline.hpp"
#endif

namespace fp4moe {

void route(const RouteArgs& a) {
  constexpr const char* kEntry = "route";
  using detail::kAnyExtent;
  const TensorView& logits = a.router_logits;
  detail::expect_present(kEntry, "router_logits", logits, "f32[T, E] on cpu or cuda");
  const detail::Place at = detail::Place::of(logits);
  detail::expect_tensor(kEntry, "router_logits", logits, DType::f32, {kAnyExtent, kAnyExtent}, at);
  const int64_t T = logits.shape[0], E = logits.shape[1];
  if (E < 1) detail::fail_tensor(kEntry, "router_logits", logits, "f32[T, E] with E >= 1 experts");
  if (a.top_k < 1 || a.top_k > E)
    detail::fail_got(kEntry, "top_k", std::to_string(a.top_k), "a value in [1, E = " + std::to_string(E) + "]");
  const int64_t k = a.top_k;
  detail::expect_routing(kEntry, "routing", a.routing, E, k);
  detail::expect_optional(kEntry, "correction_bias", a.correction_bias, {DType::f32}, {E}, at);
  detail::expect_tensor(kEntry, "topk_weights", a.topk_weights, DType::f32, {T, k}, at);
  detail::expect_tensor(kEntry, "topk_ids", a.topk_ids, DType::i32, {T, k}, at);
  detail::expect_disjoint(kEntry, "topk_weights", a.topk_weights, "router_logits", logits);
  detail::expect_disjoint(kEntry, "topk_weights", a.topk_weights, "correction_bias", a.correction_bias);
  detail::expect_disjoint(kEntry, "topk_ids", a.topk_ids, "router_logits", logits);
  detail::expect_disjoint(kEntry, "topk_ids", a.topk_ids, "correction_bias", a.correction_bias);
  detail::expect_disjoint(kEntry, "topk_ids", a.topk_ids, "topk_weights", a.topk_weights);
  if (T == 0) return;

  if (at.device == DeviceType::cpu) {
    detail::route_reference(a);
    return;
  }
#if defined(FP4MOE_WITH_CUDA)
  detail::expect_device_pointers(kEntry, {{"router_logits", &logits},
                                          {"correction_bias", &a.correction_bias},
                                          {"topk_weights", &a.topk_weights},
                                          {"topk_ids", &a.topk_ids}});
  cuda::route(a);
#else
  detail::fail_tensor(kEntry, "router_logits", logits, "a CPU tensor (this build has no CUDA)",
                      ErrorKind::unsupported);
#endif
}

}  // namespace fp4moe
