"""fp4moe on CUDA through PyTorch (and CuPy when present): formats bit-exact against the
NumPy oracle, the layer against a PyTorch evaluation of SPEC §4, in-place output, streams,
CUDA-graph capture and replay, and bad arguments. Skipped without torch, a GPU or a
CUDA build of fp4moe."""
import numpy as np
import pytest

import fp4moe
import oracle

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(
    not (torch.cuda.is_available() and fp4moe.info()["with_cuda"]),
    reason="needs a CUDA device and fp4moe built with CUDA")

E, H, I, T, K = 8, 256, 128, 37, 4
DEV = "cuda"


def _t(a, dtype=None):
    t = torch.from_numpy(np.ascontiguousarray(a)).to(DEV)
    return t if dtype is None else t.to(dtype)


def _routing(g, t=T, k=K, e=E):
    ids = torch.stack([torch.randperm(e, generator=g)[:k] for _ in range(t)]).to(torch.int32)
    w = torch.rand(t, k, generator=g) * 0.9 + 0.1
    return w.to(DEV), ids.to(DEV)


def torch_moe(x, w, ids, deq, *, activation="silu", a13_dq=None, a2_dq=None, expert_map=None,
              apply_router_weight_on_input=False):
    """SPEC §4 in PyTorch, float64 accumulation over exactly dequantized weights (fp32 [T, H])."""
    w13 = torch.as_tensor(deq["w13"], device=DEV, dtype=torch.float64)
    w2 = torch.as_tensor(deq["w2"], device=DEV, dtype=torch.float64)
    b13 = torch.as_tensor(deq["w13_bias"], device=DEV, dtype=torch.float64) if "w13_bias" in deq else None
    b2 = torch.as_tensor(deq["w2_bias"], device=DEV, dtype=torch.float64) if "w2_bias" in deq else None
    n_i = w2.shape[2]
    xb = x.to(torch.bfloat16).float()
    out = torch.zeros(x.shape[0], w2.shape[1], dtype=torch.float64, device=DEV)
    local = ids.long()
    if expert_map is not None:
        emap = expert_map.long()
        local = torch.where(local >= 0, emap[local.clamp(min=0)], local)
    for j in range(ids.shape[1]):
        for e in torch.unique(local[:, j]).tolist():
            if e < 0:
                continue
            rows = (local[:, j] == e).nonzero().flatten()
            wt = w[rows, j].double()[:, None]
            a = xb[rows]
            if apply_router_weight_on_input:
                a = (a * wt.float())
            if a13_dq is not None:
                a = torch.from_numpy(oracle.nvfp4_round_trip(a.cpu().numpy(), a13_dq)).to(DEV)
            gu = a.double() @ w13[e].T
            if b13 is not None:
                gu = gu + b13[e]
            g, u = gu[:, :n_i], gu[:, n_i:]
            if activation == "silu":
                h = torch.nn.functional.silu(g) * u
            else:
                g = g.clamp(max=7.0)
                u = u.clamp(-7.0, 7.0)
                h = (u + 1) * g * torch.sigmoid(1.702 * g)
            h = h.float().to(torch.bfloat16).float()
            if a2_dq is not None:
                h = torch.from_numpy(oracle.nvfp4_round_trip(h.cpu().numpy(), a2_dq)).to(DEV)
            y = h.double() @ w2[e].T
            if b2 is not None:
                y = y + b2[e]
            out[rows] += y if apply_router_weight_on_input else wt * y
    return out.float()


def _close(out, ref, tol=1e-2):
    scale = ref.abs().max().item() + 1e-30
    torch.testing.assert_close(out.float(), ref, rtol=tol, atol=tol * scale)


def _nvfp4(quant="w4a16", fp8_dtype=True, **kw):
    rng = np.random.default_rng()
    ck, deq = oracle.make_nvfp4_weights(rng, E, H, I)
    t = {k: _t(v) for k, v in ck.items()}
    if fp8_dtype:  # the ModelOpt dtype; uint8 holding the same bytes works too
        t["w13_scale"] = t["w13_scale"].view(torch.float8_e4m3fn)
        t["w2_scale"] = t["w2_scale"].view(torch.float8_e4m3fn)
    extra = {}
    if quant == "w4a4":
        extra = dict(w13_input_scale=_t(rng.uniform(0.001, 0.003, E).astype(np.float32)),
                     w2_input_scale=_t(rng.uniform(0.0005, 0.001, E).astype(np.float32)))
    layer = fp4moe.MoELayer(t["w13"], t["w13_scale"], t["w13_scale_2"], t["w2"], t["w2_scale"],
                            t["w2_scale_2"], quant=quant, max_num_tokens=256, **extra, **kw)
    return layer, deq, extra


