/*
 * xfa.h - the public C API of xfa, a cross-vendor FlashAttention library.
 *
 * One API over several backends (CPU, OpenCL, Vulkan, CUDA). Every backend runs
 * the same exact, tiled online-softmax forward pass (FlashAttention-2 style):
 * a work-group owns Br query rows, streams K/V in blocks of Bc columns through
 * local memory, keeps the running row max m_i, row sum l_i and the rescaled
 * output acc, and writes O once.
 *
 * C11, usable from C++. Including this header needs no backend headers; the
 * engine-integration headers (xfa_opencl.h, xfa_vulkan.h, xfa_cuda.h) add the
 * calls that take native handles.
 *
 * Thread-safety (applies to every call unless a call says otherwise):
 *   - distinct contexts may be used concurrently from different threads;
 *   - one context, and the buffers made from it, must be used by one thread at
 *     a time (the caller serialises);
 *   - discovery calls (xfa_backend_*, xfa_device_*) and xfa_status_string()
 *     are safe from any thread.
 */
#ifndef XFA_H
#define XFA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define XFA_VERSION_MAJOR 0
#define XFA_VERSION_MINOR 1
#define XFA_VERSION_PATCH 0
/* One integer that orders versions: major*10000 + minor*100 + patch. */
#define XFA_VERSION (XFA_VERSION_MAJOR * 10000 + XFA_VERSION_MINOR * 100 + XFA_VERSION_PATCH)

/* The version of the library actually linked, in the encoding of XFA_VERSION. */
int xfa_version(void);
/* The same as "major.minor.patch". */
const char *xfa_version_string(void);

/* ------------------------------------------------------------------------ */
/* Status codes                                                              */
/* ------------------------------------------------------------------------ */

/* One list generates both the enum and xfa_status_string(), so they never drift. */
#define XFA_STATUS_LIST(X)                                                                  \
    X(XFA_SUCCESS, 0, "success")                                                            \
    X(XFA_ERROR_NULL_POINTER, 1, "a required pointer argument is NULL")                     \
    X(XFA_ERROR_INVALID_ARGUMENT, 2, "an argument has a value outside its allowed range")   \
    X(XFA_ERROR_INVALID_DTYPE, 3, "unknown dtype value")                                    \
    X(XFA_ERROR_DTYPE_MISMATCH, 4, "tensors have a combination of dtypes that is not supported") \
    X(XFA_ERROR_UNSUPPORTED_DTYPE, 5, "the dtype is not supported by this backend or device") \
    X(XFA_ERROR_SHAPE_MISMATCH, 6, "tensor shapes disagree")                                \
    X(XFA_ERROR_EMPTY_TENSOR, 7, "a tensor dimension is zero or negative")                  \
    X(XFA_ERROR_UNSUPPORTED_HEAD_DIM, 8, "head dimension outside the supported set")        \
    X(XFA_ERROR_BAD_STRIDES, 9, "tensor strides are negative or make elements overlap")     \
    X(XFA_ERROR_MISALIGNED, 10, "a byte offset is not a multiple of the element size")      \
    X(XFA_ERROR_SIZE_OVERFLOW, 11, "a size or byte count overflows 64 bits")                \
    X(XFA_ERROR_OUT_OF_BOUNDS, 12, "a tensor view reaches past the end of its buffer")      \
    X(XFA_ERROR_ALIASING, 13, "an output overlaps another tensor of the same call")         \
    X(XFA_ERROR_WRONG_CONTEXT, 14, "a buffer belongs to another context")                   \
    X(XFA_ERROR_BACKEND_NOT_COMPILED, 15, "the backend was not compiled into this library") \
    X(XFA_ERROR_NO_DEVICE, 16, "no device found for the backend")                           \
    X(XFA_ERROR_INVALID_DEVICE, 17, "device index out of range")                            \
    X(XFA_ERROR_LOCAL_MEMORY_TOO_SMALL, 18, "the device's local memory is too small for any tile") \
    X(XFA_ERROR_INVALID_PLAN, 19, "the tile plan does not fit the kernel or the device")    \
    X(XFA_ERROR_UNSUPPORTED_FEATURE, 20, "the backend or device lacks a feature this call needs") \
    X(XFA_ERROR_OUT_OF_HOST_MEMORY, 21, "host memory allocation failed")                    \
    X(XFA_ERROR_OUT_OF_DEVICE_MEMORY, 22, "device memory allocation failed")                \
    X(XFA_ERROR_KERNEL_BUILD, 23, "a kernel failed to build (the message holds the log)")   \
    X(XFA_ERROR_BACKEND_FAILURE, 24, "the backend's runtime reported an error")             \
    X(XFA_ERROR_NOT_IMPLEMENTED, 25, "not implemented by this backend")

