/*
 * test_allocator.c - a caller's host allocator (xfa_set_allocator) on one backend:
 * xfa's own host memory goes through it and is all given back, the allocator
 * cannot be swapped while xfa holds memory from it, and an allocator that runs
 * dry at any point makes the calls fail cleanly with an error, never a crash.
 *
 *   test_allocator <backend> [device]
 */
#define _POSIX_C_SOURCE 200112L /* posix_memalign */
#include "attention_case.h"
#include "check_run.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static xfa_backend backend;
static int device;

typedef struct counting_allocator {
    size_t allocs, reallocs, frees;
    long budget;        /* allocations left before alloc returns NULL; < 0: unlimited */
    int misaligned;     /* an alignment that was not a power of two >= 16 */
} counting_allocator;

static void *count_alloc(void *user, size_t bytes, size_t alignment)
{
    counting_allocator *a = user;
    if (alignment < 16 || (alignment & (alignment - 1))) a->misaligned = 1;
    if (a->budget == 0) return NULL;
    if (a->budget > 0) a->budget--;
    void *p = NULL;
    if (posix_memalign(&p, alignment, bytes ? bytes : 1)) return NULL;
    a->allocs++;
    return p;
}

static void *count_realloc(void *user, void *ptr, size_t bytes, size_t alignment)
{
    counting_allocator *a = user;
    (void)alignment;
    if (a->budget == 0) return NULL;
    if (a->budget > 0) a->budget--;
    a->reallocs += ptr != NULL;
    a->allocs += ptr == NULL;
    return realloc(ptr, bytes);
}

static void count_free(void *user, void *ptr)
{
    counting_allocator *a = user;
    if (ptr) a->frees++;
    free(ptr);
}

static counting_allocator counter;
static const xfa_allocator allocator = {count_alloc, count_realloc, count_free, &counter};

/* One small forward pass with its buffers; returns the first failing status. */
static xfa_status one_forward(void)
{
    xfa_context *ctx = NULL;
    xfa_buffer *qb = NULL, *ob = NULL;
    enum { B = 1, S = 33, H = 2, D = 64 };
    const size_t bytes = (size_t)B * S * H * D * sizeof(float);
    xfa_status st = xfa_context_create(backend, device, &ctx);
    if (!st) st = xfa_buffer_create(ctx, bytes, &qb);
    if (!st) st = xfa_buffer_create(ctx, bytes, &ob);
    float *host = malloc(bytes);
    for (size_t i = 0; i < bytes / sizeof(float); i++) host[i] = (float)((i * 37) % 101) / 101.0f - 0.5f;
    if (!st) st = xfa_buffer_upload(qb, 0, host, bytes);
    if (!st) {
        const xfa_tensor q = xfa_tensor_bshd(qb, 0, XFA_DTYPE_F32, B, S, H, D);
        const xfa_tensor o = xfa_tensor_bshd(ob, 0, XFA_DTYPE_F32, B, S, H, D);
        xfa_attention_params params = XFA_ATTENTION_PARAMS_DEFAULT;
        params.causal = 1;
        st = xfa_attention_forward(ctx, &params, &q, &q, &q, &o, NULL);
    }
    if (!st) st = xfa_buffer_download(ob, 0, host, bytes);
    if (!st)
        for (size_t i = 0; i < bytes / sizeof(float); i++)
            if (!(host[i] > -1.0f && host[i] < 1.0f)) { st = XFA_ERROR_BACKEND_FAILURE; break; }
    free(host);
    xfa_buffer_destroy(&qb);
    xfa_buffer_destroy(&ob);
    xfa_context_destroy(&ctx);
    return st;
}

