"""fp4moe layers as PyTorch custom operators, for ``torch.compile`` and ``torch.export``.

A compiled graph cannot hold a Python object, so a layer is named by an integer handle:
``register(layer)`` returns it, and the operators take it as their last positional
argument. To the compiler the operators are opaque (``torch.library.custom_op``) with a
fake implementation that gives the output's shape and dtype, so a model that calls them
compiles without graph breaks; at run time they call the layer on PyTorch's current stream
(CUDA-graph capture works as for a direct call).

    import fp4moe, fp4moe.torch_ops as ops
    layer = fp4moe.MoELayer(w13, w13_scale, w13_scale_2, w2, w2_scale, w2_scale_2, ...)
    handle = ops.register(layer)

    @torch.compile(fullgraph=True)
    def block(x, topk_weights, topk_ids):
        return torch.ops.fp4moe.moe(x, topk_weights, topk_ids, handle)   # or ops.moe(handle, x, ...)

Operators (namespace ``fp4moe``):
  moe(hidden_states, topk_weights, topk_ids, handle, apply_router_weight_on_input=False) -> out
      the standard format; out [T, H] in hidden_states' dtype (a new tensor).
  moe_out(hidden_states, topk_weights, topk_ids, out, handle, apply_router_weight_on_input=False,
          accumulate=False) -> ()
      the same into a given ``out`` (written or, with accumulate, added to; nothing else).
  moe_batched(hidden_states, expert_num_tokens, handle) -> out
      the batched format with bf16/f16/f32 activations; out [E_local, M, H], rows at or past
      expert_num_tokens[e] left as torch.empty leaves them.

Needs PyTorch >= 2.4 (torch.library.custom_op). Importing this module imports torch;
``import fp4moe`` alone never does.
"""
from __future__ import annotations

import itertools
import threading
from typing import Any, Dict

import torch

__all__ = ["moe", "moe_batched", "moe_out", "register", "unregister"]

_layers: Dict[int, Any] = {}
_next_handle = itertools.count(1)
_lock = threading.Lock()


def register(layer: Any) -> int:
    """A handle for `layer` (an fp4moe.MoELayer) to pass to the operators. The layer is
    kept alive until unregister(handle)."""
    if not hasattr(layer, "batched") or not hasattr(layer, "hidden"):
        raise ValueError(f"layer: got a {type(layer).__name__}, need an fp4moe.MoELayer")
    with _lock:
        handle = next(_next_handle)
        _layers[handle] = layer
    return handle


def unregister(handle: int) -> None:
    """Forgets a handle (a later call with it raises ValueError)."""
    with _lock:
        if _layers.pop(int(handle), None) is None:
            raise ValueError(f"handle: got {handle}, need one that register() returned and is not unregistered")


def _layer(handle: int) -> Any:
    layer = _layers.get(int(handle))
    if layer is None:
        raise ValueError(f"handle: got {handle}, need one that fp4moe.torch_ops.register() returned")
    return layer


@torch.library.custom_op("fp4moe::moe", mutates_args=())
def _moe(hidden_states: torch.Tensor, topk_weights: torch.Tensor, topk_ids: torch.Tensor, handle: int,
         apply_router_weight_on_input: bool = False) -> torch.Tensor:
    return _layer(handle)(hidden_states, topk_weights, topk_ids,
                          apply_router_weight_on_input=apply_router_weight_on_input)


@_moe.register_fake
def _moe_fake(hidden_states, topk_weights, topk_ids, handle, apply_router_weight_on_input=False):
    return hidden_states.new_empty((hidden_states.shape[0], _layer(handle).hidden))


@torch.library.custom_op("fp4moe::moe_out", mutates_args=("out",))
def _moe_out(hidden_states: torch.Tensor, topk_weights: torch.Tensor, topk_ids: torch.Tensor, out: torch.Tensor,
             handle: int, apply_router_weight_on_input: bool = False, accumulate: bool = False) -> None:
    _layer(handle)(hidden_states, topk_weights, topk_ids, out=out,
                   apply_router_weight_on_input=apply_router_weight_on_input, accumulate=accumulate)


@_moe_out.register_fake
def _moe_out_fake(hidden_states, topk_weights, topk_ids, out, handle, apply_router_weight_on_input=False,
                  accumulate=False):
    return None


@torch.library.custom_op("fp4moe::moe_batched", mutates_args=())
def _moe_batched(hidden_states: torch.Tensor, expert_num_tokens: torch.Tensor, handle: int) -> torch.Tensor:
    return _layer(handle).batched(hidden_states, expert_num_tokens)


@_moe_batched.register_fake
def _moe_batched_fake(hidden_states, expert_num_tokens, handle):
    return hidden_states.new_empty((hidden_states.shape[0], hidden_states.shape[1], _layer(handle).hidden))


def moe(handle: int, hidden_states: torch.Tensor, topk_weights: torch.Tensor, topk_ids: torch.Tensor, *,
        out: torch.Tensor = None, apply_router_weight_on_input: bool = False,
        accumulate: bool = False) -> torch.Tensor:
    """torch.ops.fp4moe.moe, or moe_out when `out` is given (then `out` is returned)."""
    if out is None:
        if accumulate:
            raise ValueError("out: got None with accumulate=True, need the tensor to add to")
        return torch.ops.fp4moe.moe(hidden_states, topk_weights, topk_ids, handle, apply_router_weight_on_input)
    torch.ops.fp4moe.moe_out(hidden_states, topk_weights, topk_ids, out, handle, apply_router_weight_on_input,
                             accumulate)
    return out


def moe_out(handle: int, hidden_states: torch.Tensor, topk_weights: torch.Tensor, topk_ids: torch.Tensor,
            out: torch.Tensor, *, apply_router_weight_on_input: bool = False, accumulate: bool = False) -> None:
    """torch.ops.fp4moe.moe_out."""
    torch.ops.fp4moe.moe_out(hidden_states, topk_weights, topk_ids, out, handle, apply_router_weight_on_input,
                             accumulate)


def moe_batched(handle: int, hidden_states: torch.Tensor, expert_num_tokens: torch.Tensor) -> torch.Tensor:
    """torch.ops.fp4moe.moe_batched."""
    return torch.ops.fp4moe.moe_batched(hidden_states, expert_num_tokens, handle)
