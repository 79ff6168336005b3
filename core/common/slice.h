/* slice.h - shorten a waiting thread's scheduler slice, and give it back
 * (slice.c says why). Shared by the plugins whose waits sleep. */
#ifndef PLX_COMMON_SLICE_H
#define PLX_COMMON_SLICE_H

#include <stddef.h>
#include <stdint.h>

/* The calling thread's slice, shortened to ns (0: left alone; a shorter
 * one, or a thread that is not a fair task, is kept) until restored. */
void plx__slice_shorten(uint64_t ns);
/* The calling thread's slice back to what it was before shortening; a
 * no-op when it was not shortened. */
void plx__slice_restore(void);
/* The calling thread's scheduler slice in ns as the kernel reports it
 * (Linux 6.12 and later), or 0 where it reports none. */
uint64_t plx__slice_ns(void);
/* Whether this kernel honours a slice of ns (1) and why, in words. */
int plx__slice_probe(uint64_t ns, char *why, size_t len);

#endif
