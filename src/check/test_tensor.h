/*
 * test_tensor.h - a tensor for the checks: a device buffer with guard bytes
 * around the view and a host copy of the whole buffer. Outputs are poisoned
 * (all bytes 0xFF, a NaN in every dtype) before a call, so an element the
 * kernel never wrote, or a guard byte it overwrote, shows afterwards.
 */
#ifndef XFA_TEST_TENSOR_H
#define XFA_TEST_TENSOR_H

#include "xfa.h"

#include <stdbool.h>

#define XFA_TEST_GUARD_BYTES 64
#define XFA_TEST_POISON_BYTE 0xFF

typedef struct xfa_test_tensor {
    xfa_tensor view;     /* offset = XFA_TEST_GUARD_BYTES into `buffer` */
    unsigned char *host; /* the whole buffer, guards included */
    size_t bytes;
} xfa_test_tensor;

/* Allocates the host copy; the device buffer comes with xfa_test_tensor_upload. */
bool xfa_test_tensor_alloc(xfa_test_tensor *t, xfa_dtype dtype, const int64_t shape[4], const int64_t stride[4]);
/* Normal random values everywhere (gaps and guards too, so nothing reads as zero by accident). */
void xfa_test_tensor_fill_random(xfa_test_tensor *t, uint64_t *rng);
void xfa_test_tensor_poison(xfa_test_tensor *t);
/* Creates the device buffer and copies the host copy into it. */
xfa_status xfa_test_tensor_upload(xfa_context *ctx, xfa_test_tensor *t);
xfa_status xfa_test_tensor_download(xfa_test_tensor *t);
void xfa_test_tensor_free(xfa_test_tensor *t);
/* After a download: elements still poisoned, and bytes outside the view's elements that changed. */
bool xfa_test_tensor_check_written(const xfa_test_tensor *t, int64_t *unwritten, int64_t *guard_damage);
/* The view's elements as floats in (b, s, h, d) order; counts non-finite values. */
void xfa_test_tensor_gather(const xfa_test_tensor *t, float *out, int64_t *nonfinite);
#endif /* XFA_TEST_TENSOR_H */
