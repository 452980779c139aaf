/*
 * internal.h - what the public wrappers and the backends share: the context and
 * buffer structs, the backend interface (one struct of function pointers per
 * backend), validated forward arguments and error reporting.
 */
#ifndef XFA_INTERNAL_H
#define XFA_INTERNAL_H

#include "xfa.h"

#include <stdarg.h>
#include <stdbool.h>

#define XFA_MESSAGE_SIZE 4096

/* A forward call after the shared validation (validate.c): shapes agree, views
 * are in bounds, the plan is resolved. Backends never re-check what is here. */
typedef struct xfa_forward_args {
    xfa_tensor q, k, v, o;
    xfa_tensor lse;      /* meaningful only when has_lse */
    bool has_lse;
    xfa_dtype dtype;     /* of q, k, v, o */
    int64_t batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim;
    float scale;         /* softmax scale, default resolved */
    bool causal;         /* true exactly when params.causal; then window_right == 0 */
    int64_t window_left, window_right; /* -1: unlimited; see xfa_key_visible() */
    float softcap;       /* 0: off */
    bool has_alibi;      /* alibi: f32 (1|B, 1, Hq, 1) */
    xfa_tensor alibi;
    bool has_bias;       /* bias: (1|B, Sq, 1|Hq, Sk), f32 or dtype */
    xfa_tensor bias;
    bool varlen;         /* packed sequences: batch == 1 in the views; `sequences` of them */
    xfa_tensor cu_seqlens_q, cu_seqlens_k;
    int64_t sequences, max_seqlen_q; /* seqlen_q/k above are then the packed totals */
    xfa_plan plan;       /* the plan to run (library's or the caller's, checked) */
} xfa_forward_args;

/* A backward call after validation: the forward arguments (o and lse are the
 * forward's outputs, here inputs) plus the incoming and outgoing gradients. */
typedef struct xfa_backward_args {
    xfa_forward_args fwd;
    xfa_tensor d_o, dq, dk, dv;
    /* f32 delta [B][Hq][Sq] = rowsum(dO * O): scratch_bytes at scratch_offset of the caller's
     * scratch, or (scratch NULL) memory of the backend's own. */
    xfa_buffer *scratch;
    size_t scratch_offset, scratch_bytes;
} xfa_backward_args;

/* A decode call after validation. */
typedef struct xfa_decode_args {
    xfa_tensor q, o, lse;
    bool has_lse;
    xfa_tensor k_cache, v_cache, seqlens, block_table;
    bool paged;
    int64_t page_size, pages_per_sequence, num_pages; /* paged only */
    int64_t capacity;                                 /* tokens a sequence may hold */
    xfa_tensor k_new, v_new;
    bool append;
    xfa_dtype dtype;
    int64_t batch, seqlen_q, heads_q, heads_kv, head_dim;
    float scale;
    bool causal;
    int64_t window_left;
    float softcap;
    bool has_alibi;
    xfa_tensor alibi;
    int num_splits; /* 0: the backend chooses (xfa_decode_choose_splits), at most max_splits */
    int max_splits; /* the most splits the call may use: what the scratch is sized for */
    /* Partial results: f32 parts [splits][B][Hq][Sq][D] at scratch_offset, f32 LSEs [splits][B][Hq][Sq]
     * at scratch_offset + scratch_lse_offset (xfa_decode_scratch_bytes). scratch NULL: the backend
     * allocates scratch_bytes for the call. */
    xfa_buffer *scratch;
    size_t scratch_offset, scratch_lse_offset, scratch_bytes;
} xfa_decode_args;

/* A merge call after validation: n parts, each an o view and an lse view. */
typedef struct xfa_merge_args {
    int n;
    const xfa_tensor *o_parts, *lse_parts; /* the caller's arrays, valid during the call */
    xfa_tensor o, lse;
    bool has_lse;
    int64_t batch, seqlen, heads, head_dim;
} xfa_merge_args;

/*
 * The backend interface. Slots that take a context report errors with
 * xfa_fail(ctx, ...), which the public call returns to the caller; device_count
 * and device_info (no context yet) write their sentence into `msg`, an
 * XFA_MESSAGE_SIZE buffer. Slots marked optional may be NULL.
 */
