/*
 * cpu_kernel.h - the tiled online-softmax forward on the CPU, in f32: the
 * algorithm the GPU kernels run, here where it can be tested anywhere.
 */
#ifndef XFA_CPU_KERNEL_H
#define XFA_CPU_KERNEL_H

#include "internal.h"

/* The hot loops get an x86-64-v3 (AVX2 + FMA) clone picked at load time, so one build
 * runs on any x86-64 and still uses the wide vectors where the CPU has them. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__) && !defined(__SANITIZE_THREAD__)
#define XFA_CPU_HOT __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define XFA_CPU_HOT
#endif

/* Scratch one worker needs for a plan, in floats. */
size_t xfa_cpu_scratch_floats(const xfa_plan *plan);

/* Where each tensor of a call starts in host memory (view offsets applied); NULL when absent. */
typedef struct xfa_cpu_views {
    const void *q, *k, *v;
    void *o;
    float *lse;
    const float *alibi;
    const void *bias;
} xfa_cpu_views;

/* q . k over d (a multiple of 8): eight partial sums so the compiler can vectorise
 * without reassociating floats behind our back. */
static inline float xfa_cpu_dot(const float *q, const float *k, int64_t d)
{
    float part[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int64_t x = 0; x < d; x += 8)
        for (int j = 0; j < 8; j++) part[j] += q[x + j] * k[x + j];
    return ((part[0] + part[1]) + (part[2] + part[3])) + ((part[4] + part[5]) + (part[6] + part[7]));
}

/* The scaled score `s` of (i, j) plus softcap, ALiBi and bias, in natural-log units (see xfa.h). */
float xfa_cpu_score_extras(const xfa_forward_args *a, const xfa_cpu_views *mem, float s, float slope, int64_t b,
                           int64_t h, int64_t i, int64_t j);
/* The ALiBi slope of (b, h), or 0 without ALiBi. */
float xfa_cpu_alibi_slope(const xfa_forward_args *a, const xfa_cpu_views *mem, int64_t b, int64_t h);
/* Keys [begin, end) that some row of rows row0 .. row0+rows-1 may see (causal mask and window). */
void xfa_cpu_key_range(const xfa_forward_args *a, int64_t row0, int64_t rows, int64_t *begin, int64_t *end);

/* Computes the query block `q_block` (rows q_block*Br ..) of head h in batch b. */
void xfa_cpu_forward_block(const xfa_forward_args *a, const xfa_cpu_views *mem, int64_t b, int64_t h, int64_t q_block,
                           float *scratch);

/* The backward's extra tensors (cpu_backward.c). */
typedef struct xfa_cpu_grad_views {
    const void *o, *d_o;
    const float *lse;
    void *dq, *dk, *dv;
} xfa_cpu_grad_views;

size_t xfa_cpu_backward_scratch_floats(const xfa_plan *plan);
/* Pass 1: dK and dV of K/V block `kv_block` of kv head hk in batch b. */
void xfa_cpu_backward_kv_block(const xfa_backward_args *a, const xfa_cpu_views *mem, const xfa_cpu_grad_views *g,
                               int64_t b, int64_t hk, int64_t kv_block, float *scratch);
/* Pass 2: dQ of query block `q_block` of head h in batch b. */
void xfa_cpu_backward_q_block(const xfa_backward_args *a, const xfa_cpu_views *mem, const xfa_cpu_grad_views *g,
                              int64_t b, int64_t h, int64_t q_block, float *scratch);

/* Decoding (cpu_decode.c). */
typedef struct xfa_cpu_decode_views {
    const void *q;
    void *k_cache, *v_cache;
    const int32_t *seqlens, *block_table;
    const float *alibi;
} xfa_cpu_decode_views;

/* Where token t of sequence b lives in the cache: returns the row, sets *batch to the
 * cache's first index (the sequence, or its page). */
int64_t xfa_cpu_cache_row(const xfa_decode_args *a, const int32_t *block_table, int64_t b, int64_t t, int64_t *batch);
/* The Sq new rows of (b, h) against cache keys [key_begin, key_end) of a sequence of len
 * tokens: o_part (Sq x d, normalised over those keys) and lse_part (Sq). Scratch: 2d floats. */
void xfa_cpu_decode_partial(const xfa_decode_args *a, const xfa_cpu_decode_views *mem, int64_t b, int64_t h,
                            int64_t key_begin, int64_t key_end, int64_t len, float *o_part, float *lse_part,
                            float *scratch);
/* One row of a merge: n partial outputs (d floats each, o_stride apart) with their LSEs
 * (lse_stride apart) into o (d floats) and *lse. */
void xfa_cpu_merge_row(int n, const float *o_parts, int64_t o_stride, const float *lse_parts, int64_t lse_stride,
                       int64_t d, float *o, float *lse);

#endif /* XFA_CPU_KERNEL_H */
