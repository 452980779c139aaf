/* sm90_forward_d64.cu - the Hopper forward kernel instantiated for head_dim 64. */
#include "sm90_configs.h"
#include "sm90_forward.cuh"

#define XFA_D 64

namespace xfa_sm90 {

cudaError_t launch_d64(bool bf16, const Params &p, dim3 grid, cudaStream_t stream, int Br, int Bc, int stages)
{
    XFA_SM90_CONFIG(192, 128, 3)
    XFA_SM90_CONFIG(192, 128, 2)
    XFA_SM90_CONFIG(128, 128, 2)
    return cudaErrorNotSupported;
}

}  // namespace xfa_sm90
