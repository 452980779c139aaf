/*
 * cpu_backend.c - the CPU backend: host memory buffers and the tiled f32
 * kernel (cpu_kernel.c) spread over threads. Always compiled; it is what the
 * other backends' algorithm is first tested on. Runs synchronously.
 */
#define _GNU_SOURCE /* sysconf cache sizes */
#include "alloc.h"
#include "cpu_kernel.h"
#include "dtype.h"
#include "internal.h"
#include "plan.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Cache the CPU path tiles for, when the OS does not say. */
#define CPU_DEFAULT_CACHE_BYTES (1u << 20)

typedef struct cpu_context {
    int threads;
} cpu_context;

/* The CPU kernel keeps Q, acc, one K and one V block and the scores in f32. */
static const xfa_tile_layout cpu_layout = {
    .path = "cpu-tiled",
    .q_elem_bytes = 4,
    .kv_elem_bytes = 4,
    .s_elem_bytes = 4,
    .o_elem_bytes = 4,
    .row_pad = 0,
    .stages = 1,
    .row_state_bytes = 8,
    .br_multiple = 8, /* round tiles for the vectoriser; any size would be correct */
    .bc_multiple = 8,
    .threads_per_row = 1,
};

/* M for the CPU path: XFA_CPU_CACHE_BYTES if set (to tile for another cache level), else the L2 size. */
static uint64_t cache_bytes(void)
{
    const char *env = getenv("XFA_CPU_CACHE_BYTES");
    if (env && strtoull(env, NULL, 10) > 0) return strtoull(env, NULL, 10);
    long l2 = -1;
#ifdef _SC_LEVEL2_CACHE_SIZE
    l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
#endif
    return l2 > 0 ? (uint64_t)l2 : CPU_DEFAULT_CACHE_BYTES;
}