typedef enum xfa_status {
#define XFA_STATUS_ENUM_(name, value, text) name = value,
    XFA_STATUS_LIST(XFA_STATUS_ENUM_)
#undef XFA_STATUS_ENUM_
    XFA_STATUS_COUNT_
} xfa_status;

/* A static, human-readable sentence for a status; "unknown status" if out of range. */
const char *xfa_status_string(xfa_status status);
/* The enumerator's name, e.g. "XFA_ERROR_SHAPE_MISMATCH". */
const char *xfa_status_name(xfa_status status);

/* ------------------------------------------------------------------------ */
/* Backends, dtypes, devices                                                 */
/* ------------------------------------------------------------------------ */

typedef enum xfa_backend {
    XFA_BACKEND_AUTO = 0, /* CUDA > Vulkan > OpenCL > CPU; env XFA_BACKEND=cpu|opencl|vulkan|cuda overrides */
    XFA_BACKEND_CPU = 1,
    XFA_BACKEND_OPENCL = 2,
    XFA_BACKEND_VULKAN = 3,
    XFA_BACKEND_CUDA = 4,
    XFA_BACKEND_COUNT_
} xfa_backend;

typedef enum xfa_dtype {
    XFA_DTYPE_F32 = 0,
    XFA_DTYPE_F16 = 1,  /* IEEE binary16 */
    XFA_DTYPE_BF16 = 2, /* bfloat16: the top 16 bits of a binary32 */
    XFA_DTYPE_COUNT_,   /* the number of data dtypes above */
    XFA_DTYPE_I32 = 16  /* 32-bit signed integers: sequence lengths and block tables only */
} xfa_dtype;

/* "cpu", "opencl", "vulkan", "cuda", "auto"; NULL if out of range. */
const char *xfa_backend_name(xfa_backend backend);
/* Parses a name as above (case-insensitive); returns XFA_ERROR_INVALID_ARGUMENT if unknown. */
xfa_status xfa_backend_from_name(const char *name, xfa_backend *out);
/* Nonzero if the backend was compiled into this library. */
int xfa_backend_compiled(xfa_backend backend);
/* The backend XFA_BACKEND_AUTO resolves to now (honours XFA_BACKEND). */
xfa_status xfa_backend_resolve(xfa_backend requested, xfa_backend *out);

/* "f32", "f16", "bf16"; NULL if out of range. */
const char *xfa_dtype_name(xfa_dtype dtype);
xfa_status xfa_dtype_from_name(const char *name, xfa_dtype *out);
/* Bytes per element; 0 if out of range. */
size_t xfa_dtype_size(xfa_dtype dtype);

