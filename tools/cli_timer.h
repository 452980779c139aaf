/*
 * cli_timer.h - device-side timing for `xfa bench`: events recorded on the context's own queue
 * around a batch of calls, so what is measured is the device's time, not the host's. Only CUDA
 * has it so far (cudaEvent on the context's stream, cli_timer_cuda.c); elsewhere
 * cli_timer_create returns NULL and the bench falls back to the host clock around a wait.
 */
#ifndef XFA_CLI_TIMER_H
#define XFA_CLI_TIMER_H

#include "xfa.h"

typedef struct cli_timer cli_timer;

/* A timer on ctx's queue, or NULL when its backend has none in this build. */
cli_timer *cli_timer_create(xfa_context *ctx);
void cli_timer_start(cli_timer *t);
/* Seconds since cli_timer_start on the device, after waiting for the end; < 0 on failure. */
double cli_timer_stop(cli_timer *t);
void cli_timer_destroy(cli_timer *t);
/* "cuda-events" or "host-clock": how a context's calls are timed. */
const char *cli_timer_method(xfa_context *ctx);

#endif
