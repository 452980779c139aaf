/*
 * backward_config.h - the tiles of the tensor-core backward kernels
 * (cuda/backward_mma.cuh), read by the kernels and by the host plan
 * (src/host/cuda_backward.c), so the two never disagree about the footprint.
 *
 * dK/dV kernel: KV_WARPS warps, each owning KV_MT m16 tiles of keys (Bc = 16 * MT * warps keys of
 *   one KV head, resident in shared memory); query blocks of KV_BR rows
 *   stream through two stages of Q, dO (16-bit) and their lse, D_i (f32).
 * dQ kernel: Q_WARPS warps, each owning Q_MT m16 tiles of query rows (Br = 16 * MT * warps rows,
 *   Q and dO resident); key blocks of Q_BC rows stream through two stages of K, V.
 * Rows are padded by XFA_BWD_PAD elements (16 bytes) so the eight rows an
 * ldmatrix reads fall in distinct banks.
 */
#ifndef XFA_CUDA_BACKWARD_CONFIG_H
#define XFA_CUDA_BACKWARD_CONFIG_H

#define XFA_BWD_PAD 8
#define XFA_BWD_KV_WARPS(d) ((d) <= 64 ? 4 : 8)
#define XFA_BWD_KV_MT(d) ((d) <= 64 ? 2 : 1)
#define XFA_BWD_KV_BC(d) (16 * XFA_BWD_KV_MT(d) * XFA_BWD_KV_WARPS(d))
#define XFA_BWD_KV_BR(d) ((d) <= 64 ? 32 : 64)
#define XFA_BWD_Q_WARPS(d) 4
#define XFA_BWD_Q_MT(d) 2 /* 1 at D = 128 (Bc 64): 210 TFLOP/s at 16k on an H100, 230 with 2 */
#define XFA_BWD_Q_BR(d) (16 * XFA_BWD_Q_MT(d) * XFA_BWD_Q_WARPS(d))
#define XFA_BWD_Q_BC(d) 32

/* K, V + two stages of Q, dO (2-byte elements) + two stages of lse, D_i (f32 per query row). */
#define XFA_BWD_KV_SMEM_BYTES(d)                                                                                   \
    ((2 * XFA_BWD_KV_BC(d) + 4 * XFA_BWD_KV_BR(d)) * ((d) + XFA_BWD_PAD) * 2 + 4 * XFA_BWD_KV_BR(d) * 4)
/* Q, dO + two stages of K, V (2-byte elements). */
#define XFA_BWD_Q_SMEM_BYTES(d) ((2 * XFA_BWD_Q_BR(d) + 4 * XFA_BWD_Q_BC(d)) * ((d) + XFA_BWD_PAD) * 2)

#endif
