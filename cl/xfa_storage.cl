/*
 * xfa_storage.cl - how the forward and backward kernels read and write tensor
 * elements, prepended to their sources when they are embedded
 * (cmake/backend_opencl.cmake). Built with -DXFA_DTYPE_F32|F16|BF16.
 */

/* Storage: f32 as is; f16 through vload_half/vstore_half (no cl_khr_fp16 needed);
 * bf16 as the top 16 bits of an f32, rounded to nearest even on store. */
#if defined(XFA_DTYPE_F32)
typedef float elem_t;
#define LOAD(p, i) ((p)[i])
#define STORE(p, i, x) ((p)[i] = (x))
#elif defined(XFA_DTYPE_F16)
typedef half elem_t;
#define LOAD(p, i) vload_half((i), (p))
#define STORE(p, i, x) vstore_half_rte((x), (i), (p))
#elif defined(XFA_DTYPE_BF16)
typedef ushort elem_t;
#define LOAD(p, i) as_float((uint)(p)[i] << 16)
#define STORE(p, i, x) ((p)[i] = bf16_from_f32(x))
static inline ushort bf16_from_f32(float x)
{
    const uint u = as_uint(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (ushort)((u >> 16) | 0x40u); /* quiet NaN */
    return (ushort)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
#else
#error "define XFA_DTYPE_F32, XFA_DTYPE_F16 or XFA_DTYPE_BF16"
#endif
