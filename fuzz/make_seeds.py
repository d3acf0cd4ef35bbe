#!/usr/bin/env python3
"""Writes the seed corpus fuzz/corpus/: one mode byte (see fuzz_input.hpp) + a safetensors file.
Independent of the library on purpose: the header is built here by hand."""
import json, os, struct, sys

out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
os.makedirs(out, exist_ok=True)
SIZE = {"U8": 1, "F8_E4M3": 1, "F8_E8M0": 1, "BF16": 2, "F16": 2, "F32": 4, "I32": 4, "I64": 8}

def st(tensors, meta=None):
    """tensors: list of (name, dtype, shape, fill byte pattern) -> safetensors bytes."""
    header, data = {}, b""
    if meta:
        header["__metadata__"] = meta
    for name, dt, shape, fill in tensors:
        n = SIZE[dt]
        for d in shape:
            n *= d
        blob = (fill * (n // len(fill) + 1))[:n]
        header[name] = {"dtype": dt, "shape": shape, "data_offsets": [len(data), len(data) + n]}
        data += blob
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    return struct.pack("<Q", len(h)) + h + data

def seed(name, mode, blob):
    with open(os.path.join(out, name), "wb") as f:
        f.write(bytes([mode]) + blob)

one = struct.pack("<f", 1.0)
bf16_small = struct.pack("<H", 0x3C00)  # bf16 0.0078125
seed("plain_two", 0, st([("a", "F32", [2], one), ("b", "U8", [3], b"\x01\x02")], {"format": "pt"}))
seed("plain_dtypes", 0, st([("u8", "U8", [2, 2], b"\x11"), ("e4m3", "F8_E4M3", [2], b"\x38"),
                            ("e8m0", "F8_E8M0", [1], b"\x7f"), ("i32", "I32", [1, 1], b"\x05\0\0\0"),
                            ("bf16", "BF16", [2], bf16_small), ("f16", "F16", [0, 3], b"\0"),
                            ("i64", "I64", [1], b"\0"), ("scalar", "F32", [], one)]))
seed("plain_empty", 0, st([]))

# Qwen3-MoE NVFP4 layer 0, H = I = 32, E = 2 (matches kQwenConfig).
H, I, E = 32, 32, 2
qwen = []
for e in range(E):
    for p, rows, cols in (("gate_proj", I, H), ("up_proj", I, H), ("down_proj", H, I)):
        base = f"model.layers.0.mlp.experts.{e}.{p}"
        qwen += [(base + ".weight", "U8", [rows, cols // 2], b"\x12\x9a"),
                 (base + ".weight_scale", "F8_E4M3", [rows, cols // 16], b"\x38"),
                 (base + ".weight_scale_2", "F32", [], one)]
qwen.append(("model.layers.0.mlp.gate.weight", "BF16", [E, H], bf16_small))
seed("qwen_nvfp4_layer0", 1, st(qwen))

# gpt-oss MXFP4 layer 0 (matches kGptOssConfig).
P = "model.layers.0.mlp."
gpt = [(P + "experts.gate_up_proj_blocks", "U8", [E, 2 * I, H // 32, 16], b"\x21\x43"),
       (P + "experts.gate_up_proj_scales", "U8", [E, 2 * I, H // 32], b"\x7f"),
       (P + "experts.gate_up_proj_bias", "BF16", [E, 2 * I], bf16_small),
       (P + "experts.down_proj_blocks", "U8", [E, H, I // 32, 16], b"\x21\x43"),
       (P + "experts.down_proj_scales", "U8", [E, H, I // 32], b"\x7f"),
       (P + "experts.down_proj_bias", "BF16", [E, H], bf16_small),
       (P + "router.weight", "BF16", [E, H], bf16_small),
       (P + "router.bias", "BF16", [E], bf16_small)]
seed("gptoss_mxfp4_layer0", 3, st(gpt))
print("seeds in", out, file=sys.stderr)