START_TEST(test_all_host_memory_goes_through_the_allocator_and_comes_back)
{
    memset(&counter, 0, sizeof counter);
    counter.budget = -1;
    ck_assert_int_eq(xfa_set_allocator(&allocator), XFA_SUCCESS);
    ck_assert_int_eq(one_forward(), XFA_SUCCESS);
    ck_assert_msg(counter.allocs > 0, "xfa made no host allocation through the caller's allocator");
    ck_assert_msg(counter.allocs == counter.frees, "%zu allocations, %zu frees", counter.allocs, counter.frees);
    ck_assert_uint_eq(xfa_host_bytes_in_use(), 0);
    ck_assert_int_eq(counter.misaligned, 0);
    ck_assert_int_eq(xfa_set_allocator(NULL), XFA_SUCCESS);
}
END_TEST

START_TEST(test_allocator_cannot_change_while_memory_is_held)
{
    memset(&counter, 0, sizeof counter);
    counter.budget = -1;
    ck_assert_int_eq(xfa_set_allocator(&allocator), XFA_SUCCESS);
    xfa_context *ctx = NULL;
    ck_assert_int_eq(xfa_context_create(backend, device, &ctx), XFA_SUCCESS);
    ck_assert_uint_gt(xfa_host_bytes_in_use(), 0);
    ck_assert_int_eq(xfa_set_allocator(NULL), XFA_ERROR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(xfa_last_error(), "still holds"));
    xfa_context_destroy(&ctx);
    ck_assert_int_eq(xfa_set_allocator(NULL), XFA_SUCCESS);
    ck_assert_int_eq(counter.allocs, counter.frees);
}
END_TEST

START_TEST(test_incomplete_allocator_is_refused)
{
    const xfa_allocator no_free = {count_alloc, NULL, NULL, &counter};
    ck_assert_int_eq(xfa_set_allocator(&no_free), XFA_ERROR_INVALID_ARGUMENT);
    ck_assert_int_eq(one_forward(), XFA_SUCCESS); /* the default allocator is still in place */
}
END_TEST

/* The allocator runs dry after k allocations, for every k until the call needs no more. */
START_TEST(test_allocator_running_dry_fails_cleanly)
{
    int succeeded = 0;
    for (long k = 0; k < 400 && !succeeded; k++) {
        memset(&counter, 0, sizeof counter);
        counter.budget = k;
        ck_assert_int_eq(xfa_set_allocator(&allocator), XFA_SUCCESS);
        const xfa_status st = one_forward();
        ck_assert_msg(st == XFA_SUCCESS || st == XFA_ERROR_OUT_OF_HOST_MEMORY || st == XFA_ERROR_OUT_OF_DEVICE_MEMORY,
                      "budget %ld: %s (%s)", k, xfa_status_string(st), xfa_last_error());
        ck_assert_msg(counter.allocs == counter.frees, "budget %ld: %zu allocations, %zu frees (leak)", k,
                      counter.allocs, counter.frees);
        ck_assert_int_eq(xfa_set_allocator(NULL), XFA_SUCCESS);
        succeeded = st == XFA_SUCCESS;
    }
    ck_assert_msg(succeeded, "the forward pass never succeeded within 400 allocations");
}
END_TEST

static Suite *allocator_suite(void)
{
    Suite *s = suite_create("allocator");
    TCase *tc = tcase_create("allocator");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_all_host_memory_goes_through_the_allocator_and_comes_back);
    tcase_add_test(tc, test_allocator_cannot_change_while_memory_is_held);
    tcase_add_test(tc, test_incomplete_allocator_is_refused);
    tcase_add_test(tc, test_allocator_running_dry_fails_cleanly);
    suite_add_tcase(s, tc);
    return s;
}

int main(int argc, char **argv)
{
    if (argc < 2 || xfa_backend_from_name(argv[1], &backend) != XFA_SUCCESS) {
        fprintf(stderr, "usage: test_allocator <backend> [device]\n");
        return 2;
    }
    device = argc > 2 ? atoi(argv[2]) : 0;
    int count = 0;
    if (xfa_device_count(backend, &count) != XFA_SUCCESS || count <= device) {
        printf("test_allocator: no %s device %d here; skipped\n", argv[1], device);
        return 77;
    }
    return xfa_check_run(allocator_suite(), backend == XFA_BACKEND_CPU);
}
