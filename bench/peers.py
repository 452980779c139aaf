#!/usr/bin/env python3
"""Times PyTorch SDPA's backends on xfa's benchmark sweep, in the CSV schema of `xfa bench --csv`.

    python3 bench/peers.py [--dtypes f16,bf16] [--dims 64,128] [--seqlens 1024,...,16384]
                           [--tokens 16384] [--peers flash,cudnn,math] [--iters 10]
    python3 bench/peers.py --backward [same options]
    python3 bench/peers.py --decode [--batches 1,8,32] [--caches 1024,...,131072] [--heads 32 --heads-kv 8]

--decode times one new token per sequence against a KV cache (q: B x Hq x 1 x D, K/V: B x Hkv x L x D,
SDPA's enable_gqa), as `xfa bench-decode` does: seqlen = cache length, gbps = K and V bytes read / time;
a `copy` row gives the device-to-device copy bandwidth of the same run (bytes read + written / time).

--backward times the backward pass alone, as `xfa bench --backward` does: one forward call, then
torch.autograd.grad of its output with a random dO (retain_graph), i.e. the backend's own backward
kernel; TFLOP/s counts 2.5x the forward's FLOPs, the path column ends in "+backward".

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


def time_point(peer, dtype, d, n, tokens, causal, iters, backward=False):
    b, h = max(tokens // n, 1), max(2048 // d, 1)
    q, k, v = (torch.randn(b, h, n, d, device="cuda", dtype=DTYPES[dtype], requires_grad=backward) for _ in range(3))
    with sdpa_kernel(PEERS[peer]):
        if backward:
            out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            d_o = torch.randn_like(out)
            median, best = time_calls(lambda: torch.autograd.grad(out, (q, k, v), d_o, retain_graph=True), iters)
        else:
            median, best = time_calls(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal), iters)
    flops = 4.0 * b * h * n * n * d / (2 if causal else 1) * (2.5 if backward else 1)
    moved = (8 if backward else 4) * b * h * n * d * q.element_size()
    return b, h, median, best, flops / (median * 1e-3) * 1e-12, moved / (median * 1e-3) * 1e-9


def time_calls(fn, iters):
    for _ in range(2):
        fn()
    times = []
    for _ in range(iters):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times), min(times)


def decode_sweep(a, device):
    d, hq, hkv = csv_list(a.dims)[0], a.heads, a.heads_kv
    src = torch.empty(1 << 29, device="cuda", dtype=torch.uint8)  # 512 MiB
    dst = torch.empty_like(src)
    med, best = time_calls(lambda: dst.copy_(src), a.iters)
    print(f"copy,\"{device}\",read+write,u8,0,0,1,{src.numel()},0,{med:.4f},{best:.4f},0,"
          f"{2 * src.numel() / (med * 1e-3) * 1e-9:.2f}", flush=True)
    del src, dst
    for peer in csv_list(a.peers, str):
        for dtype in csv_list(a.dtypes, str):
            for b in csv_list(a.batches):
                for n in csv_list(a.caches):
                    try:
                        q = torch.randn(b, hq, 1, d, device="cuda", dtype=DTYPES[dtype])
                        k, v = (torch.randn(b, hkv, n, d, device="cuda", dtype=DTYPES[dtype]) for _ in range(2))
                        with sdpa_kernel(PEERS[peer]):
                            med, best = time_calls(
                                lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=hq != hkv), a.iters)
                    except Exception as e:  # out of memory, no kernel for this shape/dtype
                        print(f"peers: sdpa_{peer} decode {dtype} B={b} L={n}: {type(e).__name__}: "
                              f"{str(e).splitlines()[0] if str(e) else ''}", file=sys.stderr)
                        q = k = v = None
                        torch.cuda.empty_cache()
                        continue
                    kv_bytes = 2 * b * hkv * n * d * k.element_size()
                    flops = 4.0 * b * hq * n * d
                    print(f"sdpa_{peer},\"{device}\",decode:torch-{torch.__version__},{dtype},{d},0,{b},{n},{hq},"
                          f"{med:.4f},{best:.4f},{flops / (med * 1e-3) * 1e-12:.3f},"
                          f"{kv_bytes / (med * 1e-3) * 1e-9:.2f}", flush=True)
                    q = k = v = None
                    torch.cuda.empty_cache()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dtypes", default="f16")
    ap.add_argument("--dims", default="64,128")
    ap.add_argument("--seqlens", default="1024,2048,4096,8192,16384")
    ap.add_argument("--tokens", type=int, default=16384)
    ap.add_argument("--peers", default="flash,cudnn,math")
    ap.add_argument("--causal", default="0,1", help="0, 1 or 0,1")
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--backward", action="store_true", help="time the backward pass alone (2.5x the forward's FLOPs)")
    ap.add_argument("--decode", action="store_true", help="time decoding against a KV cache instead")
    ap.add_argument("--batches", default="1,8,32")
    ap.add_argument("--caches", default="1024,8192,32768,131072")
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--heads-kv", type=int, default=8)
    a = ap.parse_args()
    device = torch.cuda.get_device_name()
    print("backend,device,path,dtype,head_dim,causal,batch,seqlen,heads,median_ms,min_ms,tflops,gbps")
    if a.decode:
        if a.dims == "64,128":
            a.dims = "128"
        decode_sweep(a, device)
        return
    for peer in csv_list(a.peers, str):
        for dtype in csv_list(a.dtypes, str):
            for d in csv_list(a.dims):
                for causal in csv_list(a.causal):
                    for n in csv_list(a.seqlens):
                        try:
                            b, h, med, best, tflops, gbps = time_point(peer, dtype, d, n, a.tokens, bool(causal), a.iters,
                                                                       a.backward)
                        except Exception as e:  # out of memory, no kernel for this shape/dtype
                            print(f"peers: sdpa_{peer} {dtype} D={d} N={n} causal={causal}: {type(e).__name__}: "
                                  f"{str(e).splitlines()[0] if str(e) else ''}", file=sys.stderr)
                            torch.cuda.empty_cache()
                            continue
                        print(f"sdpa_{peer},\"{device}\",torch-{torch.__version__}{'+backward' if a.backward else ''},{dtype},{d},{causal},{b},{n},{h},"
                              f"{med:.4f},{best:.4f},{tflops:.3f},{gbps:.2f}", flush=True)
                        torch.cuda.empty_cache()  # the math backend's N x N scores otherwise pile up


if __name__ == "__main__":
    main()
