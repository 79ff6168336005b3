/* fuzz_check.h - a failed property in a fuzz target aborts, which libFuzzer
 * reports as a crash (and saves the input) and the replay program turns
 * into a failed test. Stability: internal to tests/fuzz. */
#ifndef PLEXUS_FUZZ_CHECK_H
#define PLEXUS_FUZZ_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#define FUZZ_CHECK(cond)                                                                   \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            fprintf(stderr, "%s:%d: fuzz check failed: %s\n", __FILE__, __LINE__, #cond); \
            abort();                                                                       \
        }                                                                                  \
    } while (0)

#endif
