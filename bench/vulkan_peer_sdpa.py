"""vulkan_peer_sdpa.py - PyTorch SDPA (flash backend) on the shapes of vulkan_bench.c.

fp16, BSHD tensors as xfa takes them (SDPA gets the B,H,N,D transpose view),
D = 64/128, N = 1k..16k, batch*N = 16k, heads = 2048/D, causal and not.
CUDA-event timing, median of 3 runs of >= 0.25 s each after a warm-up call.
"""
import statistics

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel


def time_ms(fn):
    fn()
    torch.cuda.synchronize()
    runs = []
    for _ in range(3):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        n, elapsed = 0, 0.0
        start.record()
        while n < 3 or elapsed < 250.0:
            fn()
            n += 1
            if n % 4 == 0:
                end.record()
                torch.cuda.synchronize()
                elapsed = start.elapsed_time(end)
        end.record()
        torch.cuda.synchronize()
        runs.append(start.elapsed_time(end) / n)
    return statistics.median(runs)


def main():
    print(f"# PyTorch {torch.__version__} SDPA flash on {torch.cuda.get_device_name()}")
    print("| peer | D | N | causal | B | H | ms | TFLOP/s |")
    print("|---|---|---|---|---|---|---|---|")
    for d in (64, 128):
        h = 2048 // d
        n = 1024
        while n <= 16384:
            b = 16384 // n
            q, k, v = (torch.randn(b, n, h, d, device="cuda", dtype=torch.float16).transpose(1, 2) for _ in range(3))
            for causal in (0, 1):
                with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                    ms = time_ms(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal)))
                flops = 4 * b * h * n * n * d * (0.5 if causal else 1.0)
                print(f"| sdpa_flash | {d} | {n} | {causal} | {b} | {h} | {ms:.3f} | {flops / ms / 1e9:.1f} |", flush=True)
            n *= 2


if __name__ == "__main__":
    main()
