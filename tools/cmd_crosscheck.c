/*
 * cmd_crosscheck.c - `xfa crosscheck`: the same seeded problems on every
 * backend and device present, each compared with the fp64 reference and with
 * every other; a pass/fail matrix with the worst error per cell, non-zero exit
 * on any failure. `--corrupt BACKEND` perturbs that backend's outputs (a test
 * hook: the run must then fail).
 */
#include "attention_case.h"
#include "cli.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_COLUMNS 16

typedef struct column {
    xfa_backend backend;
    int device;
    xfa_context *ctx;
    xfa_device_info info;
    double worst_ratio; /* max over cases of error / tolerance */
    int failed, skipped;
} column;

/* Fixed edge cases first, then seeded random ones. */
static xfa_test_case make_case(int i, uint64_t seed)
{
    static const struct { int64_t b, sq, sk, hq, hkv, d; xfa_dtype dt; bool causal; } fixed[] = {
        {1, 1, 1, 1, 1, 64, XFA_DTYPE_F32, false},   {1, 1, 150, 4, 1, 128, XFA_DTYPE_F16, true},
        {2, 77, 77, 4, 2, 128, XFA_DTYPE_F16, true}, {1, 65, 33, 2, 1, 256, XFA_DTYPE_BF16, true},
        {1, 40, 90, 3, 3, 32, XFA_DTYPE_F32, true},  {2, 100, 100, 2, 2, 96, XFA_DTYPE_BF16, false},
    };
    const int n_fixed = (int)(sizeof fixed / sizeof fixed[0]);
    if (i < n_fixed)
        return xfa_test_case_make(fixed[i].b, fixed[i].sq, fixed[i].sk, fixed[i].hq, fixed[i].hkv, fixed[i].d,
                                  fixed[i].dt, fixed[i].causal, seed + (uint64_t)i);
    return xfa_test_case_random(seed + (uint64_t)i, (xfa_dtype)(i % XFA_DTYPE_COUNT_));
}

static int open_columns(const cli_options *o, column *cols)
{
    int n = 0;
    for (int b = XFA_BACKEND_CPU; b < XFA_BACKEND_COUNT_; b++) {
        if (o->backend != XFA_BACKEND_AUTO && o->backend != (xfa_backend)b) continue;
        int count = 0;
        if (!xfa_backend_compiled((xfa_backend)b) || xfa_device_count((xfa_backend)b, &count)) continue;
        for (int d = 0; d < count && n < MAX_COLUMNS; d++) {
            column *c = &cols[n];
            memset(c, 0, sizeof *c);
            c->backend = (xfa_backend)b;
            c->device = d;
            if (xfa_context_create(c->backend, d, &c->ctx)) {
                fprintf(stderr, "crosscheck: skipping %s device %d: %s\n", xfa_backend_name(c->backend), d,
                        xfa_last_error());
                continue;
            }
            xfa_context_get_info(c->ctx, &c->info);
            n++;
        }
    }
    return n;
}

