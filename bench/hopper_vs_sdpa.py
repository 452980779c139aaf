#!/usr/bin/env python3
"""The Hopper kernel (cuda/hopper/, through libxfa_sm90.so and cuda/launch.h) against PyTorch SDPA's
cuDNN and flash backends, interleaved in one process on the same tensors, in xfa bench's CSV schema.

    python3 bench/hopper_vs_sdpa.py --lib path/libxfa_sm90.so [--dtypes f16,bf16] [--dims 64,128,256]
        [--seqlens 1024,...,16384] [--tokens 16384] [--causal 0,1] [--iters 20] [--peers cudnn,flash]
        [--configs 128x176x2,...] [--variant NAME=path/lib.so ...]

--configs adds the same library with those Br x Bc x stages plans as backends xfa_<plan>;
--variant adds another build of the kernels (an ablation) as backend xfa_<NAME>. All of them join the
same round robin, so that their differences are not drift between runs.

Shapes as xfa bench and bench/peers.py: batch = tokens / N, heads = 2048 / D, (B, H, N, D) tensors.
Each point: two warm-up calls of every backend, then `iters` rounds, each round timing one call of
every backend with CUDA events (round robin, so that clock and thermal drift hit all alike); the median
and minimum per backend. TFLOP/s counts 4*B*H*N^2*D, halved for causal. The xfa output is also
compared with SDPA's (max abs difference printed on stderr) as a sanity check of the binding.
"""
import argparse
import ctypes
import statistics
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

PEERS = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION}
DTYPES = {"f16": (torch.float16, 1), "bf16": (torch.bfloat16, 2)}


class Forward(ctypes.Structure):
    """cuda/launch.h: xfa_cuda_forward"""
    _fields_ = [("q", ctypes.c_void_p), ("k", ctypes.c_void_p), ("v", ctypes.c_void_p), ("o", ctypes.c_void_p),
                ("lse", ctypes.c_void_p), ("dtype", ctypes.c_int),
                ("batch", ctypes.c_int32), ("heads_q", ctypes.c_int32), ("heads_kv", ctypes.c_int32),
                ("seqlen_q", ctypes.c_int32), ("seqlen_k", ctypes.c_int32), ("head_dim", ctypes.c_int32),
                ("q_stride", ctypes.c_int64 * 3), ("k_stride", ctypes.c_int64 * 3), ("v_stride", ctypes.c_int64 * 3),
                ("o_stride", ctypes.c_int64 * 3), ("lse_stride", ctypes.c_int64 * 3),
                ("scale", ctypes.c_float), ("causal", ctypes.c_int32),
                ("Br", ctypes.c_int32), ("Bc", ctypes.c_int32), ("stages", ctypes.c_int32)]


def bshd_strides(t):
    """(batch, seq, head) strides of a (B, H, N, D) tensor"""
    return (t.stride(0), t.stride(2), t.stride(1))


def csv_list(text, kind=int):
    return [kind(x) for x in text.split(",") if x]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lib", required=True)
    ap.add_argument("--dtypes", default="f16,bf16")
    ap.add_argument("--dims", default="64,128,256")
    ap.add_argument("--seqlens", default="1024,2048,4096,8192,16384")
    ap.add_argument("--tokens", type=int, default=16384)
    ap.add_argument("--causal", default="0,1")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--peers", default="cudnn,flash")
    ap.add_argument("--configs", default="")
    ap.add_argument("--variant", action="append", default=[])
    a = ap.parse_args()
    libs = {"xfa_cuda_sm90": (ctypes.CDLL(a.lib), (0, 0, 0))}
    for plan in csv_list(a.configs, str):
        libs["xfa_" + plan] = (libs["xfa_cuda_sm90"][0], tuple(int(x) for x in plan.split("x")))
    for v in a.variant:
        name, path = v.split("=", 1)
        libs["xfa_" + name] = (ctypes.CDLL(path), (0, 0, 0))
    for lib, _ in libs.values():
        lib.xfa_cuda_sm90_forward.argtypes = [ctypes.POINTER(Forward), ctypes.c_void_p]
    device = torch.cuda.get_device_name()
    print("backend,device,path,dtype,head_dim,causal,batch,seqlen,heads,median_ms,min_ms,tflops,gbps")
    for dname in csv_list(a.dtypes, str):
        dtype, code = DTYPES[dname]
        for d in csv_list(a.dims):
            for causal in csv_list(a.causal):
                for n in csv_list(a.seqlens):
                    b, h = max(a.tokens // n, 1), max(2048 // d, 1)
                    q, k, v = (torch.randn(b, h, n, d, device="cuda", dtype=dtype) for _ in range(3))
                    o = torch.empty_like(q)
                    lse = torch.empty(b, h, n, device="cuda", dtype=torch.float32)
                    stream = torch.cuda.current_stream().cuda_stream
                    runs = {}
                    for name, (lib, plan) in libs.items():
                        p = Forward(q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(), lse.data_ptr(), code,
                                    b, h, h, n, n, d, bshd_strides(q), bshd_strides(k), bshd_strides(v),
                                    bshd_strides(o), (lse.stride(0), lse.stride(2), lse.stride(1)), d ** -0.5, causal,
                                    *plan)

                        def run_xfa(lib=lib, p=p):
                            r = lib.xfa_cuda_sm90_forward(ctypes.byref(p), stream)
                            if r != 0:
                                raise RuntimeError(f"xfa_cuda_sm90_forward returned {r}")
                        runs[name] = run_xfa
                    for peer in csv_list(a.peers, str):
                        def run_peer(peer=peer):
                            with sdpa_kernel(PEERS[peer]):
                                return F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal))
                        runs["sdpa_" + peer] = run_peer
                    live = {}
                    for name, fn in runs.items():
                        try:
                            fn()
                            fn()
                            live[name] = fn
                        except Exception as e:  # a peer without a kernel for this shape
                            print(f"{name} {dname} D={d} N={n} causal={causal}: {type(e).__name__}: "
                                  f"{str(e).splitlines()[0] if str(e) else ''}", file=sys.stderr)
                    torch.cuda.synchronize()
                    if "xfa_cuda_sm90" in live:
                        live["xfa_cuda_sm90"]()
                        ref = F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal))
                        print(f"check {dname} D={d} N={n} causal={causal}: max|xfa-sdpa| = "
                              f"{(o.float() - ref.float()).abs().max().item():.2e}", file=sys.stderr)
                    times = {name: [] for name in live}
                    for _ in range(a.iters):
                        for name, fn in live.items():
                            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                            s.record()
                            fn()
                            e.record()
                            e.synchronize()
                            times[name].append(s.elapsed_time(e))
                    flops = 4.0 * b * h * n * n * d / (2 if causal else 1)
                    moved = 4 * b * h * n * d * q.element_size()
                    for name, t in times.items():
                        med, best = statistics.median(t), min(t)
                        path = "sm90a-wgmma-tma" if name.startswith("xfa") else f"torch-{torch.__version__}"
                        print(f"{name},\"{device}\",{path},{dname},{d},{causal},{b},{n},{h},{med:.4f},{best:.4f},"
                              f"{flops / (med * 1e-3) * 1e-12:.3f},{moved / (med * 1e-3) * 1e-9:.2f}", flush=True)
                    del q, k, v, o, lse
                    torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