/* Features a backend/path supports, reported in xfa_device_info.features. */
enum {
    XFA_FEATURE_CAUSAL = 1u << 0,
    XFA_FEATURE_LSE = 1u << 1,
    XFA_FEATURE_GQA = 1u << 2,          /* K/V with fewer heads than Q */
    XFA_FEATURE_SEQLEN_QK_DIFFER = 1u << 3, /* seqlen_q != seqlen_k */
    XFA_FEATURE_WINDOW = 1u << 4,       /* sliding-window (local) attention */
    XFA_FEATURE_SOFTCAP = 1u << 5,      /* softcap * tanh(s / softcap) */
    XFA_FEATURE_ENGINE_HANDLES = 1u << 6, /* context/buffers from caller's native handles */
    XFA_FEATURE_ALIBI = 1u << 7,        /* per-head ALiBi slopes */
    XFA_FEATURE_BIAS = 1u << 8,         /* additive score bias / mask tensor */
    XFA_FEATURE_BACKWARD = 1u << 9,     /* xfa_attention_backward */
    XFA_FEATURE_DECODE = 1u << 10,      /* xfa_attention_decode with a contiguous KV cache */
    XFA_FEATURE_PAGED_KV = 1u << 11,    /* xfa_attention_decode with a paged KV cache */
    XFA_FEATURE_MERGE = 1u << 12,       /* xfa_merge_partials */
    XFA_FEATURE_VARLEN = 1u << 13       /* packed variable-length batches (cu_seqlens) */
};

/* Head dims: multiples of XFA_HEAD_DIM_STEP from XFA_HEAD_DIM_MIN to XFA_HEAD_DIM_MAX. */
#define XFA_HEAD_DIM_MIN 32
#define XFA_HEAD_DIM_MAX 256
#define XFA_HEAD_DIM_STEP 32

typedef struct xfa_device_info {
    xfa_backend backend;
    int index;                  /* index within the backend */
    char name[128];
    char vendor[64];
    char driver[64];            /* driver or runtime version as the backend reports it */
    char path[64];              /* the kernel path this device gets, e.g. "portable", "mma.sync" */
    uint64_t local_mem_bytes;   /* M: local/shared memory a work-group may use */
    uint64_t global_mem_bytes;
    uint32_t subgroup_size;     /* SIMD width: warp/wavefront/subgroup; 1 on the CPU */
    uint32_t max_workgroup_size;
    uint32_t compute_units;
    uint32_t dtypes;            /* bit (1u << xfa_dtype) for each dtype the device takes */
    uint32_t features;          /* XFA_FEATURE_* bits */
} xfa_device_info;

/* Number of devices the backend sees (0 with XFA_SUCCESS when none). */
xfa_status xfa_device_count(xfa_backend backend, int *count);
/* Info for one device without making a context. */
xfa_status xfa_device_get_info(xfa_backend backend, int index, xfa_device_info *info);

/* ------------------------------------------------------------------------ */
/* Host memory                                                               */
/* ------------------------------------------------------------------------ */

/*
 * The allocator xfa uses for every host allocation it makes itself (its objects,
 * staging, the CPU backend's buffers and scratch). An engine hands in its own to
 * account for or pool that memory. Allocations made inside the runtimes xfa calls
 * (OpenCL, Vulkan, CUDA drivers) are theirs and do not go through it.
 * alloc returns memory aligned to at least `alignment` (a power of two) or NULL;
 * realloc keeps the contents up to the smaller size (ptr may be NULL); free
 * accepts NULL. The callbacks may be called from xfa's worker threads.
 */
typedef struct xfa_allocator {
    void *(*alloc)(void *user, size_t bytes, size_t alignment);
    void *(*realloc)(void *user, void *ptr, size_t bytes, size_t alignment);
    void (*free)(void *user, void *ptr);
    void *user;
} xfa_allocator;

/*
 * Installs `allocator` (copied) for the whole process; NULL restores malloc/free.
 * Refused with XFA_ERROR_INVALID_ARGUMENT while memory from the current allocator
 * is still held by xfa (contexts or buffers alive): call it before the first
 * context, or after the last is destroyed. Not safe concurrently with other xfa calls.
 */
xfa_status xfa_set_allocator(const xfa_allocator *allocator);
/* Bytes of host memory xfa currently holds through its allocator. Safe from any thread. */
size_t xfa_host_bytes_in_use(void);

