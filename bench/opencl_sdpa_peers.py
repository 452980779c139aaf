"""PyTorch SDPA (flash and math backends) on the shapes of bench/opencl_bench.c, same table format.

fp16, batch * N = tokens, heads = 2048 / D, causal and not; median of R timed calls after two
warm-ups (CUDA events). TFLOP/s counts 4*B*H*N^2*D, halved for causal. Math runs out of memory
at large N (it materialises B*H*N*N scores): such rows say so.
"""
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

tokens = int(sys.argv[1]) if len(sys.argv) > 1 else 16384
reps = int(sys.argv[2]) if len(sys.argv) > 2 else 5
backends = {"flash": SDPBackend.FLASH_ATTENTION, "math": SDPBackend.MATH}

print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}", file=sys.stderr)
print("| kernel | D | N | batch | heads | causal | ms | TFLOP/s |")
print("| --- | --- | --- | --- | --- | --- | --- | --- |")
for name, backend in backends.items():
    for d in (64, 128):
        for causal in (False, True):
            n = 1024
            while n <= tokens:
                b, h = tokens // n, 2048 // d
                flops = 4.0 * b * h * n * n * d / (2 if causal else 1)
                row = f"| torch sdpa {name} | {d} | {n} | {b} | {h} | {'yes' if causal else 'no'} |"
                try:
                    q, k, v = (torch.randn(b, h, n, d, device="cuda", dtype=torch.float16) for _ in range(3))
                    times = []
                    with sdpa_kernel(backend):
                        for r in range(reps + 2):
                            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                            start.record()
                            F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                            end.record()
                            torch.cuda.synchronize()
                            if r >= 2:
                                times.append(start.elapsed_time(end))
                    t = sorted(times)[len(times) // 2]
                    print(f"{row} {t:.3f} | {flops / t * 1e-9:.1f} |", flush=True)
                except torch.cuda.OutOfMemoryError:
                    print(f"{row} out of memory | - |", flush=True)
                finally:
                    q = k = v = None
                    torch.cuda.empty_cache()
                n *= 2
