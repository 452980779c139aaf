/* cli.h - what the `xfa` command's subcommands share: options and output helpers. */
#ifndef XFA_CLI_H
#define XFA_CLI_H

#include "xfa.h"

#include <stdbool.h>

typedef struct cli_options {
    xfa_backend backend;
    int device;
    int64_t batch, seqlen, seqlen_k, heads, heads_kv, dim;
    xfa_dtype dtype;
    bool causal;
    int64_t window_left, window_right; /* --window L,R (-1: no limit); causal is R = 0 */
    bool bhsd;
    uint64_t seed;
    int check;          /* -1 auto (when affordable), 0 never, 1 always */
    uint32_t Br, Bc;    /* plan override */
    const char *seqlens; /* bench: comma-separated list */
    int64_t tokens;     /* bench: batch * seqlen */
    int warmup, iters;
    bool csv, json;
    bool backward;      /* bench: time xfa_attention_backward alone (TFLOP/s at 2.5x the forward's FLOPs) */
    int cases;          /* crosscheck: number of problems */
    const char *corrupt; /* crosscheck test hook: perturb this backend's outputs */
    const char *batches, *caches; /* bench-decode: comma-separated lists */
} cli_options;

/* Parses argv[first..] into opts (defaults already in opts); prints the problem and returns false on error. */
bool cli_parse(int argc, char **argv, int first, cli_options *opts);
/* Creates the context the options name; prints the reason on failure. */
xfa_context *cli_open(const cli_options *opts);
double cli_now(void);
/* 4·D·(query, key) pairs the mask leaves visible, per batch and head: FLOPs that scale with a window. */
double cli_attention_flops(const cli_options *o, int64_t batch, int64_t heads, int64_t seqlen_q, int64_t seqlen_k);
/* cli_measure.c: random values in [-1, 1) of dtype into buf's first count elements (one 4M-element
 * slice repeated: for timing, not for checking). */
xfa_status cli_fill_random(xfa_buffer *buf, xfa_dtype dtype, size_t count, uint64_t seed);
/* Times call(arg): `warmup` calls each followed by a wait, then `iters` samples of as many calls back
 * to back as fill about sample_s (so a GPU wait's latency is not what gets timed) and one wait;
 * *median_s and *min_s per call. The first failing status is returned. */
xfa_status cli_time_calls(xfa_context *ctx, xfa_status (*call)(void *arg), void *arg, int warmup, int iters,
                          double sample_s, double *median_s, double *min_s);

int cli_info(const cli_options *opts);
int cli_run(const cli_options *opts);
int cli_bench(const cli_options *opts);
int cli_bench_decode(const cli_options *opts);
int cli_crosscheck(const cli_options *opts);
int cli_conformance(const char *action, const char *dir, const cli_options *opts);

#endif
