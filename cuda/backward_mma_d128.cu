/* backward_mma_d128.cu - the tensor-core backward kernels for head dim 128 (one file per head dim so they build in parallel). */
#include "backward_mma.cuh"

extern "C" xfa_cuda_result xfa_cuda_backward_mma_d128(const xfa_cuda_backward *p, void *stream)
{
    return xfa::bwd::backward_mma<128>(p, stream);
}
