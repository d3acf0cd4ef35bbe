"""fp4moe.route against the NumPy routing of SPEC §4."""
import numpy as np
import pytest

import fp4moe
import oracle


@pytest.mark.parametrize("renormalize", [True, False])
def test_softmax(renormalize):
    rng = np.random.default_rng()
    logits = rng.standard_normal((9, 16)).astype(np.float32)
    logits[0, :] = 0.5  # all tied: the k lowest indices win
    w, ids = fp4moe.route(logits, 4, renormalize=renormalize)
    ref_w, ref_ids = oracle.softmax_route(logits, 4, renormalize)
    assert w.dtype == np.float32 and ids.dtype == np.int32 and w.shape == ids.shape == (9, 4)
    np.testing.assert_array_equal(np.sort(ids, axis=1), np.sort(ref_ids, axis=1))
    np.testing.assert_array_equal(np.sort(ids[0]), [0, 1, 2, 3])
    order = np.argsort(ids, axis=1)
    ref_order = np.argsort(ref_ids, axis=1)
    np.testing.assert_allclose(np.take_along_axis(w, order, 1), np.take_along_axis(ref_w, ref_order, 1),
                               rtol=1e-5, atol=1e-7)


def test_sigmoid_grouped():
    rng = np.random.default_rng()
    T, E, k = 7, 32, 4
    logits = rng.standard_normal((T, E)).astype(np.float32)
    bias = (rng.standard_normal(E) * 0.1).astype(np.float32)
    w, ids = fp4moe.route(logits, k, method="sigmoid_grouped", n_group=4, topk_group=2,
                          correction_bias=bias, routed_scaling_factor=2.5)
    ref_w, ref_ids = oracle.sigmoid_grouped_route(logits, k, 4, 2, bias, 2.5)
    np.testing.assert_array_equal(np.sort(ids, axis=1), np.sort(ref_ids, axis=1))
    order, ref_order = np.argsort(ids, axis=1), np.argsort(ref_ids, axis=1)
    np.testing.assert_allclose(np.take_along_axis(w, order, 1), np.take_along_axis(ref_w, ref_order, 1),
                               rtol=1e-5)


def test_route_bad_arguments():
    logits = np.zeros((3, 8), np.float32)
    with pytest.raises(ValueError, match="top_k"):
        fp4moe.route(logits, 9)
    with pytest.raises(ValueError, match="method"):
        fp4moe.route(logits, 2, method="nope")
    with pytest.raises(ValueError, match="router_logits"):
        fp4moe.route(logits.astype(np.float64), 2)
    with pytest.raises(ValueError, match="router_logits"):
        fp4moe.route([[0.0, 1.0]], 1)