# ---------------------------------------------------------------------------
# Formats
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_quantize_nvfp4_cuda_bit_exact(dtype):
    x = torch.randn(5, 3, 256, device=DEV).to(dtype)
    x[0, 0, :16] = torch.tensor([0, .25, .75, 1.25, 1.75, 2.5, 3.5, 5, 6, -.25, -2.5, -5, .5, 3, 4, -6])
    gs = 448 * 6 / x.float().abs().max().item()
    data, scale = fp4moe.quantize_nvfp4(x, gs)
    assert data.is_cuda and data.dtype == torch.uint8 and scale.dtype == torch.float8_e4m3fn
    ref_d, ref_s = oracle.quantize_nvfp4(x.float().cpu().numpy(), np.float32(gs))
    np.testing.assert_array_equal(scale.view(torch.uint8).cpu().numpy(), ref_s)
    np.testing.assert_array_equal(data.cpu().numpy(), ref_d)
    back = fp4moe.dequantize_nvfp4(data, scale, 1 / gs)
    np.testing.assert_array_equal(back.cpu().numpy(), oracle.dequantize_nvfp4(ref_d, ref_s, np.float32(1 / gs)))


def test_mxfp4_and_swizzle_cuda_bit_exact():
    x = torch.randn(7, 320, device=DEV)
    data, scale = fp4moe.quantize_mxfp4(x)
    ref_d, ref_s = oracle.quantize_mxfp4(x.cpu().numpy())
    np.testing.assert_array_equal(scale.cpu().numpy(), ref_s)
    np.testing.assert_array_equal(data.cpu().numpy(), ref_d)
    np.testing.assert_array_equal(fp4moe.dequantize_mxfp4(data, scale).cpu().numpy(),
                                  oracle.dequantize_mxfp4(ref_d, ref_s))
    s = torch.randint(0, 256, (2, 130, 7), dtype=torch.uint8, device=DEV)
    sw = fp4moe.swizzle_scales(s)
    np.testing.assert_array_equal(sw.cpu().numpy(), oracle.swizzle(s.cpu().numpy()))
    assert torch.equal(fp4moe.unswizzle_scales(sw, 130, 7), s)


def test_route_cuda():
    logits = torch.randn(19, 64, device=DEV)
    w, ids = fp4moe.route(logits, 6)
    assert w.is_cuda and ids.dtype == torch.int32
    ref_w, ref_ids = oracle.softmax_route(logits.cpu().numpy(), 6)
    np.testing.assert_array_equal(np.sort(ids.cpu().numpy(), 1), np.sort(ref_ids, 1))


def test_cupy_arrays_work():
    cupy = pytest.importorskip("cupy")
    x = cupy.random.standard_normal((4, 64), dtype=cupy.float32)
    data, scale = fp4moe.quantize_nvfp4(x, 100.0)
    assert isinstance(data, cupy.ndarray)
    ref_d, ref_s = oracle.quantize_nvfp4(cupy.asnumpy(x), np.float32(100.0))
    np.testing.assert_array_equal(cupy.asnumpy(data), ref_d)
    np.testing.assert_array_equal(cupy.asnumpy(scale), ref_s)


