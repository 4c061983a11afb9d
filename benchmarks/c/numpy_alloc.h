/* Allocate as numpy allocates array data, so that the C references get the same pages.
 *
 * numpy takes the memory from malloc (np.empty) or calloc (np.zeros), and on Linux asks for
 * transparent huge pages for every allocation of 4 MiB or more (madvise MADV_HUGEPAGE from
 * the first page boundary on; numpy/_core/src/multiarray/alloc.c, indicate_hugepages).
 * Where THP is in "madvise" mode that decides whether the arrays sit on 2 MiB pages, which
 * moves STREAM and large-message bandwidth by tens of percent: a reference that skipped it
 * would not be running the same loop on the same memory.
 */
#ifndef NUMPY_ALLOC_H
#define NUMPY_ALLOC_H

#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

static void *numpy_alloc(size_t bytes, int zero)
{
    void *p = zero ? calloc(bytes ? bytes : 1, 1) : malloc(bytes ? bytes : 1);
#ifdef MADV_HUGEPAGE
    if (p && bytes >= ((size_t)1 << 22)) {
        uintptr_t offset = 4096u - (uintptr_t)p % 4096u;
        madvise((char *)p + offset, bytes - offset, MADV_HUGEPAGE);
    }
#endif
    return p;
}

#endif