/* ------------------------------------------------------------------------ */
/* Contexts                                                                  */
/* ------------------------------------------------------------------------ */

/* A context is one device on one backend; it owns the kernels built for it. */
typedef struct xfa_context xfa_context;

/* Creates a context on device `index` of `backend` (XFA_BACKEND_AUTO allowed). */
xfa_status xfa_context_create(xfa_backend backend, int index, xfa_context **out);
/* Waits for the context's work, frees it and sets *ctx to NULL. NULL and *ctx == NULL are no-ops. */
void xfa_context_destroy(xfa_context **ctx);
/* Message of the last failed call on this context ("" if none); valid until the next call. */
const char *xfa_context_last_error(const xfa_context *ctx);
/* The message of the last failed call that had no context (e.g. xfa_context_create), per thread. */
const char *xfa_last_error(void);
xfa_status xfa_context_get_info(const xfa_context *ctx, xfa_device_info *info);
xfa_backend xfa_context_backend(const xfa_context *ctx);
/* Blocks until all work enqueued on the context's queue/stream has finished. */
xfa_status xfa_context_synchronize(xfa_context *ctx);

/* ------------------------------------------------------------------------ */
/* Tile plans                                                                */
/* ------------------------------------------------------------------------ */

/*
 * How a kernel tiles the problem. Derived from the device's local memory M,
 * the head dim and the dtype (xfa_plan_get); a caller may pass a modified copy
 * in xfa_attention_params.plan to override it, and the library checks it fits.
 */
typedef struct xfa_plan {
    uint32_t Br;              /* query rows per work-group */
    uint32_t Bc;              /* key/value rows per streamed block */
    uint32_t head_dim;
    xfa_dtype dtype;
    uint32_t workgroup_size;  /* work-items per work-group */
    uint32_t stages;          /* K/V blocks in flight (1 = no pipelining) */
    uint64_t local_mem_bytes; /* local memory the kernel uses with this plan */
    char path[32];            /* kernel path, as in xfa_device_info.path */
} xfa_plan;

xfa_status xfa_plan_get(xfa_context *ctx, uint32_t head_dim, xfa_dtype dtype, xfa_plan *plan);

/* ------------------------------------------------------------------------ */
/* Buffers and tensors                                                       */
/* ------------------------------------------------------------------------ */

/* Device memory: made by the library (xfa_buffer_create) or wrapping the caller's
 * memory (the backend headers). A buffer belongs to one context. */
typedef struct xfa_buffer xfa_buffer;

xfa_status xfa_buffer_create(xfa_context *ctx, size_t bytes, xfa_buffer **out);
/* Frees library-owned memory (a wrapped buffer leaves the caller's memory alone), sets *buf to NULL. */
void xfa_buffer_destroy(xfa_buffer **buf);
size_t xfa_buffer_size(const xfa_buffer *buf);
/* Copies host -> device. Blocking: returns when `src` may be reused. */
xfa_status xfa_buffer_upload(xfa_buffer *buf, size_t offset, const void *src, size_t bytes);
/* Copies device -> host after all work enqueued before it. Blocking. */
xfa_status xfa_buffer_download(xfa_buffer *buf, size_t offset, void *dst, size_t bytes);

/*
 * A 4-D view into a buffer. Dimensions are (batch, seqlen, heads, head_dim) in
 * that order whatever the memory layout: `stride` gives the distance in
 * elements between neighbours along each dimension, so BSHD and BHSD (and any
 * other non-overlapping layout) need no copies. Strides must be positive for
 * dimensions of size > 1; views must not overlap themselves.
 *
 * The LSE output is a tensor of dtype f32 and shape (batch, seqlen_q, heads, 1).
 */
typedef struct xfa_tensor {
    xfa_buffer *buffer;
    size_t offset;       /* in bytes from the start of the buffer */
    xfa_dtype dtype;
    int64_t shape[4];    /* batch, seqlen, heads, head_dim */
    int64_t stride[4];   /* in elements */
} xfa_tensor;

