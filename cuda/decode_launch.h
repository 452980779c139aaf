/*
 * decode_launch.h - what the C host code (src/host/cuda_decode.c) hands the
 * decode kernels (cuda/decode*.cu): one struct for a decode call (append, the
 * split-KV attention) and one for a merge of partial results. Plain C, like
 * cuda/launch.h, whose dtype enum and result convention it shares.
 *
 * All pointers are device pointers, already offset to the view's first
 * element; strides are in elements.
 */
#ifndef XFA_CUDA_DECODE_LAUNCH_H
#define XFA_CUDA_DECODE_LAUNCH_H

#include "launch.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Query rows (token x query head of one KV head) a decode work-group holds in registers; a KV
 * head with more rows (GQA group x Sq) gets several work-groups per split, one per row block. */
#define XFA_CUDA_DECODE_ROWS 4
/* Work-groups of the vectorized decode kernel resident per SM (its __launch_bounds__): the host
 * sizes the grid to whole waves of SMs x this. */
#define XFA_CUDA_DECODE_BLOCKS_PER_SM 4

/* One decode call. Token t of sequence b is cache row (b, t) when block_table is NULL, else row
 * t % page_size of page block_table[b][t / page_size]. Lengths and pages are clamped on the device
 * (xfa.h): len_b = min(clamp(seqlens[b], 0, capacity) + appended, capacity), pages into
 * 0 .. num_pages - 1. */
typedef struct xfa_cuda_decode_problem {
    const void *q;
    void *o;
    float *lse;                      /* NULL: no LSE output */
    void *k_cache, *v_cache;
    const void *k_new, *v_new;       /* the append's source (NULL: no append) */
    const int32_t *seqlens;
    const int32_t *block_table;      /* NULL: contiguous cache */
    const float *alibi;              /* NULL: no ALiBi */
    /* Partial results [split][b][h][i] of head_dim f32, and their LSEs [split][b][h][i]; NULL:
     * one split, written straight to o and lse. */
    float *part_o, *part_lse;
    xfa_cuda_dtype dtype;
    int32_t batch, seqlen_q, heads_q, heads_kv, head_dim;
    int32_t capacity, page_size, num_pages;
    int32_t page_shift;              /* log2(page_size) when a power of two, else -1 */
    int32_t appended;                /* tokens appended by this call (0 or seqlen_q) */
    int32_t splits;
    int32_t window_left;             /* -1: unlimited */
    int32_t causal;
    float q_scale;                   /* softmax scale, times log2(e) unless softcap or ALiBi is on */
    float softcap;                   /* 0: off */
    /* (batch, seqlen, head, dim) strides; for a paged cache, the first is the page's */
    int64_t q_stride[4], o_stride[4], k_stride[4], v_stride[4], k_new_stride[4], v_new_stride[4];
    int64_t lse_stride[3];           /* (batch, seqlen, head) of the f32 LSE view */
    int64_t seqlens_stride;          /* between sequences */
    int64_t block_table_stride[2];   /* between sequences, between page indices */
    int64_t alibi_stride[2];         /* between sequences (0: one row for all), between heads */
    /* Whether K and V may be read in 16-byte vectors: aligned bases, unit dim stride, other strides
     * multiples of 16 bytes (the host checks; otherwise an element-wise kernel runs). */
    int32_t vector_kv;
} xfa_cuda_decode_problem;

/* Writes k_new/v_new into the cache at positions len_b .. (past the capacity: dropped). */
xfa_cuda_result xfa_cuda_decode_append(const xfa_cuda_decode_problem *p, void *stream);
/* The split-KV attention: p->splits x row blocks work-groups per (KV head, sequence). */
xfa_cuda_result xfa_cuda_decode_attention(const xfa_cuda_decode_problem *p, void *stream);

/* Parts one merge launch takes; more are merged through a running result. */
#define XFA_CUDA_MERGE_MAX_PARTS 16

typedef struct xfa_cuda_merge_part {
    const void *o;                   /* (batch, seqlen, head, dim), f32 or the output's dtype */
    const float *lse;                /* (batch, seqlen, head) */
    int64_t o_stride[4], lse_stride[3];
} xfa_cuda_merge_part;

/*
 * LSE = log sum_i exp(LSE_i), O = sum_i exp(LSE_i - LSE) O_i over the parts and an optional
 * running result; parts with LSE -inf add nothing; all -inf gives O = 0 and LSE = -inf.
 */
typedef struct xfa_cuda_merge_problem {
    int32_t n;                       /* parts */
    /* 0: parts[0 .. n-1]; 1: part i is parts[0] moved on by i * o_step and i * lse_step elements
     * (the decode scratch, up to 1024 splits) */
    int32_t strided;
    int64_t o_step, lse_step;
    xfa_cuda_merge_part parts[XFA_CUDA_MERGE_MAX_PARTS];
    int32_t parts_f32;               /* parts hold f32 (else the dtype) */
    const float *prev_o, *prev_lse;  /* running result: compact f32 rows (b, s, h) of dim, and LSEs; NULL: none */
    void *out;                       /* the dtype, or f32 when out_f32 */
    int64_t out_stride[4];
    int32_t out_f32;
    float *out_lse;                  /* NULL: none */
    int64_t out_lse_stride[3];
    xfa_cuda_dtype dtype;
    int32_t batch, seqlen, heads, head_dim;
} xfa_cuda_merge_problem;

xfa_cuda_result xfa_cuda_merge(const xfa_cuda_merge_problem *m, void *stream);

#ifdef __cplusplus
}
#endif

#endif