typedef struct xfa_backend_ops {
    xfa_backend id;
    const char *name;

    /* Devices this backend sees; 0 with success when the runtime is absent. */
    xfa_status (*device_count)(int *count, char *msg);
    xfa_status (*device_info)(int index, xfa_device_info *info, char *msg);

    /* Opens device `index`; stores backend state in ctx->impl, fills ctx->info. */
    xfa_status (*context_create)(xfa_context *ctx, int index);
    /* Waits for outstanding work and frees ctx->impl. */
    void (*context_destroy)(xfa_context *ctx);

    /* The plan for (head_dim, dtype) on this context's device, or an error if no tile fits. */
    xfa_status (*plan)(xfa_context *ctx, uint32_t head_dim, xfa_dtype dtype, xfa_plan *plan);
    /* Checks a caller's plan override fits the kernel and the device; fills local_mem_bytes. */
    xfa_status (*plan_check)(xfa_context *ctx, xfa_plan *plan);

    /* Library-owned device memory: stores the native handle in buf->impl. */
    xfa_status (*buffer_create)(xfa_context *ctx, xfa_buffer *buf);
    /* Frees buf->impl if the library owns it (buf->owned). */
    void (*buffer_destroy)(xfa_context *ctx, xfa_buffer *buf);
    /* Blocking copies; offset+bytes already checked against buf->size. */
    xfa_status (*buffer_upload)(xfa_context *ctx, xfa_buffer *buf, size_t offset, const void *src, size_t bytes);
    xfa_status (*buffer_download)(xfa_context *ctx, xfa_buffer *buf, size_t offset, void *dst, size_t bytes);

    /* Enqueues the forward pass; args are validated. */
    xfa_status (*forward)(xfa_context *ctx, const xfa_forward_args *args);
    /* Waits for everything enqueued on the context. */
    xfa_status (*synchronize)(xfa_context *ctx);

    /* Optional (NULL: XFA_FEATURE_BACKWARD is not offered). Enqueues the backward pass. */
    xfa_status (*backward)(xfa_context *ctx, const xfa_backward_args *args);
    /* Optional (XFA_FEATURE_DECODE, XFA_FEATURE_PAGED_KV). Enqueues a decode call. */
    xfa_status (*decode)(xfa_context *ctx, const xfa_decode_args *args);
    /* Optional (XFA_FEATURE_MERGE). Enqueues a merge of partial results. */
    xfa_status (*merge)(xfa_context *ctx, const xfa_merge_args *args);
} xfa_backend_ops;

struct xfa_context {
    const xfa_backend_ops *ops;
    void *impl;                 /* backend state */
    xfa_device_info info;
    char last_error[XFA_MESSAGE_SIZE];
};

struct xfa_buffer {
    xfa_context *ctx;
    size_t size;
    bool owned;                 /* false: wraps caller memory, never freed by xfa */
    void *impl;                 /* backend handle (host pointer, cl_mem, ...) */
    size_t native_offset;       /* bytes into the native allocation where this buffer starts */
};

/* registry.c: the backend table; NULL when the backend is not compiled in. */
const xfa_backend_ops *xfa_backend_ops_get(xfa_backend backend);

