/* error.c - per-context and per-thread error messages. */
#include "internal.h"

#include <stdio.h>
#include <string.h>

static _Thread_local char thread_error[XFA_MESSAGE_SIZE];

void xfa_set_thread_error(const char *text)
{
    snprintf(thread_error, sizeof thread_error, "%s", text ? text : "");
}

const char *xfa_last_error(void) { return thread_error; }

static void vformat(char *dst, xfa_status status, const char *fmt, va_list ap)
{
    char body[XFA_MESSAGE_SIZE - 64]; /* room for the status name in front */
    vsnprintf(body, sizeof body, fmt, ap);
    snprintf(dst, XFA_MESSAGE_SIZE, "%s: %s", xfa_status_name(status), body);
}

xfa_status xfa_fail(xfa_context *ctx, xfa_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vformat(ctx ? ctx->last_error : thread_error, status, fmt, ap);
    va_end(ap);
    return status;
}

xfa_status xfa_msg(char *msg, xfa_status status, const char *fmt, ...)
{
    if (msg) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, XFA_MESSAGE_SIZE, fmt, ap);
        va_end(ap);
    }
    return status;
}

void xfa_clear_error(xfa_context *ctx)
{
    if (ctx) ctx->last_error[0] = '\0';
}

const char *xfa_context_last_error(const xfa_context *ctx)
{
    return ctx ? ctx->last_error : thread_error;
}
