/* sm90_forward_d128.cu - the Hopper forward kernel instantiated for head_dim 128. */
#include "sm90_configs.h"
#include "sm90_forward.cuh"

#define XFA_D 128

namespace xfa_sm90 {

cudaError_t launch_d128(bool bf16, const Params &p, dim3 grid, cudaStream_t stream, int Br, int Bc, int stages)
{
    XFA_SM90_CONFIG(128, 192, 2)
    XFA_SM90_CONFIG(128, 128, 2)
    XFA_SM90_CONFIG(128, 176, 2)
    return cudaErrorNotSupported;
}

}  // namespace xfa_sm90
