/*
 * sm90_configs.h - the tile configurations compiled for the Hopper kernel, per head dim, and the
 * per-head-dim launchers (one .cu each, so that they compile in parallel).
 */
#pragma once
#include <cuda_runtime.h>

namespace xfa_sm90 {

struct Params;

/* Compiled (D, Bc, stages); the first entry of each D is its default. Keep in step with the
 * XFA_SM90_CONFIG lines of sm90_forward_d<D>.cu. */
struct Config {
    int D, Bc, stages;
};
constexpr Config kConfigs[] = {{64, 128, 2}, {128, 128, 2}, {256, 80, 2}};

/* The host plan's Bc/stages when compiled, else the head dim's default. */
inline void resolve_config(int D, int *Bc, int *stages)
{
    int def = -1;
    for (int i = 0; i < (int)(sizeof kConfigs / sizeof kConfigs[0]); i++) {
        if (kConfigs[i].D != D) continue;
        if (def < 0) def = i;
        if ((*Bc == 0 || *Bc == kConfigs[i].Bc) && (*stages == 0 || *stages == kConfigs[i].stages)) {
            *Bc = kConfigs[i].Bc;
            *stages = kConfigs[i].stages;
            return;
        }
    }
    *Bc = def < 0 ? 0 : kConfigs[def].Bc;
    *stages = def < 0 ? 0 : kConfigs[def].stages;
}

/* Bc and stages as resolve_config() returned them (Br is always 128: two consumer warpgroups of
 * 64 rows); cudaErrorNotSupported for a configuration not compiled. */
cudaError_t launch_d64(bool bf16, const Params &p, dim3 grid, cudaStream_t stream, int Bc, int stages);
cudaError_t launch_d128(bool bf16, const Params &p, dim3 grid, cudaStream_t stream, int Bc, int stages);
cudaError_t launch_d256(bool bf16, const Params &p, dim3 grid, cudaStream_t stream, int Bc, int stages);

}  // namespace xfa_sm90

/* Defines launch_d<D>: tries each (Bc, STAGES) given, the first one as the default. */
#define XFA_SM90_CONFIG(BC, ST)                                                                          \
    if (Bc == BC && stages == ST)                                                                        \
        return bf16 ? launch<__nv_bfloat16, XFA_D, BC, ST>(p, grid, stream) : launch<__half, XFA_D, BC, ST>(p, grid, stream);