def _bytes(t):
    t = t.detach().cpu()
    return (t.view(torch.uint8) if t.dtype == torch.float8_e4m3fn else t).numpy()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_formats_cuda_equal_cpu_on_special_values(dtype):
    """The GPU and the CPU functions on the same tensor, NaN of both signs, infinities,
    signed zeros, subnormals and huge blocks included; the GPU on a side stream."""
    x = torch.randn(6, 3, 96) * torch.logspace(-40, 30, 96, base=2.0)
    x[0, 0, :6] = torch.tensor([float("nan"), -float("nan"), float("inf"), -float("inf"), -0.0, 1e-42])
    x[1, 1, :32] = float("nan")
    x[2, 2, 32:64] = 0.0
    x[3, 0, 64:] = 1e30
    x = x.to(dtype)
    x_gpu = x.to(DEV)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):  # allocations and kernels on s, torch's current stream here
        nv_gpu = fp4moe.quantize_nvfp4(x_gpu, 448 * 6 / 7.0)
        mx_gpu = fp4moe.quantize_mxfp4(x_gpu)
        back_gpu = fp4moe.dequantize_nvfp4(*nv_gpu, 7.0 / (448 * 6))
        mback_gpu = fp4moe.dequantize_mxfp4(*mx_gpu)
        sw_gpu = fp4moe.swizzle_scales(nv_gpu[1])
    s.synchronize()
    nv_cpu = fp4moe.quantize_nvfp4(x, 448 * 6 / 7.0)
    mx_cpu = fp4moe.quantize_mxfp4(x)
    for g, c in zip(nv_gpu + mx_gpu, nv_cpu + mx_cpu):
        assert g.is_cuda and not c.is_cuda
        np.testing.assert_array_equal(_bytes(g), _bytes(c))
    # NaN equals NaN here: dequantized NaN payloads are the hardware's
    np.testing.assert_array_equal(back_gpu.cpu().numpy(), fp4moe.dequantize_nvfp4(*nv_cpu, 7.0 / (448 * 6)).numpy())
    np.testing.assert_array_equal(mback_gpu.cpu().numpy(), fp4moe.dequantize_mxfp4(*mx_cpu).numpy())
    np.testing.assert_array_equal(_bytes(sw_gpu), _bytes(fp4moe.swizzle_scales(nv_cpu[1])))


def test_dequantize_cuda_equal_cpu_on_every_code():
    g = torch.Generator().manual_seed(int(np.random.default_rng().integers(1 << 30)))
    data = torch.randint(0, 256, (5, 7, 64), dtype=torch.uint8, generator=g)
    scale16 = torch.randint(0, 256, (5, 7, 8), dtype=torch.uint8, generator=g)  # NaN codes 0x7F/0xFF too
    scale32 = torch.randint(0, 256, (5, 7, 4), dtype=torch.uint8, generator=g)  # 0xFF is NaN
    for dq in (1.0, 1e-30, 3e30):
        np.testing.assert_array_equal(fp4moe.dequantize_nvfp4(data.to(DEV), scale16.to(DEV), dq).cpu().numpy(),
                                      fp4moe.dequantize_nvfp4(data, scale16, dq).numpy())
    np.testing.assert_array_equal(fp4moe.dequantize_mxfp4(data.to(DEV), scale32.to(DEV)).cpu().numpy(),
                                  fp4moe.dequantize_mxfp4(data, scale32).numpy())


def test_formats_explicit_stream_and_bad_devices():
    x = torch.randn(4, 64, device=DEV)
    s = torch.cuda.Stream()
    torch.cuda.synchronize()
    data, scale = fp4moe.quantize_nvfp4(x, 100.0, stream=s)  # an object with .cuda_stream
    d2, s2 = fp4moe.quantize_mxfp4(x, stream=s.cuda_stream)  # an int cudaStream_t
    torch.cuda.synchronize()
    ref_d, ref_s = oracle.quantize_nvfp4(x.cpu().numpy(), np.float32(100.0))
    np.testing.assert_array_equal(data.cpu().numpy(), ref_d)
    np.testing.assert_array_equal(_bytes(scale), ref_s)
    np.testing.assert_array_equal(d2.cpu().numpy(), oracle.quantize_mxfp4(x.cpu().numpy())[0])
    with pytest.raises(ValueError, match="scale"):  # data on the GPU, scale on the host
        fp4moe.dequantize_nvfp4(data, scale.cpu(), 0.01)
    with pytest.raises(ValueError, match="data"):
        fp4moe.dequantize_nvfp4(data[:, :31], scale, 0.01)
    with pytest.raises(ValueError, match="stream"):
        fp4moe.quantize_nvfp4(x, 1.0, stream="fast")


