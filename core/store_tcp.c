/* store_tcp.c - placeholder until the tcp store lands. */
#include "error.h"
#include "store.h"

int plx__store_tcp_open(const char *rest, int rank, int size, int64_t timeout_ms, struct plx_store **out)
{
    (void)rank;
    (void)size;
    (void)timeout_ms;
    *out = NULL;
    return plx__err(PLX_ERR_UNSUPPORTED, "tcp:// store '%s': not available in this build", rest);
}
