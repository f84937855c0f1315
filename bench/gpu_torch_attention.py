"""PyTorch's fused attention on the GPU, the peer of `gpu_bench attention` (bench/gpu_bench.cu):
torch.nn.functional.scaled_dot_product_attention at the same shapes (B 8, H 8, D 64, causal),
in float32 and in bfloat16 (names with bf16_), forward and forward + backward, median of
CUDA-event timings, one JSON line each.

    python3 bench/gpu_torch_attention.py [--quick]

Prints one line with "ok": false and the reason when PyTorch has no CUDA or no SDPA (< 2.0).
"""
import json
import sys

try:
    import torch
    import torch.nn.functional as F
except ImportError as e:
    print(json.dumps({"section": "attention", "name": "torch_sdpa", "ok": False, "note": f"no torch: {e}"}))
    sys.exit(0)


def median_ms(fn):
    fn()  # warm-up
    torch.cuda.synchronize()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    while len(times) < 50 and (len(times) < 5 or sum(times) < 100):
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    times.sort()
    return times[len(times) // 2]


def main():
    if not torch.cuda.is_available() or not hasattr(F, "scaled_dot_product_attention"):
        print(json.dumps({"section": "attention", "name": "torch_sdpa", "ok": False,
                          "note": f"torch {torch.__version__}: needs CUDA and scaled_dot_product_attention"}))
        return
    torch.backends.cuda.matmul.allow_tf32 = False  # float32 products, as ours
    lengths = [1024] if "--quick" in sys.argv else [1024, 2048, 4096]
    for T in lengths:
        for dtype, kind in [(torch.float32, ""), (torch.bfloat16, "bf16_")]:
            B, H, D = 8, 8, 64
            q, k, v = (torch.randn(B, H, T, D, device="cuda", dtype=dtype, requires_grad=True) for _ in range(3))
            do = torch.randn(B, H, T, D, device="cuda", dtype=dtype)

            def forward():
                with torch.no_grad():
                    F.scaled_dot_product_attention(q, k, v, is_causal=True)

            def forward_backward():
                o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
                o.backward(do)

            fwd_flop = 4.0 * B * H * T * T * D / 2
            for name, fn, flop in [(f"torch_sdpa_{kind}forward", forward, fwd_flop),
                                   (f"torch_sdpa_{kind}forward_backward", forward_backward, 3.5 * fwd_flop)]:
                ms = median_ms(fn)
                print(json.dumps({"section": "attention", "name": name, "T": T, "ms": round(ms, 4),
                                  "tflops": round(flop / ms / 1e9, 3), "ok": True,
                                  "note": f"torch {torch.__version__}"}), flush=True)


main()
