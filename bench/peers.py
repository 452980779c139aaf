#!/usr/bin/env python3
"""Times PyTorch SDPA's backends on xfa's benchmark sweep, in the CSV schema of `xfa bench --csv`.

    python3 bench/peers.py [--dtypes f16,bf16] [--dims 64,128] [--seqlens 1024,...,16384]
                           [--tokens 16384] [--peers flash,cudnn,math] [--iters 10]

Shapes as xfa bench: batch = tokens / N, heads = 2048 / D, causal and not. Each point: two warm-up
calls, then `iters` calls timed with CUDA events; the median and minimum are reported. TFLOP/s
counts 4*B*H*N^2*D, halved for causal. A peer that cannot run a shape (out of memory, unsupported)
is reported on stderr and skipped. Runs wherever PyTorch with CUDA is installed.
"""
import argparse
import statistics
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

PEERS = {
    "flash": SDPBackend.FLASH_ATTENTION,
    "cudnn": SDPBackend.CUDNN_ATTENTION,
    "efficient": SDPBackend.EFFICIENT_ATTENTION,
    "math": SDPBackend.MATH,
}
DTYPES = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}


def csv_list(text, kind=int):
    return [kind(x) for x in text.split(",") if x]


def time_point(peer, dtype, d, n, tokens, causal, iters):
    b, h = max(tokens // n, 1), max(2048 // d, 1)
    q, k, v = (torch.randn(b, h, n, d, device="cuda", dtype=DTYPES[dtype]) for _ in range(3))
    with sdpa_kernel(PEERS[peer]):
        for _ in range(2):
            F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        times = []
        for _ in range(iters):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
    median, best = statistics.median(times), min(times)
    flops = 4.0 * b * h * n * n * d / (2 if causal else 1)
    moved = 4 * b * h * n * d * q.element_size()
    return b, h, median, best, flops / (median * 1e-3) * 1e-12, moved / (median * 1e-3) * 1e-9


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dtypes", default="f16")
    ap.add_argument("--dims", default="64,128")
    ap.add_argument("--seqlens", default="1024,2048,4096,8192,16384")
    ap.add_argument("--tokens", type=int, default=16384)
    ap.add_argument("--peers", default="flash,cudnn,math")
    ap.add_argument("--causal", default="0,1", help="0, 1 or 0,1")
    ap.add_argument("--iters", type=int, default=10)
    a = ap.parse_args()
    device = torch.cuda.get_device_name()
    print("backend,device,path,dtype,head_dim,causal,batch,seqlen,heads,median_ms,min_ms,tflops,gbps")
    for peer in csv_list(a.peers, str):
        for dtype in csv_list(a.dtypes, str):
            for d in csv_list(a.dims):
                for causal in csv_list(a.causal):
                    for n in csv_list(a.seqlens):
                        try:
                            b, h, med, best, tflops, gbps = time_point(peer, dtype, d, n, a.tokens, bool(causal), a.iters)
                        except Exception as e:  # out of memory, no kernel for this shape/dtype
                            print(f"peers: sdpa_{peer} {dtype} D={d} N={n} causal={causal}: {type(e).__name__}: "
                                  f"{str(e).splitlines()[0] if str(e) else ''}", file=sys.stderr)
                            torch.cuda.empty_cache()
                            continue
                        print(f"sdpa_{peer},\"{device}\",torch-{torch.__version__},{dtype},{d},{causal},{b},{n},{h},"
                              f"{med:.4f},{best:.4f},{tflops:.3f},{gbps:.2f}", flush=True)


if __name__ == "__main__":
    main()
