/*
 * mma_config.h - the tiles of the mma.sync kernel per head dim, read by both
 * the kernels (cuda/mma_forward.cuh) and the host plan (src/host/cuda_device.c),
 * so the two never disagree about the footprint.
 *
 * A work-group is `warps` warps; each warp owns Br / warps query rows (one or
 * two m16 tiles). Q, one K block and one V block live in shared memory as
 * 16-bit elements, each row padded by XFA_MMA_PAD elements (16 bytes) so the
 * eight rows an ldmatrix reads fall in distinct banks.
 *
 *   d <= 128: Br = 128, 4 warps of 32 rows (each K/V element read from shared
 *             memory serves two m16 tiles); Bc = 64 at d <= 64, else 32 so the
 *             S and O accumulators stay in registers.
 *   d > 128:  Br = 128, 8 warps of 16 rows, Bc = 64 ("wide", 132-135 KiB of
 *             shared memory: sm_80, sm_90), or Br = 64 with 4 warps where M is
 *             smaller (sm_86, sm_89: 99 KiB). The plan picks the first that fits.
 * Measured on an H100 (bench/results/h100-2026-11-23-cuda.md): at d = 256 the wide
 * tile gives 292 TFLOP/s against 212 for Br = 64; at d = 128, Bc = 32 beats 64.
 */
#ifndef XFA_CUDA_MMA_CONFIG_H
#define XFA_CUDA_MMA_CONFIG_H

#define XFA_MMA_PAD 8
#define XFA_MMA_BC(d) ((d) <= 64 ? 64 : (d) <= 128 ? 32 : 64)
#define XFA_MMA_BR(d, warps) ((d) <= 128 ? 128 : 16 * (warps))
/* Q + K + V tiles, 2-byte elements. */
#define XFA_MMA_SMEM_BYTES(d, warps) ((XFA_MMA_BR(d, warps) + 2 * XFA_MMA_BC(d)) * ((d) + XFA_MMA_PAD) * 2)
/* The warp counts built for a head dim, preferred first. */
#define XFA_MMA_WARPS_FIRST(d) ((d) <= 128 ? 4 : 8)
#define XFA_MMA_WARPS_SECOND(d) 4
/* Largest opt-in shared memory of sm_86 and sm_89; wider tiles are not built for them. */
#define XFA_MMA_SMEM_SM86 101376

#endif
