"""fp4moe: exact, fast Mixture-of-Experts layers with FP4 (NVFP4, MXFP4) expert weights.

Tensors cross into the C++ core by DLPack, zero-copy, on the CPU or a CUDA device:
PyTorch, NumPy, CuPy and JAX arrays all work, and fp4moe links against none of them.
Outputs the caller does not pass are allocated with the framework of the input they
follow (``torch.empty`` for torch tensors, ``numpy.empty`` for NumPy arrays, ...);
a framework is imported only when one of its tensors was passed in.

FP8 scales may be ``float8_e4m3fn`` (``float8_e8m0fnu`` for MXFP4) tensors or
``uint8`` tensors holding the same bytes.

Work runs where the tensors are. A layer lives where its weights are unless device= says
otherwise (PyTorch's rule; see MoELayer); the format functions run where their input is.
CUDA work runs on the caller's stream: PyTorch's current stream for torch tensors,
CuPy's current stream for CuPy arrays, else the ``stream=`` argument (an int
``cudaStream_t``, or an object with ``.cuda_stream`` or ``.ptr``), else the default
stream. Errors are ``ValueError`` (bad argument) or ``RuntimeError`` (unsupported
request, CUDA failure), carrying the C++ message that names the argument.

Formats and semantics: SPEC.md (§2 block formats, §3 checkpoint layout, §4 the layer).
For torch.compile, ``fp4moe.torch_ops`` registers a layer as PyTorch custom operators.
"""
from __future__ import annotations

import numbers
import os
import sys
from typing import Any, Optional, Sequence, Tuple

from . import _C

__version__: str = _C.__version__

__all__ = [
    "MoELayer",
    "backends",
    "dequantize_mxfp4",
    "dequantize_nvfp4",
    "info",
    "load_layer",
    "quantize_mxfp4",
    "quantize_nvfp4",
    "route",
    "swizzle_scales",
    "unswizzle_scales",
]

# DLPack device types (dlpack.h): what __dlpack_device__ returns.
_DL_CPU, _DL_CUDA, _DL_CUDA_HOST, _DL_CUDA_MANAGED = 1, 2, 3, 13


# ---------------------------------------------------------------------------
# Framework plumbing: the only place that knows torch / numpy / cupy / jax.
# ---------------------------------------------------------------------------
def _framework(x: Any) -> str:
    root = type(x).__module__.split(".", 1)[0]
    return "jax" if root == "jaxlib" else root


def _dtype_name(x: Any) -> str:
    return str(getattr(x, "dtype", type(x).__name__)).replace("torch.", "")


def _shape(x: Any, name: str) -> Tuple[int, ...]:
    shape = getattr(x, "shape", None)
    if shape is None:
        raise ValueError(f"{name}: got a {type(x).__name__}, need a tensor that supports DLPack "
                         "(torch, numpy, cupy, jax)")
    return tuple(int(d) for d in shape)


def _on_cuda(x: Any) -> Tuple[bool, int]:
    """(is on a CUDA device, device id) from the DLPack device of x."""
    try:
        dev_type, dev_id = x.__dlpack_device__()
    except Exception:  # not a DLPack producer: the core reports it by name
        return False, 0
    return int(dev_type) in (_DL_CUDA, _DL_CUDA_MANAGED), int(dev_id)


def _arg(x: Any, bytes_of: Optional[str] = None, name: str = "") -> Any:
    """x ready to cross by DLPack.

    Torch tensors are detached (DLPack refuses tensors that require grad). A float8
    tensor of the FP8 type `bytes_of` ("e4m3" or "e8m0") is viewed as uint8, which
    every framework exports; the core reads those bytes as `bytes_of`.
    """
    if x is None:
        return None
    fw = _framework(x)
    if fw == "torch":
        x = x.detach()
    dt = _dtype_name(x)
    if dt.startswith("float8"):
        want = {"e4m3": "float8_e4m3fn", "e8m0": "float8_e8m0fnu"}.get(bytes_of or "")
        if dt != want:
            need = f"{want} or uint8" if want else "a non-float8 dtype"
            raise ValueError(f"{name}: got dtype {dt}, need {need}")
        if fw == "torch":
            import torch
            return x.view(torch.uint8)
        if fw == "jax":
            import jax
            import jax.numpy as jnp
            return jax.lax.bitcast_convert_type(x, jnp.uint8)
        import numpy as np  # numpy with ml_dtypes, cupy
        return x.view(np.uint8)
    return x