/* Contiguous views: (batch, seqlen, heads, dim) stored in BSHD or BHSD order. */
xfa_tensor xfa_tensor_bshd(xfa_buffer *buf, size_t offset, xfa_dtype dtype,
                           int64_t batch, int64_t seqlen, int64_t heads, int64_t head_dim);
xfa_tensor xfa_tensor_bhsd(xfa_buffer *buf, size_t offset, xfa_dtype dtype,
                           int64_t batch, int64_t seqlen, int64_t heads, int64_t head_dim);
/* The LSE view FlashAttention uses: f32, stored (batch, heads, seqlen). */
xfa_tensor xfa_tensor_lse(xfa_buffer *buf, size_t offset, int64_t batch, int64_t seqlen, int64_t heads);
/* Bytes a view spans from its offset (max element index + 1) * element size; 0 on overflow. */
size_t xfa_tensor_span_bytes(const xfa_tensor *t);

/* ------------------------------------------------------------------------ */
/* Attention                                                                 */
/* ------------------------------------------------------------------------ */

typedef struct xfa_attention_params {
    float softmax_scale;  /* multiplies QK^T; 0 means 1/sqrt(head_dim) */
    int causal;           /* nonzero: the same as window_right = 0 (bottom-right aligned) */
    const xfa_plan *plan; /* NULL: the library's plan; else an override that must fit the device */
    /* Sliding window, bottom-right aligned as in FlashAttention: query i sees key j when
     * i + Sk - Sq - window_left <= j <= i + Sk - Sq + window_right; -1 means no limit. */
    int64_t window_left, window_right;
    float softcap;        /* > 0: scores become softcap * tanh(score / softcap); 0: off */
    /* ALiBi: f32 slopes, shape (1 or B, 1, Hq, 1); adds -slope * |i + Sk - Sq - j|. NULL: off */
    const xfa_tensor *alibi_slopes;
    /* Additive bias (or mask: -inf hides a key), shape (1 or B, Sq, 1 or Hq, Sk), f32 or the
     * dtype of q. Broadcast over batch and heads where that dimension is 1. NULL: off */
    const xfa_tensor *bias;
    /* Variable-length batch (FlashAttention's varlen): q, k, v and o hold B sequences packed
     * along the seqlen dimension with batch 1 (q: (1, total_q, Hq, D)); cu_seqlens_q and
     * cu_seqlens_k are i32 (B+1, 1, 1, 1) offsets, sequence b being rows cu[b] .. cu[b+1]-1
     * (empty sequences allowed). Masks, windows and ALiBi apply per sequence, with its own
     * lengths; the LSE is (1, total_q, Hq, 1). max_seqlen_q bounds cu_seqlens_q[b+1] -
     * cu_seqlens_q[b] (GPU grids are sized from it without reading the offsets). NULL: off. */
    const xfa_tensor *cu_seqlens_q, *cu_seqlens_k;
    int64_t max_seqlen_q;
    /* Device scratch for the calls that need some (xfa_attention_backward: its size from
     * xfa_attention_backward_scratch_size), at a byte offset that is a multiple of 256.
     * NULL: the backend uses memory of its own (kept by the context between calls). */
    xfa_buffer *scratch;
    size_t scratch_offset;
} xfa_attention_params;

/* Defaults: scale 1/sqrt(d), not causal, the library's plan, no window, softcap, ALiBi,
 * bias or variable lengths. */
#define XFA_ATTENTION_PARAMS_DEFAULT {0.0f, 0, NULL, -1, -1, 0.0f, NULL, NULL, NULL, NULL, 0, NULL, 0}

