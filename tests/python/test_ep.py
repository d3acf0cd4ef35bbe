"""fp4moe.ep on any machine: placement, availability, and clean errors where EP cannot run.
The two-GPU behaviour is tested in C++ (tests/cuda/test_ep.cpp), from Python in
test_ep_gpus.py (two processes), and measured by `fp4moe ep-bench`."""
import numpy as np
import pytest

import fp4moe
import fp4moe.ep as ep


@pytest.mark.parametrize("E, world", [(8, 2), (11, 2), (384, 8), (33, 4), (5, 5)])
def test_local_experts_is_an_even_contiguous_split(E, world):
    parts = [ep.local_experts(E, world, r) for r in range(world)]
    # contiguous, covering [0, E) once, in rank order
    first = 0
    for start, count in parts:
        assert start == first
        first += count
    assert first == E
    # the first E % world ranks get one more
    counts = [c for _, c in parts]
    assert counts == [E // world + (1 if r < E % world else 0) for r in range(world)]


@pytest.mark.parametrize("E, world, rank", [(4, 8, 0), (8, 2, 2), (8, 2, -1), (8, 0, 0)])
def test_local_experts_rejects_bad_worlds(E, world, rank):
    with pytest.raises(ValueError):
        ep.local_experts(E, world, rank)


def test_availability_is_explained():
    why = ep.why_unavailable()
    assert isinstance(why, str)
    assert ep.available() == (why == "")
    if not ep.available():
        # without NCCL or a CUDA build, asking for an id fails with the reason, never crashes
        with pytest.raises((RuntimeError, ValueError)):
            ep.unique_id()
    else:
        uid = ep.unique_id()
        assert isinstance(uid, bytes) and len(uid) == 128
        assert uid != ep.unique_id()
