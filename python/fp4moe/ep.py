"""Expert parallelism: one MoE layer spread over GPUs by experts, over NCCL (docs/ep.md).

One process per GPU (torchrun, mpirun, or your own launcher). Each rank builds an
EpLayer from the weights of its own experts only::

    import fp4moe.ep as ep
    first, n = ep.local_experts(num_experts, world, rank)    # this rank's experts: [first, first + n)
    layer = ep.EpLayer(w13[first:first + n], ..., num_experts=E, top_k=k,
                       process_group=torch.distributed.group.WORLD, max_tokens=4096)
    out = layer(hidden_states, topk_weights, topk_ids)       # this rank's tokens, global expert ids

Without PyTorch, share fp4moe.ep.unique_id() from rank 0 yourself and pass
unique_id=, rank=, world=. Construction is collective: every rank must call it, in the
same order as every other collective of the layer (forward too).

mode="all_to_all" (default): each rank brings its own tokens (T <= max_tokens, may differ
per rank); rows travel to the owners of their experts and back. mode="all_reduce": every
rank brings the same tokens; partial sums are added with an all-reduce.
"""
from __future__ import annotations

import sys
from typing import Any, Optional, Tuple

from . import _C
from . import _QUANT, _arg, _empty, _full, _on_cuda, _shape, _stream  # shared tensor plumbing

__all__ = ["available", "why_unavailable", "nccl_version", "unique_id", "local_experts", "EpLayer"]


def why_unavailable() -> str:
    """"" when expert parallelism can run here, else why not (no NCCL, no CUDA build)."""
    return _C.ep_why_unavailable()


def available() -> bool:
    return why_unavailable() == ""


def nccl_version() -> str:
    return _C.ep_nccl_version()


def unique_id() -> bytes:
    """A fresh NCCL unique id (128 bytes), made on one rank and sent to all others."""
    return _C.ep_unique_id()


def local_experts(num_experts: int, world: int, rank: int) -> Tuple[int, int]:
    """(first global expert, count) of `rank`: contiguous ranges, the first E % world ranks one more."""
    return _C.ep_placement(int(num_experts), int(world), int(rank))


def _id_from_process_group(group: Any) -> Tuple[bytes, int, int]:
    """(unique id, rank, world) agreed over a torch.distributed process group.

    The layer gets a communicator of its own (like vLLM's PyNcclCommunicator): the group's
    rank 0 makes the id and broadcasts it with the group's own backend.
    """
    import torch.distributed as dist
    rank, world = dist.get_rank(group), dist.get_world_size(group)
    box = [unique_id() if rank == 0 else None]
    dist.broadcast_object_list(box, src=dist.get_global_rank(group, 0), group=group)
    return box[0], rank, world


