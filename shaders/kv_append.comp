/*
 * kv_append.comp - writes the new tokens' K and V (k_new, v_new: (B, Sq, Hkv,
 * D)) into the cache at positions seqlens[b] .. seqlens[b] + Sq - 1, before
 * flash_decode.comp attends to them. One invocation per element; lengths
 * and page ids are clamped as in flash_decode.comp, and a token that would
 * land past the capacity is dropped.
 */
#version 450
#extension GL_EXT_shader_16bit_storage : require

layout(constant_id = 0) const uint DTYPE = 0;   /* 0 f32; 1, 2: 16-bit words copied as they are */
layout(constant_id = 1) const bool PAGED = false;
layout(local_size_x = 64) in;

/* Mirrors vk_append_args in vulkan_decode.c. */
layout(binding = 5, std430) readonly buffer Extra {
    uint kn_base, kn_sb, kn_ss, kn_sh, kn_sd;
    uint vn_base, vn_sb, vn_ss, vn_sh, vn_sd;
    uint k_base, k_sb, k_ss, k_sh, k_sd;
    uint v_base, v_sb, v_ss, v_sh, v_sd;
    uint len_base, len_sb;
    uint bt_base, bt_sb, bt_sd;
    uint batch, seqlen_q, heads_kv, head_dim, capacity, page_size, num_pages;
    uint groups_x; /* the grid's x size: element = (y * groups_x + x) * 64 + local */
} args;

layout(binding = 0, std430) readonly buffer KN32 { float kn32[]; };
layout(binding = 0, std430) readonly buffer KN16 { uint16_t kn16[]; };
layout(binding = 1, std430) readonly buffer VN32 { float vn32[]; };
layout(binding = 1, std430) readonly buffer VN16 { uint16_t vn16[]; };
layout(binding = 2, std430) writeonly buffer K32 { float k32[]; };
layout(binding = 2, std430) writeonly buffer K16 { uint16_t k16[]; };
layout(binding = 3, std430) writeonly buffer V32 { float v32[]; };
layout(binding = 3, std430) writeonly buffer V16 { uint16_t v16[]; };
layout(binding = 7, std430) readonly buffer Lens { int seqlens[]; };
layout(binding = 8, std430) readonly buffer Table { int block_table[]; };

void main()
{
    const uint e = (gl_WorkGroupID.y * args.groups_x + gl_WorkGroupID.x) * 64 + gl_LocalInvocationID.x;
    const uint D = args.head_dim, H = args.heads_kv, Sq = args.seqlen_q;
    if (e >= args.batch * Sq * H * D) return;
    const uint x = e % D, hk = (e / D) % H, t = (e / (D * H)) % Sq, b = e / (D * H * Sq);
    const uint pos = uint(clamp(seqlens[args.len_base + b * args.len_sb], 0, int(args.capacity))) + t;
    if (pos >= args.capacity) return;
    uint cb = b, row = pos;
    if (PAGED) {
        const int id = block_table[args.bt_base + b * args.bt_sb + (pos / args.page_size) * args.bt_sd];
        cb = uint(clamp(id, 0, int(args.num_pages) - 1));
        row = pos % args.page_size;
    }
    const uint src_k = args.kn_base + b * args.kn_sb + t * args.kn_ss + hk * args.kn_sh + x * args.kn_sd;
    const uint src_v = args.vn_base + b * args.vn_sb + t * args.vn_ss + hk * args.vn_sh + x * args.vn_sd;
    const uint dst_k = args.k_base + cb * args.k_sb + row * args.k_ss + hk * args.k_sh + x * args.k_sd;
    const uint dst_v = args.v_base + cb * args.v_sb + row * args.v_ss + hk * args.v_sh + x * args.v_sd;
    if (DTYPE == 0) {
        k32[dst_k] = kn32[src_k];
        v32[dst_v] = vn32[src_v];
    } else {
        k16[dst_k] = kn16[src_k];
        v16[dst_v] = vn16[src_v];
    }
}
