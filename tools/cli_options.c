/* cli_options.c - option parsing and context opening for the `xfa` command. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

double cli_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

double cli_attention_flops(const cli_options *o, int64_t batch, int64_t heads, int64_t seqlen_q, int64_t seqlen_k)
{
    const int64_t left = o->window_left, right = o->causal ? 0 : o->window_right, shift = seqlen_k - seqlen_q;
    if (left < 0 && right < 0) return 4.0 * (double)batch * (double)heads * (double)seqlen_q * (double)seqlen_k * (double)o->dim;
    double pairs = 0;
    for (int64_t i = 0; i < seqlen_q; i++) {
        const int64_t lo = left < 0 ? 0 : i + shift - left, hi = right < 0 ? seqlen_k - 1 : i + shift + right;
        const int64_t a = lo < 0 ? 0 : lo, b = hi > seqlen_k - 1 ? seqlen_k - 1 : hi;
        if (b >= a) pairs += (double)(b - a + 1);
    }
    return 4.0 * (double)batch * (double)heads * pairs * (double)o->dim;
}

static bool parse_int(const char *name, const char *text, int64_t min, int64_t *out)
{
    char *end;
    errno = 0;
    const long long v = strtoll(text, &end, 10);
    if (errno || end == text || *end || v < min) {
        fprintf(stderr, "xfa: %s wants an integer >= %lld, got '%s'\n", name, (long long)min, text);
        return false;
    }
    *out = v;
    return true;
}

bool cli_parse(int argc, char **argv, int first, cli_options *o)
{
    for (int i = first; i < argc; i++) {
        const char *a = argv[i];
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
        int64_t n;
        /* flags without a value */
        if (!strcmp(a, "--causal")) { o->causal = true; continue; }
        if (!strcmp(a, "--check")) { o->check = 1; continue; }
        if (!strcmp(a, "--no-check")) { o->check = 0; continue; }
        if (!strcmp(a, "--csv")) { o->csv = true; continue; }
        if (!strcmp(a, "--json")) { o->json = true; continue; }
        if (!strcmp(a, "--backward")) { o->backward = true; continue; }
        if (!val) {
            fprintf(stderr, "xfa: unknown option or missing value: %s\n", a);
            return false;
        }
        i++;
        if (!strcmp(a, "--backend")) {
            if (xfa_backend_from_name(val, &o->backend)) {
                fprintf(stderr, "xfa: unknown backend '%s' (auto, cpu, opencl, vulkan, cuda)\n", val);
                return false;
            }
        } else if (!strcmp(a, "--dtype")) {
            if (xfa_dtype_from_name(val, &o->dtype)) {
                fprintf(stderr, "xfa: unknown dtype '%s' (f32, f16, bf16)\n", val);
                return false;
            }
        } else if (!strcmp(a, "--layout")) {
            if (strcmp(val, "bshd") && strcmp(val, "bhsd")) {
                fprintf(stderr, "xfa: --layout is bshd or bhsd, got '%s'\n", val);
                return false;
            }
            o->bhsd = !strcmp(val, "bhsd");
        } else if (!strcmp(a, "--seqlens")) {
            o->seqlens = val;
        } else if (!strcmp(a, "--window")) {
            char *end;
            o->window_left = strtoll(val, &end, 10);
            o->window_right = *end == ',' ? strtoll(end + 1, &end, 10) : -2;
            if (*end || o->window_left < -1 || o->window_right < -1) {
                fprintf(stderr, "xfa: --window wants LEFT,RIGHT (each >= 0, or -1 for no limit), got '%s'\n", val);
                return false;
            }
        } else if (!strcmp(a, "--batches")) {
            o->batches = val;
        } else if (!strcmp(a, "--caches")) {
            o->caches = val;
        } else if (!strcmp(a, "--corrupt")) {
            xfa_backend b;
            if (xfa_backend_from_name(val, &b) || b == XFA_BACKEND_AUTO) {
                fprintf(stderr, "xfa: --corrupt wants a backend name, got '%s'\n", val);
                return false;
            }
            o->corrupt = val;
        } else {
            static const struct { const char *name; int64_t min; } ints[] = {
                {"--device", 0}, {"--batch", 1}, {"--seqlen", 1}, {"--seqlen-k", 1}, {"--heads", 1},
                {"--heads-kv", 1}, {"--dim", 1}, {"--seed", 0}, {"--Br", 1}, {"--Bc", 1}, {"--tokens", 1},
                {"--warmup", 0}, {"--iters", 1}, {"--cases", 1},
            };
            size_t k = 0;
            while (k < sizeof ints / sizeof ints[0] && strcmp(a, ints[k].name)) k++;
            if (k == sizeof ints / sizeof ints[0]) {
                fprintf(stderr, "xfa: unknown option %s\n", a);
                return false;
            }
            if (!parse_int(a, val, ints[k].min, &n)) return false;
            switch (k) {
            case 0: o->device = (int)n; break;
            case 1: o->batch = n; break;
            case 2: o->seqlen = n; break;
            case 3: o->seqlen_k = n; break;
            case 4: o->heads = n; break;
            case 5: o->heads_kv = n; break;
            case 6: o->dim = n; break;
            case 7: o->seed = (uint64_t)n; break;
            case 8: o->Br = (uint32_t)n; break;
            case 9: o->Bc = (uint32_t)n; break;
            case 10: o->tokens = n; break;
            case 11: o->warmup = (int)n; break;
            case 12: o->iters = (int)n; break;
            case 13: o->cases = (int)n; break;
            }
        }
    }
    if (o->seqlen_k == 0) o->seqlen_k = o->seqlen;
    if (o->heads == 0) o->heads = o->dim <= 2048 ? 2048 / o->dim : 1; /* FlashAttention's benchmark: 2048 / D heads */
    if (o->heads_kv == 0) o->heads_kv = o->heads;
    return true;
}

xfa_context *cli_open(const cli_options *o)
{
    xfa_context *ctx = NULL;
    const xfa_status st = xfa_context_create(o->backend, o->device, &ctx);
    if (st) {
        fprintf(stderr, "xfa: cannot open device %d of backend %s: %s\n", o->device, xfa_backend_name(o->backend),
                xfa_last_error());
        return NULL;
    }
    return ctx;
}
