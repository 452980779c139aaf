/* decode_bf16.cu - the split-KV decode kernel (cuda/decode_kernel.cuh) for bf16 K/V, every head dim. */
#include "decode_kernel.cuh"

xfa_cuda_result xfa_decode_attention_bf16(const xfa_cuda_decode_problem *p, cudaStream_t stream)
{
    return xfa_decode::launch_attention<__nv_bfloat16>(p, stream);
}