/* error.c: record a message on a context (or, ctx == NULL, the thread's) and return status. */
xfa_status xfa_fail(xfa_context *ctx, xfa_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* Formats into a backend `msg` buffer and returns status. */
xfa_status xfa_msg(char *msg, xfa_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
void xfa_clear_error(xfa_context *ctx);
/* Sets the thread's context-less message. */
void xfa_set_thread_error(const char *text);

/* validate.c: checks a forward call and fills args (plan left for the caller). */
xfa_status xfa_validate_forward(xfa_context *ctx, const xfa_attention_params *params,
                                const xfa_tensor *q, const xfa_tensor *k, const xfa_tensor *v,
                                const xfa_tensor *o, const xfa_tensor *lse, xfa_forward_args *args);
/* validate.c: checks a backward call and fills args (plan left for the caller). */
xfa_status xfa_validate_backward(xfa_context *ctx, const xfa_attention_params *params, const xfa_tensor *q,
                                 const xfa_tensor *k, const xfa_tensor *v, const xfa_tensor *o, const xfa_tensor *d_o,
                                 const xfa_tensor *lse, const xfa_tensor *dq, const xfa_tensor *dk,
                                 const xfa_tensor *dv, xfa_backward_args *args);
/* Checks a caller's scratch (params.scratch at offset, `bytes` needed): its context, a
 * 256-byte-aligned offset, its size, and no overlap with the call's views (n of them, named). */
xfa_status xfa_validate_scratch(xfa_context *ctx, const xfa_buffer *scratch, size_t offset, size_t bytes,
                                const xfa_tensor *const *views, const char *const *names, int n);
/* validate_decode.c: checks decode and merge calls and fills their args. */
xfa_status xfa_validate_decode(xfa_context *ctx, const xfa_decode_params *params, const xfa_tensor *q,
                               const xfa_kv_cache *cache, const xfa_tensor *k_new, const xfa_tensor *v_new,
                               const xfa_tensor *o, const xfa_tensor *lse, xfa_decode_args *args);
xfa_status xfa_validate_merge(xfa_context *ctx, int n, const xfa_tensor *o_parts, const xfa_tensor *lse_parts,
                              const xfa_tensor *o, const xfa_tensor *lse, xfa_merge_args *args);
/* Split-KV factor for a decode call: enough work-groups to fill the device's compute
 * units a few times over, each with at least `min_keys` keys. */
/* Scratch bytes of a validated decode call sized for a->max_splits; *lse_offset: where the LSEs start. */
size_t xfa_decode_scratch_bytes(const xfa_decode_args *a, size_t *lse_offset);
int xfa_decode_choose_splits(uint32_t compute_units, int64_t batch, int64_t heads_kv, int64_t max_len,
                             int64_t min_keys);
/* Shared by the validators: a feature the device must list, and whether two views share memory. */
xfa_status xfa_require_feature(xfa_context *ctx, uint32_t feature, const char *what);
bool xfa_views_intersect(const xfa_tensor *a, const xfa_tensor *b);
/* Checks one view on its own: dtype, dims > 0, strides, alignment, overflow, bounds. */
xfa_status xfa_validate_tensor(xfa_context *ctx, const char *name, const xfa_tensor *t);
/* Nonzero if head_dim is in the supported set. */
bool xfa_head_dim_supported(int64_t head_dim);

/* Whether query row i may attend key j: the causal mask and the sliding window,
 * both aligned to the bottom-right corner (row i's diagonal is key i + Sk - Sq).
 * Every backend and the reference decide visibility by this rule. */
static inline bool xfa_key_visible(int64_t window_left, int64_t window_right, int64_t i, int64_t j, int64_t seqlen_q,
                                   int64_t seqlen_k)
{
    const int64_t diagonal = i + seqlen_k - seqlen_q;
    return (window_left < 0 || j >= diagonal - window_left) && (window_right < 0 || j <= diagonal + window_right);
}

/* The same rule as a range: row i sees exactly the keys lo..hi (lo > hi: none), clipped to 0..Sk-1. */
static inline void xfa_visible_keys(int64_t window_left, int64_t window_right, int64_t i, int64_t seqlen_q,
                                    int64_t seqlen_k, int64_t *lo, int64_t *hi)
{
    const int64_t diagonal = i + seqlen_k - seqlen_q;
    *lo = window_left < 0 || diagonal - window_left < 0 ? 0 : diagonal - window_left;
    *hi = window_right < 0 || diagonal + window_right > seqlen_k - 1 ? seqlen_k - 1 : diagonal + window_right;
}

/* Element offset of (b, s, h, d) in a view. */
static inline int64_t xfa_tensor_index(const xfa_tensor *t, int64_t b, int64_t s, int64_t h, int64_t d)
{
    return b * t->stride[0] + s * t->stride[1] + h * t->stride[2] + d * t->stride[3];
}

#endif /* XFA_INTERNAL_H */