int cli_crosscheck(const cli_options *o)
{
    column cols[MAX_COLUMNS];
    const int n_cols = open_columns(o, cols);
    if (n_cols == 0) {
        fprintf(stderr, "crosscheck: no backend with a device\n");
        return 1;
    }
    const int n_cases = o->cases > 0 ? o->cases : 18;
    int failures = 0;
    xfa_backend corrupt = XFA_BACKEND_AUTO;
    if (o->corrupt) xfa_backend_from_name(o->corrupt, &corrupt);

    if (o->json) printf("{\"cases\":[");
    else {
        printf("xfa crosscheck: %d problems (seed %llu) on %d device(s); cell = max|o-ref| / tolerance\n", n_cases,
               (unsigned long long)o->seed, n_cols);
        for (int c = 0; c < n_cols; c++)
            printf("  [%c] %s %d: %s (%s)\n", 'A' + c, xfa_backend_name(cols[c].backend), cols[c].device,
                   cols[c].info.name, cols[c].info.path);
        printf("%-62s", "problem");
        for (int c = 0; c < n_cols; c++) printf(" %9c", 'A' + c);
        printf("  agree\n");
    }
    float *outputs[MAX_COLUMNS];
    for (int i = 0; i < n_cases; i++) {
        xfa_test_case tc = make_case(i, o->seed);
        const size_t n_out = (size_t)(tc.batch * tc.seqlen_q * tc.heads_q * tc.head_dim);
        xfa_test_result res[MAX_COLUMNS];
        bool ran[MAX_COLUMNS];
        char what[256];
        xfa_test_case_describe(&tc, what, sizeof what);
        if (!o->json) printf("%-62.62s", what);
        for (int c = 0; c < n_cols; c++) {
            outputs[c] = malloc(n_out * sizeof(float));
            ran[c] = false;
            if (!(cols[c].info.dtypes & (1u << tc.dtype))) {
                cols[c].skipped++;
                if (!o->json) printf(" %9s", "n/a");
                continue;
            }
            xfa_test_case mine = tc;
            mine.output = outputs[c];
            mine.corrupt = cols[c].backend == corrupt ? XFA_CORRUPT_VALUE : XFA_CORRUPT_NONE;
            res[c] = xfa_test_run_case(cols[c].ctx, &mine);
            ran[c] = res[c].status == XFA_SUCCESS;
            const double ratio = res[c].tolerance > 0 ? res[c].max_abs_err / res[c].tolerance : INFINITY;
            if (res[c].status == XFA_ERROR_UNSUPPORTED_FEATURE || res[c].status == XFA_ERROR_UNSUPPORTED_HEAD_DIM) {
                cols[c].skipped++;
                if (!o->json) printf(" %9s", "n/a");
                continue;
            }
            if (!res[c].passed) {
                cols[c].failed++;
                failures++;
                if (!o->json) printf(" %9s", "FAIL");
                fprintf(stderr, "\n  %s %d: %s: %s\n", xfa_backend_name(cols[c].backend), cols[c].device, what,
                        res[c].message);
            } else if (!o->json) {
                printf(" %9.3f", ratio);
            }
            if (ratio > cols[c].worst_ratio && isfinite(ratio)) cols[c].worst_ratio = ratio;
        }
        /* every pair of devices that ran must agree within the sum of their tolerances */
        int disagreements = 0;
        for (int a = 0; a < n_cols; a++)
            for (int b = a + 1; b < n_cols; b++) {
                if (!ran[a] || !ran[b]) continue;
                double diff = 0;
                for (size_t e = 0; e < n_out; e++) diff = fmax(diff, fabs((double)outputs[a][e] - outputs[b][e]));
                if (!(diff <= res[a].tolerance + res[b].tolerance)) {
                    disagreements++;
                    fprintf(stderr, "\n  %c and %c disagree on %s: max diff %.3g\n", 'A' + a, 'A' + b, what, diff);
                }
            }
        failures += disagreements;
        if (o->json) {
            printf("%s{\"problem\":\"%s\",\"results\":[", i ? "," : "", what);
            for (int c = 0; c < n_cols; c++)
                printf("%s{\"backend\":\"%s\",\"device\":%d,\"ran\":%s,\"passed\":%s,\"max_abs_err\":%.6g,"
                       "\"tolerance\":%.6g}",
                       c ? "," : "", xfa_backend_name(cols[c].backend), cols[c].device, ran[c] ? "true" : "false",
                       ran[c] && res[c].passed ? "true" : "false", ran[c] ? res[c].max_abs_err : 0.0,
                       ran[c] ? res[c].tolerance : 0.0);
            printf("],\"disagreements\":%d}", disagreements);
        } else {
            printf("  %s\n", disagreements ? "NO" : "yes");
        }
        for (int c = 0; c < n_cols; c++) free(outputs[c]);
    }
    if (o->json) {
        printf("],\"devices\":[");
        for (int c = 0; c < n_cols; c++)
            printf("%s{\"backend\":\"%s\",\"device\":%d,\"name\":\"%s\",\"path\":\"%s\",\"failed\":%d,\"skipped\":%d,"
                   "\"worst_ratio\":%.4f}",
                   c ? "," : "", xfa_backend_name(cols[c].backend), cols[c].device, cols[c].info.name,
                   cols[c].info.path, cols[c].failed, cols[c].skipped, cols[c].worst_ratio);
        printf("],\"passed\":%s}\n", failures ? "false" : "true");
    } else {
        printf("\n%-10s %-8s %-8s %s\n", "device", "failed", "skipped", "worst error/tolerance");
        for (int c = 0; c < n_cols; c++)
            printf("[%c] %-6s %-8d %-8d %.3f\n", 'A' + c, xfa_backend_name(cols[c].backend), cols[c].failed,
                   cols[c].skipped, cols[c].worst_ratio);
        printf("%s\n", failures ? "CROSSCHECK FAILED" : "crosscheck passed");
    }
    for (int c = 0; c < n_cols; c++) xfa_context_destroy(&cols[c].ctx);
    return failures ? 1 : 0;
}
