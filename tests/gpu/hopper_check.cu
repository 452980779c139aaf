/*
 * hopper_check.cu - correctness of the Hopper forward kernel (cuda/hopper/) on its own, through the
 * launcher interface of cuda/launch.h: random inputs, poisoned outputs, every element of O and LSE
 * compared with an fp64 reference computed on the host, and the padding around O checked untouched.
 *
 * Tolerance: twice the error of an unfused computation in the same precision (S and softmax in fp32,
 * P rounded to the input type, O accumulated in fp32 and rounded), measured per case against the same
 * fp64 reference: the fused kernel must be as accurate as the obvious implementation, within 2x.
 *
 *     hopper_check [--quick]      exit status 0 when every case passes
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

#include "../../cuda/hopper/sm90_configs.h"
#include "../../cuda/launch.h"

#define CHECK_CUDA(x)                                                                                   \
    do {                                                                                                \
        cudaError_t e_ = (x);                                                                           \
        if (e_ != cudaSuccess) {                                                                        \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));          \
            exit(2);                                                                                    \
        }                                                                                               \
    } while (0)

struct Case {
    const char *name;
    xfa_cuda_dtype dtype;
    int B, Hq, Hkv, Sq, Sk, D, causal;
    bool lse;
    bool bhsd;        /* (batch, head, seq, dim) storage instead of (batch, seq, head, dim) */
    int o_pad;        /* extra elements after each O row (checked untouched) */
    int Br, Bc, stages; /* plan hints passed to the launcher */
};

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static double uniform()
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) / (double)(1ull << 53);
}
static double normal()
{
    double s = 0;
    for (int i = 0; i < 4; i++) s += uniform();
    return (s - 2.0) * 1.7320508;
}

static uint16_t to_bits(double x, xfa_cuda_dtype t)
{
    if (t == XFA_CUDA_F16) {
        __half h = __double2half(x);
        return *reinterpret_cast<uint16_t *>(&h);
    }
    __nv_bfloat16 h = __double2bfloat16(x);
    return *reinterpret_cast<uint16_t *>(&h);
}
static double from_bits(uint16_t b, xfa_cuda_dtype t)
{
    if (t == XFA_CUDA_F16) return __half2float(*reinterpret_cast<__half *>(&b));
    return __bfloat162float(*reinterpret_cast<__nv_bfloat16 *>(&b));
}
static double round_to(double x, xfa_cuda_dtype t) { return from_bits(to_bits(x, t), t); }

/* A (B, S, H, D) tensor: values (already rounded to the type) and device storage in the case's layout. */
struct Tensor {
    int B, S, H, D;
    std::vector<double> val; /* [b][s][h][d] */
    int64_t stride[3];       /* batch, seq, head */
    size_t elems;
};

static Tensor make_tensor(const Case &c, int S, int H, int pad)
{
    Tensor t{c.B, S, H, c.D, {}, {0, 0, 0}, 0};
    const int64_t row = c.D + pad;
    if (c.bhsd) {
        t.stride[2] = (int64_t)S * row;
        t.stride[1] = row;
        t.stride[0] = (int64_t)H * S * row;
    } else {
        t.stride[2] = row;
        t.stride[1] = (int64_t)H * row;
        t.stride[0] = (int64_t)S * H * row;
    }
    t.elems = (size_t)c.B * S * H * row;
    return t;
}
static size_t at(const Tensor &t, int b, int s, int h) { return b * t.stride[0] + s * t.stride[1] + h * t.stride[2]; }

static void fill(Tensor &t, xfa_cuda_dtype type, std::vector<uint16_t> &host)
{
    host.assign(t.elems, to_bits(NAN, type));
    t.val.resize((size_t)t.B * t.S * t.H * t.D);
    for (int b = 0; b < t.B; b++)
        for (int s = 0; s < t.S; s++)
            for (int h = 0; h < t.H; h++)
                for (int d = 0; d < t.D; d++) {
                    const uint16_t bits = to_bits(normal(), type);
                    host[at(t, b, s, h) + d] = bits;
                    t.val[(((size_t)b * t.S + s) * t.H + h) * t.D + d] = from_bits(bits, type);
                }
}