def _empty(like: Any, shape: Sequence[int], dtype: Optional[str] = None) -> Any:
    """An uninitialised tensor of `shape` on like's device, in like's framework.

    dtype: a name ("uint8", "int32", "float32", "bfloat16", ...) or None for like's
    own dtype.
    """
    shape = tuple(int(d) for d in shape)
    fw = _framework(like)
    cuda, dev = _on_cuda(like)
    if fw == "torch":
        import torch
        dt = like.dtype if dtype is None else getattr(torch, dtype)
        return torch.empty(shape, dtype=dt, device=like.device)
    if fw == "cupy" and cuda:
        import cupy
        with cupy.cuda.Device(dev):
            return cupy.empty(shape, dtype=like.dtype if dtype is None else dtype)
    if not cuda:
        # NumPy, JAX on the CPU (its arrays are immutable), anything else on the host
        import numpy as np
        dt = like.dtype if dtype is None else dtype
        if dtype == "bfloat16":
            try:
                import ml_dtypes
                dt = ml_dtypes.bfloat16
            except ImportError:
                raise ValueError("out: NumPy has no bfloat16; pass out= explicitly") from None
        return np.empty(shape, dtype=np.dtype(dt) if not hasattr(dt, "itemsize") else dt)
    # a CUDA tensor of a framework we cannot allocate with (JAX arrays are immutable)
    for fallback in ("torch", "cupy"):
        try:
            mod = __import__(fallback)
        except ImportError:
            continue
        name = dtype or _dtype_name(like)
        if fallback == "torch":
            return mod.empty(shape, dtype=getattr(mod, name), device=f"cuda:{dev}")
        with mod.cuda.Device(dev):
            return mod.empty(shape, dtype=name)
    raise ValueError(f"out: cannot allocate on cuda:{dev} for a {type(like).__name__} input; pass out=")


def _full(like: Any, shape: Sequence[int], value: float) -> Any:
    """A float32 tensor filled with value, where `like` lives (global scales given as floats)."""
    fw = _framework(like)
    cuda, dev = _on_cuda(like)
    if fw == "torch":
        import torch
        return torch.full(tuple(shape), float(value), dtype=torch.float32, device=like.device)
    if fw == "cupy" and cuda:
        import cupy
        with cupy.cuda.Device(dev):
            return cupy.full(tuple(shape), value, dtype="float32")
    if fw == "jax":
        import jax.numpy as jnp
        return jnp.full(tuple(shape), value, dtype=jnp.float32)
    import numpy as np
    return np.full(tuple(shape), value, dtype=np.float32)


def _stream(x: Any, stream: Any) -> int:
    """The cudaStream_t to run on, as an int (0: the default stream)."""
    if stream is not None:
        if isinstance(stream, numbers.Integral):
            return int(stream)
        for attr in ("cuda_stream", "ptr"):  # torch.cuda.Stream, cupy.cuda.Stream
            if hasattr(stream, attr):
                return int(getattr(stream, attr))
        raise ValueError(f"stream: got a {type(stream).__name__}, need an int cudaStream_t or "
                         "an object with .cuda_stream or .ptr")
    cuda, dev = _on_cuda(x)
    if not cuda:
        return 0
    fw = _framework(x)
    if fw == "torch":
        import torch
        return int(torch.cuda.current_stream(x.device).cuda_stream)
    if fw == "cupy":
        import cupy
        return int(cupy.cuda.get_current_stream().ptr)
    return 0


def _as_e4m3(like: Any, t: Any) -> Any:
    """uint8 bytes as a float8_e4m3fn view where the framework has that dtype."""
    if _framework(like) == "torch":
        import torch
        if hasattr(torch, "float8_e4m3fn"):
            return t.view(torch.float8_e4m3fn)
    return t


# ---------------------------------------------------------------------------
# Build facts
# ---------------------------------------------------------------------------
def backends() -> list:
    """Every backend of this build: [{name, device, available, reason}], best first."""
    return _C.backends()


