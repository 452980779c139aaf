/* sm90_forward_d256.cu - the Hopper forward kernel instantiated for head_dim 256. */
#include "sm90_configs.h"
#include "sm90_forward.cuh"

#define XFA_D 256

namespace xfa_sm90 {

cudaError_t launch_d256(bool bf16, const Params &p, dim3 grid, cudaStream_t stream, int Br, int Bc, int stages)
{
    XFA_SM90_CONFIG(128, 80, 2)
    return cudaErrorNotSupported;
}

}  // namespace xfa_sm90