static int online_cpus(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

static xfa_status cpu_device_count(int *count, char *msg)
{
    (void)msg;
    *count = 1;
    return XFA_SUCCESS;
}

/* "model name" from /proc/cpuinfo where there is one. */
static void cpu_model(char *name, size_t size, char *vendor, size_t vsize)
{
    snprintf(name, size, "CPU");
    snprintf(vendor, vsize, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    bool have_name = false, have_vendor = false;
    while ((!have_name || !have_vendor) && fgets(line, sizeof line, f)) {
        char *colon = strchr(line, ':');
        if (!colon) continue;
        char *value = colon + 1;
        while (*value == ' ') value++;
        value[strcspn(value, "\n")] = '\0';
        if (!have_name && strncmp(line, "model name", 10) == 0) {
            snprintf(name, size, "%s", value);
            have_name = true;
        } else if (!have_vendor && strncmp(line, "vendor_id", 9) == 0) {
            snprintf(vendor, vsize, "%s", value);
            have_vendor = true;
        }
    }
    fclose(f);
}

static xfa_status cpu_device_info(int index, xfa_device_info *info, char *msg)
{
    (void)index;
    (void)msg;
    cpu_model(info->name, sizeof info->name, info->vendor, sizeof info->vendor);
    snprintf(info->driver, sizeof info->driver, "xfa %s", xfa_version_string());
    snprintf(info->path, sizeof info->path, "%s", cpu_layout.path);
    info->local_mem_bytes = cache_bytes();
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    info->global_mem_bytes = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0;
    info->subgroup_size = 1;
    info->max_workgroup_size = 1u << 16;
    info->compute_units = (uint32_t)online_cpus();
    info->dtypes = (1u << XFA_DTYPE_F32) | (1u << XFA_DTYPE_F16) | (1u << XFA_DTYPE_BF16);
    info->features = XFA_FEATURE_CAUSAL | XFA_FEATURE_LSE | XFA_FEATURE_GQA | XFA_FEATURE_SEQLEN_QK_DIFFER |
                     XFA_FEATURE_WINDOW | XFA_FEATURE_SOFTCAP | XFA_FEATURE_ALIBI | XFA_FEATURE_BIAS |
                     XFA_FEATURE_BACKWARD | XFA_FEATURE_DECODE | XFA_FEATURE_PAGED_KV | XFA_FEATURE_MERGE |
                     XFA_FEATURE_VARLEN;
    return XFA_SUCCESS;
}

static xfa_status cpu_context_create(xfa_context *ctx, int index)
{
    char msg[XFA_MESSAGE_SIZE];
    cpu_device_info(index, &ctx->info, msg);
    cpu_context *cpu = xfa_calloc(1, sizeof *cpu);
    if (!cpu) return xfa_fail(ctx, XFA_ERROR_OUT_OF_HOST_MEMORY, "allocating the CPU context");
    cpu->threads = online_cpus();
    const char *env = getenv("XFA_CPU_THREADS");
    if (env && atoi(env) > 0) cpu->threads = atoi(env);
    ctx->impl = cpu;
    return XFA_SUCCESS;
}

static void cpu_context_destroy(xfa_context *ctx)
{
    xfa_free(ctx->impl);
    ctx->impl = NULL;
}

static xfa_plan_limits cpu_limits(const xfa_context *ctx)
{
    const xfa_plan_limits lim = {ctx->info.local_mem_bytes, ctx->info.max_workgroup_size, 1};
    return lim;
}

static xfa_status cpu_plan(xfa_context *ctx, uint32_t head_dim, xfa_dtype dtype, xfa_plan *plan)
{
    char msg[XFA_MESSAGE_SIZE];
    const xfa_plan_limits lim = cpu_limits(ctx);
    xfa_status st = xfa_plan_make(&lim, &cpu_layout, head_dim, dtype, plan, msg);
    return st ? xfa_fail(ctx, st, "%s", msg) : XFA_SUCCESS;
}

static xfa_status cpu_plan_check(xfa_context *ctx, xfa_plan *plan)
{
    char msg[XFA_MESSAGE_SIZE];
    /* The CPU has no hard local-memory limit: a plan larger than the cache is slow, not wrong. */
    xfa_plan_limits lim = cpu_limits(ctx);
    lim.local_mem_bytes = UINT64_MAX;
    xfa_status st = xfa_plan_fit(&lim, &cpu_layout, plan, msg);
    return st ? xfa_fail(ctx, st, "%s", msg) : XFA_SUCCESS;
}

static xfa_status cpu_buffer_create(xfa_context *ctx, xfa_buffer *buf)
{
    buf->impl = xfa_malloc(buf->size);
    if (!buf->impl) return xfa_fail(ctx, XFA_ERROR_OUT_OF_DEVICE_MEMORY, "malloc of %zu bytes failed", buf->size);
    return XFA_SUCCESS;
}

static void cpu_buffer_destroy(xfa_context *ctx, xfa_buffer *buf)
{
    (void)ctx;
    if (buf->owned) xfa_free(buf->impl);
    buf->impl = NULL;
}

static xfa_status cpu_buffer_upload(xfa_context *ctx, xfa_buffer *buf, size_t offset, const void *src, size_t bytes)
{
    (void)ctx;
    memcpy((char *)buf->impl + buf->native_offset + offset, src, bytes);
    return XFA_SUCCESS;
}

static xfa_status cpu_buffer_download(xfa_context *ctx, xfa_buffer *buf, size_t offset, void *dst, size_t bytes)
{
    (void)ctx;
    memcpy(dst, (char *)buf->impl + buf->native_offset + offset, bytes);
    return XFA_SUCCESS;
}

/* ---- work items spread over threads, handed out by an atomic counter ---- */

/* One call's work: item i of `total`, each with its own scratch of `scratch_floats`. */
typedef struct cpu_job {
    void (*run_item)(const struct cpu_job *job, int64_t item, float *scratch);
    const xfa_forward_args *fwd;
    const xfa_backward_args *bwd;
    xfa_cpu_views mem;
    xfa_cpu_grad_views grad;
    const xfa_decode_args *dec; /* decode: the call, its memory, the per-sequence lengths and the partials */
    xfa_cpu_decode_views dmem;
    const int64_t *lens;
    float *parts, *part_lse;
    int splits;
    const xfa_merge_args *merge; /* merge_partials */
    const int32_t *cu_q, *cu_k;  /* variable-length offsets (host memory) */
    int64_t blocks; /* blocks per (batch, head) */
    int64_t total;
    size_t scratch_floats;
    atomic_llong next;
} cpu_job;

static const void *view_base(const xfa_tensor *t)
{
    return (const char *)t->buffer->impl + t->buffer->native_offset + t->offset;
}

static void *cpu_worker(void *arg)
{
    cpu_job *job = arg;
    float *scratch = xfa_malloc(job->scratch_floats * sizeof(float));
    if (!scratch) return NULL;
    for (;;) {
        const int64_t item = atomic_fetch_add(&job->next, 1);
        if (item >= job->total) break;
        job->run_item(job, item, scratch);
    }
    xfa_free(scratch);
    return NULL;
}

/* Runs every item of the job on the context's threads (the caller's thread among them). */
static xfa_status run_job(xfa_context *ctx, cpu_job *job, const char *what)
{
    const cpu_context *cpu = ctx->impl;
    atomic_init(&job->next, 0);
    int threads = cpu->threads;
    if (threads > job->total) threads = (int)job->total;
    pthread_t tid[256];
    if (threads > (int)(sizeof tid / sizeof tid[0])) threads = (int)(sizeof tid / sizeof tid[0]);
    int started = 0;
    for (int t = 1; t < threads; t++) {
        if (pthread_create(&tid[started], NULL, cpu_worker, job) != 0) break;
        started++;
    }
    cpu_worker(job);
    for (int t = 0; t < started; t++) pthread_join(tid[t], NULL);
    /* A worker that could not get scratch leaves its items to the others; only a shortfall is an error. */
    if (atomic_load(&job->next) < job->total)
        return xfa_fail(ctx, XFA_ERROR_OUT_OF_HOST_MEMORY, "allocating CPU scratch for the %s", what);
    return XFA_SUCCESS;
}

static void job_views(cpu_job *job, const xfa_forward_args *a)
{
    memset(job, 0, sizeof *job);
    job->fwd = a;
    job->mem.q = view_base(&a->q);
    job->mem.k = view_base(&a->k);
    job->mem.v = view_base(&a->v);
    job->mem.o = (void *)view_base(&a->o);
    job->mem.lse = a->has_lse ? (float *)view_base(&a->lse) : NULL;
    job->mem.alibi = a->has_alibi ? (const float *)view_base(&a->alibi) : NULL;
    job->mem.bias = a->has_bias ? view_base(&a->bias) : NULL;
}

/* Element size times a row offset: the byte shift to a packed sequence's first row. */
static size_t row_shift(const xfa_tensor *t, int64_t row)
{
    return (size_t)(row * t->stride[1]) * xfa_dtype_size(t->dtype);
}

/* forward: items are (batch, head, query block); with variable lengths, (sequence, head,
 * query block), each sequence run as a batch of one over its own rows of the packed views */
static void forward_item(const cpu_job *job, int64_t item, float *scratch)
{
    const xfa_forward_args *a = job->fwd;
    const int64_t heads = a->heads_q, bh = item / job->blocks, b = bh / heads, h = bh % heads, block = item % job->blocks;
    if (!a->varlen) {
        xfa_cpu_forward_block(a, &job->mem, b, h, block, scratch);
        return;
    }
    const int32_t *cu_q = job->cu_q, *cu_k = job->cu_k;
    const int64_t q0 = cu_q[b], k0 = cu_k[b];
    xfa_forward_args one = *a;
    one.seqlen_q = cu_q[b + 1] - q0;
    one.seqlen_k = cu_k[b + 1] - k0;
    if (block * a->plan.Br >= one.seqlen_q) return; /* past this sequence's rows */
    one.varlen = false;
    xfa_cpu_views mem = job->mem;
    mem.q = (const char *)mem.q + row_shift(&a->q, q0);
    mem.k = (const char *)mem.k + row_shift(&a->k, k0);
    mem.v = (const char *)mem.v + row_shift(&a->v, k0);
    mem.o = (char *)mem.o + row_shift(&a->o, q0);
    if (mem.lse) mem.lse = (float *)((char *)mem.lse + row_shift(&a->lse, q0));
    xfa_cpu_forward_block(&one, &mem, 0, h, block, scratch);
}

/* Offsets must rise from 0 .. within the packed rows, no sequence longer than max_seqlen_q. */
static xfa_status check_offsets(xfa_context *ctx, const xfa_forward_args *a, const int32_t *cu_q, const int32_t *cu_k)
{
    for (int64_t b = 0; b <= a->sequences; b++) {
        const bool q_ok = cu_q[b] >= 0 && cu_q[b] <= a->seqlen_q && (b == 0 || cu_q[b] >= cu_q[b - 1]) &&
                          (b == 0 || cu_q[b] - cu_q[b - 1] <= a->max_seqlen_q);
        const bool k_ok = cu_k[b] >= 0 && cu_k[b] <= a->seqlen_k && (b == 0 || cu_k[b] >= cu_k[b - 1]);
        if (!q_ok || !k_ok)
            return xfa_fail(ctx, XFA_ERROR_OUT_OF_BOUNDS,
                            "cu_seqlens_%s[%lld] = %d: offsets must not decrease, stay within the %lld packed rows, "
                            "and give no sequence more than max_seqlen_q = %lld rows",
                            q_ok ? "k" : "q", (long long)b, q_ok ? cu_k[b] : cu_q[b],
                            (long long)(q_ok ? a->seqlen_k : a->seqlen_q), (long long)a->max_seqlen_q);
    }
    return XFA_SUCCESS;
}

static xfa_status cpu_forward(xfa_context *ctx, const xfa_forward_args *a)
{
    cpu_job job;
    job_views(&job, a);
    job.run_item = forward_item;
    int64_t batch = a->batch, rows = a->seqlen_q;
    if (a->varlen) {
        job.cu_q = (const int32_t *)view_base(&a->cu_seqlens_q);
        job.cu_k = (const int32_t *)view_base(&a->cu_seqlens_k);
        xfa_status st = check_offsets(ctx, a, job.cu_q, job.cu_k);
        if (st) return st;
        batch = a->sequences;
        rows = a->max_seqlen_q;
    }
    job.blocks = (rows + a->plan.Br - 1) / a->plan.Br;
    job.total = batch * a->heads_q * job.blocks;
    job.scratch_floats = xfa_cpu_scratch_floats(&a->plan);
    return run_job(ctx, &job, "forward pass");
}

/* backward pass 1: items are (batch, kv head, K/V block); pass 2: (batch, head, query block) */
static void backward_kv_item(const cpu_job *job, int64_t item, float *scratch)
{
    const int64_t heads = job->fwd->heads_kv, bh = item / job->blocks;
    xfa_cpu_backward_kv_block(job->bwd, &job->mem, &job->grad, bh / heads, bh % heads, item % job->blocks, scratch);
}

static void backward_q_item(const cpu_job *job, int64_t item, float *scratch)
{
    const int64_t heads = job->fwd->heads_q, bh = item / job->blocks;
    xfa_cpu_backward_q_block(job->bwd, &job->mem, &job->grad, bh / heads, bh % heads, item % job->blocks, scratch);
}

static xfa_status cpu_backward(xfa_context *ctx, const xfa_backward_args *a)
{
    const xfa_forward_args *f = &a->fwd;
    cpu_job job;
    job_views(&job, f);
    job.bwd = a;
    job.grad.o = view_base(&f->o);
    job.grad.lse = (const float *)view_base(&f->lse);
    job.grad.d_o = view_base(&a->d_o);
    job.grad.dq = (void *)view_base(&a->dq);
    job.grad.dk = (void *)view_base(&a->dk);
    job.grad.dv = (void *)view_base(&a->dv);
    job.scratch_floats = xfa_cpu_backward_scratch_floats(&f->plan);

    job.run_item = backward_kv_item;
    job.blocks = (f->seqlen_k + f->plan.Bc - 1) / f->plan.Bc;
    job.total = f->batch * f->heads_kv * job.blocks;
    xfa_status st = run_job(ctx, &job, "backward pass");
    if (st) return st;
    job.run_item = backward_q_item;
    job.blocks = (f->seqlen_q + f->plan.Br - 1) / f->plan.Br;
    job.total = f->batch * f->heads_q * job.blocks;
    return run_job(ctx, &job, "backward pass");
}

/* ---- decode: append, then items (batch, head, split) -> partials, then (batch, head, row) -> merge ---- */

static float *part_o(const cpu_job *job, int split, int64_t b, int64_t h)
{
    const xfa_decode_args *a = job->dec;
    return job->parts + (((int64_t)split * a->batch + b) * a->heads_q + h) * a->seqlen_q * a->head_dim;
}

static float *part_lse(const cpu_job *job, int split, int64_t b, int64_t h)
{
    const xfa_decode_args *a = job->dec;
    return job->part_lse + (((int64_t)split * a->batch + b) * a->heads_q + h) * a->seqlen_q;
}

static void decode_split_item(const cpu_job *job, int64_t item, float *scratch)
{
    const xfa_decode_args *a = job->dec;
    const int split = (int)(item % job->splits);
    const int64_t bh = item / job->splits, b = bh / a->heads_q, h = bh % a->heads_q;
    const int64_t len = job->lens[b], chunk = (len + job->splits - 1) / job->splits;
    const int64_t begin = split * chunk, end = begin + chunk < len ? begin + chunk : len;
    xfa_cpu_decode_partial(a, &job->dmem, b, h, begin, end, len, part_o(job, split, b, h), part_lse(job, split, b, h),
                           scratch);
}

static void decode_merge_item(const cpu_job *job, int64_t item, float *scratch)
{
    const xfa_decode_args *a = job->dec;
    const int64_t i = item % a->seqlen_q, bh = item / a->seqlen_q, b = bh / a->heads_q, h = bh % a->heads_q;
    const int64_t d = a->head_dim;
    const int64_t o_stride = a->batch * a->heads_q * a->seqlen_q * d, lse_stride = a->batch * a->heads_q * a->seqlen_q;
    float merged_lse;
    xfa_cpu_merge_row(job->splits, part_o(job, 0, b, h) + i * d, o_stride, part_lse(job, 0, b, h) + i, lse_stride, d,
                      scratch, &merged_lse);
    for (int64_t x = 0; x < d; x++) xfa_store_f32((void *)job->mem.o, a->dtype, xfa_tensor_index(&a->o, b, i, h, x), scratch[x]);
    if (job->mem.lse) job->mem.lse[xfa_tensor_index(&a->lse, b, i, h, 0)] = merged_lse;
}

/* Lengths after the append, each checked against the capacity and the block table. */
static xfa_status decode_lengths(xfa_context *ctx, const xfa_decode_args *a, const xfa_cpu_decode_views *m, int64_t *lens)
{
    for (int64_t b = 0; b < a->batch; b++) {
        const int64_t cached = m->seqlens[xfa_tensor_index(&a->seqlens, b, 0, 0, 0)];
        lens[b] = cached + (a->append ? a->seqlen_q : 0);
        if (cached < 0 || lens[b] > a->capacity)
            return xfa_fail(ctx, XFA_ERROR_OUT_OF_BOUNDS, "cache.seqlens[%lld] = %lld: with %lld new tokens it must stay "
                            "within 0..%lld", (long long)b, (long long)cached, (long long)(a->append ? a->seqlen_q : 0),
                            (long long)a->capacity);
        for (int64_t page = 0; a->paged && page * a->page_size < lens[b]; page++) {
            const int64_t id = m->block_table[xfa_tensor_index(&a->block_table, b, 0, 0, page)];
            if (id < 0 || id >= a->num_pages)
                return xfa_fail(ctx, XFA_ERROR_OUT_OF_BOUNDS, "cache.block_table[%lld][%lld] = %lld; there are %lld pages",
                                (long long)b, (long long)page, (long long)id, (long long)a->num_pages);
        }
    }
    return XFA_SUCCESS;
}

static void decode_append(const xfa_decode_args *a, const xfa_cpu_decode_views *m, const void *k_new, const void *v_new,
                          const int64_t *lens)
{
    for (int64_t b = 0; b < a->batch; b++)
        for (int64_t t = 0; t < a->seqlen_q; t++) {
            int64_t cb;
            const int64_t row = xfa_cpu_cache_row(a, m->block_table, b, lens[b] - a->seqlen_q + t, &cb);
            for (int64_t h = 0; h < a->heads_kv; h++)
                for (int64_t x = 0; x < a->head_dim; x++) {
                    xfa_store_f32(m->k_cache, a->dtype, xfa_tensor_index(&a->k_cache, cb, row, h, x),
                                  xfa_load_f32(k_new, a->dtype, xfa_tensor_index(&a->k_new, b, t, h, x)));
                    xfa_store_f32(m->v_cache, a->dtype, xfa_tensor_index(&a->v_cache, cb, row, h, x),
                                  xfa_load_f32(v_new, a->dtype, xfa_tensor_index(&a->v_new, b, t, h, x)));
                }
        }
}

static xfa_status cpu_decode(xfa_context *ctx, const xfa_decode_args *a)
{
    cpu_job job;
    memset(&job, 0, sizeof job);
    job.dec = a;
    job.dmem.q = view_base(&a->q);
    job.dmem.k_cache = (void *)view_base(&a->k_cache);
    job.dmem.v_cache = (void *)view_base(&a->v_cache);
    job.dmem.seqlens = (const int32_t *)view_base(&a->seqlens);
    job.dmem.block_table = a->paged ? (const int32_t *)view_base(&a->block_table) : NULL;
    job.dmem.alibi = a->has_alibi ? (const float *)view_base(&a->alibi) : NULL;
    job.mem.o = (void *)view_base(&a->o);
    job.mem.lse = a->has_lse ? (float *)view_base(&a->lse) : NULL;

    int64_t *lens = xfa_malloc((size_t)a->batch * sizeof *lens);
    if (!lens) return xfa_fail(ctx, XFA_ERROR_OUT_OF_HOST_MEMORY, "allocating decode lengths");
    xfa_status st = decode_lengths(ctx, a, &job.dmem, lens);
    if (st) {
        xfa_free(lens);
        return st;
    }
    if (a->append) decode_append(a, &job.dmem, view_base(&a->k_new), view_base(&a->v_new), lens);
    int64_t max_len = 0;
    for (int64_t b = 0; b < a->batch; b++) max_len = lens[b] > max_len ? lens[b] : max_len;
    job.lens = lens;
    /* The lengths are known here, so fewer splits than the scratch allows may do. */
    job.splits = a->num_splits ? a->num_splits
                               : xfa_decode_choose_splits(ctx->info.compute_units, a->batch, a->heads_kv, max_len, 256);
    if (job.splits > a->max_splits) job.splits = a->max_splits;
    char *scratch = a->scratch ? (char *)a->scratch->impl + a->scratch->native_offset + a->scratch_offset
                               : xfa_malloc(a->scratch_bytes);
    job.parts = (float *)scratch;
    job.part_lse = scratch ? (float *)(scratch + a->scratch_lse_offset) : NULL;
    st = XFA_ERROR_OUT_OF_HOST_MEMORY;
    if (job.parts && job.part_lse) {
        job.run_item = decode_split_item;
        job.total = a->batch * a->heads_q * job.splits;
        job.scratch_floats = (size_t)(2 * a->head_dim);
        st = run_job(ctx, &job, "decode");
    } else {
        xfa_fail(ctx, st, "allocating %d decode partials", job.splits);
    }
    if (!st) {
        job.run_item = decode_merge_item;
        job.total = a->batch * a->heads_q * a->seqlen_q;
        job.scratch_floats = (size_t)a->head_dim; /* the merged row */
        st = run_job(ctx, &job, "decode merge");
    }
    if (!a->scratch) xfa_free(scratch);
    xfa_free(lens);
    return st;
}

/* ---- merge_partials: items are (batch, row, head) ---- */

static void merge_item(const cpu_job *job, int64_t item, float *scratch)
{
    const xfa_merge_args *a = job->merge;
    const int64_t h = item % a->heads, bs = item / a->heads, s = bs % a->seqlen, b = bs / a->seqlen, d = a->head_dim;
    float *merged = scratch, *lse = merged + d, *values = lse + a->n; /* the parts' rows gathered as f32 */
    for (int i = 0; i < a->n; i++) {
        const xfa_tensor *op = &a->o_parts[i], *lp = &a->lse_parts[i];
        for (int64_t x = 0; x < d; x++)
            values[i * d + x] = xfa_load_f32(view_base(op), op->dtype, xfa_tensor_index(op, b, s, h, x));
        lse[i] = ((const float *)view_base(lp))[xfa_tensor_index(lp, b, s, h, 0)];
    }
    float merged_lse;
    xfa_cpu_merge_row(a->n, values, d, lse, 1, d, merged, &merged_lse);
    for (int64_t x = 0; x < d; x++)
        xfa_store_f32((void *)view_base(&a->o), a->o.dtype, xfa_tensor_index(&a->o, b, s, h, x), merged[x]);
    if (a->has_lse) ((float *)view_base(&a->lse))[xfa_tensor_index(&a->lse, b, s, h, 0)] = merged_lse;
}

static xfa_status cpu_merge(xfa_context *ctx, const xfa_merge_args *a)
{
    cpu_job job;
    memset(&job, 0, sizeof job);
    job.merge = a;
    job.run_item = merge_item;
    job.total = a->batch * a->seqlen * a->heads;
    job.scratch_floats = (size_t)(a->head_dim + a->n + a->n * a->head_dim);
    return run_job(ctx, &job, "merge");
}

static xfa_status cpu_synchronize(xfa_context *ctx)
{
    (void)ctx;
    return XFA_SUCCESS;
}

const xfa_backend_ops xfa_cpu_backend = {
    .id = XFA_BACKEND_CPU,
    .name = "cpu",
    .device_count = cpu_device_count,
    .device_info = cpu_device_info,
    .context_create = cpu_context_create,
    .context_destroy = cpu_context_destroy,
    .plan = cpu_plan,
    .plan_check = cpu_plan_check,
    .buffer_create = cpu_buffer_create,
    .buffer_destroy = cpu_buffer_destroy,
    .buffer_upload = cpu_buffer_upload,
    .buffer_download = cpu_buffer_download,
    .forward = cpu_forward,
    .synchronize = cpu_synchronize,
    .backward = cpu_backward,
    .decode = cpu_decode,
    .merge = cpu_merge,
};
