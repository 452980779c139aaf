/* cli_measure.c - what `xfa bench` and `xfa bench-decode` share: random device inputs and timing. */
#include "cli.h"
#include "cli_timer.h"

#include "dtype.h"

#include <stdlib.h>

xfa_status cli_fill_random(xfa_buffer *buf, xfa_dtype dtype, size_t count, uint64_t seed)
{
    /* One slice of random values, uploaded over and over: a 128k-token KV cache at batch 32 (17 GB)
     * then costs an upload, not minutes of random numbers on the host. Timing does not depend on
     * the values, and the checked paths (`xfa run --check`) make their own inputs. */
    const size_t elem = xfa_dtype_size(dtype), slice = (size_t)1 << 22;
    const size_t n0 = count < slice ? count : slice;
    unsigned char *host = malloc(n0 * elem);
    if (!host) return XFA_ERROR_OUT_OF_HOST_MEMORY;
    uint64_t s = seed;
    for (size_t i = 0; i < n0; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        xfa_store_f32(host, dtype, (int64_t)i, (float)((s >> 40) & 0xffffff) / 8388608.0f - 1.0f);
    }
    xfa_status st = XFA_SUCCESS;
    for (size_t at = 0; at < count && !st; at += slice) {
        const size_t n = count - at < slice ? count - at : slice;
        st = xfa_buffer_upload(buf, at * elem, host, n * elem);
    }
    free(host);
    return st;
}

static int compare_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

xfa_status cli_time_calls(xfa_context *ctx, xfa_status (*call)(void *arg), void *arg, int warmup, int iters,
                          double sample_s, double *median_s, double *min_s)
{
    double *times = calloc((size_t)iters, sizeof *times);
    if (!times) return XFA_ERROR_OUT_OF_HOST_MEMORY;
    xfa_status st = XFA_SUCCESS;
    double one_call = 0;
    for (int i = 0; i < warmup && !st; i++) {
        const double t0 = cli_now();
        if (!(st = call(arg)) && !(st = xfa_context_synchronize(ctx))) one_call = cli_now() - t0;
    }
    /* `reps` calls back to back per wait, from the last warm-up call (1 for slow calls); timed by
     * the device's events where the backend has them (cli_timer.h), else by the host clock. */
    const int reps = one_call > 0 && one_call < sample_s ? (int)(sample_s / one_call) + 1 : 1;
    cli_timer *timer = st ? NULL : cli_timer_create(ctx);
    for (int i = 0; i < iters && !st; i++) {
        const double t0 = cli_now();
        if (timer) cli_timer_start(timer);
        for (int r = 0; r < reps && !st; r++) st = call(arg);
        const double device_s = timer && !st ? cli_timer_stop(timer) : -1.0;
        if (!st && !(st = xfa_context_synchronize(ctx))) times[i] = (device_s >= 0 ? device_s : cli_now() - t0) / reps;
    }
    cli_timer_destroy(timer);
    if (!st) {
        qsort(times, (size_t)iters, sizeof *times, compare_double);
        *min_s = times[0];
        *median_s = times[iters / 2];
    }
    free(times);
    return st;
}