static bool visible(const Case &c, int i, int j) { return j < c.Sk && (!c.causal || j <= i + c.Sk - c.Sq); }

/* fp64 reference (o, lse) and the unfused low-precision computation (uo) for one (b, h, i). */
static void reference_row(const Case &c, const Tensor &q, const Tensor &k, const Tensor &v, int b, int h, int i,
                          double *o, double *lse, double *uo, std::vector<double> &sc, std::vector<float> &sf)
{
    const int hk = h / (c.Hq / c.Hkv), D = c.D;
    const double scale = 1.0 / sqrt((double)D);
    const double *qr = &q.val[(((size_t)b * c.Sq + i) * c.Hq + h) * D];
    double mx = -INFINITY;
    float mxf = -INFINITY;
    for (int j = 0; j < c.Sk; j++) {
        if (!visible(c, i, j)) { sc[j] = -INFINITY; sf[j] = -INFINITY; continue; }
        const double *kr = &k.val[(((size_t)b * c.Sk + j) * c.Hkv + hk) * D];
        double dot = 0;
        float dotf = 0;
        for (int d = 0; d < D; d++) {
            dot += qr[d] * kr[d];
            dotf += (float)qr[d] * (float)kr[d];
        }
        sc[j] = dot * scale;
        sf[j] = dotf * (float)scale;
        mx = fmax(mx, sc[j]);
        mxf = fmaxf(mxf, sf[j]);
    }
    for (int d = 0; d < D; d++) o[d] = uo[d] = 0;
    double sum = 0;
    float sumf = 0;
    if (mx != -INFINITY) {
        for (int j = 0; j < c.Sk; j++) {
            if (sc[j] == -INFINITY) continue;
            sc[j] = exp(sc[j] - mx);
            sum += sc[j];
            sf[j] = expf(sf[j] - mxf);
            sumf += sf[j];
        }
        std::vector<float> acc(D, 0.f);
        for (int j = 0; j < c.Sk; j++) {
            if (sc[j] == 0 && sf[j] == 0) continue;
            if (!visible(c, i, j)) continue;
            const double *vr = &v.val[(((size_t)b * c.Sk + j) * c.Hkv + hk) * D];
            const float pj = (float)round_to(sf[j] / sumf, c.dtype);
            for (int d = 0; d < D; d++) {
                o[d] += sc[j] * vr[d];
                acc[d] += pj * (float)vr[d];
            }
        }
        for (int d = 0; d < D; d++) {
            o[d] /= sum;
            uo[d] = round_to(acc[d], c.dtype);
        }
    }
    *lse = sum > 0 ? mx + log(sum) : -INFINITY;
}

