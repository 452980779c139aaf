/*
 * test_threads.c - the thread-safety rule of xfa.h: distinct contexts may be
 * used from different threads at once. Several threads, each with its own
 * context, run forward checks concurrently; every result must be correct.
 * Run under ThreadSanitizer in CI (-DXFA_SANITIZE=thread) for the CPU path.
 * Usage: test_threads <backend>; exit 77 when the backend has no device.
 */
#include "attention_case.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define THREADS 4
#define CASES_PER_THREAD 6

typedef struct worker {
    xfa_backend backend;
    int index;
    int failures;
    char message[1024];
} worker;

static void *run_worker(void *arg)
{
    worker *w = arg;
    xfa_context *ctx = NULL;
    if (xfa_context_create(w->backend, 0, &ctx)) {
        snprintf(w->message, sizeof w->message, "context: %s", xfa_last_error());
        w->failures++;
        return NULL;
    }
    for (int i = 0; i < CASES_PER_THREAD; i++) {
        xfa_test_case tc = xfa_test_case_random(5000 + (uint64_t)(w->index * 100 + i), (xfa_dtype)(i % XFA_DTYPE_COUNT_));
        const xfa_test_result r = xfa_test_run_case(ctx, &tc);
        if (r.status == XFA_ERROR_UNSUPPORTED_DTYPE) continue;
        if (r.status || !r.passed) {
            w->failures++;
            snprintf(w->message, sizeof w->message, "%s", r.message);
        }
    }
    xfa_context_destroy(&ctx);
    return NULL;
}

int main(int argc, char **argv)
{
    xfa_backend backend;
    if (argc < 2 || xfa_backend_from_name(argv[1], &backend)) {
        fprintf(stderr, "usage: %s <backend>\n", argv[0]);
        return 2;
    }
    int count = 0;
    if (xfa_device_count(backend, &count) || count == 0) {
        printf("SKIP: the %s backend sees no device\n", argv[1]);
        return 77;
    }
    pthread_t threads[THREADS];
    worker workers[THREADS];
    for (int i = 0; i < THREADS; i++) {
        workers[i] = (worker){backend, i, 0, ""};
        if (pthread_create(&threads[i], NULL, run_worker, &workers[i])) return 1;
    }
    int failures = 0;
    for (int i = 0; i < THREADS; i++) {
        pthread_join(threads[i], NULL);
        if (workers[i].failures) fprintf(stderr, "thread %d: %d failure(s): %s\n", i, workers[i].failures, workers[i].message);
        failures += workers[i].failures;
    }
    printf("%d threads x %d cases on %s: %s\n", THREADS, CASES_PER_THREAD, argv[1], failures ? "FAILED" : "passed");
    return failures ? 1 : 0;
}
