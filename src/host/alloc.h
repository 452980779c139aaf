/*
 * alloc.h - xfa's host allocations, through the caller's allocator (xfa_set_allocator).
 * Library code uses these instead of malloc/calloc/realloc/free, and frees with
 * xfa_free only what these returned.
 */
#ifndef XFA_ALLOC_H
#define XFA_ALLOC_H

#include <stddef.h>

void *xfa_malloc(size_t bytes);
void *xfa_calloc(size_t count, size_t size);  /* zeroed; NULL on overflow */
void *xfa_realloc(void *ptr, size_t bytes);   /* ptr NULL: xfa_malloc */
void *xfa_alloc_aligned(size_t bytes, size_t alignment);
void xfa_free(void *ptr);                     /* NULL: no-op */

#endif
