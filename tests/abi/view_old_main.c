/* view_old_main.c - a plugin of ABI 1.2 reads, with the process-wide
 * host's config_get inside comm_create, the configuration of the
 * communicator being created: an option of that call reaches it, and a
 * communicator created without the option does not see the other's. */
#include <stdio.h>
#include <string.h>

#include <plexus/plexus.h>

static int init(const char *const *overrides, struct plx_comm **c)
{
    struct plx_comm_options o;
    plx_comm_options_init(&o);
    o.backend = "viewold";
    o.rank = 0;
    o.size = 1;
    o.init = "mem://view_old";
    o.overrides = overrides;
    return plx_comm_init(&o, c);
}

int main(void)
{
    int fail = 0;
    struct plx_comm *c = NULL;
    const char *opt[] = {"viewold.mark=from-option", NULL};
    if (init(opt, &c) != 0) {
        printf("FAIL: with the option: %s\n", plx_last_error());
        fail = 1;
    }
    plx_comm_destroy(c);
    c = NULL;
    int rc = init(NULL, &c);
    if (rc == 0 || !strstr(plx_last_error(), "viewold: comm_create read mark")) {
        printf("FAIL: without the option comm_create must fail saying what it read: rc %d, %s\n", rc, plx_last_error());
        fail = 1;
    }
    plx_comm_destroy(c);
    if (!fail)
        printf("an ABI 1.2 plugin's config_get in comm_create reads that communicator's options\n");
    return fail;
}
