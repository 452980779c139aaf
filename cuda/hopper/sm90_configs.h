/*
 * sm90_configs.h - the tile configurations compiled for the Hopper kernel, per head dim, and the
 * per-head-dim launchers (one .cu each, so that they compile in parallel).
 */
#pragma once
#include <cuda_runtime.h>

namespace xfa_sm90 {

struct Params;

/* A compiled configuration: Br = 64 x consumer warpgroups; causal -1 = either. The default for a
 * problem is the first entry of its head dim whose causal and min_seqlen_k match (measured on an
 * H100, bench/results/h100-2026-11-23-hopper.md); a host plan may name any entry. Keep in step with
 * the XFA_SM90_CONFIG lines of sm90_forward_d<D>.cu. */
struct Config {
    int D, causal, min_seqlen_k, Br, Bc, stages;
};
constexpr Config kConfigs[] = {
    {64, -1, 0, 192, 128, 3},   {64, -1, 0, 192, 128, 2},  {64, -1, 0, 128, 128, 2},
    {128, -1, 4096, 128, 192, 2}, {128, -1, 0, 128, 128, 2}, {128, -1, 0, 128, 176, 2},
    {256, -1, 0, 128, 80, 2},
};

/* The host plan's Br/Bc/stages (0 = any) when a compiled configuration matches, else the default. */
inline void resolve_config(int D, int causal, int seqlen_k, int *Br, int *Bc, int *stages)
{
    int def = -1, hit = -1;
    for (int i = 0; i < (int)(sizeof kConfigs / sizeof kConfigs[0]); i++) {
        const Config &c = kConfigs[i];
        if (c.D != D) continue;
        if (def < 0 && (c.causal < 0 || c.causal == causal) && seqlen_k >= c.min_seqlen_k) def = i;
        if (hit < 0 && (*Br || *Bc || *stages) && (*Br == 0 || *Br == c.Br) && (*Bc == 0 || *Bc == c.Bc) &&
            (*stages == 0 || *stages == c.stages))
            hit = i;
    }
    const int k = hit >= 0 ? hit : def;
    *Br = k < 0 ? 0 : kConfigs[k].Br;
    *Bc = k < 0 ? 0 : kConfigs[k].Bc;
    *stages = k < 0 ? 0 : kConfigs[k].stages;
}

/* Br, Bc and stages as resolve_config() returned them; cudaErrorNotSupported if not compiled. */
cudaError_t launch_d64(bool bf16, const Params &p, dim3 grid, cudaStream_t stream, int Br, int Bc, int stages);
cudaError_t launch_d128(bool bf16, const Params &p, dim3 grid, cudaStream_t stream, int Br, int Bc, int stages);
cudaError_t launch_d256(bool bf16, const Params &p, dim3 grid, cudaStream_t stream, int Br, int Bc, int stages);

}  // namespace xfa_sm90

/* One compiled configuration of launch_d<XFA_D>. */
#define XFA_SM90_CONFIG(BR, BC, ST)                                                                      \
    if (Br == BR && Bc == BC && stages == ST)                                                            \
        return bf16 ? launch<__nv_bfloat16, XFA_D, BC, ST, BR / 64>(p, grid, stream)                     \
                    : launch<__half, XFA_D, BC, ST, BR / 64>(p, grid, stream);
