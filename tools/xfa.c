/*
 * xfa.c - the `xfa` command: `info` lists backends, devices and tile plans;
 * `run` computes one attention and checks it against the fp64 reference;
 * `bench` times a sweep over sequence lengths.
 */
#include "cli.h"

#include <stdio.h>
#include <string.h>

static void usage(FILE *f)
{
    fprintf(f,
            "usage: xfa <command> [options]\n"
            "\n"
            "commands:\n"
            "  info     backends, devices, local memory and tile plans\n"
            "  run      compute attention on random inputs, check against the fp64 reference, time it\n"
            "  bench    time a sweep over sequence lengths (table, --csv or --json)\n"
            "  bench-decode  time one-token decoding over batch sizes and KV-cache lengths (CSV)\n"
            "  crosscheck  the same seeded problems on every backend/device, vs the fp64 reference and each other\n"
            "  conformance write|check DIR  store the conformance vectors / check every backend against them\n"
            "  version  print the library version\n"
            "\n"
            "options:\n"
            "  --backend auto|cpu|opencl|vulkan|cuda   (default auto: CUDA > Vulkan > OpenCL > CPU, env XFA_BACKEND)\n"
            "  --device N          device index within the backend (0)\n"
            "  --batch B --seqlen N --seqlen-k N --heads H (2048/D) --heads-kv H --dim D\n"
            "  --window L,R        sliding window: keys i-L..i+R (-1: no limit; with --causal R is 0)\n"
            "  --dtype f32|f16|bf16 --causal --layout bshd|bhsd --seed S --Br N --Bc N\n"
            "  --check / --no-check  run: force or skip the reference check (default: when affordable)\n"
            "  --seqlens 512,1024,...  --tokens T (batch = T / seqlen)  --warmup N --iters N --csv --json  (bench)\n"
            "  --backward  (bench: time the backward pass alone; TFLOP/s count 2.5x the forward's FLOPs)\n"
            "  --batches 1,8,32 --caches 1024,...  (bench-decode; default 32 query / 8 KV heads, D from --dim)\n"
            "  --cases N --seed S --json --corrupt BACKEND  (crosscheck; --backend restricts it to one backend)\n");
}

static bool has_option(int argc, char **argv, const char *name)
{
    for (int i = 2; i < argc; i++)
        if (!strcmp(argv[i], name)) return true;
    return false;
}

int main(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    cli_options opts = {
        .backend = XFA_BACKEND_AUTO, .device = 0, .batch = 1, .seqlen = 1024, .seqlen_k = 0, .heads = 0,
        .heads_kv = 0, .dim = 64, .dtype = XFA_DTYPE_F16, .seed = 1, .check = -1, .tokens = 0,
        .warmup = 2, .iters = 5, .window_left = -1, .window_right = -1,
    };
    const char *cmd = argv[1];
    if (!strcmp(cmd, "version")) {
        printf("xfa %s\n", xfa_version_string());
        return 0;
    }
    if (!strcmp(cmd, "conformance")) {
        if (argc < 4) {
            fprintf(stderr, "usage: xfa conformance write|check DIR [--backend B]\n");
            return 2;
        }
        return cli_parse(argc, argv, 4, &opts) ? cli_conformance(argv[2], argv[3], &opts) : 2;
    }
    if (!cli_parse(argc, argv, 2, &opts)) return 2;
    if (!strcmp(cmd, "info")) return cli_info(&opts);
    if (!strcmp(cmd, "run")) return cli_run(&opts);
    if (!strcmp(cmd, "bench")) return cli_bench(&opts);
    if (!strcmp(cmd, "bench-decode")) {
        /* Llama-style 32 query heads / 8 KV heads unless the options say otherwise */
        if (!has_option(argc, argv, "--heads")) opts.heads = 32;
        if (!has_option(argc, argv, "--heads-kv")) opts.heads_kv = opts.heads % 4 ? opts.heads : opts.heads / 4;
        return cli_bench_decode(&opts);
    }
    if (!strcmp(cmd, "crosscheck")) return cli_crosscheck(&opts);
    fprintf(stderr, "xfa: unknown command '%s'\n\n", cmd);
    usage(stderr);
    return 2;
}
