/* cli_timer_none.c - cli_timer.h in a build without CUDA: no device timer, the host clock times. */
#include "cli_timer.h"

cli_timer *cli_timer_create(xfa_context *ctx)
{
    (void)ctx;
    return NULL;
}
void cli_timer_start(cli_timer *t) { (void)t; }
double cli_timer_stop(cli_timer *t)
{
    (void)t;
    return -1.0;
}
void cli_timer_destroy(cli_timer *t) { (void)t; }
const char *cli_timer_method(xfa_context *ctx)
{
    (void)ctx;
    return "host-clock";
}
