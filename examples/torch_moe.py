"""Run one NVFP4 MoE layer from PyTorch with fp4moe.

Builds a small random layer in the ModelOpt checkpoint layout (what vLLM loads), routes
random router logits, runs the layer, checks it against a plain PyTorch evaluation on the
dequantized weights, and (on a GPU) replays it from a CUDA graph.

    python examples/torch_moe.py [--experts 16] [--hidden 1024] [--intermediate 512]
                                 [--tokens 64] [--top-k 4] [--quant w4a16|w4a4]
"""
import argparse

import torch

import fp4moe


def quantize_expert_weights(w: torch.Tensor):
    """[E, N, K] float -> (data u8 [E, N, K/2], scale e4m3 [E, N, K/16], weight_scale_2 f32 [E]).

    ModelOpt's convention: one global dq_scale per expert, amax / (6 * 448).
    """
    dq = w.abs().amax(dim=(1, 2)).float() / (6 * 448)
    data, scale = zip(*(fp4moe.quantize_nvfp4(w[e], 1.0 / dq[e].item()) for e in range(w.shape[0])))
    # stack the scale bytes: not every torch version concatenates float8 tensors
    scale = torch.stack([s.view(torch.uint8) for s in scale]).view(torch.float8_e4m3fn)
    return torch.stack(data), scale, dq


def dequantize_expert_weights(data, scale, dq):
    return torch.stack([fp4moe.dequantize_nvfp4(data[e], scale[e], dq[e].item()) for e in range(data.shape[0])])


def torch_moe(x, topk_weights, topk_ids, w13, w2):
    """What the layer computes (SPEC §4, W4A16), on dequantized fp32 weights."""
    n_i = w2.shape[2]
    xb = x.to(torch.bfloat16).float()
    out = torch.zeros(x.shape[0], w2.shape[1], device=x.device)
    for t in range(x.shape[0]):
        for j in range(topk_ids.shape[1]):
            e = int(topk_ids[t, j])
            gu = w13[e] @ xb[t]
            h = (torch.nn.functional.silu(gu[:n_i]) * gu[n_i:]).to(torch.bfloat16).float()
            out[t] += topk_weights[t, j] * (w2[e] @ h)
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--experts", type=int, default=16)
    p.add_argument("--hidden", type=int, default=1024)
    p.add_argument("--intermediate", type=int, default=512)
    p.add_argument("--tokens", type=int, default=64)
    p.add_argument("--top-k", type=int, default=4)
    p.add_argument("--quant", choices=["w4a16", "w4a4"], default="w4a16")
    args = p.parse_args()
    dev = "cuda" if torch.cuda.is_available() and fp4moe.info()["with_cuda"] else "cpu"
    E, H, I, T, k = args.experts, args.hidden, args.intermediate, args.tokens, args.top_k
    print(f"fp4moe {fp4moe.__version__} on {dev}; backends:",
          ", ".join(f"{b['name']}{'' if b['available'] else ' (unavailable)'}" for b in fp4moe.backends()))

    # A checkpoint as ModelOpt exports it: gate rows [0, I) and up rows [I, 2I) share one global scale.
    w13_f = torch.randn(E, 2 * I, H, device=dev) * 0.05
    w2_f = torch.randn(E, H, I, device=dev) * 0.05
    w13, w13_scale, w13_scale_2 = quantize_expert_weights(w13_f)
    w2, w2_scale, w2_scale_2 = quantize_expert_weights(w2_f)
    extra = {}
    if args.quant == "w4a4":  # activation dq_scales (calibrated in a real checkpoint)
        extra = dict(w13_input_scale=torch.full((E,), 4.0 / (6 * 448), device=dev),
                     w2_input_scale=torch.full((E,), 1.0 / (6 * 448), device=dev))

    layer = fp4moe.MoELayer(w13, w13_scale, w13_scale_2, w2, w2_scale, w2_scale_2, quant=args.quant,
                            max_num_tokens=T, top_k=k, **extra)
    print(layer, "-", layer.selection_reason)

    x = torch.randn(T, H, device=dev, dtype=torch.bfloat16)
    topk_weights, topk_ids = fp4moe.route(torch.randn(T, E, device=dev), k)
    out = layer(x, topk_weights, topk_ids)

    if args.quant == "w4a16":
        ref = torch_moe(x, topk_weights, topk_ids, dequantize_expert_weights(w13, w13_scale, w13_scale_2),
                        dequantize_expert_weights(w2, w2_scale, w2_scale_2))
        err = ((out.float() - ref).abs().max() / ref.abs().max()).item()
        print(f"max |out - reference| / max |reference| = {err:.2e}")
        assert err < 1e-2, "fp4moe disagrees with the PyTorch evaluation"

    if dev == "cuda":
        # Calls neither allocate nor synchronise when out is given, so they can be captured.
        static_out = torch.empty_like(out)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            layer(x, topk_weights, topk_ids, out=static_out)
        x.copy_(torch.randn_like(x))
        graph.replay()
        torch.cuda.synchronize()
        same = torch.equal(static_out, layer(x, topk_weights, topk_ids))
        print("CUDA graph replay matches an eager call:", same)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(20):
            graph.replay()
        end.record()
        torch.cuda.synchronize()
        print(f"{start.elapsed_time(end) / 20 * 1e3:.1f} us per layer call (graph replay)")


if __name__ == "__main__":
    main()
