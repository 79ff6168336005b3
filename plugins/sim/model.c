/* model.c - the network model: virtual time for sim's point-to-point
 * messages. Each rank keeps a clock that moves only when one of its waits
 * completes; a message costs alpha + beta * bytes on its link (within a host
 * or across hosts), queues behind the sender's earlier messages (the rank's
 * injection bandwidth), behind the host NIC's other traffic when it leaves
 * the host, and behind the receiver's other arrivals. Nothing sleeps: wall
 * time does not depend on the modelled latency. */
#include <stdlib.h>

#include "sim.h"

static _Thread_local double last_clock_ns;

/* Bandwidth in bytes per second to nanoseconds per byte (0: free). */
static double ns_per_byte(int64_t bytes_per_s)
{
    return bytes_per_s > 0 ? 1e9 / (double)bytes_per_s : 0.0;
}

void sim_model_read(const struct plx_config *config, struct sim_model *m)
{
    const struct plx_host *h = sim_host;
    m->on = plx_plugin_config_bool(h, config, "model", 0);
    m->ranks_per_host = (int)plx_plugin_config_int(h, config, "model_ranks_per_host", 0);
    m->intra_alpha_ns = (double)plx_plugin_config_int(h, config, "model_intra_latency", 0);
    m->intra_beta_ns = ns_per_byte(plx_plugin_config_int(h, config, "model_intra_bandwidth", 0));
    m->inter_alpha_ns = (double)plx_plugin_config_int(h, config, "model_inter_latency", 0);
    m->inter_beta_ns = ns_per_byte(plx_plugin_config_int(h, config, "model_inter_bandwidth", 0));
    m->inject_beta_ns = ns_per_byte(plx_plugin_config_int(h, config, "model_injection_bandwidth", 0));
    m->payload = plx_plugin_config_bool(h, config, "model_payload", 1);
}

static int host_of(const struct sim_model *m, int rank)
{
    return m->ranks_per_host > 0 ? rank / m->ranks_per_host : 0;
}

static double max2(double a, double b)
{
    return a > b ? a : b;
}

/* Queues by rank and by host, made on first use (w->mu held). */
static int model_state(struct world *w)
{
    if (w->egress_free)
        return 0;
    size_t n = (size_t)w->size;
    w->egress_free = calloc(4 * n, sizeof *w->egress_free);
    if (!w->egress_free)
        return -1;
    w->ingress_free = w->egress_free + n;
    w->nic_out_free = w->ingress_free + n;
    w->nic_in_free = w->nic_out_free + n;
    return 0;
}

int sim_model_send(struct impl *c, struct sim_req *r)
{
    const struct sim_model *m = &c->cfg.model;
    struct world *w = c->w;
    if (model_state(w))
        return -1;
    int inter = host_of(m, c->rank) != host_of(m, r->peer);
    double beta = inter ? m->inter_beta_ns : m->intra_beta_ns;
    double occupy = (double)r->bytes * max2(beta, m->inject_beta_ns);
    double depart = max2(c->clock_ns, w->egress_free[c->rank]);
    int host = host_of(m, c->rank);
    if (inter)
        depart = max2(depart, w->nic_out_free[host]);
    w->egress_free[c->rank] = depart + occupy;
    if (inter)
        w->nic_out_free[host] = depart + (double)r->bytes * m->inter_beta_ns;
    r->t_depart = depart;
    r->t_done = depart + occupy; /* the buffer is free once sent: eager */
    return 0;
}

void sim_model_deliver(struct impl *sc, struct sim_req *send, struct sim_req *recv)
{
    const struct sim_model *m = &sc->cfg.model;
    struct world *w = sc->w;
    int dst = recv->owner;
    int inter = host_of(m, send->owner) != host_of(m, dst);
    double alpha = inter ? m->inter_alpha_ns : m->intra_alpha_ns;
    double beta = inter ? m->inter_beta_ns : m->intra_beta_ns;
    double b = (double)send->bytes;
    double arrive = send->t_depart + alpha + b * beta;
    /* Arrivals share the receiver's link (and its host's NIC). */
    arrive = max2(arrive, w->ingress_free[dst] + b * max2(beta, m->inject_beta_ns));
    if (inter) {
        int host = host_of(m, dst);
        arrive = max2(arrive, w->nic_in_free[host] + b * m->inter_beta_ns);
        w->nic_in_free[host] = arrive;
    }
    w->ingress_free[dst] = arrive;
    recv->t_done = arrive;
}

void sim_model_complete(struct impl *c, const struct sim_req *r)
{
    if (!c->cfg.model.on || r->is_coll)
        return;
    if (r->t_done > c->clock_ns)
        c->clock_ns = r->t_done;
    last_clock_ns = c->clock_ns;
}

/* For tests and tools that run ranks as threads: the modelled clock of the
 * calling thread's rank, as of its last completed wait. */
PLX_BACKEND_EXPORT double plexus_sim_model_clock_ns(void)
{
    return last_clock_ns;
}
