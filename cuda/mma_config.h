/*
 * mma_config.h - the tile shape of the mma.sync kernel per head dim, read by
 * both the kernels (cuda/mma_forward.cuh) and the host plan
 * (src/host/cuda_device.c), so the two never disagree about the footprint.
 *
 * A work-group is XFA_MMA_WARPS warps; each warp owns Br / XFA_MMA_WARPS query
 * rows (16 or 32: one or two m16 tiles). Q, one K block and one V block live in
 * shared memory as 16-bit elements, each row padded by XFA_MMA_PAD elements
 * (16 bytes) so the eight rows an ldmatrix reads fall in distinct banks.
 * Up to D = 128 a warp owns 32 rows (each K/V element read from shared memory
 * serves twice the FLOPs); above, 16 rows keep the accumulators in registers.
 */
#ifndef XFA_CUDA_MMA_CONFIG_H
#define XFA_CUDA_MMA_CONFIG_H

#define XFA_MMA_WARPS 4
#define XFA_MMA_PAD 8
#define XFA_MMA_BR(d) ((d) <= 128 ? 128 : 64)
#define XFA_MMA_BC(d) 64
/* Q + K + V tiles, 2-byte elements. */
#define XFA_MMA_SMEM_BYTES(d) ((XFA_MMA_BR(d) + 2 * XFA_MMA_BC(d)) * ((d) + XFA_MMA_PAD) * 2)

#endif
