"""fp4moe.MoELayer on the CPU (NumPy tensors) against the NumPy layer of SPEC §4."""
import numpy as np
import pytest

import fp4moe
import oracle

E, H, I, T, K = 6, 64, 32, 11, 2


def _routing(rng, t=T, k=K, e=E):
    ids = np.stack([rng.permutation(e)[:k] for _ in range(t)]).astype(np.int32)
    w = rng.uniform(0.1, 1, (t, k)).astype(np.float32)
    return w, ids


def _check(out, ref, dtype=np.float32):
    """Equal up to the order of fp32 sums (and a bf16 flip of h upstream): a layout or
    semantics bug is off by O(|ref|), far outside this."""
    scale = float(np.abs(ref).max()) + 1e-30
    tol = 2e-3 if dtype == np.float32 else 8e-3
    np.testing.assert_allclose(out.astype(np.float32), ref, rtol=tol, atol=tol * scale)


def _nvfp4_layer(rng, quant="w4a16", **kw):
    ck, deq = oracle.make_nvfp4_weights(rng, E, H, I)
    extra = {}
    if quant == "w4a4":
        extra = dict(w13_input_scale=rng.uniform(0.001, 0.003, E).astype(np.float32),
                     w2_input_scale=rng.uniform(0.0005, 0.001, E).astype(np.float32))
    layer = fp4moe.MoELayer(ck["w13"], ck["w13_scale"], ck["w13_scale_2"], ck["w2"], ck["w2_scale"],
                            ck["w2_scale_2"], quant=quant, max_num_tokens=64, **extra, **kw)
    return layer, ck, deq, extra


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_w4a16_standard(dtype):
    rng = np.random.default_rng()
    layer, _, deq, _ = _nvfp4_layer(rng)
    x = rng.standard_normal((T, H)).astype(dtype)
    w, ids = _routing(rng)
    ids[3, 1] = -1  # no expert: contributes nothing
    out = layer(x, w, ids)
    assert out.dtype == dtype and out.shape == (T, H)
    assert layer.top_k == K and isinstance(layer.backend, str) and layer.device == "cpu"
    _check(out, oracle.moe(x.astype(np.float32), w, ids, deq), dtype)


def test_w4a4_standard():
    rng = np.random.default_rng()
    layer, _, deq, extra = _nvfp4_layer(rng, "w4a4", top_k=K)
    x = rng.standard_normal((T, H)).astype(np.float32)
    w, ids = _routing(rng)
    out = layer(x, w, ids)
    ref = oracle.moe(x, w, ids, deq, a13_dq=extra["w13_input_scale"].max(),
                     a2_dq=extra["w2_input_scale"].max())
    # NVFP4 activations: one flipped code of h moves a y by a few % of a term
    scale = float(np.abs(ref).max())
    np.testing.assert_allclose(out, ref, rtol=2e-2, atol=2e-2 * scale)
    assert np.mean(np.abs(out - ref) <= 2e-3 * scale + 2e-3 * np.abs(ref)) > 0.9


@pytest.mark.parametrize("gate_up", ["concat", "interleaved"])
def test_mxfp4_swiglu_bias(gate_up):
    rng = np.random.default_rng()
    ck, deq = oracle.make_mxfp4_weights(rng, E, H, I, interleaved=gate_up == "interleaved", bias=True)
    layer = fp4moe.MoELayer(ck["w13"], ck["w13_scale"], None, ck["w2"], ck["w2_scale"], None,
                            quant="mxfp4", gate_up=gate_up, activation="swiglu_oai",
                            w13_bias=ck["w13_bias"], w2_bias=ck["w2_bias"], max_num_tokens=T)
    x = (rng.standard_normal((T, H)) * 0.1).astype(np.float32)
    w, ids = _routing(rng)
    _check(layer(x, w, ids), oracle.moe(x, w, ids, deq, activation="swiglu_oai"))


def test_out_in_place_and_accumulate():
    rng = np.random.default_rng()
    layer, _, deq, _ = _nvfp4_layer(rng)
    x = rng.standard_normal((T, H)).astype(np.float32)
    w, ids = _routing(rng)
    ref = oracle.moe(x, w, ids, deq)
    out = np.full((T, H), np.nan, np.float32)  # poison: every element must be written
    got = layer(x, w, ids, out=out)
    assert got is out
    _check(out, ref)
    base = rng.standard_normal((T, H)).astype(np.float32)
    acc = base.copy()
    assert layer(x, w, ids, out=acc, accumulate=True) is acc
    _check(acc - base, ref)


def test_out_is_exactly_the_callers_buffer():
    rng = np.random.default_rng()
    layer, _, _, _ = _nvfp4_layer(rng)
    x = rng.standard_normal((T, H)).astype(np.float32)
    w, ids = _routing(rng)
    big = np.full((T + 2, H + 8), 7.0, np.float32)
    view = big[1:T + 1, :H]  # a strided view: either refused, or written without spilling
    try:
        layer(x, w, ids, out=view)
    except ValueError as e:
        assert "out" in str(e)
    assert (big[0] == 7).all() and (big[-1] == 7).all() and (big[:, H:] == 7).all()


