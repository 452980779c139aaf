/*
 * cmd_conformance.c - `xfa conformance write DIR` stores the built-in
 * conformance vectors as text files; `xfa conformance check DIR` runs every
 * vector file in DIR on every backend and device present (or --backend) and
 * exits non-zero on any mismatch.
 */
#define _DEFAULT_SOURCE /* DT_REG-free dirent with strdup */
#include "cli.h"
#include "conformance.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int write_vectors(const char *dir)
{
    for (int i = 0; i < xfa_vector_count(); i++) {
        xfa_vector v;
        char path[1024];
        if (!xfa_vector_generate(i, &v)) {
            fprintf(stderr, "conformance: cannot generate vector %d\n", i);
            return 1;
        }
        snprintf(path, sizeof path, "%s/%02d_%s.txt", dir, i, v.name);
        FILE *f = fopen(path, "w");
        const bool ok = f && xfa_vector_write(&v, f);
        if (f) fclose(f);
        xfa_vector_free(&v);
        if (!ok) {
            fprintf(stderr, "conformance: cannot write %s\n", path);
            return 1;
        }
        printf("wrote %s\n", path);
    }
    return 0;
}

static int compare_names(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The vector files of a directory (*.txt but README), sorted. */
static int list_vectors(const char *dir, char ***out)
{
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0, cap = 16;
    char **names = malloc((size_t)cap * sizeof *names);
    for (struct dirent *e; (e = readdir(d));) {
        const size_t len = strlen(e->d_name);
        if (len < 5 || strcmp(e->d_name + len - 4, ".txt")) continue;
        if (n == cap) names = realloc(names, (size_t)(cap *= 2) * sizeof *names);
        names[n++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, compare_names);
    *out = names;
    return n;
}

static int check_vectors(const char *dir, const cli_options *o)
{
    char **files;
    const int n = list_vectors(dir, &files);
    if (n <= 0) {
        fprintf(stderr, "conformance: no vector files in %s\n", dir);
        return 1;
    }
    int failures = 0, ran = 0;
    for (int b = XFA_BACKEND_CPU; b < XFA_BACKEND_COUNT_; b++) {
        int count = 0;
        if (o->backend != XFA_BACKEND_AUTO && o->backend != (xfa_backend)b) continue;
        if (!xfa_backend_compiled((xfa_backend)b) || xfa_device_count((xfa_backend)b, &count)) continue;
        for (int dev = 0; dev < count; dev++) {
            xfa_context *ctx = NULL;
            if (xfa_context_create((xfa_backend)b, dev, &ctx)) continue;
            xfa_device_info info;
            xfa_context_get_info(ctx, &info);
            printf("%s %d (%s, %s path)\n", xfa_backend_name((xfa_backend)b), dev, info.name, info.path);
            for (int i = 0; i < n; i++) {
                char path[1024], why[256] = "";
                snprintf(path, sizeof path, "%s/%s", dir, files[i]);
                FILE *f = fopen(path, "r");
                xfa_vector v;
                const bool read = f && xfa_vector_read(f, &v, why, sizeof why);
                if (f) fclose(f);
                if (!read) {
                    printf("  %-32s UNREADABLE (%s)\n", files[i], why);
                    failures++;
                    continue;
                }
                bool passed;
                double o_err, lse_err;
                const xfa_status st = xfa_vector_check(ctx, &v, &passed, &o_err, &lse_err);
                if (st == XFA_ERROR_UNSUPPORTED_FEATURE || st == XFA_ERROR_UNSUPPORTED_DTYPE) {
                    printf("  %-32s n/a (%s)\n", files[i], xfa_context_last_error(ctx));
                } else if (st) {
                    printf("  %-32s ERROR %s\n", files[i], xfa_context_last_error(ctx));
                    failures++;
                } else {
                    printf("  %-32s %s  |o-ref| %.3g (tol %.3g)  lse rel %.3g (tol %.3g)\n", files[i],
                           passed ? "pass" : "FAIL", o_err, v.o_tolerance, lse_err, v.lse_tolerance);
                    failures += !passed;
                    ran++;
                }
                xfa_vector_free(&v);
            }
            xfa_context_destroy(&ctx);
        }
    }
    for (int i = 0; i < n; i++) free(files[i]);
    free(files);
    printf("%s (%d checks)\n", failures ? "CONFORMANCE FAILED" : "conformance passed", ran);
    return failures || ran == 0 ? 1 : 0;
}

int cli_conformance(const char *action, const char *dir, const cli_options *o)
{
    if (!strcmp(action, "write")) return write_vectors(dir);
    if (!strcmp(action, "check")) return check_vectors(dir, o);
    fprintf(stderr, "xfa conformance: the action is write or check, not '%s'\n", action);
    return 2;
}
