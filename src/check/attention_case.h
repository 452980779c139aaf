/*
 * attention_case.h - the backend-neutral test body: build a random problem,
 * run it on a context, check it against the fp64 reference.
 *
 * Every run uses fresh random inputs (seeded, never zeros), poisons the output
 * and guard bytes around it first, and afterwards checks that every output
 * element was written and no guard byte was touched. Tolerances follow the
 * precision: f32 1e-5 relative to the largest |O|; f16/bf16 twice the error of
 * a plain unfused attention in the same precision against the fp64 reference.
 *
 * Used by the tests (every backend's forward suite) and by `xfa run`.
 */
#ifndef XFA_ATTENTION_CASE_H
#define XFA_ATTENTION_CASE_H

#include "reference.h"
#include "test_tensor.h"
#include "xfa.h"

#include <stdbool.h>

typedef enum xfa_test_layout { XFA_LAYOUT_BSHD = 0, XFA_LAYOUT_BHSD = 1 } xfa_test_layout;

/* Test hooks: damage a correct result the way a broken kernel would; the check must then fail. */
typedef enum xfa_test_corruption {
    XFA_CORRUPT_NONE = 0,
    XFA_CORRUPT_VALUE = 1,     /* one output element off by well above the tolerance */
    XFA_CORRUPT_UNWRITTEN = 2, /* one output element left holding the poison */
    XFA_CORRUPT_GUARD = 3      /* a write just past the end of the output view */
} xfa_test_corruption;

typedef struct xfa_test_case {
    int64_t batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim;
    xfa_dtype dtype;
    bool causal;
    bool lse;
    xfa_test_layout layout;
    int64_t row_pad;   /* extra elements between consecutive rows of each tensor (non-contiguous views) */
    uint32_t Br, Bc;   /* nonzero: override the plan's tile sizes */
    int64_t window_left, window_right; /* -1: no limit (xfa_test_case_make sets both) */
    float softcap;     /* 0: off */
    bool alibi;        /* random ALiBi slopes, shape (1, 1, Hq, 1) or, with per_batch, (B, 1, Hq, 1) */
    bool bias;         /* random additive bias with some -inf entries (masked keys) */
    bool per_batch;    /* alibi/bias vary over batch (and bias over heads) rather than broadcast */
    xfa_dtype bias_dtype; /* f32 or the case's dtype */
    int sequences;     /* > 0: a packed variable-length batch of these sequences (batch is 1) */
    int64_t seq_q[8], seq_k[8]; /* their lengths (0 allowed); seqlen_q/k are the sums */
    float scale;       /* 0: default 1/sqrt(d) */
    uint64_t seed;
    xfa_test_corruption corrupt; /* test hook (see above) */
    bool caller_scratch; /* backward: hand in a NaN-filled scratch at offset 256 (params.scratch) */
    bool skip_reference; /* sizes too large for the fp64 reference: check only coverage and finiteness */
    float *output;     /* optional: receives O as batch*seqlen_q*heads_q*head_dim floats in BSHD order */
} xfa_test_case;

typedef struct xfa_test_result {
    xfa_status status;        /* of the forward call (or the first failing setup call) */
    bool passed;
    double max_abs_err;       /* max |o - ref| */
    double ref_max;           /* max |ref| */
    double tolerance;         /* allowed max_abs_err */
    double unfused_err;       /* f16/bf16: the unfused attention's max_abs_err, else 0 */
    double lse_max_err;
    int64_t unwritten;        /* output elements still holding the poison pattern */
    int64_t guard_damage;     /* guard bytes around the outputs that changed */
    int64_t nonfinite;        /* NaN/inf in O (none allowed) */
    double seconds;           /* wall time of the forward call and the wait for it */
    char message[1024];       /* why it failed, for the test log */
} xfa_test_result;

/* The inputs of a case on a device: q, k, v (random), ALiBi slopes and bias when asked
 * for, the params and plan override the case asks for, and the same problem for the
 * reference. Keep it in place: params points into it. */
typedef struct xfa_test_inputs {
    xfa_test_tensor q, k, v, alibi, bias, cu_q, cu_k;
    xfa_attention_params params;
    xfa_plan plan;
    xfa_reference_problem reference;
} xfa_test_inputs;

xfa_status xfa_test_inputs_make(xfa_context *ctx, const xfa_test_case *tc, uint64_t *rng, xfa_test_inputs *in,
                                char *message, size_t size);
void xfa_test_inputs_free(xfa_test_inputs *in);
/* A poisoned (B, S, H, D) output in the case's dtype and layout, uploaded. */
xfa_status xfa_test_output_make(xfa_context *ctx, const xfa_test_case *tc, int64_t S, int64_t H, xfa_test_tensor *t);
/* Turns a case into a packed variable-length batch of n sequences with these lengths. */
void xfa_test_case_varlen(xfa_test_case *tc, int n, const int64_t *seq_q, const int64_t *seq_k);
/* The fp64 reference of the inputs (per sequence when packed): o (BSHD), lse (B, H, S); and,
 * when o_unfused is not NULL, the unfused one in the case's dtype. */
xfa_status xfa_test_reference(const xfa_test_case *tc, const xfa_test_inputs *in, double *o, double *lse,
                              float *o_unfused);
/* The allowed max |x - ref|: f32 1e-5 of max |ref|; f16/bf16 twice the unfused error (at least an ulp). */
double xfa_test_tolerance(xfa_dtype dtype, double ref_max, double unfused_err);

/* A case with the given shape and defaults elsewhere (BSHD, LSE on, library plan). */
xfa_test_case xfa_test_case_make(int64_t batch, int64_t seqlen_q, int64_t seqlen_k, int64_t heads_q, int64_t heads_kv,
                                 int64_t head_dim, xfa_dtype dtype, bool causal, uint64_t seed);

/* Runs the case on ctx and checks it. */
xfa_test_result xfa_test_run_case(xfa_context *ctx, const xfa_test_case *tc);

/* Element strides of a (B, S, H, D) tensor in the case's layout and padding. */
void xfa_test_layout_strides(const xfa_test_case *tc, int64_t S, int64_t H, int64_t stride[4]);

/* The attention params a case asks for (the tensors for ALiBi and bias supplied by the caller). */
xfa_attention_params xfa_test_case_params(const xfa_test_case *tc, const xfa_tensor *alibi, const xfa_tensor *bias);

/* One line describing a case, for failure messages. */
void xfa_test_case_describe(const xfa_test_case *tc, char *out, size_t size);

/* A random case (small shapes, odd lengths, any supported head dim) from a seed. */
xfa_test_case xfa_test_case_random(uint64_t seed, xfa_dtype dtype);

/* Deterministic random numbers for tests. */
uint64_t xfa_test_rand_u64(uint64_t *state);
double xfa_test_rand_normal(uint64_t *state);

#endif /* XFA_ATTENTION_CASE_H */