def info() -> dict:
    """Version, compiled CUDA architectures, visible CUDA devices, the CPU backend's SIMD level
    (cpu_simd: "amx", "avx512", "avx2" or "scalar") and backends."""
    d = dict(_C.build_info())
    d["with_cuda"] = bool(_C.with_cuda)
    d["backends"] = _C.backends()
    return d


# ---------------------------------------------------------------------------
# Formats (SPEC §2)
#
# Each runs where its input is: on the CPU for host arrays, on the GPU for CUDA tensors
# (torch, CuPy, ...), on the caller's stream (see the module docstring; stream= overrides),
# without synchronising. Outputs are allocated on the input's device, in its framework.
# GPU results are bit-identical to the CPU's (NaN outputs of dequantization are NaN on
# both, with the hardware's payload).
# ---------------------------------------------------------------------------
def quantize_nvfp4(x: Any, q_scale: float, *, stream: Any = None) -> Tuple[Any, Any]:
    """NVFP4-quantize x [..., K] (K % 16 == 0) with quantization scale q_scale = 1/dq_scale.

    x: float32 | bfloat16 | float16, on the CPU or a CUDA device. Returns (data uint8
    [..., K/2], two e2m1 per byte, low nibble first; scale e4m3 [..., K/16], linear layout;
    float8_e4m3fn for torch, uint8 bytes otherwise), where x is.
    """
    shape = _shape(x, "x")
    if not shape:
        raise ValueError("x: got a 0-d tensor, need [..., K]")
    k = shape[-1]
    data = _empty(x, shape[:-1] + (k // 2,), "uint8")
    scale = _empty(x, shape[:-1] + (k // 16,), "uint8")
    _C.quantize_nvfp4(_arg(x, name="x"), float(q_scale), data, scale, _stream(x, stream))
    return data, _as_e4m3(x, scale)


def dequantize_nvfp4(data: Any, scale: Any, dq_scale: float, *, stream: Any = None) -> Any:
    """x_hat = e2m1(data) * e4m3(scale) * dq_scale as float32 [..., K], where data is."""
    shape = _shape(data, "data")
    if not shape:
        raise ValueError("data: got a 0-d tensor, need [..., K/2]")
    out = _empty(data, shape[:-1] + (2 * shape[-1],), "float32")
    _C.dequantize_nvfp4(_arg(data, name="data"), _arg(scale, "e4m3", "scale"), float(dq_scale), out,
                        _stream(data, stream))
    return out


def quantize_mxfp4(x: Any, *, stream: Any = None) -> Tuple[Any, Any]:
    """MXFP4-quantize x [..., K] (K % 32 == 0), on the CPU or a CUDA device.

    Returns (data uint8 [..., K/2]; scale uint8 e8m0 codes [..., K/32]), where x is.
    """
    shape = _shape(x, "x")
    if not shape:
        raise ValueError("x: got a 0-d tensor, need [..., K]")
    k = shape[-1]
    data = _empty(x, shape[:-1] + (k // 2,), "uint8")
    scale = _empty(x, shape[:-1] + (k // 32,), "uint8")
    _C.quantize_mxfp4(_arg(x, name="x"), data, scale, _stream(x, stream))
    return data, scale


def dequantize_mxfp4(data: Any, scale: Any, *, stream: Any = None) -> Any:
    """x_hat = e2m1(data) * 2^(scale - 127) as float32 [..., K], where data is."""
    shape = _shape(data, "data")
    if not shape:
        raise ValueError("data: got a 0-d tensor, need [..., K/2]")
    out = _empty(data, shape[:-1] + (2 * shape[-1],), "float32")
    _C.dequantize_mxfp4(_arg(data, name="data"), _arg(scale, "e8m0", "scale"), out, _stream(data, stream))
    return out


def _pad(n: int, to: int) -> int:
    return (n + to - 1) // to * to


def swizzle_scales(scale: Any, *, stream: Any = None) -> Any:
    """Linear scales [B..., R, C] -> the swizzled 128x4 layout, uint8 [B..., Rp*Cp], where scale is.

    Rp = ceil(R/128)*128, Cp = ceil(C/4)*4; padding bytes are 0 (SPEC §2).
    """
    shape = _shape(scale, "scale")
    if len(shape) < 2:
        raise ValueError(f"scale: got shape {list(shape)}, need [..., R, C]")
    r, c = shape[-2], shape[-1]
    out = _empty(scale, shape[:-2] + (_pad(r, 128) * _pad(c, 4),), "uint8")
    # any FP8 flavour is just bytes here
    s = _arg(scale, "e8m0" if _dtype_name(scale) == "float8_e8m0fnu" else "e4m3", "scale")
    _C.swizzle_scales(s, out, _stream(scale, stream))
    return out


def unswizzle_scales(swizzled: Any, rows: int, cols: int, *, stream: Any = None) -> Any:
    """The inverse of swizzle_scales: uint8 [B..., Rp*Cp] -> uint8 [B..., rows, cols], where swizzled is."""
    shape = _shape(swizzled, "swizzled")
    if not shape:
        raise ValueError("swizzled: got a 0-d tensor, need [..., Rp*Cp]")
    if int(rows) < 0 or int(cols) < 0:
        raise ValueError(f"rows, cols: got {rows}, {cols}, need >= 0")
    if _pad(int(rows), 128) * _pad(int(cols), 4) != shape[-1]:  # before allocating rows x cols
        raise ValueError(f"swizzled: got {shape[-1]} bytes per matrix, need "
                         f"{_pad(int(rows), 128) * _pad(int(cols), 4)} for rows={rows}, cols={cols}")
    out = _empty(swizzled, shape[:-1] + (int(rows), int(cols)), "uint8")
    _C.unswizzle_scales(_arg(swizzled, "e4m3", "swizzled"), out, _stream(swizzled, stream))
    return out


# ---------------------------------------------------------------------------
# Routing (SPEC §4)
# ---------------------------------------------------------------------------
def route(router_logits: Any, top_k: int, method: str = "softmax", renormalize: bool = True,
          n_group: int = 1, topk_group: int = 1, correction_bias: Any = None,
          routed_scaling_factor: float = 1.0, *, stream: Any = None) -> Tuple[Any, Any]:
    """Select top_k experts per token from router_logits float32 [T, E].

    method: "softmax" (Qwen, gpt-oss) or "sigmoid_grouped" (DeepSeek-V3, Kimi-K2, with
    n_group, topk_group, correction_bias [E] and routed_scaling_factor). Ties go to the
    lower expert index. Returns (topk_weights float32 [T, k], topk_ids int32 [T, k]).
    """
    shape = _shape(router_logits, "router_logits")
    t = shape[0] if shape else 0
    k = int(top_k)
    if k < 1 or (len(shape) == 2 and k > shape[1]):  # checked before allocating [T, k]
        raise ValueError(f"top_k: got {top_k}, need a value in [1, E]")
    weights = _empty(router_logits, (t, k), "float32")
    ids = _empty(router_logits, (t, k), "int32")
    _C.route(_arg(router_logits, name="router_logits"), _arg(correction_bias, name="correction_bias"),
             weights, ids, k, method, bool(renormalize), int(n_group), int(topk_group),
             float(routed_scaling_factor), _stream(router_logits, stream))
    return weights, ids


# ---------------------------------------------------------------------------
# The layer
# ---------------------------------------------------------------------------
_QUANT = {  # quant= -> (weight format, activation quantization)
    "w4a16": ("nvfp4", "none"),
    "w4a4": ("nvfp4", "nvfp4"),
    "mxfp4": ("mxfp4", "none"),
}


def _current_cuda_device() -> int:
    """PyTorch's current CUDA device when torch is in use (torch.cuda.set_device), else -1:
    the core then takes the CUDA runtime's current device."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        return int(torch.cuda.current_device())
    return -1


def _device_id(device: Any) -> Tuple[Optional[str], int]:
    """device= -> ("cpu" | "cuda" | None, CUDA ordinal or -1)."""
    if device is None:
        return None, -1
    if isinstance(device, numbers.Integral):
        return "cuda", int(device)
    s = str(device)  # torch.device, "cuda:1", "cpu"
    if s == "cpu":
        return "cpu", -1
    if s == "cuda":
        return "cuda", -1
    if s.startswith("cuda:") and s[5:].isdigit():
        return "cuda", int(s[5:])
    raise ValueError(f"device: got {device!r}, need None, 'cpu', 'cuda', 'cuda:N' or an int")


class MoELayer:
    """One MoE layer with FP4 expert weights, prepared once from the checkpoint layout.

    Arguments are the tensors of SPEC §3 (vLLM / ModelOpt layout), E_local experts,
    hidden H, intermediate I:

    - w13 uint8 [E, 2I, H/2]: gate rows [0, I), up rows [I, 2I) (gate_up="concat") or
      gate/up alternating (gate_up="interleaved");
    - w13_scale e4m3 [E, 2I, H/16] (MXFP4: e8m0 [E, 2I, H/32]), linear layout;
    - w13_scale_2 float32 [E] or a float: the weight dq_scale (None for MXFP4);
    - w2 uint8 [E, H, I/2], w2_scale, w2_scale_2 likewise;
    - quant: "w4a16" (NVFP4 weights, bf16 activations), "w4a4" (NVFP4 activations too,
      needs w13_input_scale and w2_input_scale: float32 [E] or floats), or "mxfp4";
    - w13_bias [E, 2I], w2_bias [E, H]: optional (MXFP4, gpt-oss);
    - activation: "silu" or "swiglu_oai"; expert_map int32 [E_global]: global -> local
      expert or -1 (expert parallelism);
    - max_num_tokens: the most tokens one call takes; the workspace for it is allocated
      here, on the layer's device, so calls neither allocate nor synchronise;
    - device: where the layer runs. None (the default) means where the weights are, as
      in PyTorch: CUDA weights give a layer on their CUDA device, host weights (NumPy,
      CPU torch tensors) a layer on the CPU. "cuda", "cuda:N" or an int put the layer on
      that GPU ("cuda": the weights' device when they are on one, else the current
      device, PyTorch's when torch is in use), copying host weights there; "cpu" copies CUDA weights to the host. Inputs
      and outputs of calls must then live on the layer's device (.device says which).
    - backend: "auto" (the best backend of fp4moe.backends() for the layer's device that
      serves the layer; FP4MOE_BACKEND, when it names a backend of that device, instead)
      or a name from fp4moe.backends(). A named backend decides the device when device is
      None (backend="cuda" with host weights copies them to the GPU) and must run on the
      given device otherwise.

    top_k (optional): the number of experts per token. The C++ layer is prepared for
    one top_k. When given, the layer is prepared here, once. When not, it is prepared
    here for top_k=1 (so bad weights fail now and .backend is known) and the
    checkpoint tensors are kept until the first standard call shows k = topk_ids.shape[1];
    if k differs, that call prepares the layer again (once) and then lets the tensors go.
    Pass top_k to avoid the second preparation and the kept tensors; later calls with
    another k raise ValueError.

    max_batched_tokens (optional): the largest per-expert row count M of batched calls,
    whose workspace is then allocated here too; without it, the first batched call with
    a larger M allocates it.

    Calls on one layer share its workspace: run them one at a time (one stream).
    """

    def __init__(self, w13: Any, w13_scale: Any, w13_scale_2: Any, w2: Any, w2_scale: Any,
                 w2_scale_2: Any, *, quant: str = "w4a16", w13_input_scale: Any = None,
                 w2_input_scale: Any = None, w13_bias: Any = None, w2_bias: Any = None,
                 gate_up: str = "concat", activation: str = "silu", expert_map: Any = None,
                 max_num_tokens: int = 8192, backend: str = "auto", device: Any = None,
                 top_k: Optional[int] = None, max_batched_tokens: Optional[int] = None) -> None:
        if quant not in _QUANT:
            raise ValueError(f"quant: got {quant!r}, need 'w4a16', 'w4a4' or 'mxfp4'")
        weight_format, act_quant = _QUANT[quant]
        shape13 = _shape(w13, "w13")
        if len(shape13) != 3 or shape13[1] % 2:
            raise ValueError(f"w13: got shape {list(shape13)}, need [E, 2I, H/2] uint8")
        e_local, two_i, half_h = shape13
        num_experts = e_local
        if expert_map is not None:
            map_shape = _shape(expert_map, "expert_map")
            num_experts = map_shape[0] if map_shape else 0  # a 0-d map is rejected by the core
        sdt = "e8m0" if weight_format == "mxfp4" else "e4m3"

        def scalar_or_tensor(v: Any, name: str) -> Any:
            if v is None or not isinstance(v, numbers.Real):
                return _arg(v, name=name)
            return _full(w13, (e_local,), float(v))

        if weight_format == "mxfp4":
            for v, name in ((w13_scale_2, "w13_scale_2"), (w2_scale_2, "w2_scale_2")):
                if v is not None:
                    raise ValueError(f"{name}: got a value, need None for quant='mxfp4' (no global scale)")
        self._kind, dev = _device_id(device)
        if self._kind is None and backend == "auto":  # where the weights are
            on_cuda, weights_dev = _on_cuda(w13)
            self._kind, dev = ("cuda", weights_dev) if on_cuda else ("cpu", -1)
        self._weights = dict(
            w13=_arg(w13, name="w13"), w13_scale=_arg(w13_scale, sdt, "w13_scale"),
            w13_scale_2=scalar_or_tensor(w13_scale_2, "w13_scale_2"),
            w2=_arg(w2, name="w2"), w2_scale=_arg(w2_scale, sdt, "w2_scale"),
            w2_scale_2=scalar_or_tensor(w2_scale_2, "w2_scale_2"),
            w13_input_scale=scalar_or_tensor(w13_input_scale, "w13_input_scale"),
            w2_input_scale=scalar_or_tensor(w2_input_scale, "w2_input_scale"),
            w13_bias=_arg(w13_bias, name="w13_bias"), w2_bias=_arg(w2_bias, name="w2_bias"),
            expert_map=_arg(expert_map, name="expert_map"))
        self._desc = dict(hidden=2 * half_h, intermediate=two_i // 2, num_experts=num_experts,
                          weight_format=weight_format, act_quant=act_quant,
                          activation=activation, gate_up=gate_up)
        self._device = dev
        self._max_num_tokens = int(max_num_tokens)
        self._max_batched_tokens = 0 if max_batched_tokens is None else int(max_batched_tokens)
        self._backend = self._pick_backend(backend)
        if self._device < 0 and not _on_cuda(w13)[0] and self._backend_device(self._backend) == "cuda":
            self._device = _current_cuda_device()  # host weights to "the current device"
        self.hidden = 2 * half_h
        self.intermediate = two_i // 2
        self.num_experts = num_experts
        self.quant = quant
        self._top_k_fixed = False
        self._layer = self._prepare(1 if top_k is None else int(top_k))
        self._top_k_fixed = top_k is not None
        if self._top_k_fixed:
            self._weights = None

    def _pick_backend(self, backend: str) -> str:
        """The backend to prepare with, for the device kind self._kind ("cpu", "cuda" or
        None: a named backend decides)."""
        listed = {b["name"]: b for b in _C.backends()}
        if backend != "auto":
            b = listed.get(backend)
            if self._kind is not None and b is not None and b["device"] != self._kind:
                raise ValueError(f"device: got {self._kind!r}, but backend {backend!r} runs on "
                                 f"{b['device']!r}; need a {self._kind} backend or device=None")
            return backend  # unknown or unavailable names: the core says why
        # "auto" on a device: the first backend of the ladder for that device that can run
        # here and serves this layer; FP4MOE_BACKEND first when it names one of them
        forced = os.environ.get("FP4MOE_BACKEND", "")
        if forced in listed and listed[forced]["device"] == self._kind:
            return forced
        why = []
        for b in listed.values():  # best first
            if b["device"] != self._kind:
                continue
            if not b["available"]:
                why.append(f"{b['name']}: {b['reason']}")
                continue
            try:  # a ValueError (a bad layer argument) is every backend's: raised as it is
                _C.select_backend(requested=b["name"], top_k=1, **self._desc)
                return b["name"]
            except RuntimeError as e:
                why.append(f"{b['name']}: {e}")
        raise RuntimeError(f"device: got {self._kind!r}, but no {self._kind} backend serves this layer" +
                           (" (" + "; ".join(why) + ")" if why else ""))

    @staticmethod
    def _backend_device(name: str) -> Optional[str]:
        return next((b["device"] for b in _C.backends() if b["name"] == name), None)

    def _prepare(self, top_k: int) -> Any:
        return _C.Layer(**self._weights, **self._desc, top_k=top_k, backend=self._backend,
                        device=self._device, max_num_tokens=self._max_num_tokens,
                        max_batched_tokens=self._max_batched_tokens)

    def _layer_for(self, topk_ids: Any) -> Any:
        if not self._top_k_fixed:
            shape = _shape(topk_ids, "topk_ids")
            if len(shape) == 2 and shape[1] >= 1:
                if shape[1] != self._layer.top_k:
                    self._layer = self._prepare(shape[1])
                self._top_k_fixed = True
                self._weights = None
        return self._layer

    @property
    def backend(self) -> str:
        """The backend the layer runs on (fp4moe.backends() lists them)."""
        return self._layer.backend

    @property
    def selection_reason(self) -> str:
        return self._layer.selection_reason

    @property
    def device(self) -> str:
        """"cpu" or "cuda:N"."""
        return self._layer.device

    @property
    def top_k(self) -> Optional[int]:
        """The top_k the layer is prepared for; None until the first standard call fixes it."""
        return self._layer.top_k if self._top_k_fixed else None

    @property
    def max_num_tokens(self) -> int:
        return self._max_num_tokens

    def __call__(self, hidden_states: Any, topk_weights: Any, topk_ids: Any, *, out: Any = None,
                 apply_router_weight_on_input: bool = False, accumulate: bool = False,
                 stream: Any = None) -> Any:
        """The layer on the standard format (SPEC §4).

        hidden_states [T, H] bfloat16 | float16 | float32; topk_weights float32 [T, k];
        topk_ids int32 [T, k] in [0, E) or -1 (no expert). Returns out [T, H] (the dtype of
        hidden_states unless out is given; with out given, it is filled and returned).
        accumulate=True adds to out (which must then be given).
        apply_router_weight_on_input scales x by the routing weight first (k = 1 only).
        Ids out of range in CUDA tensors are reported by check_device_errors().
        """
        layer = self._layer_for(topk_ids)
        if out is None:
            if accumulate:
                raise ValueError("out: got None with accumulate=True, need the tensor to add to")
            shape = _shape(hidden_states, "hidden_states")
            out = _empty(hidden_states, (shape[0] if shape else 0, self.hidden))
        layer.forward(_arg(hidden_states, name="hidden_states"), _arg(topk_weights, name="topk_weights"),
                      _arg(topk_ids, name="topk_ids"), _arg(out, name="out"),
                      bool(apply_router_weight_on_input), bool(accumulate), _stream(hidden_states, stream))
        return out

    forward = __call__

    def batched(self, hidden_states: Any, expert_num_tokens: Any, *, out: Any = None,
                hidden_scale: Any = None, stream: Any = None) -> Any:
        """The layer on the batched format (SPEC §4, expert-parallel dispatch).

        hidden_states [E_local, M, H] bfloat16 | float16 | float32, or (W4A4) NVFP4 data
        uint8 [E_local, M, H/2] with hidden_scale e4m3 [E_local, M, H/16];
        expert_num_tokens int32 [E_local], each <= M. Returns out [E_local, M, H],
        unweighted; rows at or past expert_num_tokens[e] are neither read nor written.
        out defaults to hidden_states' dtype (bfloat16, or float32 for NumPy, when the
        input is NVFP4 data).
        """
        if out is None:
            shape = _shape(hidden_states, "hidden_states")
            lead = shape[:2] if len(shape) >= 2 else (0, 0)
            dtype = None
            if _dtype_name(hidden_states) == "uint8":
                dtype = "bfloat16" if _framework(hidden_states) == "torch" else "float32"
            out = _empty(hidden_states, lead + (self.hidden,), dtype)
        self._layer.forward_batched(_arg(hidden_states, name="hidden_states"),
                                    _arg(hidden_scale, "e4m3", "hidden_scale"),
                                    _arg(expert_num_tokens, name="expert_num_tokens"),
                                    _arg(out, name="out"), _stream(hidden_states, stream))
        return out

    def check_device_errors(self, stream: Any = None) -> None:
        """Raise what CUDA kernels recorded (ids out of range, batched counts over M).

        Synchronises the stream; CPU layers check everything up front and never record.
        """
        s = 0 if stream is None else _stream(None, stream)
        if stream is None and self.device.startswith("cuda") and "torch" in sys.modules:
            torch = sys.modules["torch"]  # torch's current stream, if torch is in use
            s = int(torch.cuda.current_stream(self.device).cuda_stream)
        self._layer.check_device_errors(s)

    def workspace_size(self, num_tokens: int) -> int:
        """Bytes of workspace a standard call with num_tokens tokens needs."""
        return self._layer.workspace_size(int(num_tokens))

    def __repr__(self) -> str:
        return (f"MoELayer(quant={self.quant!r}, E={self.num_experts}, H={self.hidden}, "
                f"I={self.intermediate}, top_k={self.top_k}, backend={self.backend!r}, "
                f"device={self.device!r})")


# ---------------------------------------------------------------------------
# Real checkpoints
# ---------------------------------------------------------------------------
def _numpy_tensor(raw: bytes, dtype: str, shape: Sequence[int]) -> Any:
    """A (bytes, fp4moe dtype name, shape) triple from _C.load_layer as a NumPy array.

    FP8 scales stay uint8 bytes (what MoELayer takes); bf16 becomes float32, exactly.
    """
    import numpy as np
    if dtype == "bf16":
        bits = np.frombuffer(raw, dtype=np.uint16).astype(np.uint32) << 16
        return bits.view(np.float32).reshape(shape)
    np_dtype = {"f32": np.float32, "i32": np.int32}.get(dtype, np.uint8)
    return np.frombuffer(raw, dtype=np_dtype).reshape(shape).copy()


def load_layer(path: Any, layer: int, **kwargs: Any) -> "MoELayer":
    """One MoE layer of a real checkpoint, ready to run.

    path: a checkpoint directory: a ModelOpt NVFP4 export (DeepSeek-V3/R1, Kimi-K2,
    Qwen3-MoE, Mixtral naming; what ``fp4moe quantize`` writes) or a gpt-oss MXFP4 model.
    H, I, E, top_k, the format, the activation and the routing come from its config.json
    (and hf_quant_config.json). kwargs go to MoELayer (quant="w4a4" for NVFP4 activations,
    which needs the checkpoint's input_scale; backend, device, max_num_tokens, ...).

    The tensors are read into host memory (NumPy), so by MoELayer's rule (device=None:
    where the weights are) the layer runs on the CPU unless device= says otherwise:
    device="cuda" (or "cuda:N", an int, or backend="cuda") copies them to the GPU.

    The returned MoELayer also carries what routing the model's own way needs:
    ``.routing`` (dict: method, renormalize, n_group, topk_group, routed_scaling_factor,
    ready for fp4moe.route), ``.router_weight`` float32 [E, H] (logits = x @ W.T, plus
    ``.router_bias`` [E] when not None), ``.correction_bias`` float32 [E] or None
    (sigmoid_grouped selection bias), ``.model_type`` and ``.top_k``.
    """
    d = _C.load_layer(str(path), int(layer))
    t = {name: _numpy_tensor(*v) for name, v in d["tensors"].items()}
    mxfp4 = d["weight_format"] == "mxfp4"
    quant = kwargs.pop("quant", "mxfp4" if mxfp4 else "w4a16")
    if d["activation"] == "swiglu_oai" and d["swiglu_limit"] != 7.0:
        raise ValueError(f"{path}: swiglu_limit: got {d['swiglu_limit']}, need 7.0 (the only limit "
                         "MoELayer takes)")
    if quant == "w4a4" and "w13_input_scale" not in t:
        raise ValueError(f"quant: got 'w4a4', but layer {layer} of {path} has no input_scale "
                         f"(e.g. model.layers.{layer}.mlp.experts.0.gate_proj.input_scale); "
                         "need a calibrated checkpoint (fp4moe quantize --calibration FILE)")
    kwargs.setdefault("top_k", d["top_k"])
    moe = MoELayer(t["w13"], t["w13_scale"], t.get("w13_scale_2"), t["w2"], t["w2_scale"], t.get("w2_scale_2"),
                   quant=quant, w13_input_scale=t.get("w13_input_scale"),
                   w2_input_scale=t.get("w2_input_scale"), w13_bias=t.get("w13_bias"),
                   w2_bias=t.get("w2_bias"), gate_up=d["gate_up"], activation=d["activation"], **kwargs)
    moe.model_type = d["model_type"]
    moe.routing = dict(d["routing"])
    moe.router_weight = t["router_weight"]
    moe.router_bias = t.get("router_bias")
    moe.correction_bias = t.get("correction_bias")
    return moe
