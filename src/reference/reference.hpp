// The scalar reference: routing and the MoE layer of SPEC §4, written as plainly as
// the formulas, one token and one expert slot at a time. It is the oracle every other
// backend and every GPU test is compared against, and the "reference" backend.
//
// All arguments are validated by the caller (src/api): CPU tensors, shapes and dtypes
// as in fp4moe.hpp, ids in [0, E) or -1, batched counts in [0, M]. Strides are honoured.
#pragma once

#include <cstddef>

#include "backend.hpp"

namespace fp4moe::detail {

// router_logits [T, E] f32 -> topk_ids [T, k] i32, topk_weights [T, k] f32, slot j in
// descending order of the selection score (the logit for softmax, sigmoid + bias for
// sigmoid_grouped), ties to the lower expert index. Every exp is portable_expf, so a
// GPU router that uses format.h selects the same ids bit for bit.
void route_reference(const RouteArgs& args);

// Floats of scratch that reference_forward / reference_forward_batched need, for any T.
size_t reference_scratch_floats(const HostWeights& w);

// out [T, H] = the layer of SPEC §4 (or out += it with args.accumulate). scratch holds
// reference_scratch_floats(w) floats; nothing else is allocated.
void reference_forward(const HostWeights& w, const ForwardArgs& args, float* scratch);

// out [E_local, M, H] row (e, r) = expert e applied to hidden_states[e, r], unweighted,
// for r < expert_num_tokens[e]; other rows are neither read nor written.
void reference_forward_batched(const HostWeights& w, const BatchedArgs& args, float* scratch);

}  // namespace fp4moe::detail
