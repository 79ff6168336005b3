/* find.h - where the dynamic loader would find a library, without loading it. */
#ifndef PLX_UCC_FIND_H
#define PLX_UCC_FIND_H

#include <stddef.h>

/* 1 and its path in path if a file name (e.g. "libucc.so.1") lies in
 * $LD_LIBRARY_PATH, extra_dir (may be NULL or ""), a folder of
 * /etc/ld.so.conf (and its includes), or the C library's own folders; 0
 * if not. searched names the places looked at. */
int ucc_find_library(const char *name, const char *extra_dir, char *path, size_t n, char *searched, size_t sn);

#endif
