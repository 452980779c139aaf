/* test_tensor.c - guarded, poisoned test tensors (see test_tensor.h). */
#include "test_tensor.h"

#include "dtype.h"
#include "internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

bool xfa_test_tensor_alloc(xfa_test_tensor *t, xfa_dtype dtype, const int64_t shape[4], const int64_t stride[4])
{
    memset(t, 0, sizeof *t);
    t->view.dtype = dtype;
    memcpy(t->view.shape, shape, sizeof t->view.shape);
    memcpy(t->view.stride, stride, sizeof t->view.stride);
    t->view.offset = XFA_TEST_GUARD_BYTES;
    t->bytes = XFA_TEST_GUARD_BYTES + xfa_tensor_span_bytes(&t->view) + XFA_TEST_GUARD_BYTES;
    t->host = malloc(t->bytes);
    return t->host != NULL;
}

double xfa_test_rand_normal(uint64_t *state);

void xfa_test_tensor_fill_random(xfa_test_tensor *t, uint64_t *rng)
{
    const size_t elem = xfa_dtype_size(t->view.dtype), count = t->bytes / elem;
    for (size_t i = 0; i < count; i++) xfa_store_f32(t->host, t->view.dtype, (int64_t)i, (float)xfa_test_rand_normal(rng));
}

void xfa_test_tensor_poison(xfa_test_tensor *t) { memset(t->host, XFA_TEST_POISON_BYTE, t->bytes); }

xfa_status xfa_test_tensor_upload(xfa_context *ctx, xfa_test_tensor *t)
{
    xfa_status st = xfa_buffer_create(ctx, t->bytes, &t->view.buffer);
    if (st) return st;
    return xfa_buffer_upload(t->view.buffer, 0, t->host, t->bytes);
}

xfa_status xfa_test_tensor_download(xfa_test_tensor *t)
{
    return xfa_buffer_download(t->view.buffer, 0, t->host, t->bytes);
}

void xfa_test_tensor_free(xfa_test_tensor *t)
{
    xfa_buffer_destroy(&t->view.buffer);
    free(t->host);
    t->host = NULL;
}

bool xfa_test_tensor_check_written(const xfa_test_tensor *t, int64_t *unwritten, int64_t *guard_damage)
{
    unsigned char *mask = calloc(t->bytes, 1); /* 1 where a byte belongs to an element of the view */
    if (!mask) return false;
    const xfa_tensor *v = &t->view;
    const size_t elem = xfa_dtype_size(v->dtype);
    for (int64_t b = 0; b < v->shape[0]; b++)
        for (int64_t s = 0; s < v->shape[1]; s++)
            for (int64_t h = 0; h < v->shape[2]; h++)
                for (int64_t d = 0; d < v->shape[3]; d++)
                    memset(mask + v->offset + (size_t)xfa_tensor_index(v, b, s, h, d) * elem, 1, elem);
    for (size_t i = 0; i < t->bytes; i++)
        if (!mask[i] && t->host[i] != XFA_TEST_POISON_BYTE) (*guard_damage)++;
    for (size_t i = 0; i + elem <= t->bytes; i += elem) {
        if (!mask[i]) continue;
        bool poisoned = true;
        for (size_t j = 0; j < elem; j++) poisoned = poisoned && t->host[i + j] == XFA_TEST_POISON_BYTE;
        if (poisoned) (*unwritten)++;
    }
    free(mask);
    return true;
}

void xfa_test_tensor_gather(const xfa_test_tensor *t, float *out, int64_t *nonfinite)
{
    const xfa_tensor *v = &t->view;
    const unsigned char *base = t->host + v->offset;
    size_t i = 0;
    for (int64_t b = 0; b < v->shape[0]; b++)
        for (int64_t s = 0; s < v->shape[1]; s++)
            for (int64_t h = 0; h < v->shape[2]; h++)
                for (int64_t d = 0; d < v->shape[3]; d++, i++) {
                    out[i] = xfa_load_f32(base, v->dtype, xfa_tensor_index(v, b, s, h, d));
                    if (!isfinite(out[i])) (*nonfinite)++;
                }
}
