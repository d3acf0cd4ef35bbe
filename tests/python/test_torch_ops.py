"""fp4moe.torch_ops: the layer as PyTorch custom operators, eager and under torch.compile.

The oracle is the layer itself called directly (its own tests check it against SPEC §4):
an operator must give the same bits, through the compiler too, and its fake implementation
must describe what the real one returns (torch.library.opcheck).
"""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
if not hasattr(torch.library, "custom_op"):
    pytest.skip("torch.library.custom_op needs PyTorch >= 2.4", allow_module_level=True)

import fp4moe  # noqa: E402
import fp4moe.torch_ops as ops  # noqa: E402
import oracle  # noqa: E402

E, H, I, T, K = 6, 64, 32, 11, 2

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() and fp4moe.info()["with_cuda"] else [])


def _layer(rng, device):
    ck, _ = oracle.make_nvfp4_weights(rng, E, H, I)
    ck = {n: torch.from_numpy(np.ascontiguousarray(v)).to(device) for n, v in ck.items()}
    return fp4moe.MoELayer(ck["w13"], ck["w13_scale"], ck["w13_scale_2"], ck["w2"], ck["w2_scale"],
                           ck["w2_scale_2"], quant="w4a16", max_num_tokens=64, top_k=K)


def _inputs(rng, device, t=T):
    x = torch.from_numpy(rng.standard_normal((t, H)).astype(np.float32)).to(device=device, dtype=torch.bfloat16)
    ids = np.stack([rng.permutation(E)[:K] for _ in range(t)]).astype(np.int32)
    w = rng.uniform(0.1, 1, (t, K)).astype(np.float32)
    return x, torch.from_numpy(w).to(device), torch.from_numpy(ids).to(device)


@pytest.fixture
def handle_and_layer(request):
    rng = np.random.default_rng()
    layer = _layer(rng, request.param)
    handle = ops.register(layer)
    yield handle, layer, rng, request.param
    ops.unregister(handle)


@pytest.mark.parametrize("handle_and_layer", DEVICES, indirect=True)
def test_eager_op_equals_the_layer(handle_and_layer):
    handle, layer, rng, device = handle_and_layer
    x, w, ids = _inputs(rng, device)
    want = layer(x, w, ids)
    got = torch.ops.fp4moe.moe(x, w, ids, handle)
    assert got.dtype == x.dtype and got.shape == (T, H) and got.device == x.device
    assert torch.equal(got, want)
    assert torch.equal(ops.moe(handle, x, w, ids), want)


@pytest.mark.parametrize("handle_and_layer", DEVICES, indirect=True)
@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_compiled_without_graph_breaks_equals_the_layer(handle_and_layer, backend):
    handle, layer, rng, device = handle_and_layer
    torch._dynamo.reset()

    def block(x, w, ids):
        return torch.ops.fp4moe.moe(x, w, ids, handle) * 2.0 + 1.0

    compiled = torch.compile(block, backend=backend, fullgraph=True)
    for t in (T, 5):  # a second shape: the fake implementation is asked again
        x, w, ids = _inputs(rng, device, t)
        want = layer(x, w, ids) * 2.0 + 1.0
        assert torch.equal(compiled(x, w, ids), want)


@pytest.mark.parametrize("handle_and_layer", DEVICES, indirect=True)
def test_out_and_accumulate_write_only_out(handle_and_layer):
    handle, layer, rng, device = handle_and_layer
    x, w, ids = _inputs(rng, device)
    base = torch.from_numpy(rng.standard_normal((T, H)).astype(np.float32)).to(device)
    y = layer(x, w, ids, out=torch.empty((T, H), dtype=torch.float32, device=device))
    out = base.clone()
    ret = ops.moe(handle, x, w, ids, out=out)
    assert ret is out and torch.equal(out, y)
    out = base.clone()
    torch.ops.fp4moe.moe_out(x, w, ids, out, handle, False, True)
    assert torch.allclose(out, base + y, rtol=1e-6, atol=1e-6)
    with pytest.raises(ValueError, match="accumulate"):
        ops.moe(handle, x, w, ids, accumulate=True)

    # compiled: the mutation of out is seen by the graph
    torch._dynamo.reset()

    def block(x, w, ids, out):
        torch.ops.fp4moe.moe_out(x, w, ids, out, handle, False, False)
        return out + 1.0

    compiled = torch.compile(block, backend="aot_eager", fullgraph=True)
    out = torch.zeros((T, H), dtype=torch.float32, device=device)
    assert torch.equal(compiled(x, w, ids, out), y + 1.0)
    assert torch.equal(out, y)


@pytest.mark.parametrize("handle_and_layer", DEVICES, indirect=True)
def test_batched_op_equals_the_layer(handle_and_layer):
    handle, layer, rng, device = handle_and_layer
    M = 4
    xb = torch.from_numpy(rng.standard_normal((E, M, H)).astype(np.float32)).to(device)
    counts = torch.from_numpy(rng.integers(0, M + 1, E).astype(np.int32)).to(device)
    want = layer.batched(xb, counts)
    got = ops.moe_batched(handle, xb, counts)
    assert got.shape == (E, M, H) and got.dtype == xb.dtype
    for e in range(E):  # rows past the count are not written: compare the live ones
        n = int(counts[e])
        assert torch.equal(got[e, :n], want[e, :n])


@pytest.mark.parametrize("handle_and_layer", DEVICES, indirect=True)
def test_opcheck(handle_and_layer):
    handle, _, rng, device = handle_and_layer
    x, w, ids = _inputs(rng, device)
    # the fake implementation agrees with the real one on shape, dtype, device, aliasing
    torch.library.opcheck(torch.ops.fp4moe.moe.default, (x, w, ids, handle),
                          test_utils=("test_schema", "test_faketensor"))
    out = torch.empty((T, H), dtype=torch.float32, device=device)
    torch.library.opcheck(torch.ops.fp4moe.moe_out.default, (x, w, ids, out, handle),
                          test_utils=("test_schema", "test_faketensor"))


def test_bad_handles_and_layers_raise():
    with pytest.raises(ValueError, match="handle"):
        ops.unregister(10 ** 9)
    with pytest.raises(ValueError, match="layer"):
        ops.register(object())
    x = torch.zeros((1, H), dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="handle"):
        torch.ops.fp4moe.moe(x, torch.ones((1, K)), torch.zeros((1, K), dtype=torch.int32), 10 ** 9)