# ---------------------------------------------------------------------------
# The layer
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_w4a16_cuda(dtype):
    g = torch.Generator().manual_seed(int(np.random.default_rng().integers(1 << 30)))
    layer, deq, _ = _nvfp4()
    assert layer.device.startswith("cuda")
    x = torch.randn(T, H, device=DEV).to(dtype)
    w, ids = _routing(g)
    ids[0, 1] = -1
    out = layer(x, w, ids)
    assert out.dtype == dtype and out.is_cuda and out.shape == (T, H)
    _close(out, torch_moe(x, w, ids, deq))


def test_w4a4_cuda():
    g = torch.Generator().manual_seed(int(np.random.default_rng().integers(1 << 30)))
    layer, deq, extra = _nvfp4("w4a4", fp8_dtype=False, top_k=K)
    x = torch.randn(T, H, device=DEV, dtype=torch.bfloat16)
    w, ids = _routing(g)
    ref = torch_moe(x, w, ids, deq, a13_dq=extra["w13_input_scale"].max().item(),
                    a2_dq=extra["w2_input_scale"].max().item())
    _close(layer(x, w, ids), ref, tol=3e-2)


@pytest.mark.parametrize("gate_up", ["concat", "interleaved"])
def test_mxfp4_swiglu_cuda(gate_up):
    g = torch.Generator().manual_seed(int(np.random.default_rng().integers(1 << 30)))
    ck, deq = oracle.make_mxfp4_weights(np.random.default_rng(), E, H, I,
                                        interleaved=gate_up == "interleaved", bias=True)
    t = {k: _t(v) for k, v in ck.items()}
    layer = fp4moe.MoELayer(t["w13"], t["w13_scale"], None, t["w2"], t["w2_scale"], None, quant="mxfp4",
                            gate_up=gate_up, activation="swiglu_oai", w13_bias=t["w13_bias"].bfloat16(),
                            w2_bias=t["w2_bias"].bfloat16(), max_num_tokens=T)
    deq["w13_bias"] = t["w13_bias"].bfloat16().float().cpu().numpy()
    if gate_up == "interleaved":  # the oracle reads biases in concat order
        b = deq["w13_bias"]
        deq["w13_bias"] = np.concatenate([b[:, 0::2], b[:, 1::2]], axis=1)
    deq["w2_bias"] = t["w2_bias"].bfloat16().float().cpu().numpy()
    x = torch.randn(T, H, device=DEV, dtype=torch.bfloat16) * 0.1
    w, ids = _routing(g)
    _close(layer(x, w, ids), torch_moe(x, w, ids, deq, activation="swiglu_oai"))


def test_layer_device_follows_the_weights():
    """device=None: where the weights are (NumPy -> CPU even with a GPU present, CUDA
    tensors -> their GPU); device="cuda" or backend="cuda" moves host weights; "cpu"
    brings CUDA weights to the host."""
    rng = np.random.default_rng()
    ck, deq = oracle.make_nvfp4_weights(rng, E, H, I)
    names = ("w13", "w13_scale", "w13_scale_2", "w2", "w2_scale", "w2_scale_2")
    host_args = [ck[n] for n in names]
    cuda_args = [_t(ck[n]) for n in names]
    kw = dict(top_k=K, max_num_tokens=T)
    host = fp4moe.MoELayer(*host_args, **kw)
    assert host.device == "cpu" and host.backend != "cuda"
    x = rng.standard_normal((T, H)).astype(np.float32)
    ids = np.stack([rng.permutation(E)[:K] for _ in range(T)]).astype(np.int32)
    w = rng.uniform(0.1, 1, (T, K)).astype(np.float32)
    ref = torch.from_numpy(host(x, w, ids)).to(DEV)
    for layer in (fp4moe.MoELayer(*host_args, device="cuda", **kw),
                  fp4moe.MoELayer(*host_args, backend="cuda", **kw),
                  fp4moe.MoELayer(*cuda_args, **kw)):
        assert layer.device == f"cuda:{torch.cuda.current_device()}" and layer.backend == "cuda"
        _close(layer(_t(x), _t(w), _t(ids)), ref)
    back = fp4moe.MoELayer(*cuda_args, device="cpu", **kw)
    assert back.device == "cpu"
    _close(torch.from_numpy(back(x, w, ids)).to(DEV), ref)
    with pytest.raises(ValueError, match="device"):
        fp4moe.MoELayer(*host_args, device="cpu", backend="cuda", **kw)


