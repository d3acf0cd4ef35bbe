"""An independent NumPy implementation of SPEC §1-2 (formats) and §4 (the layer).

Written from the SPEC text, not from the C++: value tables are enumerated and
rounding is "nearest value, ties to the even code", so a bug shared with
include/fp4moe/format.h would have to be made twice in two different ways.
All quantization arithmetic is IEEE fp32 (NumPy float32 never fuses), in the
order SPEC §2 gives.
"""
from __future__ import annotations

import numpy as np

f32 = np.float32

# ---------------------------------------------------------------------------
# Value tables
# ---------------------------------------------------------------------------
E2M1_MAG = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6], dtype=np.float64)  # codes 0..7


def _e4m3_value(code: int) -> float:
    e, m = (code >> 3) & 15, code & 7
    v = m * 2.0 ** -9 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7)
    return -v if code & 0x80 else v


E4M3_MAG = np.array([_e4m3_value(c) for c in range(127)], dtype=np.float64)  # codes 0..126 (0x7F is NaN)
E4M3_ALL = np.array([np.nan if (c & 0x7F) == 0x7F else _e4m3_value(c) for c in range(256)], dtype=np.float64)
E2M1_ALL = np.concatenate([E2M1_MAG, -E2M1_MAG])


def _nearest_even(mag: np.ndarray, table: np.ndarray) -> np.ndarray:
    """Code of the nearest table entry to each |value|; ties to the even code."""
    d = np.abs(mag[..., None].astype(np.float64) - table)
    best = d.min(axis=-1, keepdims=True)
    hit = d == best
    codes = np.arange(table.size)
    # among the (at most two) nearest, prefer the even code
    score = np.where(hit, np.where(codes % 2 == 0, 0, 1), 2)
    return score.argmin(axis=-1).astype(np.uint8)


def e2m1_encode(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float32)
    code = _nearest_even(np.minimum(np.abs(x), 6.0), E2M1_MAG)
    return code | (np.signbit(x).astype(np.uint8) << 3)


def e4m3_encode_pos(x: np.ndarray) -> np.ndarray:
    """fp32 >= 0 -> e4m3fn code, RNE, saturating to 448."""
    return _nearest_even(np.minimum(np.asarray(x, dtype=np.float64), 448.0), E4M3_MAG)


def pack(codes: np.ndarray) -> np.ndarray:
    """[..., K] 4-bit codes -> [..., K/2] bytes, element 2j in the low nibble of byte j."""
    return (codes[..., 0::2] | (codes[..., 1::2] << 4)).astype(np.uint8)


def unpack(data: np.ndarray) -> np.ndarray:
    out = np.empty(data.shape[:-1] + (data.shape[-1] * 2,), dtype=np.uint8)
    out[..., 0::2] = data & 15
    out[..., 1::2] = data >> 4
    return out


