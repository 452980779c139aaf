/*
 * alloc.c - every host allocation xfa makes goes through here, so that an engine
 * can hand in its own allocator (xfa_set_allocator) and see what xfa holds
 * (xfa_host_bytes_in_use).
 *
 * Each block carries a small header in front of the caller's pointer with its
 * size and the distance back to the allocator's pointer: the count of bytes in
 * use needs the size at free time, and the allocator's free needs its own pointer.
 */
#define _POSIX_C_SOURCE 200112L /* posix_memalign */
#include "alloc.h"
#include "internal.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct block_header {
    size_t bytes;  /* the caller's size */
    size_t offset; /* caller pointer - allocator pointer */
} block_header;

#define MIN_ALIGN 16 /* >= alignof(max_align_t) on the hosts we build for, and fits a header */

static void *default_alloc(void *user, size_t bytes, size_t alignment)
{
    (void)user;
    void *p = NULL;
    if (alignment < sizeof(void *)) alignment = sizeof(void *);
    return posix_memalign(&p, alignment, bytes) == 0 ? p : NULL;
}

static void default_free(void *user, void *ptr)
{
    (void)user;
    free(ptr);
}

static xfa_allocator current = {default_alloc, NULL, default_free, NULL};
static atomic_size_t bytes_in_use;
static atomic_size_t blocks_in_use;

xfa_status xfa_set_allocator(const xfa_allocator *allocator)
{
    if (allocator && (!allocator->alloc || !allocator->free)) {
        xfa_set_thread_error("xfa_set_allocator: alloc and free must both be set (realloc may be NULL)");
        return XFA_ERROR_INVALID_ARGUMENT;
    }
    const size_t held = atomic_load(&blocks_in_use);
    if (held) {
        char text[160];
        snprintf(text, sizeof text,
                 "xfa_set_allocator: xfa still holds %zu block(s) from the current allocator; destroy every context "
                 "and buffer first",
                 held);
        xfa_set_thread_error(text);
        return XFA_ERROR_INVALID_ARGUMENT;
    }
    current = allocator ? *allocator : (xfa_allocator){default_alloc, NULL, default_free, NULL};
    return XFA_SUCCESS;
}

size_t xfa_host_bytes_in_use(void) { return atomic_load(&bytes_in_use); }

static size_t header_size(size_t alignment)
{
    return alignment > sizeof(block_header) ? alignment : sizeof(block_header);
}

void *xfa_alloc_aligned(size_t bytes, size_t alignment)
{
    if (alignment < MIN_ALIGN) alignment = MIN_ALIGN;
    const size_t header = header_size(alignment);
    if (bytes > SIZE_MAX - header) return NULL;
    unsigned char *base = current.alloc(current.user, bytes + header, alignment);
    if (!base) return NULL;
    unsigned char *p = base + header;
    block_header h = {bytes, header};
    memcpy(p - sizeof h, &h, sizeof h);
    atomic_fetch_add(&bytes_in_use, bytes);
    atomic_fetch_add(&blocks_in_use, 1);
    return p;
}

void *xfa_malloc(size_t bytes) { return xfa_alloc_aligned(bytes, MIN_ALIGN); }

void *xfa_calloc(size_t count, size_t size)
{
    if (size && count > SIZE_MAX / size) return NULL;
    void *p = xfa_malloc(count * size);
    if (p) memset(p, 0, count * size);
    return p;
}

static block_header header_of(const void *ptr)
{
    block_header h;
    memcpy(&h, (const unsigned char *)ptr - sizeof h, sizeof h);
    return h;
}

void xfa_free(void *ptr)
{
    if (!ptr) return;
    const block_header h = header_of(ptr);
    atomic_fetch_sub(&bytes_in_use, h.bytes);
    atomic_fetch_sub(&blocks_in_use, 1);
    current.free(current.user, (unsigned char *)ptr - h.offset);
}

void *xfa_realloc(void *ptr, size_t bytes)
{
    if (!ptr) return xfa_malloc(bytes);
    const block_header old = header_of(ptr);
    if (current.realloc && old.offset == header_size(MIN_ALIGN) && bytes <= SIZE_MAX - old.offset) {
        unsigned char *base = current.realloc(current.user, (unsigned char *)ptr - old.offset, bytes + old.offset,
                                              MIN_ALIGN);
        if (!base) return NULL;
        unsigned char *p = base + old.offset;
        const block_header h = {bytes, old.offset};
        memcpy(p - sizeof h, &h, sizeof h);
        atomic_fetch_add(&bytes_in_use, bytes);
        atomic_fetch_sub(&bytes_in_use, old.bytes);
        return p;
    }
    void *p = xfa_malloc(bytes);
    if (!p) return NULL;
    memcpy(p, ptr, old.bytes < bytes ? old.bytes : bytes);
    xfa_free(ptr);
    return p;
}
