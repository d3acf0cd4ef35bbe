"""Every bad argument raises a Python exception naming it; none crashes, none writes."""
import numpy as np
import pytest

import fp4moe
import oracle

E, H, I, T, K = 4, 32, 32, 5, 2


@pytest.fixture(scope="module")
def ck():
    rng = np.random.default_rng()
    ck, _ = oracle.make_nvfp4_weights(rng, E, H, I)
    return ck


def _make(ck, **kw):
    args = dict(ck)
    args.update(kw)
    pos = [args.pop(n) for n in ("w13", "w13_scale", "w13_scale_2", "w2", "w2_scale", "w2_scale_2")]
    args.setdefault("max_num_tokens", 16)
    return fp4moe.MoELayer(*pos, **args)


@pytest.fixture(scope="module")
def layer(ck):
    return _make(ck, top_k=K)


def _inputs(t=T, k=K):
    rng = np.random.default_rng()
    x = rng.standard_normal((t, H)).astype(np.float32)
    w = np.full((t, k), 0.5, np.float32)
    ids = np.stack([rng.permutation(E)[:k] for _ in range(t)]).astype(np.int32)
    return x, w, ids


@pytest.mark.parametrize("name, value, match", [
    ("w13", lambda c: c["w13"].astype(np.float32), "w13"),
    ("w13", lambda c: c["w13"][0], "w13"),
    ("w13", lambda c: c["w13"].tolist(), "w13"),
    ("w13_scale", lambda c: c["w13_scale"][:, :, :1], "w13_scale"),
    ("w13_scale", lambda c: c["w13_scale"].astype(np.int32), "w13_scale"),
    ("w13_scale_2", lambda c: c["w13_scale_2"][:2], "w13_scale_2"),
    ("w13_scale_2", lambda c: np.full(E, np.nan, np.float32), "w13_scale_2"),
    ("w2", lambda c: c["w2"][:, :, :4], "w2"),
    ("w2_scale", lambda c: c["w2_scale"][:1], "w2_scale"),
    ("w2_scale_2", lambda c: c["w2_scale_2"].astype(np.float64), "w2_scale_2"),
])
def test_bad_weights(ck, name, value, match):
    with pytest.raises(ValueError, match=match):
        _make(ck, **{name: value(ck)})


@pytest.mark.parametrize("kw, match", [
    (dict(quant="w4a8"), "quant"),
    (dict(activation="gelu"), "activation"),
    (dict(gate_up="split"), "gate_up"),
    (dict(device="tpu"), "device"),
    (dict(max_num_tokens=-1), "max_num_tokens"),
    (dict(quant="w4a4"), "input_scale"),  # W4A4 needs the activation scales
    (dict(expert_map=np.array([0, 1, 2, 9], np.int32)), "expert_map"),
])
def test_bad_layer_options(ck, kw, match):
    with pytest.raises(ValueError, match=match):
        _make(ck, **kw)


