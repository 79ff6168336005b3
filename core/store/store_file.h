/* store_file.h - the file:// store's pieces that tests reach directly.
 * Stability: internal. */
#ifndef PLX_CORE_STORE_FILE_H
#define PLX_CORE_STORE_FILE_H

#include <stddef.h>
#include <stdint.h>

/* libstdc++'s std::hash<std::string> on a 64-bit target (_Hash_bytes with
 * its default seed), so our file names are the ones Gloo's FileStore uses:
 * "rank_0" hashes to 7977090932840177126. */
uint64_t plx__store_file_hash(const void *key, size_t len);

/* Largest value file the store reads; a larger file is reported as corrupt
 * rather than allocated. */
#define PLX__STORE_FILE_MAX_VALUE (64u << 20)

#endif