/*
 * O = softmax(S) V per batch and head, exactly (no approximation), where for
 * query row i and key j
 *
 *   S_ij = scale * q_i . k_j              then, each only when asked for:
 *   S_ij = softcap * tanh(S_ij / softcap)
 *   S_ij += -slope_h * |i + Sk - Sq - j|  (ALiBi)
 *   S_ij += bias[b, i, h, j]
 *   S_ij = -inf outside the causal mask or the window,
 *
 * with an optional per-row log-sum-exp, log(sum_j exp(S_ij)) (natural log),
 * written to `lse`.
 *
 *   q:   (B, Sq, Hq, D)     k, v: (B, Sk, Hkv, D)    o: (B, Sq, Hq, D)
 *   lse: (B, Sq, Hq, 1) f32, or NULL
 *
 * Hq must be a multiple of Hkv (MQA/GQA: query head h reads K/V head
 * h / (Hq/Hkv)). q, k, v and o share one dtype. A query row that sees no key
 * (a mask, window or causal with Sq > Sk empties it) gets O = 0 and LSE = -inf.
 *
 * params may be NULL (XFA_ATTENTION_PARAMS_DEFAULT). The call is enqueued on
 * the context's queue/stream and may return before it finishes; downloads and
 * xfa_context_synchronize() wait for it. The CPU backend runs it synchronously.
 */
xfa_status xfa_attention_forward(xfa_context *ctx, const xfa_attention_params *params,
                                 const xfa_tensor *q, const xfa_tensor *k, const xfa_tensor *v,
                                 const xfa_tensor *o, const xfa_tensor *lse);

/*
 * The gradients of the forward pass: given dO = dLoss/dO, writes dQ, dK and
 * dV (same shapes and dtype as q, k and v). `o` and `lse` are the forward
 * pass's outputs for the same inputs and params (the LSE is required: P is
 * recomputed block by block from it, so no N x N matrix is stored, as in
 * FlashAttention-2). With GQA, dK and dV sum over the query heads that share a
 * K/V head. ALiBi slopes and the bias get no gradient. Deterministic: the same
 * inputs give the same bits on the same device.
 *
 *   d_o: like o      dq: like q      dk, dv: like k and v
 */
xfa_status xfa_attention_backward(xfa_context *ctx, const xfa_attention_params *params, const xfa_tensor *q,
                                  const xfa_tensor *k, const xfa_tensor *v, const xfa_tensor *o,
                                  const xfa_tensor *d_o, const xfa_tensor *lse, const xfa_tensor *dq,
                                  const xfa_tensor *dk, const xfa_tensor *dv);

/* Bytes of device scratch xfa_attention_backward needs with these arguments (one f32 per query
 * row and head: rowsum(dO * O)). Validates like the call. */
xfa_status xfa_attention_backward_scratch_size(xfa_context *ctx, const xfa_attention_params *params,
                                               const xfa_tensor *q, const xfa_tensor *k, const xfa_tensor *v,
                                               const xfa_tensor *o, const xfa_tensor *d_o, const xfa_tensor *lse,
                                               const xfa_tensor *dq, const xfa_tensor *dk, const xfa_tensor *dv,
                                               size_t *bytes);

/* ------------------------------------------------------------------------ */
/* Decoding: a few new query tokens against a KV cache                       */
/* ------------------------------------------------------------------------ */

/*
 * The KV cache of a batch of sequences, contiguous or paged.
 *   contiguous: k, v are (B, capacity, Hkv, D); sequence b's token t is row t of batch b.
 *   paged:      k, v are (num_pages, page_size, Hkv, D) and block_table is i32
 *               (B, 1, 1, pages_per_sequence); token t of sequence b lives in page
 *               block_table[b][t / page_size], row t % page_size (as in vLLM and FlashAttention).
 * seqlens is i32 (B, 1, 1, 1): the tokens sequence b has in the cache before the call.
 */
typedef struct xfa_kv_cache {
    const xfa_tensor *k, *v;
    const xfa_tensor *seqlens;
    const xfa_tensor *block_table; /* NULL: contiguous */
} xfa_kv_cache;

