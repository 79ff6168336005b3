/* check.h - the tests' one assertion. Internal to the tests.
 *
 * A failed CHECK prints where it failed, the condition and a detail, adds one
 * to the including file's `int failures` (atomically: rank threads share it)
 * and goes on, so one run reports every broken check; the test then exits
 * nonzero when failures is not 0. The detail is plexus's last error for the
 * calling thread when plexus/plexus.h was included first; a file may define
 * CHECK_DETAIL() (a string) and CHECK_WHO() (a prefix such as "rank 2: ")
 * before including this header. */
#ifndef PLEXUS_TEST_CHECK_H
#define PLEXUS_TEST_CHECK_H

#include <stdio.h>
#include <string.h>

#ifndef CHECK_DETAIL
#ifdef PLEXUS_PLEXUS_H
#define CHECK_DETAIL() plx_last_error()
#else
#define CHECK_DETAIL() "-"
#endif
#endif
#ifndef CHECK_WHO
#define CHECK_WHO() ""
#endif

#define CHECK_FAILED_() __atomic_add_fetch(&failures, 1, __ATOMIC_RELAXED)

#define CHECK(cond)                                                                                 \
    do {                                                                                            \
        if (!(cond)) {                                                                              \
            fprintf(stderr, "%s%s:%d: CHECK failed: %s (last error: %s)\n", CHECK_WHO(), __FILE__, \
                    __LINE__, #cond, CHECK_DETAIL());                                               \
            CHECK_FAILED_();                                                                        \
        }                                                                                           \
    } while (0)

/* CHECKF(cond, fmt, ...): the message is the caller's; only the first 30
 * failures print, so a wrong kernel does not flood the log. */
#define CHECKF(cond, ...)                                                                           \
    do {                                                                                            \
        if (!(cond) && CHECK_FAILED_() <= 30) {                                                     \
            fprintf(stderr, "%s%s:%d: FAIL: ", CHECK_WHO(), __FILE__, __LINE__);                    \
            fprintf(stderr, __VA_ARGS__);                                                           \
            fputc('\n', stderr);                                                                    \
        }                                                                                           \
    } while (0)

/* CHECK_STR(got, want): two strings are equal; prints both when not. */
#define CHECK_STR(got, want)                                                                        \
    do {                                                                                            \
        const char *got_ = (got), *want_ = (want);                                                  \
        if (strcmp(got_, want_)) {                                                                  \
            fprintf(stderr, "%s%s:%d: message\n  got:  %s\n  want: %s\n", CHECK_WHO(), __FILE__,   \
                    __LINE__, got_, want_);                                                         \
            CHECK_FAILED_();                                                                        \
        }                                                                                           \
    } while (0)

#endif
