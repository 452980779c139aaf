/*
 * hopper_bench.cu - throughput of the Hopper forward kernel (cuda/hopper/) through cuda/launch.h, on
 * xfa bench's sweep and in its CSV schema, so that bench/peers.py rows (PyTorch SDPA) sit beside it.
 *
 *     hopper_bench [--dtypes f16,bf16] [--dims 64,128,256] [--seqlens 1024,...,16384] [--tokens 16384]
 *                  [--causal 0,1] [--iters 20] [--label xfa_cuda_sm90] [--br N --bc N --stages N]
 *
 * Shapes: batch = tokens / N, heads = 2048 / D, (batch, head, seq, dim) storage as torch.randn(b, h, n, d).
 * Random inputs (never zeros); two warm-up launches, then `iters` launches each timed with events;
 * median and minimum. TFLOP/s counts 4*B*H*N^2*D, halved for causal.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <algorithm>
#include <string>
#include <vector>

#include "../cuda/launch.h"

#define CHECK_CUDA(x)                                                                                   \
    do {                                                                                                \
        cudaError_t e_ = (x);                                                                           \
        if (e_ != cudaSuccess) {                                                                        \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));          \
            exit(2);                                                                                    \
        }                                                                                               \
    } while (0)

/* Roughly normal 16-bit values from a hash of the index (sum of two uniforms). */
__global__ void fill_random(uint16_t *x, size_t n, uint32_t seed, int bf16)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint32_t h = (uint32_t)i * 2654435761u ^ seed;
        h ^= h >> 16;
        h *= 0x7feb352d;
        h ^= h >> 15;
        h *= 0x846ca68b;
        h ^= h >> 16;
        const float u = ((h & 0xffff) + (h >> 16)) / 65536.f - 1.f;
        const float v = 1.7f * u;
        x[i] = bf16 ? __bfloat16_as_ushort(__float2bfloat16(v)) : __half_as_ushort(__float2half(v));
    }
}

static std::vector<int> int_list(const char *s)
{
    std::vector<int> v;
    for (const char *p = s; *p;) {
        v.push_back(atoi(p));
        while (*p && *p != ',') p++;
        if (*p) p++;
    }
    return v;
}

int main(int argc, char **argv)
{
    const char *dtypes = "f16,bf16", *dims = "64,128,256", *seqlens = "1024,2048,4096,8192,16384", *causals = "0,1";
    const char *label = "xfa_cuda_sm90";
    int tokens = 16384, iters = 20, Br = 0, Bc = 0, stages = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--dtypes")) dtypes = argv[i + 1];
        else if (!strcmp(argv[i], "--dims")) dims = argv[i + 1];
        else if (!strcmp(argv[i], "--seqlens")) seqlens = argv[i + 1];
        else if (!strcmp(argv[i], "--causal")) causals = argv[i + 1];
        else if (!strcmp(argv[i], "--tokens")) tokens = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--iters")) iters = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--label")) label = argv[i + 1];
        else if (!strcmp(argv[i], "--br")) Br = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--bc")) Bc = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--stages")) stages = atoi(argv[i + 1]);
        else {
            fprintf(stderr, "unknown option %s\n", argv[i]);
            return 2;
        }
    }
    cudaDeviceProp prop;
    CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
    printf("backend,device,path,dtype,head_dim,causal,batch,seqlen,heads,median_ms,min_ms,tflops,gbps\n");
    const size_t max_elems = (size_t)tokens * 2048;
    uint16_t *q, *k, *v, *o;
    CHECK_CUDA(cudaMalloc(&q, max_elems * 2));
    CHECK_CUDA(cudaMalloc(&k, max_elems * 2));
    CHECK_CUDA(cudaMalloc(&v, max_elems * 2));
    CHECK_CUDA(cudaMalloc(&o, max_elems * 2));
    float *lse;
    CHECK_CUDA(cudaMalloc(&lse, (size_t)tokens * 2048 / 64 * 4));
    cudaEvent_t e0, e1;
    CHECK_CUDA(cudaEventCreate(&e0));
    CHECK_CUDA(cudaEventCreate(&e1));
    std::string dt(dtypes);
    for (int bf16 = 0; bf16 < 2; bf16++) {
        if (("," + dt + ",").find(bf16 ? ",bf16," : ",f16,") == std::string::npos) continue;
        for (int seed = 0; seed < 3; seed++)
            fill_random<<<1024, 256>>>(seed == 0 ? q : seed == 1 ? k : v, max_elems, 0x1234567u * (seed + 1), bf16);
        CHECK_CUDA(cudaDeviceSynchronize());
        for (int D : int_list(dims))
            for (int causal : int_list(causals))
                for (int N : int_list(seqlens)) {
                    const int B = std::max(tokens / N, 1), H = std::max(2048 / D, 1);
                    xfa_cuda_forward p;
                    memset(&p, 0, sizeof p);
                    p.q = q;
                    p.k = k;
                    p.v = v;
                    p.o = o;
                    p.lse = lse;
                    p.dtype = bf16 ? XFA_CUDA_BF16 : XFA_CUDA_F16;
                    p.batch = B;
                    p.heads_q = p.heads_kv = H;
                    p.seqlen_q = p.seqlen_k = N;
                    p.head_dim = D;
                    const int64_t st[3] = {(int64_t)H * N * D, D, (int64_t)N * D};
                    for (int i = 0; i < 3; i++) p.q_stride[i] = p.k_stride[i] = p.v_stride[i] = p.o_stride[i] = st[i];
                    p.lse_stride[0] = (int64_t)H * N;
                    p.lse_stride[1] = 1;
                    p.lse_stride[2] = N;
                    p.scale = 1.f / sqrtf((float)D);
                    p.causal = causal;
                    p.Br = Br;
                    p.Bc = Bc;
                    p.stages = stages;
                    std::vector<float> ms;
                    bool failed = false;
                    for (int it = 0; it < iters + 2 && !failed; it++) {
                        CHECK_CUDA(cudaEventRecord(e0));
                        const int r = xfa_cuda_sm90_forward(&p, nullptr);
                        CHECK_CUDA(cudaEventRecord(e1));
                        if (r != 0) {
                            fprintf(stderr, "hopper_bench: D=%d N=%d: launcher returned %d\n", D, N, r);
                            failed = true;
                            break;
                        }
                        CHECK_CUDA(cudaEventSynchronize(e1));
                        float t;
                        CHECK_CUDA(cudaEventElapsedTime(&t, e0, e1));
                        if (it >= 2) ms.push_back(t);
                    }
                    CHECK_CUDA(cudaGetLastError());
                    if (failed) continue;
                    std::sort(ms.begin(), ms.end());
                    const double med = ms[ms.size() / 2], best = ms[0];
                    const double flops = 4.0 * B * H * (double)N * N * D / (causal ? 2 : 1);
                    const double bytes = 4.0 * B * H * (double)N * D * 2;
                    printf("%s,\"%s\",sm90a-wgmma-tma,%s,%d,%d,%d,%d,%d,%.4f,%.4f,%.3f,%.2f\n", label, prop.name,
                           bf16 ? "bf16" : "f16", D, causal, B, N, H, med, best, flops / (med * 1e-3) * 1e-12,
                           bytes / (med * 1e-3) * 1e-9);
                    fflush(stdout);
                }
    }
    return 0;
}
