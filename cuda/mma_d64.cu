/* mma_d64.cu - the mma.sync forward kernel for head dim 64 (one file per head dim so they build in parallel). */
#include "mma_forward.cuh"

extern "C" xfa_cuda_result xfa_cuda_mma_forward_d64(const xfa_cuda_forward *p, void *stream)
{
    return xfa::mma_forward<64>(p, stream);
}
