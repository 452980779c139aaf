/* backward_mma_d128.cu - the tensor-core backward kernels for head dim 128 (stub until they land). */
#include "backward_launch.h"

extern "C" xfa_cuda_result xfa_cuda_backward_mma_d128(const xfa_cuda_backward *p, void *stream)
{
    (void)p;
    (void)stream;
    return XFA_CUDA_NOT_HANDLED;
}