# ---------------------------------------------------------------------------
# NVFP4 (SPEC §2)
# ---------------------------------------------------------------------------
def quantize_nvfp4(x: np.ndarray, gs: float):
    """x [..., K] fp32 -> (data u8 [..., K/2], scale u8 e4m3 codes [..., K/16])."""
    x = np.asarray(x, dtype=np.float32)
    gs = f32(gs)
    blocks = x.reshape(x.shape[:-1] + (x.shape[-1] // 16, 16))
    amax = np.abs(blocks).max(axis=-1)
    t = (amax * f32(f32(1) / f32(6))).astype(np.float32)
    s_code = e4m3_encode_pos((gs * t).astype(np.float32))
    s = E4M3_ALL[s_code].astype(np.float32)
    with np.errstate(divide="ignore"):
        inv = np.where(s == 0, f32(0), f32(1) / (s * (f32(1) / gs))).astype(np.float32)
    q = e2m1_encode((blocks * inv[..., None]).astype(np.float32))
    return pack(q.reshape(x.shape)), s_code


def dequantize_nvfp4(data: np.ndarray, scale: np.ndarray, dq: float) -> np.ndarray:
    v = E2M1_ALL[unpack(data)].astype(np.float32)
    s = np.repeat(E4M3_ALL[scale].astype(np.float32), 16, axis=-1)
    return (v * s * f32(dq)).astype(np.float32)


# ---------------------------------------------------------------------------
# MXFP4 (OCP MX v1.0)
# ---------------------------------------------------------------------------
def quantize_mxfp4(x: np.ndarray):
    """x [..., K] fp32 -> (data u8 [..., K/2], scale u8 e8m0 codes [..., K/32])."""
    x = np.asarray(x, dtype=np.float32)
    blocks = x.reshape(x.shape[:-1] + (x.shape[-1] // 32, 32)).astype(np.float64)
    amax = np.abs(blocks).max(axis=-1)
    _, e2 = np.frexp(amax)  # amax = f * 2^e2, f in [0.5, 1)
    e = np.clip(e2 - 1 - 2, -127, 127)
    code = np.where(amax > 0, e + 127, 0).astype(np.uint8)
    e = code.astype(np.int64) - 127
    q = e2m1_encode(np.ldexp(blocks, -e[..., None]).astype(np.float32))
    return pack(q.reshape(x.shape)), code


def dequantize_mxfp4(data: np.ndarray, scale: np.ndarray) -> np.ndarray:
    v = E2M1_ALL[unpack(data)]
    e = np.repeat(scale.astype(np.int64) - 127, 32, axis=-1)
    return np.ldexp(v, e).astype(np.float32)


# ---------------------------------------------------------------------------
# Swizzled 128x4 scale layout
# ---------------------------------------------------------------------------
def swizzle(scale: np.ndarray) -> np.ndarray:
    """[B..., R, C] -> [B..., Rp*Cp] by the index formula of SPEC §2."""
    *batch, r, c = scale.shape
    rp, cp = -(-r // 128) * 128, -(-c // 4) * 4
    out = np.zeros(tuple(batch) + (rp * cp,), dtype=np.uint8)
    rr, cc = np.meshgrid(np.arange(r), np.arange(c), indexing="ij")
    off = ((rr // 128) * (cp // 4) + cc // 4) * 512 + (rr % 32) * 16 + ((rr // 32) % 4) * 4 + (cc % 4)
    out[..., off] = scale
    return out


# ---------------------------------------------------------------------------
# bf16 / activations
# ---------------------------------------------------------------------------
def round_bf16(x: np.ndarray) -> np.ndarray:
    """fp32 -> nearest bf16 (ties to even), as fp32."""
    u = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16
    return r.astype(np.uint32).view(np.float32)


def nvfp4_round_trip(x: np.ndarray, dq: float) -> np.ndarray:
    data, scale = quantize_nvfp4(x, f32(1) / f32(dq))
    return dequantize_nvfp4(data, scale, dq)


# ---------------------------------------------------------------------------
# Weights and the layer (SPEC §3-4)
# ---------------------------------------------------------------------------
def make_nvfp4_weights(rng, E, H, I, scale=1.0):
    """Random NVFP4 checkpoint tensors (SPEC §3) and their exact dequantization."""
    w13f = (rng.standard_normal((E, 2 * I, H)) * scale).astype(np.float32)
    w2f = (rng.standard_normal((E, H, I)) * scale).astype(np.float32)
    ck = {}
    deq = {}
    for name, w in (("w13", w13f), ("w2", w2f)):
        data, sc, dqs, full = [], [], [], []
        for e in range(E):
            dq = f32(np.abs(w[e]).max() / f32(6 * 448))
            d, s = quantize_nvfp4(w[e], f32(1) / dq)
            data.append(d)
            sc.append(s)
            dqs.append(dq)
            full.append(dequantize_nvfp4(d, s, dq))
        ck[name] = np.stack(data)
        ck[name + "_scale"] = np.stack(sc)
        ck[name + "_scale_2"] = np.array(dqs, dtype=np.float32)
        deq[name] = np.stack(full)
    return ck, deq


def make_mxfp4_weights(rng, E, H, I, interleaved=False, bias=False):
    w13f = rng.standard_normal((E, 2 * I, H)).astype(np.float32)
    w2f = rng.standard_normal((E, H, I)).astype(np.float32)
    ck, deq = {}, {}
    d, s = quantize_mxfp4(w13f)
    deq13 = dequantize_mxfp4(d, s)  # concat order: gate rows [0, I), up rows [I, 2I)
    if interleaved:
        perm = np.empty(2 * I, dtype=np.int64)
        perm[0::2] = np.arange(I)
        perm[1::2] = I + np.arange(I)
        d, s = np.ascontiguousarray(d[:, perm]), np.ascontiguousarray(s[:, perm])
    ck["w13"], ck["w13_scale"] = d, s
    deq["w13"] = deq13
    ck["w2"], ck["w2_scale"] = quantize_mxfp4(w2f)
    deq["w2"] = dequantize_mxfp4(ck["w2"], ck["w2_scale"])
    if bias:
        b13 = rng.standard_normal((E, 2 * I)).astype(np.float32)
        deq["w13_bias"] = b13
        ck["w13_bias"] = np.ascontiguousarray(b13[:, perm]) if interleaved else b13
        ck["w2_bias"] = deq["w2_bias"] = rng.standard_normal((E, H)).astype(np.float32)
    return ck, deq


def moe(x, topk_weights, topk_ids, deq, *, activation="silu", a13_dq=None, a2_dq=None,
        expert_map=None, apply_router_weight_on_input=False):
    """SPEC §4 in float64 accumulation over exactly dequantized fp32 values; returns fp32 [T, H]
    before the final rounding to out's dtype."""
    x = round_bf16(np.asarray(x, dtype=np.float32))
    T, H = x.shape
    I = deq["w2"].shape[2]
    out = np.zeros((T, H), dtype=np.float64)
    for t in range(T):
        for j in range(topk_ids.shape[1]):
            e = int(topk_ids[t, j])
            if e < 0:
                continue
            if expert_map is not None:
                e = int(expert_map[e])
                if e < 0:
                    continue
            w = float(topk_weights[t, j])
            a = x[t]
            if apply_router_weight_on_input:
                a = (a * f32(w)).astype(np.float32)
            if a13_dq is not None:
                a = nvfp4_round_trip(a[None], a13_dq)[0]
            gu = deq["w13"][e].astype(np.float64) @ a.astype(np.float64)
            if "w13_bias" in deq:
                gu = gu + deq["w13_bias"][e]
            g, u = gu[:I], gu[I:]
            if activation == "silu":
                h = g / (1 + np.exp(-g)) * u
            else:
                g = np.minimum(g, 7.0)
                u = np.clip(u, -7.0, 7.0)
                h = (u + 1) * g / (1 + np.exp(-1.702 * g))
            h = round_bf16(h.astype(np.float32))
            if a2_dq is not None:
                h = nvfp4_round_trip(h[None], a2_dq)[0]
            y = deq["w2"][e].astype(np.float64) @ h.astype(np.float64)
            if "w2_bias" in deq:
                y = y + deq["w2_bias"][e]
            out[t] += y if apply_router_weight_on_input else w * y
    return out.astype(np.float32)


def softmax_route(logits, k, renormalize=True):
    l = logits.astype(np.float64)
    p = np.exp(l - l.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    ids = np.argsort(-p, axis=1, kind="stable")[:, :k]  # stable: ties to the lower index
    w = np.take_along_axis(p, ids, axis=1)
    if renormalize:
        w = w / w.sum(axis=1, keepdims=True)
    return w.astype(np.float32), ids.astype(np.int32)


def sigmoid_grouped_route(logits, k, n_group, topk_group, bias, scale):
    s = 1 / (1 + np.exp(-logits.astype(np.float64)))
    b = s + (0 if bias is None else bias.astype(np.float64))
    T, E = logits.shape
    gsz = E // n_group
    ids = np.zeros((T, k), dtype=np.int32)
    w = np.zeros((T, k), dtype=np.float32)
    for t in range(T):
        groups = b[t].reshape(n_group, gsz)
        gscore = np.sort(groups, axis=1)[:, -2:].sum(axis=1)
        keep = np.argsort(-gscore, kind="stable")[:topk_group]
        masked = np.full(E, -np.inf)
        for g in keep:
            masked[g * gsz:(g + 1) * gsz] = b[t, g * gsz:(g + 1) * gsz]
        sel = np.argsort(-masked, kind="stable")[:k]
        ws = s[t, sel]
        ids[t] = sel
        w[t] = ws / (ws.sum() + 1e-20) * scale
    return w, ids