def test_global_scales_as_floats_and_expert_map():
    rng = np.random.default_rng()
    ck, deq = oracle.make_nvfp4_weights(rng, E, H, I)
    # one global scale for every expert, given as a Python float
    dq13, dq2 = float(ck["w13_scale_2"].max()), float(ck["w2_scale_2"].max())
    deq["w13"] = deq["w13"] / ck["w13_scale_2"][:, None, None] * np.float32(dq13)
    deq["w2"] = deq["w2"] / ck["w2_scale_2"][:, None, None] * np.float32(dq2)
    e_global = 2 * E
    emap = np.full(e_global, -1, np.int32)
    local = rng.permutation(e_global)[:E]
    emap[local] = np.arange(E, dtype=np.int32)
    layer = fp4moe.MoELayer(ck["w13"], ck["w13_scale"], dq13, ck["w2"], ck["w2_scale"], dq2,
                            expert_map=emap, max_num_tokens=T)
    assert layer.num_experts == e_global
    x = rng.standard_normal((T, H)).astype(np.float32)
    w, ids = _routing(rng, e=e_global)
    _check(layer(x, w, ids), oracle.moe(x, w, ids, deq, expert_map=emap))


def test_apply_router_weight_on_input():
    rng = np.random.default_rng()
    layer, _, deq, _ = _nvfp4_layer(rng, top_k=1)
    x = rng.standard_normal((T, H)).astype(np.float32)
    w, ids = _routing(rng, k=1)
    out = layer(x, w, ids, apply_router_weight_on_input=True)
    _check(out, oracle.moe(x, w, ids, deq, apply_router_weight_on_input=True), np.float16)


def test_top_k_fixed_by_first_call():
    rng = np.random.default_rng()
    layer, _, deq, _ = _nvfp4_layer(rng)
    assert layer.top_k is None
    x = rng.standard_normal((3, H)).astype(np.float32)
    w, ids = _routing(rng, t=3, k=3)
    _check(layer(x, w, ids), oracle.moe(x, w, ids, deq))
    assert layer.top_k == 3
    w2, ids2 = _routing(rng, t=3, k=2)
    with pytest.raises(ValueError, match="topk"):
        layer(x, w2, ids2)


def test_zero_tokens():
    rng = np.random.default_rng()
    layer, _, _, _ = _nvfp4_layer(rng, top_k=K)
    out = layer(np.zeros((0, H), np.float32), np.zeros((0, K), np.float32), np.zeros((0, K), np.int32))
    assert out.shape == (0, H)


def test_batched():
    rng = np.random.default_rng()
    layer, _, deq, _ = _nvfp4_layer(rng)
    M = 5
    x = rng.standard_normal((E, M, H)).astype(np.float32)
    counts = rng.integers(0, M + 1, E).astype(np.int32)
    counts[0], counts[1] = 0, M
    out = np.full((E, M, H), np.nan, np.float32)
    assert layer.batched(x, counts, out=out) is out
    for e in range(E):
        n = counts[e]
        assert np.isnan(out[e, n:]).all()  # rows past the count are not written
        if n:
            ref = oracle.moe(x[e, :n], np.ones((n, 1), np.float32), np.full((n, 1), e, np.int32), deq)
            _check(out[e, :n], ref)
    fresh = layer.batched(x, counts)
    assert fresh.shape == (E, M, H) and fresh.dtype == np.float32


def test_info_and_backends():
    info = fp4moe.info()
    assert info["version"] == fp4moe.__version__
    names = [b["name"] for b in fp4moe.backends()]
    assert names and all(isinstance(n, str) for n in names)
    assert any(b["available"] and b["device"] == "cpu" for b in info["backends"])
    assert info["cpu_simd"] in ("amx", "avx512", "avx2", "scalar")


def test_device_follows_the_weights():
    """device=None: where the weights are. NumPy weights make a CPU layer on the best CPU
    backend even where a GPU is (test_gpu.py checks the GPU side); device="cuda" asks for
    a GPU and fails without one; a named backend must run on the given device."""
    rng = np.random.default_rng()
    layer, _, _, _ = _nvfp4_layer(rng, top_k=K)
    cpu_backends = [b["name"] for b in fp4moe.backends() if b["device"] == "cpu" and b["available"]]
    assert layer.device == "cpu" and layer.backend == cpu_backends[0]
    if not any(b["device"] == "cuda" and b["available"] for b in fp4moe.backends()):
        with pytest.raises(RuntimeError, match="device"):
            _nvfp4_layer(rng, device="cuda", top_k=K)
    with pytest.raises(ValueError, match="device"):
        _nvfp4_layer(rng, device="cpu", backend="cuda", top_k=K)  # listed even when not built
    with pytest.raises(ValueError, match="device"):
        _nvfp4_layer(rng, device="cuda", backend=cpu_backends[0], top_k=K)


def test_fp4moe_backend_picks_among_the_devices_backends(monkeypatch):
    rng = np.random.default_rng()
    monkeypatch.setenv("FP4MOE_BACKEND", "reference")
    layer, _, deq, _ = _nvfp4_layer(rng, top_k=K)
    assert layer.backend == "reference" and layer.device == "cpu"
    x = rng.standard_normal((T, H)).astype(np.float32)
    w, ids = _routing(rng)
    _check(layer(x, w, ids), oracle.moe(x, w, ids, deq))


def test_device_cpu_and_named_backend():
    rng = np.random.default_rng()
    cpu = next(b["name"] for b in fp4moe.backends() if b["device"] == "cpu" and b["available"])
    layer, _, deq, _ = _nvfp4_layer(rng, backend=cpu, device="cpu", top_k=K)
    assert layer.backend == cpu and layer.device == "cpu"
    x = rng.standard_normal((T, H)).astype(np.float32)
    w, ids = _routing(rng)
    _check(layer(x, w, ids), oracle.moe(x, w, ids, deq))
