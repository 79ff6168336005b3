/* fault.c - fault injection for tests and what-if studies, configured in
 * [sim]: fail the Nth matching op, delay a rank, keep a rank from joining. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "sim.h"

/* Typed reads through the communicator's view (ABI 1.3): the core checked
 * every value against the keys in plugin.c. */
void sim_config_read(const struct plx_host *h, const struct plx_config *config, struct sim_config *cfg)
{
    cfg->native = plx_plugin_config_bool(h, config, "native_collectives", 1);
    const char *op = plx_plugin_config_str(h, config, "fail_op");
    snprintf(cfg->fail_op, sizeof cfg->fail_op, "%s", op ? op : "");
    cfg->fail_after = (int)plx_plugin_config_int(h, config, "fail_after", 0);
    cfg->fail_rank = (int)plx_plugin_config_int(h, config, "fail_rank", -1);
    cfg->delay_rank = (int)plx_plugin_config_int(h, config, "delay_rank", -1);
    cfg->delay_ms = (int)plx_plugin_config_ms(h, config, "delay_ms", 0);
    cfg->absent_rank = (int)plx_plugin_config_int(h, config, "absent_rank", -1);
    sim_model_read(h, config, &cfg->model);
    if (cfg->model.on) /* the model prices messages: the core's algorithms send them */
        cfg->native = 0;
}

int sim_fault_injects(const struct sim_config *cfg, int rank)
{
    return (cfg->fail_after && cfg->fail_op[0]) || (cfg->delay_rank == rank && cfg->delay_ms > 0);
}

int sim_fault_check(struct impl *c, const char *opname)
{
    const struct sim_config *f = &c->cfg;
    if (!c->injects || !f->fail_after || !f->fail_op[0] || (f->fail_rank >= 0 && f->fail_rank != c->rank))
        return 0;
    if (strcmp(f->fail_op, "any") && strcmp(f->fail_op, opname))
        return 0;
    int n = __atomic_add_fetch(&c->op_count, 1, __ATOMIC_RELAXED);
    if (n != f->fail_after)
        return 0;
    return sim_error(c, PLX_ERR_INTERNAL, "sim: injected failure in %s #%d on rank %d", opname, n,
                           c->rank);
}

void sim_fault_delay(struct impl *c)
{
    if (!c->injects || c->cfg.delay_rank != c->rank || c->cfg.delay_ms <= 0)
        return;
    struct timespec ts = {c->cfg.delay_ms / 1000, (long)(c->cfg.delay_ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}