def test_mxfp4_rejects_global_scales():
    rng = np.random.default_rng()
    m, _ = oracle.make_mxfp4_weights(rng, E, H, I)
    with pytest.raises(ValueError, match="w13_scale_2"):
        fp4moe.MoELayer(m["w13"], m["w13_scale"], 1.0, m["w2"], m["w2_scale"], None, quant="mxfp4")
    with pytest.raises(ValueError, match="w13_scale"):  # e4m3 scales for an MXFP4 layer: wrong shape
        fp4moe.MoELayer(m["w13"], np.zeros((E, 2 * I, H // 16), np.uint8), None, m["w2"], m["w2_scale"],
                        None, quant="mxfp4")


def test_unknown_or_unavailable_backend(ck):
    with pytest.raises((ValueError, RuntimeError), match="backend"):
        _make(ck, backend="no-such-backend")
    for b in fp4moe.backends():
        if not b["available"]:
            with pytest.raises(RuntimeError):
                _make(ck, backend=b["name"])


def _misaligned(a):
    """a's values in an array whose data pointer is 2 bytes past an aligned one (np.frombuffer-like
    views of packed bytes): not aligned for 4-byte elements."""
    raw = np.zeros(a.nbytes + 8, np.uint8)[2:2 + a.nbytes]
    m = raw.view(a.dtype).reshape(a.shape)
    m[...] = a
    assert not m.flags.aligned
    return m


def _call_cases():
    x, w, ids = _inputs()
    ro = np.zeros((T, H), np.float32)
    ro.flags.writeable = False
    big = np.zeros((17, H), np.float32)
    return [
        ("hidden_states", dict(hidden_states=x.astype(np.float64))),
        ("hidden_states", dict(hidden_states=x.astype(np.int32))),
        ("hidden_states", dict(hidden_states=x[:, :16])),
        ("hidden_states", dict(hidden_states=x[None])),
        ("hidden_states", dict(hidden_states="x")),
        ("hidden_states", dict(hidden_states=big, topk_weights=np.zeros((17, K), np.float32),
                               topk_ids=np.zeros((17, K), np.int32))),  # > max_num_tokens
        ("topk_weights", dict(topk_weights=w.astype(np.float16))),
        ("topk_weights", dict(topk_weights=w[:3])),
        ("topk_weights.*aligned to 4 bytes", dict(topk_weights=_misaligned(w))),
        ("topk_ids.*aligned to 4 bytes", dict(topk_ids=_misaligned(ids))),
        ("topk_ids", dict(topk_ids=ids.astype(np.int64))),
        ("topk_ids", dict(topk_ids=np.full((T, K), E, np.int32))),
        ("topk_ids", dict(topk_ids=np.full((T, K), -2, np.int32))),
        ("topk", dict(topk_ids=np.zeros((T, 3), np.int32), topk_weights=np.zeros((T, 3), np.float32))),
        ("topk_ids", dict(topk_ids=np.zeros((T, 3), np.int32))),
        ("out", dict(out=np.zeros((T, H + 1), np.float32))),
        ("out", dict(out=np.zeros((T, H), np.int32))),
        ("out", dict(out=ro)),
        ("out", dict(out=None, accumulate=True)),
        ("apply_router_weight_on_input", dict(apply_router_weight_on_input=True)),
        ("stream", dict(stream="fast")),
    ]


@pytest.mark.parametrize("match, change", _call_cases())
def test_bad_call(layer, match, change):
    x, w, ids = _inputs()
    args = dict(hidden_states=x, topk_weights=w, topk_ids=ids, out=np.zeros((T, H), np.float32))
    args.update(change)
    sentinel = args["out"].copy() if isinstance(args["out"], np.ndarray) else None
    with pytest.raises(ValueError, match=match):
        layer(args.pop("hidden_states"), args.pop("topk_weights"), args.pop("topk_ids"), **args)
    if sentinel is not None:  # nothing written on failure
        np.testing.assert_array_equal(args["out"], sentinel)
    layer(*_inputs())  # the layer still works


def test_bad_batched(layer):
    M = 3
    x = np.zeros((E, M, H), np.float32)
    with pytest.raises(ValueError, match="expert_num_tokens"):
        layer.batched(x, np.full(E, M + 1, np.int32))
    with pytest.raises(ValueError, match="expert_num_tokens"):
        layer.batched(x, np.full(E, -1, np.int32))
    with pytest.raises(ValueError, match="expert_num_tokens"):
        layer.batched(x, np.zeros(E, np.int64))
    with pytest.raises(ValueError, match="expert_num_tokens"):
        layer.batched(x, np.zeros(E + 1, np.int32))
    with pytest.raises(ValueError, match="hidden_states"):
        layer.batched(np.zeros((E + 1, M, H), np.float32), np.zeros(E + 1, np.int32))
    with pytest.raises(ValueError, match="out"):
        layer.batched(x, np.zeros(E, np.int32), out=np.zeros((E, M, H - 1), np.float32))


@pytest.mark.parametrize("fn, args, match", [
    (fp4moe.quantize_nvfp4, (np.zeros((2, 24), np.float32), 1.0), "x"),
    (fp4moe.quantize_nvfp4, (np.zeros((2, 32), np.float64), 1.0), "x"),
    (fp4moe.quantize_nvfp4, (np.float32(1.0), 1.0), "x"),
    (fp4moe.quantize_nvfp4, (np.zeros((2, 32), np.float32), float("nan")), "q_scale"),
    (fp4moe.quantize_mxfp4, (np.zeros((2, 48), np.float32),), "x"),
    (fp4moe.dequantize_nvfp4, (np.zeros((2, 16), np.uint8), np.zeros((2, 1), np.uint8), 1.0), "scale"),
    (fp4moe.dequantize_nvfp4, (np.zeros((2, 16), np.int32), np.zeros((2, 2), np.uint8), 1.0), "data"),
    (fp4moe.dequantize_mxfp4, (np.zeros((2, 16), np.uint8), np.zeros((2, 2), np.uint8)), "scale"),
    (fp4moe.swizzle_scales, (np.zeros(8, np.uint8),), "scale"),
    (fp4moe.unswizzle_scales, (np.zeros((3, 512), np.uint8), 129, 4), "swizzled"),
])
def test_bad_format_calls(fn, args, match):
    with pytest.raises(ValueError, match=match):
        fn(*args)


def test_float8_of_the_wrong_kind():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    with pytest.raises(ValueError, match="scale"):
        fp4moe.dequantize_nvfp4(np.zeros((2, 8), np.uint8),
                                np.zeros((2, 1), np.uint8).view(ml_dtypes.float8_e5m2), 1.0)
