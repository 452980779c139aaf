/* backward_mma_d64.cu - the tensor-core backward kernels for head dim 64 (one file per head dim so they build in parallel). */
#include "backward_mma.cuh"

extern "C" xfa_cuda_result xfa_cuda_backward_mma_d64(const xfa_cuda_backward *p, void *stream)
{
    return xfa::bwd::backward_mma<64>(p, stream);
}
