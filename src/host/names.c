/* names.c - version, status, backend and dtype names. */
#include "internal.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

int xfa_version(void) { return XFA_VERSION; }

const char *xfa_version_string(void)
{
#define XFA_STR2_(x) #x
#define XFA_STR_(x) XFA_STR2_(x)
    return XFA_STR_(XFA_VERSION_MAJOR) "." XFA_STR_(XFA_VERSION_MINOR) "." XFA_STR_(XFA_VERSION_PATCH);
}

const char *xfa_status_string(xfa_status status)
{
    switch (status) {
#define XFA_STATUS_TEXT_(name, value, text) case name: return text;
        XFA_STATUS_LIST(XFA_STATUS_TEXT_)
#undef XFA_STATUS_TEXT_
    default: return "unknown status";
    }
}

const char *xfa_status_name(xfa_status status)
{
    switch (status) {
#define XFA_STATUS_NAME_(name, value, text) case name: return #name;
        XFA_STATUS_LIST(XFA_STATUS_NAME_)
#undef XFA_STATUS_NAME_
    default: return "XFA_STATUS_UNKNOWN";
    }
}

static const char *const backend_names[XFA_BACKEND_COUNT_] = {"auto", "cpu", "opencl", "vulkan", "cuda"};
static const char *const dtype_names[XFA_DTYPE_COUNT_] = {"f32", "f16", "bf16"};

static bool same_word(const char *a, const char *b)
{
    for (; *a && *b; a++, b++)
        if (tolower((unsigned char)*a) != tolower((unsigned char)*b)) return false;
    return *a == *b;
}

const char *xfa_backend_name(xfa_backend backend)
{
    return (unsigned)backend < XFA_BACKEND_COUNT_ ? backend_names[backend] : NULL;
}

xfa_status xfa_backend_from_name(const char *name, xfa_backend *out)
{
    if (!name || !out) return XFA_ERROR_NULL_POINTER;
    for (int i = 0; i < XFA_BACKEND_COUNT_; i++)
        if (same_word(name, backend_names[i])) { *out = (xfa_backend)i; return XFA_SUCCESS; }
    return XFA_ERROR_INVALID_ARGUMENT;
}

const char *xfa_dtype_name(xfa_dtype dtype)
{
    if (dtype == XFA_DTYPE_I32) return "i32";
    return (unsigned)dtype < XFA_DTYPE_COUNT_ ? dtype_names[dtype] : NULL;
}

xfa_status xfa_dtype_from_name(const char *name, xfa_dtype *out)
{
    if (!name || !out) return XFA_ERROR_NULL_POINTER;
    for (int i = 0; i < XFA_DTYPE_COUNT_; i++)
        if (same_word(name, dtype_names[i])) { *out = (xfa_dtype)i; return XFA_SUCCESS; }
    /* the spellings PyTorch users type */
    if (same_word(name, "float32") || same_word(name, "fp32")) { *out = XFA_DTYPE_F32; return XFA_SUCCESS; }
    if (same_word(name, "float16") || same_word(name, "fp16") || same_word(name, "half")) { *out = XFA_DTYPE_F16; return XFA_SUCCESS; }
    if (same_word(name, "bfloat16")) { *out = XFA_DTYPE_BF16; return XFA_SUCCESS; }
    if (same_word(name, "i32") || same_word(name, "int32")) { *out = XFA_DTYPE_I32; return XFA_SUCCESS; }
    return XFA_ERROR_INVALID_DTYPE;
}

size_t xfa_dtype_size(xfa_dtype dtype)
{
    switch (dtype) {
    case XFA_DTYPE_F32:
    case XFA_DTYPE_I32: return 4;
    case XFA_DTYPE_F16:
    case XFA_DTYPE_BF16: return 2;
    default: return 0;
    }
}

double xfa_attention_flops(int64_t batch, int64_t heads, int64_t seqlen_q, int64_t seqlen_k, int64_t head_dim,
                           int causal)
{
    double pairs = (double)seqlen_q * (double)seqlen_k;
    if (causal) {
        if (seqlen_q == seqlen_k) {
            pairs *= 0.5; /* the convention FlashAttention's benchmarks use */
        } else {
            /* exact count of visible (i, j): j <= i + seqlen_k - seqlen_q */
            pairs = 0;
            for (int64_t i = 0; i < seqlen_q; i++) {
                int64_t visible = i + seqlen_k - seqlen_q + 1;
                if (visible > seqlen_k) visible = seqlen_k;
                if (visible > 0) pairs += (double)visible;
            }
        }
    }
    return 4.0 * (double)batch * (double)heads * pairs * (double)head_dim;
}
