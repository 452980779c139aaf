/*
 * conformance.h - fixed attention problems with reference outputs, stored as
 * text files (format: tests/conformance/README.md) that any implementation,
 * a user's own included, can be checked against without xfa's reference.
 */
#ifndef XFA_CONFORMANCE_H
#define XFA_CONFORMANCE_H

#include "xfa.h"

#include <stdbool.h>
#include <stdio.h>

typedef struct xfa_vector {
    char name[64];
    xfa_dtype dtype;
    int64_t batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim; /* all tensors contiguous BSHD */
    double scale;
    bool causal;
    int64_t window_left, window_right;
    double softcap;
    double o_tolerance;   /* allowed max |o - o_ref| */
    double lse_tolerance; /* allowed |lse - lse_ref| / max(1, |lse_ref|) */
    uint16_t *q16, *k16, *v16; /* f16/bf16 inputs as bits (NULL for f32) */
    float *q32, *k32, *v32;    /* f32 inputs (NULL for f16/bf16) */
    float *alibi;              /* (Hq) slopes or NULL */
    float *bias;               /* (Sq, Sk) f32, broadcast over batch and heads, or NULL */
    double *o_ref;             /* B*Sq*Hq*D, BSHD */
    double *lse_ref;           /* B*Hq*Sq */
} xfa_vector;

/* The built-in set, generated from fixed seeds: index 0..xfa_vector_count()-1. */
int xfa_vector_count(void);
bool xfa_vector_generate(int index, xfa_vector *v);

bool xfa_vector_write(const xfa_vector *v, FILE *f);
/* Reads one vector; false with a reason in `why` on a malformed file. */
bool xfa_vector_read(FILE *f, xfa_vector *v, char *why, size_t size);
void xfa_vector_free(xfa_vector *v);

/* Runs the vector on ctx; fills the worst errors; XFA_SUCCESS with *passed set, or the call's error. */
xfa_status xfa_vector_check(xfa_context *ctx, const xfa_vector *v, bool *passed, double *o_err, double *lse_err);

#endif /* XFA_CONFORMANCE_H */
