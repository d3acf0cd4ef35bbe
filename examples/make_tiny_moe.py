#!/usr/bin/env python3
"""Writes a tiny bf16 Qwen3-MoE-style checkpoint (config.json + model.safetensors) to try
`fp4moe quantize` and `fp4moe run` on, with NumPy only:

    python3 examples/make_tiny_moe.py /tmp/tiny-bf16
    fp4moe quantize /tmp/tiny-bf16 /tmp/tiny-nvfp4
    fp4moe run --checkpoint /tmp/tiny-nvfp4 --layer 1 --tokens 64 --check
"""
import json
import os
import struct
import sys

import numpy as np


def bf16_bytes(x: np.ndarray) -> bytes:
    """fp32 -> bf16 (round to nearest even), little-endian bytes."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return u.astype("<u2").tobytes()


def write_safetensors(path: str, tensors: dict) -> None:
    header, blobs, offset = {}, [], 0
    for name, (dtype, shape, data) in tensors.items():
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def main() -> None:
    out = sys.argv[1] if len(sys.argv) > 1 else "tiny-moe-bf16"
    H, I, E, K, L = 256, 128, 8, 2, 2
    rng = np.random.default_rng(0)
    os.makedirs(out, exist_ok=True)
    cfg = {"model_type": "qwen3_moe", "architectures": ["Qwen3MoeForCausalLM"], "hidden_size": H,
           "moe_intermediate_size": I, "num_experts": E, "num_experts_per_tok": K, "norm_topk_prob": True,
           "num_hidden_layers": L, "hidden_act": "silu", "mlp_only_layers": [0], "decoder_sparse_step": 1,
           "torch_dtype": "bfloat16"}
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
    t = {}
    for layer in range(L):
        p = f"model.layers.{layer}.mlp"
        if layer in cfg["mlp_only_layers"]:  # a dense MLP: copied as it is by quantize
            for n, shape in (("gate_proj", (4 * H, H)), ("up_proj", (4 * H, H)), ("down_proj", (H, 4 * H))):
                t[f"{p}.{n}.weight"] = ("BF16", shape, bf16_bytes(0.05 * rng.standard_normal(shape)))
            continue
        t[f"{p}.gate.weight"] = ("BF16", (E, H), bf16_bytes(0.1 * rng.standard_normal((E, H))))
        for e in range(E):
            for n, shape in (("gate_proj", (I, H)), ("up_proj", (I, H)), ("down_proj", (H, I))):
                w = rng.standard_normal(shape) / np.sqrt(shape[1])
                t[f"{p}.experts.{e}.{n}.weight"] = ("BF16", shape, bf16_bytes(w))
    t["model.embed_tokens.weight"] = ("BF16", (64, H), bf16_bytes(rng.standard_normal((64, H))))
    write_safetensors(os.path.join(out, "model.safetensors"), t)
    print(f"wrote {out}: {L} layers (layer 0 dense), {E} experts of H={H} I={I}, top-{K}")


if __name__ == "__main__":
    main()