typedef struct xfa_decode_params {
    float softmax_scale;  /* 0: 1/sqrt(head_dim) */
    int causal;           /* nonzero: new token i sees cache tokens j <= len_b - Sq + i */
    int64_t window_left;  /* -1: no limit; else also j >= len_b - Sq + i - window_left */
    float softcap;        /* 0: off */
    const xfa_tensor *alibi_slopes; /* as in xfa_attention_params, or NULL */
    int num_splits;       /* split-KV factor: 0 chooses from the device, batch, heads and length; >= 1 forces */
    /* Device scratch for the partial results (xfa_attention_decode_scratch_size says how much), at a
     * byte offset that is a multiple of 256. NULL: the backend allocates it for the call and frees
     * it once the call has finished; engines that must not allocate pass their own. */
    xfa_buffer *scratch;
    size_t scratch_offset;
} xfa_decode_params;

#define XFA_DECODE_PARAMS_DEFAULT {0.0f, 1, -1, 0.0f, NULL, 0, NULL, 0}

/*
 * Attention of Sq new query tokens per sequence (q: (B, Sq, Hq, D), Sq small,
 * typically 1) against each sequence's cached keys and values. If k_new and
 * v_new ((B, Sq, Hkv, D)) are given, they are first written into the cache at
 * positions seqlens[b] .. seqlens[b] + Sq - 1 and attended to, so len_b =
 * seqlens[b] + Sq; otherwise len_b = seqlens[b]. seqlens itself is not
 * updated (the caller advances it). The KV length is split over work-groups
 * (Flash-Decoding) whose partial results are merged by their LSE.
 *
 * seqlens and block_table live on the device: the CPU backend checks them
 * (XFA_ERROR_OUT_OF_BOUNDS for a length past the capacity or a page index past
 * num_pages); GPU kernels clamp them so that no access leaves the cache.
 */
xfa_status xfa_attention_decode(xfa_context *ctx, const xfa_decode_params *params, const xfa_tensor *q,
                                 const xfa_kv_cache *cache, const xfa_tensor *k_new, const xfa_tensor *v_new,
                                 const xfa_tensor *o, const xfa_tensor *lse);

/*
 * Bytes of device scratch xfa_attention_decode needs with these arguments (the
 * partial outputs and LSEs of the KV splits, sized for the largest split count
 * the call may choose, from the cache's capacity). Validates like the call.
 */
xfa_status xfa_attention_decode_scratch_size(xfa_context *ctx, const xfa_decode_params *params, const xfa_tensor *q,
                                             const xfa_kv_cache *cache, const xfa_tensor *k_new,
                                             const xfa_tensor *v_new, const xfa_tensor *o, const xfa_tensor *lse,
                                             size_t *bytes);

/*
 * Combines attention computed over n disjoint parts of the keys (each part's
 * output normalised over its own keys, with its LSE) into the attention over
 * all of them: LSE = log sum_i exp(LSE_i), O = sum_i exp(LSE_i - LSE) O_i.
 * Parts whose LSE is -inf (they saw no key) contribute nothing; if all are,
 * O = 0 and LSE = -inf. o_parts[i]: (B, S, H, D) in o's dtype or f32;
 * lse_parts[i]: (B, S, H, 1) f32; o like o_parts; lse may be NULL.
 */
xfa_status xfa_merge_partials(xfa_context *ctx, int n, const xfa_tensor *o_parts, const xfa_tensor *lse_parts,
                              const xfa_tensor *o, const xfa_tensor *lse);

/* Floating-point operations of a forward call as benchmarks count them:
 * 4*B*Hq*Sq*Sk*D, halved for causal when Sq == Sk. */
double xfa_attention_flops(int64_t batch, int64_t heads, int64_t seqlen_q, int64_t seqlen_k,
                           int64_t head_dim, int causal);

#ifdef __cplusplus
}
#endif

#endif /* XFA_H */
