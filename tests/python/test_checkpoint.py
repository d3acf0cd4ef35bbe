"""fp4moe.load_layer on checkpoints written here (ModelOpt NVFP4 in Qwen3-MoE and DeepSeek
naming, gpt-oss MXFP4 with biases): the loaded layer equals an MoELayer built from the
same tensors in memory, and matches the NumPy layer of SPEC §4; bad checkpoints raise
ValueError naming the tensor or config key."""
import json
import struct

import numpy as np
import pytest

import fp4moe
import oracle

E, H, I, K = 8, 64, 32, 2


def _bf16_bits(x):
    """float32 -> bf16 bits, round to nearest even (x must be bf16-exact for a lossless trip)."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def _write_safetensors(path, tensors):
    """tensors: {name: (safetensors dtype, ndarray)} in file order."""
    header, blobs, off = {}, [], 0
    for name, (dtype, a) in tensors.items():
        b = np.ascontiguousarray(a).tobytes()
        header[name] = {"dtype": dtype, "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        off += len(b)
        blobs.append(b)
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def _routing(rng, t, k=K, e=E):
    ids = np.stack([rng.permutation(e)[:k] for _ in range(t)]).astype(np.int32)
    return rng.uniform(0.1, 1, (t, k)).astype(np.float32), ids


def _modelopt_dir(tmp_path, rng, deepseek=False, input_scales=False):
    ck, deq = oracle.make_nvfp4_weights(rng, E, H, I, scale=0.05)
    router = oracle.round_bf16(rng.standard_normal((E, H)).astype(np.float32) * 0.1)
    corr = rng.uniform(0, 0.1, E).astype(np.float32)
    L = "model.layers.1.mlp."
    t = {L + "gate.weight": ("BF16", _bf16_bits(router))}
    if deepseek:
        t[L + "gate.e_score_correction_bias"] = ("F32", corr)
    for e in range(E):
        for proj, data, scale, dq in (("gate_proj", ck["w13"][e, :I], ck["w13_scale"][e, :I], ck["w13_scale_2"][e]),
                                      ("up_proj", ck["w13"][e, I:], ck["w13_scale"][e, I:], ck["w13_scale_2"][e]),
                                      ("down_proj", ck["w2"][e], ck["w2_scale"][e], ck["w2_scale_2"][e])):
            p = f"{L}experts.{e}.{proj}."
            t[p + "weight"] = ("U8", data)
            t[p + "weight_scale"] = ("F8_E4M3", scale)
            t[p + "weight_scale_2"] = ("F32", np.array(dq, dtype=np.float32))  # shape [] as ModelOpt
            if input_scales:
                t[p + "input_scale"] = ("F32", np.array(0.002, dtype=np.float32))
    _write_safetensors(tmp_path / "model.safetensors", t)
    cfg = {"hidden_size": H, "moe_intermediate_size": I, "num_experts_per_tok": K, "num_hidden_layers": 2,
           "hidden_act": "silu"}
    if deepseek:
        cfg.update(model_type="deepseek_v3", n_routed_experts=E, n_group=4, topk_group=2, scoring_func="sigmoid",
                   routed_scaling_factor=2.5, norm_topk_prob=True, first_k_dense_replace=1)
    else:
        cfg.update(model_type="qwen3_moe", num_experts=E, norm_topk_prob=True)
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    (tmp_path / "hf_quant_config.json").write_text(json.dumps(
        {"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "NVFP4", "group_size": 16}}))
    return ck, deq, router, corr


@pytest.mark.parametrize("deepseek", [False, True])
def test_modelopt_nvfp4(tmp_path, deepseek):
    rng = np.random.default_rng()
    ck, deq, router, corr = _modelopt_dir(tmp_path, rng, deepseek=deepseek)
    layer = fp4moe.load_layer(tmp_path, 1, max_num_tokens=64)
    assert layer.model_type == ("deepseek_v3" if deepseek else "qwen3_moe")
    assert (layer.hidden, layer.intermediate, layer.num_experts, layer.top_k) == (H, I, E, K)
    np.testing.assert_array_equal(layer.router_weight, router)
    assert layer.router_bias is None
    if deepseek:
        assert layer.routing == {"method": "sigmoid_grouped", "renormalize": True, "n_group": 4, "topk_group": 2,
                                 "routed_scaling_factor": 2.5}
        np.testing.assert_array_equal(layer.correction_bias, corr)
    else:
        assert layer.routing["method"] == "softmax" and layer.routing["renormalize"]
        assert layer.correction_bias is None

    # route the model's way, run, compare with the in-memory layer and the NumPy layer
    x = oracle.round_bf16(rng.standard_normal((9, H)).astype(np.float32))
    logits = x @ layer.router_weight.T
    w, ids = fp4moe.route(logits, layer.top_k, correction_bias=layer.correction_bias, **layer.routing)
    mem = fp4moe.MoELayer(ck["w13"], ck["w13_scale"], ck["w13_scale_2"], ck["w2"], ck["w2_scale"],
                          ck["w2_scale_2"], top_k=K, max_num_tokens=64, backend=layer.backend)
    out = layer(x, w, ids)
    np.testing.assert_array_equal(out, mem(x, w, ids))
    ref = oracle.moe(x, w, ids, deq)
    np.testing.assert_allclose(out, ref, rtol=2e-3, atol=2e-3 * float(np.abs(ref).max()))


def test_gpt_oss_mxfp4_with_biases(tmp_path):
    rng = np.random.default_rng()
    ck, deq = oracle.make_mxfp4_weights(rng, E, H, I, interleaved=True, bias=True)
    for b in ("w13_bias", "w2_bias"):  # the checkpoint holds bf16 biases
        ck[b] = oracle.round_bf16(ck[b])
    router = oracle.round_bf16(rng.standard_normal((E, H)).astype(np.float32) * 0.1)
    rbias = oracle.round_bf16(rng.standard_normal(E).astype(np.float32) * 0.1)
    P = "model.layers.0.mlp."
    _write_safetensors(tmp_path / "model.safetensors", {
        P + "router.weight": ("BF16", _bf16_bits(router)),
        P + "router.bias": ("BF16", _bf16_bits(rbias)),
        P + "experts.gate_up_proj_blocks": ("U8", ck["w13"].reshape(E, 2 * I, H // 32, 16)),
        P + "experts.gate_up_proj_scales": ("U8", ck["w13_scale"]),
        P + "experts.gate_up_proj_bias": ("BF16", _bf16_bits(ck["w13_bias"])),
        P + "experts.down_proj_blocks": ("U8", ck["w2"].reshape(E, H, I // 32, 16)),
        P + "experts.down_proj_scales": ("U8", ck["w2_scale"]),
        P + "experts.down_proj_bias": ("BF16", _bf16_bits(ck["w2_bias"])),
    })
    (tmp_path / "config.json").write_text(json.dumps({
        "model_type": "gpt_oss", "hidden_size": H, "intermediate_size": I, "num_local_experts": E,
        "experts_per_token": K, "num_experts_per_tok": K, "swiglu_limit": 7.0, "num_hidden_layers": 1,
        "quantization_config": {"quant_method": "mxfp4"}}))
    layer = fp4moe.load_layer(str(tmp_path), 0, max_num_tokens=64)
    assert layer.quant == "mxfp4" and layer.top_k == K
    np.testing.assert_array_equal(layer.router_bias, rbias)
    x = oracle.round_bf16(rng.standard_normal((7, H)).astype(np.float32))
    w, ids = fp4moe.route(x @ layer.router_weight.T + layer.router_bias, K, **layer.routing)
    mem = fp4moe.MoELayer(ck["w13"], ck["w13_scale"], None, ck["w2"], ck["w2_scale"], None, quant="mxfp4",
                          w13_bias=ck["w13_bias"], w2_bias=ck["w2_bias"], gate_up="interleaved",
                          activation="swiglu_oai", top_k=K, max_num_tokens=64, backend=layer.backend)
    out = layer(x, w, ids)
    np.testing.assert_array_equal(out, mem(x, w, ids))
    deq["w13_bias"], deq["w2_bias"] = oracle.round_bf16(deq["w13_bias"]), ck["w2_bias"]
    ref = oracle.moe(x, w, ids, deq, activation="swiglu_oai")
    np.testing.assert_allclose(out, ref, rtol=2e-3, atol=2e-3 * float(np.abs(ref).max()))


def test_w4a4_needs_input_scales(tmp_path):
    rng = np.random.default_rng()
    _modelopt_dir(tmp_path, rng)
    with pytest.raises(ValueError, match="input_scale"):
        fp4moe.load_layer(tmp_path, 1, quant="w4a4")
    _modelopt_dir(tmp_path, rng, input_scales=True)
    layer = fp4moe.load_layer(tmp_path, 1, quant="w4a4", max_num_tokens=8)
    assert layer.quant == "w4a4"


def test_bad_checkpoints_name_the_problem(tmp_path):
    rng = np.random.default_rng()
    _modelopt_dir(tmp_path, rng, deepseek=True)
    with pytest.raises(ValueError, match="first_k_dense_replace"):
        fp4moe.load_layer(tmp_path, 0)
    cfg = json.loads((tmp_path / "config.json").read_text())
    del cfg["moe_intermediate_size"]
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ValueError, match="moe_intermediate_size or intermediate_size"):
        fp4moe.load_layer(tmp_path, 1)
    with pytest.raises(ValueError):
        fp4moe.load_layer(tmp_path / "missing", 1)