static bool run_case(const Case &c, bool verbose)
{
    Tensor q = make_tensor(c, c.Sq, c.Hq, 0), k = make_tensor(c, c.Sk, c.Hkv, 0), v = make_tensor(c, c.Sk, c.Hkv, 0);
    Tensor o = make_tensor(c, c.Sq, c.Hq, c.o_pad);
    std::vector<uint16_t> hq, hk, hv;
    fill(q, c.dtype, hq);
    fill(k, c.dtype, hk);
    fill(v, c.dtype, hv);
    const uint16_t poison = to_bits(NAN, c.dtype);
    std::vector<uint16_t> ho(o.elems, poison);
    const size_t lse_n = (size_t)c.B * c.Sq * c.Hq;
    std::vector<float> hl(lse_n + 1, NAN); /* one extra element: checked untouched */

    void *dq, *dk, *dv, *dout;
    float *dl = nullptr;
    CHECK_CUDA(cudaMalloc(&dq, q.elems * 2));
    CHECK_CUDA(cudaMalloc(&dk, k.elems * 2));
    CHECK_CUDA(cudaMalloc(&dv, v.elems * 2));
    CHECK_CUDA(cudaMalloc(&dout, o.elems * 2));
    CHECK_CUDA(cudaMalloc(&dl, hl.size() * 4));
    CHECK_CUDA(cudaMemcpy(dq, hq.data(), q.elems * 2, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(dk, hk.data(), k.elems * 2, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(dv, hv.data(), v.elems * 2, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(dout, ho.data(), o.elems * 2, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(dl, hl.data(), hl.size() * 4, cudaMemcpyHostToDevice));

    xfa_cuda_forward p;
    memset(&p, 0, sizeof p);
    p.q = dq;
    p.k = dk;
    p.v = dv;
    p.o = dout;
    p.lse = c.lse ? dl : nullptr;
    p.dtype = c.dtype;
    p.batch = c.B;
    p.heads_q = c.Hq;
    p.heads_kv = c.Hkv;
    p.seqlen_q = c.Sq;
    p.seqlen_k = c.Sk;
    p.head_dim = c.D;
    for (int i = 0; i < 3; i++) {
        p.q_stride[i] = q.stride[i];
        p.k_stride[i] = k.stride[i];
        p.v_stride[i] = v.stride[i];
        p.o_stride[i] = o.stride[i];
    }
    /* LSE as (batch, head, seq) */
    p.lse_stride[0] = (int64_t)c.Hq * c.Sq;
    p.lse_stride[1] = 1;
    p.lse_stride[2] = c.Sq;
    p.scale = (float)(1.0 / sqrt((double)c.D));
    p.causal = c.causal;
    p.Br = c.Br;
    p.Bc = c.Bc;
    p.stages = c.stages;

    if (!xfa_cuda_sm90_supported(&p)) {
        printf("FAIL %s: not supported\n", c.name);
        return false;
    }
    const int r = xfa_cuda_sm90_forward(&p, nullptr);
    if (r != 0) {
        printf("FAIL %s: launcher returned %d (%s)\n", c.name, r, r > 0 ? cudaGetErrorString((cudaError_t)r) : "not handled");
        return false;
    }
    CHECK_CUDA(cudaGetLastError());
    CHECK_CUDA(cudaDeviceSynchronize());
    CHECK_CUDA(cudaMemcpy(ho.data(), dout, o.elems * 2, cudaMemcpyDeviceToHost));
    CHECK_CUDA(cudaMemcpy(hl.data(), dl, hl.size() * 4, cudaMemcpyDeviceToHost));

    /* a second launch must give the same bits (a race shows up as a difference) */
    std::vector<uint16_t> ho2(o.elems);
    CHECK_CUDA(cudaMemset(dout, 0xFF, o.elems * 2));
    if (xfa_cuda_sm90_forward(&p, nullptr) != 0) return false;
    CHECK_CUDA(cudaDeviceSynchronize());
    CHECK_CUDA(cudaMemcpy(ho2.data(), dout, o.elems * 2, cudaMemcpyDeviceToHost));
    size_t diff_bits = 0;
    for (int b = 0; b < c.B; b++)
        for (int s = 0; s < c.Sq; s++)
            for (int h = 0; h < c.Hq; h++)
                for (int d = 0; d < c.D; d++) diff_bits += ho[at(o, b, s, h) + d] != ho2[at(o, b, s, h) + d];

    double max_err = 0, max_uerr = 0, max_ref = 0, max_lse_err = 0, sq_err = 0, sq_ref = 0;
    size_t bad = 0, pad_touched = 0, lse_bad = 0;
    const int rows = c.B * c.Hq * c.Sq;
#pragma omp parallel reduction(max : max_err, max_uerr, max_ref, max_lse_err) reduction(+ : sq_err, sq_ref, bad, pad_touched, lse_bad)
    {
        std::vector<double> ro(c.D), uo(c.D), sc(c.Sk);
        std::vector<float> sf(c.Sk);
#pragma omp for schedule(dynamic, 16)
        for (int r = 0; r < rows; r++) {
                const int b = r / (c.Hq * c.Sq), h = r / c.Sq % c.Hq, i = r % c.Sq;
                double lse;
                reference_row(c, q, k, v, b, h, i, ro.data(), &lse, uo.data(), sc, sf);
                const size_t base = at(o, b, i, h);
                for (int d = 0; d < c.D; d++) {
                    const double got = from_bits(ho[base + d], c.dtype);
                    if (!isfinite(got)) { bad++; continue; }
                    max_err = fmax(max_err, fabs(got - ro[d]));
                    max_uerr = fmax(max_uerr, fabs(uo[d] - ro[d]));
                    max_ref = fmax(max_ref, fabs(ro[d]));
                    sq_err += (got - ro[d]) * (got - ro[d]);
                    sq_ref += ro[d] * ro[d];
                }
                for (int d = c.D; d < c.D + c.o_pad; d++) pad_touched += ho[base + d] != poison;
                if (c.lse) {
                    const float got = hl[(size_t)b * c.Hq * c.Sq + (size_t)h * c.Sq + i];
                    if (isinf(lse)) {
                        lse_bad += !(isinf(got) && got < 0);
                    } else if (!isfinite(got)) {
                        lse_bad++;
                    } else {
                        const double e = fabs(got - lse);
                        max_lse_err = fmax(max_lse_err, e);
                        lse_bad += e > 1e-3 * (1 + fabs(lse));
                    }
                }
        }
    }
    if (c.lse) lse_bad += !isnan(hl[lse_n]);
    else
        for (size_t i = 0; i <= lse_n; i++) lse_bad += !isnan(hl[i]);
    /* the unfused error is at least half an ulp of the output; the floor keeps tiny outputs fair */
    const double tol = 2 * max_uerr + 1e-6;
    const bool ok = bad == 0 && pad_touched == 0 && lse_bad == 0 && diff_bits == 0 && max_err <= tol;
    if (!ok || verbose)
        printf("%s %-44s err %.3e (unfused %.3e, tol %.3e) rel_l2 %.2e lse_err %.2e unwritten %zu pad %zu lse_bad %zu "
               "rerun_diff %zu\n",
               ok ? "ok  " : "FAIL", c.name, max_err, max_uerr, tol, sqrt(sq_err / fmax(sq_ref, 1e-300)), max_lse_err, bad,
               pad_touched, lse_bad, diff_bits);
    cudaFree(dq);
    cudaFree(dk);
    cudaFree(dv);
    cudaFree(dout);
    cudaFree(dl);
    return ok;
}

/* The launcher must decline what it cannot do, so that the host falls back. */
static bool check_declines()
{
    static __align__(16) uint16_t dummy[64];
    xfa_cuda_forward p;
    memset(&p, 0, sizeof p);
    p.q = p.k = p.v = dummy;
    p.o = dummy;
    p.dtype = XFA_CUDA_F16;
    p.batch = p.heads_q = p.heads_kv = 1;
    p.seqlen_q = p.seqlen_k = 1;
    p.head_dim = 128;
    bool ok = xfa_cuda_sm90_supported(&p) == 1;
    p.head_dim = 96;
    ok &= xfa_cuda_sm90_supported(&p) == 0 && xfa_cuda_sm90_forward(&p, nullptr) == XFA_CUDA_NOT_HANDLED;
    p.head_dim = 64;
    p.dtype = XFA_CUDA_F32;
    ok &= xfa_cuda_sm90_supported(&p) == 0;
    p.dtype = XFA_CUDA_BF16;
    p.k = reinterpret_cast<const uint8_t *>(dummy) + 2; /* not 16-byte aligned */
    ok &= xfa_cuda_sm90_supported(&p) == 0;
    p.k = dummy;
    p.seqlen_k = 4;
    p.k_stride[1] = 68; /* 136-byte rows: TMA cannot step them */
    ok &= xfa_cuda_sm90_supported(&p) == 0;
    p.k_stride[1] = 64;
    p.heads_q = 3;
    p.heads_kv = 2; /* not a GQA grouping */
    ok &= xfa_cuda_sm90_supported(&p) == 0;
    printf("%s declines unsupported problems\n", ok ? "ok  " : "FAIL");
    return ok;
}

int main(int argc, char **argv)
{
    const bool quick = argc > 1 && !strcmp(argv[1], "--quick");
    cudaDeviceProp prop;
    CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
    printf("device: %s (sm_%d%d)\n", prop.name, prop.major, prop.minor);
    std::vector<Case> cases;
    char *names = (char *)malloc(1 << 16), *np = names;
    auto add = [&](xfa_cuda_dtype t, int B, int Hq, int Hkv, int Sq, int Sk, int D, int causal, bool lse, bool bhsd,
                   int pad, int Br = 0, int Bc = 0, int stages = 0) {
        int n = sprintf(np, "%s B%d H%d/%d Sq%d Sk%d D%d%s%s%s", t == XFA_CUDA_F16 ? "f16" : "bf16", B, Hq, Hkv, Sq, Sk, D,
                        causal ? " causal" : "", bhsd ? " bhsd" : "", lse ? "" : " nolse");
        if (Br || Bc || stages) n += sprintf(np + n, " [%d,%d,%d]", Br, Bc, stages);
        cases.push_back(Case{np, t, B, Hq, Hkv, Sq, Sk, D, causal, lse, bhsd, pad, Br, Bc, stages});
        np += n + 1;
    };
    const xfa_cuda_dtype types[2] = {XFA_CUDA_F16, XFA_CUDA_BF16};
    const int dims[3] = {64, 128, 256};
    for (xfa_cuda_dtype t : types)
        for (int D : dims)
            for (int causal = 0; causal < 2; causal++) {
                add(t, 2, 3, 3, 257, 257, D, causal, true, false, 8);  /* odd N, padded O rows */
                if (quick) continue;
                add(t, 1, 2, 2, 1, 1, D, causal, true, true, 0);       /* N = 1 */
                add(t, 1, 8, 2, 300, 300, D, causal, true, false, 0);  /* GQA 4:1 */
                add(t, 1, 2, 1, 100, 333, D, causal, true, true, 0);   /* Sq < Sk: bottom-right diagonal */
                add(t, 1, 2, 2, 333, 100, D, causal, true, false, 0);  /* Sq > Sk: causal rows with no key */
                add(t, 1, 2, 2, 1000, 1000, D, causal, false, true, 0); /* many key blocks, no LSE */
            }
    if (!quick) {
        add(XFA_CUDA_F16, 1, 2, 2, 700, 700, 128, 1, true, false, 0, 96, 64, 3); /* hints not compiled: default */
        /* every compiled configuration, not only the defaults */
        int i = 0;
        for (const xfa_sm90::Config &k : xfa_sm90::kConfigs) {
            add(i % 2 ? XFA_CUDA_BF16 : XFA_CUDA_F16, 1, 3, 3, 611, 611, k.D, i / 2 % 2, true, i % 2, 0, k.Br, k.Bc, k.stages);
            add(i % 2 ? XFA_CUDA_F16 : XFA_CUDA_BF16, 1, 4, 2, 200, 611, k.D, 1 - i / 2 % 2, true, false, 0, k.Br, k.Bc,
                k.stages);
            i++;
        }
        add(XFA_CUDA_BF16, 1, 1, 1, 2048, 2048, 128, 0, true, true, 0);
    }
    int fails = !check_declines();
    for (const Case &c : cases) fails += !run_case(c, true);
    printf("%s: %d of %zu cases failed\n", fails ? "FAILED" : "PASSED", fails, cases.size() + 1);
    free(names);
    return fails ? 1 : 0;
}
