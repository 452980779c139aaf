/*
 * extras.cuh - the attention extras as the forward kernels apply them, in one
 * place so the generic and the tensor-core kernel cannot disagree: which
 * sequence a work-group's rows belong to (packed variable-length batches), the
 * sliding window, and softcap, ALiBi and bias on a score. The rules are those of
 * xfa_key_visible() and cpu_kernel.c (src/host), as cl/flash_forward.cl has them.
 */
#ifndef XFA_CUDA_EXTRAS_CUH
#define XFA_CUDA_EXTRAS_CUH

#include "device_util.cuh"
#include "launch.h"

namespace xfa {

/* One sequence's rows and keys: a batch entry, or one sequence of a packed batch. */
struct sequence_span {
    int b;                /* batch index into the views (0 in a packed batch) */
    int seqlen_q, seqlen_k;
    int64_t q0, k0;       /* its first row in the packed q/o and k/v (0 unless packed) */
};

__device__ __forceinline__ int clamp_int(int x, int lo, int hi) { return x < lo ? lo : x > hi ? hi : x; }

/*
 * Grid z is the batch entry, or in a packed batch the sequence. The offsets come from device
 * memory and are not trusted: each is clamped into the packed rows and an end below its start
 * is raised to it (an empty sequence), as the OpenCL kernels do, so nothing is read or written
 * outside q, k, v, o and lse whatever the offsets say.
 */
__device__ __forceinline__ sequence_span sequence_of(const xfa_cuda_forward &p, int z)
{
    sequence_span s = {z, p.seqlen_q, p.seqlen_k, 0, 0};
    if (p.cu_seqlens_q) {
        const int qa = clamp_int(p.cu_seqlens_q[(int64_t)z * p.cu_stride[0]], 0, p.seqlen_q);
        const int qb = clamp_int(p.cu_seqlens_q[(int64_t)(z + 1) * p.cu_stride[0]], qa, p.seqlen_q);
        const int ka = clamp_int(p.cu_seqlens_k[(int64_t)z * p.cu_stride[1]], 0, p.seqlen_k);
        const int kb = clamp_int(p.cu_seqlens_k[(int64_t)(z + 1) * p.cu_stride[1]], ka, p.seqlen_k);
        s.b = 0;
        s.seqlen_q = qb - qa;
        s.seqlen_k = kb - ka;
        s.q0 = qa;
        s.k0 = ka;
    }
    return s;
}

/* Row i (of its sequence) sees keys i + diag - left .. i + diag + right, diag = Sk - Sq;
 * -1: no limit on that side. Causal is right = 0. */
struct window {
    int left, right;
    __device__ __forceinline__ bool sees(int row, int key, int diag) const
    {
        return (left < 0 || key >= row + diag - left) && (right < 0 || key <= row + diag + right);
    }
};

__device__ __forceinline__ window window_of(const xfa_cuda_forward &p)
{
    window w = {p.has_window ? p.window_left : -1, p.causal ? 0 : p.has_window ? p.window_right : -1};
    return w;
}

/* Softcap, ALiBi and bias for one (batch entry, head), applied in that order to a score
 * already multiplied by the softmax scale (natural units); the result is in log2 units. */
template <typename E> struct score_extras {
    float softcap, slope;
    const float *bias_f32; /* at most one of the two bias pointers is set */
    const E *bias_e;
    int64_t bias_row, bias_key; /* strides over seqlen_q and seqlen_k */

    __device__ __forceinline__ float apply(float x, int row, int key, int diag) const
    {
        if (softcap > 0.0f) x = softcap * tanhf(x / softcap);
        x -= slope * fabsf((float)(row + diag - key));
        const int64_t at = (int64_t)row * bias_row + (int64_t)key * bias_key;
        if (bias_f32) x += bias_f32[at];
        else if (bias_e) x += to_f32(bias_e[at]);
        return x * 1.4426950408889634f;
    }
};

template <typename E> __device__ __forceinline__ score_extras<E> score_extras_of(const xfa_cuda_forward &p, int b, int h)
{
    score_extras<E> x;
    x.softcap = p.softcap;
    x.slope = p.alibi ? p.alibi[b * p.alibi_stride[0] + h * p.alibi_stride[1]] : 0.0f;
    const int64_t base = b * p.bias_stride[0] + h * p.bias_stride[2];
    x.bias_f32 = p.bias && p.bias_f32 ? static_cast<const float *>(p.bias) + base : nullptr;
    x.bias_e = p.bias && !p.bias_f32 ? static_cast<const E *>(p.bias) + base : nullptr;
    x.bias_row = p.bias_stride[1];
    x.bias_key = p.bias_stride[3];
    return x;
}

/* Whether the score needs softcap, ALiBi or a bias (else it is just scale · q·k). */
__device__ __forceinline__ bool has_score_extras(const xfa_cuda_forward &p)
{
    return p.softcap > 0.0f || p.alibi || p.bias;
}

} // namespace xfa

#endif