class EpLayer:
    """This rank's share of an expert-parallel MoE layer.

    Weights: the SPEC §3 tensors of this rank's experts only (local_experts() says
    which), n = count along dim 0, no expert_map; scales and quant as for fp4moe.MoELayer.
    W4A4: the activation scales used are the max over all ranks' experts.

    Communicator, one of: process_group= (torch.distributed), unique_id= with rank= and
    world=, or comm= (an existing ncclComm_t as an int, e.g. from your framework; it must
    outlive the layer). device: this rank's GPU; None (the default): the GPU the weights
    are on, as for fp4moe.MoELayer, or for host weights the current device (PyTorch's;
    rank % the number of visible GPUs without torch). EP layers always run on a GPU:
    host weights are copied there.

    mode: "all_to_all" | "all_reduce". dispatch: "bf16" | "nvfp4" (W4A4 only, ~3.5x fewer
    bytes); combine: "f32" (exact: bit-identical to one GPU) | "bf16". Capacities, fixed
    here (CUDA-graph friendly), the same on every rank: max_tokens per rank per call;
    send_rows (rows one rank sends to one rank) and expert_rows (rows one local expert
    receives), 0 for sizes that can never overflow. Overflow never drops rows silently:
    check_device_errors() raises with the counts that were needed.
    """

    def __init__(self, w13: Any, w13_scale: Any, w13_scale_2: Any, w2: Any, w2_scale: Any, w2_scale_2: Any, *,
                 num_experts: int, top_k: int, max_tokens: int, quant: str = "w4a16",
                 w13_input_scale: Any = None, w2_input_scale: Any = None, w13_bias: Any = None,
                 w2_bias: Any = None, gate_up: str = "concat", activation: str = "silu",
                 process_group: Any = None, unique_id: Optional[bytes] = None, rank: Optional[int] = None,
                 world: Optional[int] = None, comm: int = 0, device: Optional[int] = None,
                 mode: str = "all_to_all", dispatch: str = "bf16", combine: str = "f32",
                 send_rows: int = 0, expert_rows: int = 0, backend: str = "auto") -> None:
        if quant not in _QUANT:
            raise ValueError(f"quant: got {quant!r}, need 'w4a16', 'w4a4' or 'mxfp4'")
        weight_format, act_quant = _QUANT[quant]
        shape13 = _shape(w13, "w13")
        if len(shape13) != 3 or shape13[1] % 2:
            raise ValueError(f"w13: got shape {list(shape13)}, need [E_local, 2I, H/2] uint8")
        e_local, two_i, half_h = shape13
        if process_group is not None:
            unique_id, rank, world = _id_from_process_group(process_group)
        elif comm:
            if rank is None or world is None:
                raise ValueError("rank, world: got None with comm=, need the communicator's rank and size")
            unique_id = b""
        elif unique_id is None or rank is None or world is None:
            raise ValueError("process_group / unique_id: got neither, need process_group= or "
                             "unique_id= with rank= and world= (or comm=)")
        if device is None:  # the weights' GPU (MoELayer's rule), else the current one
            on_cuda, weights_device = _on_cuda(w13)
            if on_cuda:
                device = weights_device
            else:
                try:
                    import torch
                    device = torch.cuda.current_device()
                except ImportError:
                    device = int(rank) % max(1, int(_C.build_info()["cuda_device_count"]))
        sdt = "e8m0" if weight_format == "mxfp4" else "e4m3"

        def scalar_or_tensor(v: Any, name: str) -> Any:
            if v is None or not isinstance(v, (int, float)):
                return _arg(v, name=name)
            return _full(w13, (e_local,), float(v))

        self.hidden = 2 * half_h
        self.num_experts = int(num_experts)
        self._layer = _C.EpLayer(
            unique_id=unique_id, comm=int(comm), world=int(world), rank=int(rank), device=int(device),
            w13=_arg(w13, name="w13"), w13_scale=_arg(w13_scale, sdt, "w13_scale"),
            w13_scale_2=scalar_or_tensor(w13_scale_2, "w13_scale_2"), w2=_arg(w2, name="w2"),
            w2_scale=_arg(w2_scale, sdt, "w2_scale"), w2_scale_2=scalar_or_tensor(w2_scale_2, "w2_scale_2"),
            w13_input_scale=scalar_or_tensor(w13_input_scale, "w13_input_scale"),
            w2_input_scale=scalar_or_tensor(w2_input_scale, "w2_input_scale"),
            w13_bias=_arg(w13_bias, name="w13_bias"), w2_bias=_arg(w2_bias, name="w2_bias"),
            hidden=self.hidden, intermediate=two_i // 2, num_experts=self.num_experts, top_k=int(top_k),
            weight_format=weight_format, act_quant=act_quant, activation=activation, gate_up=gate_up,
            backend=backend, mode=mode, dispatch=dispatch, combine=combine, max_tokens=int(max_tokens),
            send_rows=int(send_rows), expert_rows=int(expert_rows))

    @property
    def rank(self) -> int:
        return self._layer.rank

    @property
    def world(self) -> int:
        return self._layer.world

    @property
    def num_local_experts(self) -> int:
        return self._layer.num_local_experts

    @property
    def capacity(self) -> Tuple[int, int, int]:
        """(max_tokens, send_rows, expert_rows) with defaults resolved."""
        return self._layer.capacity

    @property
    def traffic(self) -> Tuple[int, int, int]:
        """Bytes per call: (dispatch, combine, remote): the fixed-size transfers of this rank."""
        return self._layer.traffic

    def __call__(self, hidden_states: Any, topk_weights: Any, topk_ids: Any, *, out: Any = None,
                 accumulate: bool = False, stream: Any = None) -> Any:
        """out [T, H] = the whole layer on this rank's tokens (global expert ids in topk_ids)."""
        if out is None:
            if accumulate:
                raise ValueError("out: got None with accumulate=True, need the tensor to add to")
            shape = _shape(hidden_states, "hidden_states")
            out = _empty(hidden_states, (shape[0] if shape else 0, self.hidden))
        self._layer.forward(_arg(hidden_states, name="hidden_states"), _arg(topk_weights, name="topk_weights"),
                            _arg(topk_ids, name="topk_ids"), _arg(out, name="out"), bool(accumulate),
                            _stream(hidden_states, stream))
        return out

    forward = __call__

    def check_device_errors(self, stream: Any = None) -> None:
        """Raises ValueError for overflowed capacities (with the rows needed) or bad ids; synchronises."""
        s = 0 if stream is None else _stream(None, stream)
        if stream is None and "torch" in sys.modules:
            torch = sys.modules["torch"]  # torch's current stream, if torch is in use
            s = int(torch.cuda.current_stream(f"cuda:{self._layer.device}").cuda_stream)
        self._layer.check_device_errors(s)
