/* cmd_info.c - `xfa info`: backends compiled in, the devices each sees, and the tile plans. */
#include "cli.h"

#include <stdio.h>

static void print_features(uint32_t f)
{
    static const struct { uint32_t bit; const char *name; } names[] = {
        {XFA_FEATURE_CAUSAL, "causal"}, {XFA_FEATURE_LSE, "lse"}, {XFA_FEATURE_GQA, "gqa"},
        {XFA_FEATURE_SEQLEN_QK_DIFFER, "seqlen_q!=seqlen_k"}, {XFA_FEATURE_WINDOW, "window"},
        {XFA_FEATURE_SOFTCAP, "softcap"}, {XFA_FEATURE_ALIBI, "alibi"}, {XFA_FEATURE_BIAS, "bias"},
        {XFA_FEATURE_ENGINE_HANDLES, "engine-handles"}, {XFA_FEATURE_BACKWARD, "backward"}, {XFA_FEATURE_DECODE, "decode"},
        {XFA_FEATURE_PAGED_KV, "paged-kv"}, {XFA_FEATURE_MERGE, "merge"}, {XFA_FEATURE_VARLEN, "varlen"},
    };
    const char *sep = "";
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (f & names[i].bit) {
            printf("%s%s", sep, names[i].name);
            sep = ", ";
        }
    printf("\n");
}

static void print_plans(xfa_backend backend, int index, const xfa_device_info *info)
{
    xfa_context *ctx = NULL;
    if (xfa_context_create(backend, index, &ctx)) {
        printf("      (no context: %s)\n", xfa_last_error());
        return;
    }
    printf("      tile plans (Br x Bc, work-items, local bytes):\n");
    for (int dt = 0; dt < XFA_DTYPE_COUNT_; dt++) {
        if (!(info->dtypes & (1u << dt))) continue;
        printf("        %-5s", xfa_dtype_name((xfa_dtype)dt));
        for (uint32_t d = 64; d <= XFA_HEAD_DIM_MAX; d *= 2) {
            xfa_plan plan;
            if (xfa_plan_get(ctx, d, (xfa_dtype)dt, &plan) == XFA_SUCCESS)
                printf("  d=%-3u %ux%u %u %lluB", d, plan.Br, plan.Bc, plan.workgroup_size,
                       (unsigned long long)plan.local_mem_bytes);
            else
                printf("  d=%-3u none", d);
        }
        printf("\n");
    }
    xfa_context_destroy(&ctx);
}

int cli_info(const cli_options *opts)
{
    (void)opts;
    printf("xfa %s\n", xfa_version_string());
    xfa_backend chosen = XFA_BACKEND_CPU;
    xfa_backend_resolve(XFA_BACKEND_AUTO, &chosen);
    printf("auto backend: %s\n\n", xfa_backend_name(chosen));
    for (int b = XFA_BACKEND_CPU; b < XFA_BACKEND_COUNT_; b++) {
        const xfa_backend backend = (xfa_backend)b;
        if (!xfa_backend_compiled(backend)) {
            printf("%-7s not compiled in\n", xfa_backend_name(backend));
            continue;
        }
        int count = 0;
        if (xfa_device_count(backend, &count)) {
            printf("%-7s error: %s\n", xfa_backend_name(backend), xfa_last_error());
            continue;
        }
        printf("%-7s %d device(s)\n", xfa_backend_name(backend), count);
        for (int i = 0; i < count; i++) {
            xfa_device_info info;
            if (xfa_device_get_info(backend, i, &info)) {
                printf("  [%d] error: %s\n", i, xfa_last_error());
                continue;
            }
            printf("  [%d] %s\n", i, info.name);
            printf("      vendor %s, driver %s\n", info.vendor, info.driver);
            printf("      path %s, local memory M = %llu bytes, subgroup %u, max work-group %u, compute units %u\n",
                   info.path, (unsigned long long)info.local_mem_bytes, info.subgroup_size, info.max_workgroup_size,
                   info.compute_units);
            printf("      dtypes:");
            for (int dt = 0; dt < XFA_DTYPE_COUNT_; dt++)
                if (info.dtypes & (1u << dt)) printf(" %s", xfa_dtype_name((xfa_dtype)dt));
            printf("\n      features: ");
            print_features(info.features);
            print_plans(backend, i, &info);
        }
    }
    return 0;
}
