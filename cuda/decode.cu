/*
 * decode.cu - the decode launchers of cuda/decode_launch.h: the append of the
 * new tokens into the cache, and the split-KV attention dispatched by dtype to
 * cuda/decode_{f16,bf16,f32}.cu (one file each, so they compile in parallel).
 */
#include "decode_kernel.cuh"

namespace {

/*
 * Writes token t of k_new/v_new (every KV head) at cache position clamp(seqlens[b], 0, capacity) + t,
 * through the block table when paged; positions past the capacity are dropped (xfa.h). The bits are
 * copied as they are (W: a word of the element's size). Grid (Sq * Hkv, B), a thread per dim.
 */
template <typename W> __global__ void append_kernel(const xfa_cuda_decode_problem p)
{
    const int x = threadIdx.x, t = blockIdx.x / p.heads_kv, h = blockIdx.x % p.heads_kv, b = blockIdx.y;
    if (x >= p.head_dim) return;
    const int pos = xfa_decode::clamp_int(p.seqlens[b * p.seqlens_stride], 0, p.capacity) + t;
    if (pos >= p.capacity) return;
    int64_t cb = b, row = pos;
    if (p.block_table) {
        const int page = pos / p.page_size;
        cb = xfa_decode::clamp_int(p.block_table[b * p.block_table_stride[0] + page * p.block_table_stride[1]], 0,
                                   p.num_pages - 1);
        row = pos - (int64_t)page * p.page_size;
    }
    const W *kn = static_cast<const W *>(p.k_new), *vn = static_cast<const W *>(p.v_new);
    W *kc = static_cast<W *>(p.k_cache), *vc = static_cast<W *>(p.v_cache);
    kc[cb * p.k_stride[0] + row * p.k_stride[1] + h * p.k_stride[2] + x * p.k_stride[3]] =
        kn[b * p.k_new_stride[0] + t * p.k_new_stride[1] + h * p.k_new_stride[2] + x * p.k_new_stride[3]];
    vc[cb * p.v_stride[0] + row * p.v_stride[1] + h * p.v_stride[2] + x * p.v_stride[3]] =
        vn[b * p.v_new_stride[0] + t * p.v_new_stride[1] + h * p.v_new_stride[2] + x * p.v_new_stride[3]];
}

} // namespace

extern "C" xfa_cuda_result xfa_cuda_decode_append(const xfa_cuda_decode_problem *p, void *stream)
{
    if (p->head_dim > 1024) return XFA_CUDA_NOT_HANDLED;
    const dim3 grid((unsigned)(p->seqlen_q * p->heads_kv), (unsigned)p->batch);
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    if (p->dtype == XFA_CUDA_F32)
        append_kernel<uint32_t><<<grid, p->head_dim, 0, s>>>(*p);
    else
        append_kernel<uint16_t><<<grid, p->head_dim, 0, s>>>(*p);
    return (xfa_cuda_result)cudaGetLastError();
}

extern "C" xfa_cuda_result xfa_cuda_decode_attention(const xfa_cuda_decode_problem *p, void *stream)
{
    if (p->head_dim % 32 || p->head_dim > 256 || p->splits < 1) return XFA_CUDA_NOT_HANDLED;
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    switch (p->dtype) {
    case XFA_CUDA_F16: return xfa_decode_attention_f16(p, s);
    case XFA_CUDA_BF16: return xfa_decode_attention_bf16(p, s);
    case XFA_CUDA_F32: return xfa_decode_attention_f32(p, s);
    }
    return XFA_CUDA_NOT_HANDLED;
}