def test_in_place_out_accumulate_and_stream():
    g = torch.Generator().manual_seed(int(np.random.default_rng().integers(1 << 30)))
    layer, deq, _ = _nvfp4(top_k=K)
    x = torch.randn(T, H, device=DEV, dtype=torch.bfloat16)
    w, ids = _routing(g)
    ref = torch_moe(x, w, ids, deq)
    big = torch.full((T + 2, H), float("nan"), device=DEV)
    out = big[1:T + 1]  # rows of a larger buffer: contiguous, neighbours must stay untouched
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):  # runs on torch's current stream
        assert layer(x, w, ids, out=out) is out
    torch.cuda.current_stream().wait_stream(s)
    _close(out, ref)
    assert torch.isnan(big[0]).all() and torch.isnan(big[-1]).all()
    base = torch.randn(T, H, device=DEV)
    acc = base.clone()
    layer(x, w, ids, out=acc, accumulate=True)
    _close(acc - base, ref)


def test_cuda_graph_capture_and_replay():
    g = torch.Generator().manual_seed(int(np.random.default_rng().integers(1 << 30)))
    layer, deq, _ = _nvfp4(top_k=K)
    x = torch.randn(T, H, device=DEV, dtype=torch.bfloat16)
    w, ids = _routing(g)
    out = torch.empty(T, H, device=DEV, dtype=torch.bfloat16)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        layer(x, w, ids, out=out)  # warm-up outside the capture
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        layer(x, w, ids, out=out)
    for _ in range(2):
        x.copy_(torch.randn(T, H, device=DEV))
        w2, ids2 = _routing(g)
        w.copy_(w2)
        ids.copy_(ids2)
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        _close(out, torch_moe(x, w, ids, deq))


def test_batched_cuda():
    layer, deq, _ = _nvfp4()
    M = 9
    x = torch.randn(E, M, H, device=DEV, dtype=torch.bfloat16)
    counts = torch.randint(0, M + 1, (E,), dtype=torch.int32)
    counts[0], counts[1] = 0, M
    out = torch.full((E, M, H), float("nan"), device=DEV, dtype=torch.bfloat16)
    assert layer.batched(x, counts.to(DEV), out=out) is out
    for e in range(E):
        n = int(counts[e])
        assert torch.isnan(out[e, n:]).all()
        if n:
            ref = torch_moe(x[e, :n], torch.ones(n, 1, device=DEV), torch.full((n, 1), e, device=DEV), deq)
            _close(out[e, :n], ref)


def test_bad_arguments_cuda():
    g = torch.Generator().manual_seed(0)
    layer, _, _ = _nvfp4(top_k=K)
    x = torch.randn(T, H, device=DEV, dtype=torch.bfloat16)
    w, ids = _routing(g)
    with pytest.raises(ValueError, match="hidden_states"):
        layer(x.cpu(), w, ids)  # wrong device
    with pytest.raises(ValueError, match="out"):
        layer(x, w, ids, out=torch.empty(T, H, dtype=torch.bfloat16))  # host out for a GPU layer
    with pytest.raises(ValueError, match="topk_ids"):
        layer(x, w, ids.long())
    with pytest.raises(ValueError, match="w13_scale"):
        fp4moe.MoELayer(torch.zeros(E, 2 * I, H // 2, dtype=torch.uint8, device=DEV),
                        torch.zeros(E, 2 * I, H // 16, device=DEV, dtype=torch.float8_e5m2), 1.0,
                        torch.zeros(E, H, I // 2, dtype=torch.uint8, device=DEV),
                        torch.zeros(E, H, I // 16, dtype=torch.uint8, device=DEV), 1.0)
    bad = ids.clone()
    bad[3, 0] = E  # out of range: refused at the call or recorded for check_device_errors
    with pytest.raises(ValueError, match="topk_ids"):
        layer(x, w, bad)
        layer.check_device_errors()
    torch.cuda.synchronize()
    layer(x, w, ids)  # the layer still works
    torch.cuda.synchronize()
