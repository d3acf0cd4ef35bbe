"""fp4moe.quantize_* / dequantize_* / swizzle against the NumPy oracle of SPEC §2, bit for bit."""
import numpy as np
import pytest

import fp4moe
import oracle


def _rng():
    return np.random.default_rng()  # fresh inputs every run; failures print the values


def _hard_values(rng, shape):
    """Random data with the cases rounding gets wrong: exact e2m1 ties, zeros, tiny and huge
    blocks, negative zero."""
    x = rng.standard_normal(shape).astype(np.float32) * np.float32(rng.choice([1e-3, 1, 1e3]))
    flat = x.reshape(-1, 16)
    n = flat.shape[0]
    # a block scaled so its amax maps to e2m1 6: every half-step of the table is a tie
    ties = np.array([0, 0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5, 6, -0.25, -2.5, -5, 0.5, 3, 4, -6], np.float32)
    flat[0] = ties
    if n > 1:
        flat[1] = 0
    if n > 2:
        flat[2] = np.float32(1e-30) * rng.standard_normal(16).astype(np.float32)
    if n > 3:
        flat[3, 5] = -0.0
    return x


@pytest.mark.parametrize("shape", [(16,), (3, 64), (2, 5, 32), (2, 2, 3, 48)])
def test_quantize_nvfp4_bit_exact(shape):
    rng = _rng()
    x = _hard_values(rng, shape)
    for gs in (np.float32(1.0), np.float32(448 * 6) / np.abs(x).max(), np.float32(rng.uniform(0.01, 100))):
        data, scale = fp4moe.quantize_nvfp4(x, float(gs))
        ref_data, ref_scale = oracle.quantize_nvfp4(x, np.float32(gs))
        assert isinstance(data, np.ndarray) and data.dtype == np.uint8
        assert data.shape == shape[:-1] + (shape[-1] // 2,)
        assert scale.shape == shape[:-1] + (shape[-1] // 16,)
        np.testing.assert_array_equal(scale.view(np.uint8), ref_scale)
        np.testing.assert_array_equal(data, ref_data)


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_quantize_nvfp4_input_dtypes(dtype):
    x = _rng().standard_normal((4, 32)).astype(dtype)
    data, scale = fp4moe.quantize_nvfp4(x, 100.0)
    ref_data, ref_scale = oracle.quantize_nvfp4(x.astype(np.float32), np.float32(100.0))
    np.testing.assert_array_equal(scale, ref_scale)
    np.testing.assert_array_equal(data, ref_data)


def test_dequantize_nvfp4_bit_exact():
    rng = _rng()
    data = rng.integers(0, 256, (3, 4, 32), dtype=np.uint8)
    scale = rng.integers(0, 0x7F, (3, 4, 4), dtype=np.uint8)  # finite e4m3 codes, both signs
    scale |= rng.integers(0, 2, scale.shape, dtype=np.uint8) << 7
    dq = float(rng.uniform(1e-4, 1))
    x = fp4moe.dequantize_nvfp4(data, scale, dq)
    assert x.dtype == np.float32 and x.shape == (3, 4, 64)
    np.testing.assert_array_equal(x, oracle.dequantize_nvfp4(data, scale, np.float32(dq)))


@pytest.mark.parametrize("shape", [(32,), (5, 64), (2, 3, 96)])
def test_mxfp4_bit_exact(shape):
    rng = _rng()
    x = rng.standard_normal(shape).astype(np.float32) * np.float32(rng.choice([1e-20, 1e-3, 1, 1e20]))
    x.reshape(-1, 32)[0] = 0
    data, scale = fp4moe.quantize_mxfp4(x)
    ref_data, ref_scale = oracle.quantize_mxfp4(x)
    assert data.dtype == np.uint8 and scale.dtype == np.uint8
    np.testing.assert_array_equal(scale, ref_scale)
    np.testing.assert_array_equal(data, ref_data)
    np.testing.assert_array_equal(fp4moe.dequantize_mxfp4(data, scale), oracle.dequantize_mxfp4(data, scale))


def test_dequantize_mxfp4_random_codes():
    rng = _rng()
    data = rng.integers(0, 256, (6, 16), dtype=np.uint8)
    scale = rng.integers(100, 150, (6, 1), dtype=np.uint8)
    np.testing.assert_array_equal(fp4moe.dequantize_mxfp4(data, scale), oracle.dequantize_mxfp4(data, scale))


@pytest.mark.parametrize("shape", [(1, 1), (128, 4), (130, 7), (3, 200, 9)])
def test_swizzle_index_and_round_trip(shape):
    rng = _rng()
    scale = rng.integers(0, 256, shape, dtype=np.uint8)
    sw = fp4moe.swizzle_scales(scale)
    np.testing.assert_array_equal(sw, oracle.swizzle(scale))
    back = fp4moe.unswizzle_scales(sw, shape[-2], shape[-1])
    np.testing.assert_array_equal(back, scale)


def test_float8_numpy_scales_when_ml_dtypes_present():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    rng = _rng()
    data = rng.integers(0, 256, (2, 16), dtype=np.uint8)
    codes = rng.integers(0, 0x7F, (2, 2), dtype=np.uint8)
    as_f8 = codes.view(ml_dtypes.float8_e4m3fn)
    np.testing.assert_array_equal(fp4moe.dequantize_nvfp4(data, as_f8, 0.5),
                                  fp4moe.dequantize_nvfp4(data, codes, 0.5))
