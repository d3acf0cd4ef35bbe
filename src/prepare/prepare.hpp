// Checkpoint (SPEC §3, the vLLM / ModelOpt layout) -> HostWeights, the canonical host
// layout every backend's create() starts from (backend.hpp). This is the one place that
// validates checkpoint tensors and undoes checkpoint variants (interleaved gate/up,
// bf16 biases, per-expert input scales); backend-private layouts are built by each
// backend's create() from HostWeights (or, for the cpu backend's code order, by its entry's
// adopt, in place).
#pragma once

#include <memory>
#include <string_view>

#include "backend.hpp"

namespace fp4moe::detail {

// Elements per block scale along K: 16 (NVFP4) or 32 (MXFP4).
int weight_block(WeightFormat format);

// Checks a layer descriptor: H, I > 0 and multiples of the weight block, E >= 1,
// 1 <= k <= E, W4A4 only with NVFP4 weights, known enum values, sane swiglu and routing
// parameters. `entry` names the public entry in messages.
void validate_desc(std::string_view entry, const LayerDesc& desc);

// Validates desc and every checkpoint tensor (dtypes, shapes, devices, contiguity,
// NaN/Inf in scales and biases, expert_map), then copies the weights to the host in the
// canonical layout: gate/up concatenated, biases fp32, dq scales per expert (1 for
// MXFP4), activation dq scales as the max over experts, identity expert_map when none
// is given. Each weight byte is copied once, into storage sized exactly. The result's
// desc has gate_up = concat (it describes the HostWeights, not the checkpoint).
// Throws Error(invalid_argument) naming the tensor (and the first bad index), or
// Error(unsupported) for CUDA tensors in a build without CUDA.
std::shared_ptr<HostWeights> prepare_host_weights(const LayerDesc& desc, const CheckpointWeights& weights);

}  // namespace fp4moe::detail
