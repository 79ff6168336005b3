/* cuda_mem.h - what the core knows of CUDA memory without linking CUDA:
 * a buffer's kind, and copies between host and device for staging.
 * Stability: internal. */
#ifndef PLX_CORE_CUDA_MEM_H
#define PLX_CORE_CUDA_MEM_H

#include <stddef.h>

/* PLX_MEM_CUDA if p is device memory according to the CUDA driver, else
 * PLX_MEM_HOST (also when the process has not loaded libcuda.so.1, since
 * then it cannot hold device memory; managed memory counts as host). */
int plx__cuda_kind(const void *p);
/* PLX_MEM_CUDA if either buffer is device memory (a may equal b): the
 * driver looked for again only for new buffers after the process loaded an
 * object. */
int plx__cuda_kind2(const void *a, const void *b);

/* Copy n bytes device->host (to_host = 1) or host->device, after the work
 * queued on stream (NULL: the legacy default stream) is finished. Returns 0
 * or an error naming the CUDA failure. */
int plx__cuda_copy(void *dst, const void *src, size_t n, int to_host, void *stream);

#endif
