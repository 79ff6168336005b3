/* fake_host.h - a struct plx_host for driving the tcp plugin directly
 * (dlopen, no core): an in-memory store shared by the threads of a test,
 * config from PLEXUS_TCP_<KEY>, errors kept per thread. */
#ifndef PLEXUS_TEST_FAKE_HOST_H
#define PLEXUS_TEST_FAKE_HOST_H

#include "plexus/backend.h"

struct plx_store *fake_store_new(void);
void fake_store_free(struct plx_store *s);
/* Loads the plugin at path; exits 1 with a message if it cannot. */
const struct plx_backend *fake_load(const char *path);
const char *fake_last_error(void);
extern const struct plx_host fake_host;

#endif
