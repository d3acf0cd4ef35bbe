"""fp4moe.ep from Python on two GPUs: one process per GPU, the communicator from a unique id
(and from a torch.distributed process group), against the single-GPU fp4moe.MoELayer on the
same tokens in the same process. Skipped unless two CUDA GPUs, a CUDA build with NCCL and
PyTorch are present.

all_to_all with the fp32 return is bit-identical to the single-GPU layer (each expert's rows
are computed by the same kernels, the combine sums the k slots in the same order);
all_reduce adds the ranks' fp32 partial sums, so it is equal to fp32 rounding.
"""
import multiprocessing as mp
import socket
import traceback

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import fp4moe  # noqa: E402
import fp4moe.ep as ep  # noqa: E402

WORLD = 2
E, H, I, K, T, MAX_T = 8, 128, 64, 2, 24, 32

needs = []
if not fp4moe.info()["with_cuda"]:
    needs.append("a CUDA build")
elif torch.cuda.device_count() < WORLD:
    needs.append(f"{WORLD} GPUs ({torch.cuda.device_count()} visible)")
elif not ep.available():
    needs.append(ep.why_unavailable())
pytestmark = pytest.mark.skipif(bool(needs), reason="needs " + ", ".join(needs))


def _weights(device):
    import oracle  # tests/python (spawned processes get the parent's sys.path); fixed seed: same weights everywhere
    ck, _ = oracle.make_nvfp4_weights(np.random.default_rng(1234), E, H, I)
    return {n: torch.from_numpy(np.ascontiguousarray(v)).to(device) for n, v in ck.items()}


def _tokens(seed, device):
    rng = np.random.default_rng(seed)
    x = torch.from_numpy(rng.standard_normal((T, H)).astype(np.float32)).to(device=device, dtype=torch.bfloat16)
    # the first half of the tokens only on rank 0's experts (0 .. E/WORLD - 1), the rest anywhere
    ids = np.stack([rng.permutation(E // WORLD if t < T // 2 else E)[:K] for t in range(T)]).astype(np.int32)
    w = rng.uniform(0.1, 1, (T, K)).astype(np.float32)
    return x, torch.from_numpy(w).to(device), torch.from_numpy(ids).to(device)


def _worker(rank, uid, mode, how, port, results):
    try:
        torch.cuda.set_device(rank)
        dev = f"cuda:{rank}"
        ck = _weights(dev)
        first, n = ep.local_experts(E, WORLD, rank)
        part = {name: v[first:first + n] for name, v in ck.items()}  # this rank's experts only
        kw = dict(num_experts=E, top_k=K, max_tokens=MAX_T, mode=mode)
        if how == "process_group":
            import torch.distributed as dist
            dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=WORLD)
            kw["process_group"] = dist.group.WORLD
        else:
            kw.update(unique_id=uid, rank=rank, world=WORLD)
        layer = ep.EpLayer(part["w13"], part["w13_scale"], part["w13_scale_2"], part["w2"], part["w2_scale"],
                           part["w2_scale_2"], **kw)
        # all_to_all: each rank its own tokens; all_reduce: the same tokens on every rank
        x, w, ids = _tokens(100 + rank if mode == "all_to_all" else 7, dev)
        out = layer(x, w, ids, out=torch.full((T, H), float("nan"), device=dev))
        layer.check_device_errors()
        single = fp4moe.MoELayer(ck["w13"], ck["w13_scale"], ck["w13_scale_2"], ck["w2"], ck["w2_scale"],
                                 ck["w2_scale_2"], top_k=K, max_num_tokens=MAX_T)
        ref = single(x, w, ids, out=torch.empty((T, H), dtype=torch.float32, device=dev))
        torch.cuda.synchronize()
        rel = float((out - ref).norm() / ref.norm())
        results.put((rank, bool(torch.isfinite(out).all()), bool(torch.equal(out, ref)), rel,
                     layer.rank, layer.world, layer.num_local_experts, n, ""))
        if how == "process_group":
            torch.distributed.destroy_process_group()
    except Exception:  # reported to the test, which fails with it
        results.put((rank, False, False, float("nan"), -1, -1, -1, -1, traceback.format_exc()))


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("mode", ["all_to_all", "all_reduce"])
@pytest.mark.parametrize("how", ["unique_id", "process_group"])
def test_two_ranks_match_one_gpu(mode, how):
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    uid = ep.unique_id() if how == "unique_id" else b""
    port = _free_port()
    procs = [ctx.Process(target=_worker, args=(r, uid, mode, how, port, results)) for r in range(WORLD)]
    for p in procs:
        p.start()
    got = [results.get(timeout=300) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    for rank, finite, equal, rel, r, world, n_local, n_want, err in sorted(got):
        assert err == "", f"rank {rank}:\n{err}"
        assert (r, world, n_local) == (rank, WORLD, n_want)
        assert finite, f"rank {rank}: the output has NaN (poisoned rows left unwritten)"
        if mode == "all_to_all":
            assert equal, f"rank {rank}: all_to_all with the f32 return differs from one GPU (rel {rel:.2e})"
        else:
            assert rel <= 1e-6, f"rank {rank}: all_reduce rel L2 {rel:.2e} vs one GPU"
