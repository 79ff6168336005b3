/* model.c - the network model: virtual time for sim's point-to-point
 * messages. Each rank keeps a clock that moves only when one of its waits
 * completes; a message costs alpha + beta * bytes on its link (within a host
 * or across hosts; bytes of a message within a host beyond the cache cost
 * more), queues behind the sender's earlier messages (the rank's
 * injection bandwidth), behind the host NIC's other traffic when it leaves
 * the host (past a token bucket's burst, where the NIC is shaped so), and
 * behind the receiver's other arrivals; a reduction the core runs costs
 * gamma * bytes on the rank's clock; a host with fewer cores than ranks
 * time-shares them (stretch), and there a message also waits for its
 * receiver to be woken and switched in (wake_ns), which takes core time
 * too (wake_cpu_ns); bytes another core still
 * holds in its own cache, and a message left unanswered (its
 * acknowledgement), cost more within a host; a message above the eager
 * limit costs its sender the handling of its receiver's ready notice
 * (rendezvous); and the copies of an operation whose buffers, over the
 * host's ranks, outgrow the host's cache come partly from memory. Nothing
 * sleeps: wall time does not depend on the modelled latency. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

/* For plexus_sim_model_clock_ns only, a documented exception to "no
 * plugin state outside a communicator": a tool asks for the clock of the
 * rank its calling thread runs, which it cannot name otherwise (a thread
 * rank's as of its last completed wait; a coroutine's is its fiber's). */
static _Thread_local double last_clock_ns;

/* Bandwidth in bytes per second to nanoseconds per byte (0: free). */
static double ns_per_byte(int64_t bytes_per_s)
{
    return bytes_per_s > 0 ? 1e9 / (double)bytes_per_s : 0.0;
}

void sim_model_read(const struct plx_host *h, const struct plx_config *config, struct sim_model *m)
{
    m->on = plx_plugin_config_bool(h, config, "model", 0);
    m->ranks_per_host = (int)plx_plugin_config_int(h, config, "model_ranks_per_host", 0);
    m->cores_per_host = (int)plx_plugin_config_int(h, config, "model_cores_per_host", 0);
    m->machine_cores = (int)plx_plugin_config_int(h, config, "model_machine_cores", 0);
    m->yielding_waits = plx_plugin_config_bool(h, config, "model_yielding_waits", 0);
    m->wake_ns = (double)plx_plugin_config_int(h, config, "model_wake_latency", 0);
    m->wake_cpu_ns = (double)plx_plugin_config_int(h, config, "model_wake_cpu", 0);
    m->intra_alpha_ns = (double)plx_plugin_config_int(h, config, "model_intra_latency", 0);
    m->intra_beta_ns = ns_per_byte(plx_plugin_config_int(h, config, "model_intra_bandwidth", 0));
    m->intra_cache_bytes = (double)plx_plugin_config_int(h, config, "model_intra_cache", 0);
    m->intra_memory_beta_ns = ns_per_byte(plx_plugin_config_int(h, config, "model_intra_memory_bandwidth", 0));
    m->host_cache_bytes = (double)plx_plugin_config_int(h, config, "model_host_cache", 0);
    m->host_memory_beta_ns = ns_per_byte(plx_plugin_config_int(h, config, "model_host_memory_bandwidth", 0));
    m->intra_head_bytes = (double)plx_plugin_config_int(h, config, "model_intra_head", 0);
    m->intra_head_beta_ns = ns_per_byte(plx_plugin_config_int(h, config, "model_intra_head_bandwidth", 0));
    m->intra_private_bytes = (double)plx_plugin_config_int(h, config, "model_intra_private_cache", 0);
    m->intra_private_beta_ns = ns_per_byte(plx_plugin_config_int(h, config, "model_intra_private_bandwidth", 0));
    m->intra_ack_ns = (double)plx_plugin_config_int(h, config, "model_intra_ack", 0);
    m->intra_serial_copies = plx_plugin_config_bool(h, config, "model_intra_serial_copies", 0);
    m->eager_limit = (double)plx_plugin_config_int(h, config, "model_eager_limit", 0);
    m->rendezvous_ns = (double)plx_plugin_config_int(h, config, "model_rendezvous_overhead", 0);
    m->inter_alpha_ns = (double)plx_plugin_config_int(h, config, "model_inter_latency", 0);
    m->inter_beta_ns = ns_per_byte(plx_plugin_config_int(h, config, "model_inter_bandwidth", 0));
    m->inter_burst_bytes = (double)plx_plugin_config_int(h, config, "model_inter_burst", 0);
    m->inject_beta_ns = ns_per_byte(plx_plugin_config_int(h, config, "model_injection_bandwidth", 0));
    m->reduce_gamma_ns = ns_per_byte(plx_plugin_config_int(h, config, "model_reduce_bandwidth", 0));
    m->payload = plx_plugin_config_bool(h, config, "model_payload", 1);
    const char *native = plx_plugin_config_str(h, config, "model_intra_native");
    m->native_shm = native && !strcmp(native, "shm");
    const char *trace = plx_plugin_config_str(h, config, "model_trace");
    snprintf(m->trace, sizeof m->trace, "%s", trace ? trace : "");
}

static int host_of(const struct sim_model *m, int rank)
{
    return m->ranks_per_host > 0 ? rank / m->ranks_per_host : 0;
}

static double max2(double a, double b)
{
    return a > b ? a : b;
}

/* The ranks on rank's host, of slots in all. */
static int ranks_on_host(const struct sim_model *m, int slots, int rank)
{
    int per = m->ranks_per_host > 0 ? m->ranks_per_host : slots;
    int first = host_of(m, rank) * per;
    return slots - first < per ? slots - first : per;
}

/* Time-sharing: while a collective runs, every rank of a host is runnable
 * (it copies, reduces, or spins and yields on its waits), and the kernel
 * shares the host's cores fairly among them, so each rank runs cores/ranks
 * of the time. Work it does on a core then takes ranks/cores times as
 * long: its reductions, and a message within the host, whose latency and
 * copy are CPU work at both ends (shared memory, loopback). Copies of
 * co-scheduled ranks serialize onto the cores, and a message waits while
 * its receiver is descheduled. Where a waiting rank gives its core to the
 * others instead (model_yielding_waits: tcp, oversubscribed, yields between
 * looks, then sleeps), the rank that waits for a message is off the cores,
 * so the message's latency is not shared; its copy and the reductions
 * still are. A NIC's transfer across hosts does not need
 * the cores (emulated hosts' do: emulated_cpu_ns). The factor: ranks on the host / cores, at least 1. Hosts
 * emulated on one machine (model_machine_cores) share its cores: all the
 * ranks / the machine's cores. */
static double stretch(const struct sim_model *m, int slots, int rank)
{
    if (m->machine_cores > 0)
        return slots > m->machine_cores ? (double)slots / m->machine_cores : 1.0;
    int on_host = ranks_on_host(m, slots, rank);
    return m->cores_per_host > 0 && on_host > m->cores_per_host ? (double)on_host / m->cores_per_host : 1.0;
}

/* What a copy of bytes within a host costs beyond its bytes at beta: its
 * head, the first model_intra_head bytes, costs more per byte. Until then a
 * copy runs at the latency of its lines rather than their bandwidth: lines
 * the other core just wrote, fetched from its cache before the prefetchers
 * run ahead (shm), or the first socket-buffer chunk, which the sender
 * copies in before the receiver can start copying out, where later chunks
 * overlap (loopback tcp). */
static double head_ns(const struct sim_model *m, double bytes)
{
    return (bytes < m->intra_head_bytes ? bytes : m->intra_head_bytes) * m->intra_head_beta_ns;
}

/* The share of the bytes a core reads that another core wrote and still
 * holds in its own cache, where the cores' working set is set bytes each:
 * those lines come from that core's cache (model_intra_private_cache), at
 * a cost beyond beta (model_intra_private_bandwidth); the rest were
 * evicted to the cache the cores share, which serves them faster. All of
 * them while the set fits the private cache; private / set beyond it. */
static double private_share(const struct sim_model *m, double set)
{
    if (m->intra_private_beta_ns <= 0 || set <= 0)
        return 0.0;
    return set <= m->intra_private_bytes ? 1.0 : m->intra_private_bytes / set;
}

/* The share of an operation's bytes that the host's cache cannot hold,
 * where its ranks' buffers together are set bytes: none while they fit
 * model_host_cache, 1 - cache / set beyond it. */
static double host_beyond(const struct sim_model *m, double set)
{
    return m->host_memory_beta_ns > 0 && set > m->host_cache_bytes ? 1.0 - m->host_cache_bytes / set : 0.0;
}

/* The ns a message's bytes take on its link. Within a host both ends copy
 * them on the CPUs (through the kernel's socket buffers, or a segment's
 * slots): while a message fits the cache the copies run at cache speed
 * (beta, its head's extra, and the extra of what the sender's core still
 * holds: a message is its own working set); bytes beyond the cache stream
 * through memory, each at beta plus the memory's extra cost. A pipelined
 * algorithm keeps its segments under the cache; one large message pays for
 * all of it. Apart from the message, the copies read and write the
 * operation's buffers, which the host's ranks touch together (host_set
 * bytes): the share of them beyond the host's cache comes from memory,
 * however small the message. */
static double link_ns(const struct sim_model *m, int inter, size_t bytes, double host_set)
{
    double b = (double)bytes;
    if (inter)
        return b * m->inter_beta_ns;
    double beyond = b > m->intra_cache_bytes ? b - m->intra_cache_bytes : 0.0;
    return b * (m->intra_beta_ns + private_share(m, b) * m->intra_private_beta_ns +
                host_beyond(m, host_set) * m->host_memory_beta_ns) +
           beyond * m->intra_memory_beta_ns + head_ns(m, b);
}

/* A message's latency to a rank whose host stretch is s. More ranks than
 * cores: the rank is off the cores (it waited for a peer that was not
 * running, and slept or lost its core) for the share of the time the cores
 * cannot hold it, (ranks - cores) / ranks = 1 - 1/s under fair sharing; then
 * it is woken and switched back in only once the message is there, so each
 * message pays that wake-up times the chance. One that queues behind
 * earlier arrivals finds its receiver busy with them, awake. The wake-up is
 * also work on the cores (the kernel's wake-up, the switches to and from
 * the receiver), shared like the rest with the host's ranks: s times its
 * core time, times the same chance, so (s - 1) times it. The latency part
 * stays bounded as ranks grow; this part grows with them, as a CPU-bound
 * round of many ranks on few cores does. Hosts emulated on one machine
 * queue that core time on the machine's cores instead (machine_ns): only
 * the messages sent pay it there, so a tree's quiet steps cost less than
 * a round where every rank sends, and where every rank does, the two
 * agree. */
static double latency_ns(const struct sim_model *m, double alpha, double s)
{
    double t = (m->yielding_waits ? 1.0 : s) * alpha;
    double wake_cpu = m->machine_cores > 0 ? 0.0 : m->wake_cpu_ns * (s - 1.0);
    return s > 1.0 ? t + m->wake_ns * (1.0 - 1.0 / s) + wake_cpu : t;
}

/* The core time a message's wake-up of its receiver takes, on a host of
 * stretch s: the receiver is off the cores 1 - 1/s of the time. */
static double wake_cpu_ns(const struct sim_model *m, double s)
{
    return s > 1.0 ? m->wake_cpu_ns * (1.0 - 1.0 / s) : 0.0;
}

/* The CPU time a message costs its sender beyond its bytes and the
 * latency. Above the eager limit the sender handles its receiver's ready
 * notice before the payload goes (tcp: a notice read, matched and answered
 * in its progress loop), once per message: a pipeline overlaps its
 * segments' latency, not this. */
static double rendezvous_ns(const struct sim_model *m, size_t bytes)
{
    return m->eager_limit > 0 && (double)bytes > m->eager_limit ? m->rendezvous_ns : 0.0;
}

/* Queues by rank and by host, made on first use (w->mu held): the
 * world's, or, for coroutine ranks, the run's, which all the communicators
 * of a rank share (its links are the same whichever communicator sends). */
static double *model_queues(struct impl *c)
{
    struct world *w = c->w;
    if (c->fiber) { /* the run's, through the world: a sender's fiber is another rank's cold line */
        if (!w->run_queues)
            w->run_queues = sim_fiber_queues(c->fiber);
        return w->run_queues;
    }
    if (!w->egress_free)
        w->egress_free = calloc(SIM_QUEUE_DOUBLES(w->size), sizeof *w->egress_free);
    return w->egress_free;
}

/* The SIM_QUEUES rows of n slots each in one block: egress and ingress by
 * rank, the NIC's out and in by host, and by rank the model rank it last
 * sent to (+ 1) and when it posted that send; after them the shared
 * machine's cores (machine_ns). */
enum { EGRESS, INGRESS, NIC_OUT, NIC_IN, LAST_TO, LAST_SENT };
#define QUEUE(q, n, which, i) (q)[(size_t)(which) * (size_t)(n) + (size_t)(i)]

static int queue_slots(const struct impl *c)
{
    return c->w->run_slots ? c->w->run_slots : c->w->size;
}

/* Hosts emulated on one machine: every message is work on the machine's
 * shared cores from end to end (the kernel's path through veths, a bridge
 * and the shaper across hosts, loopback within one; there is no wire, so
 * a link's latency when idle is that work, and its bytes are copied by
 * the cores as within a host: cpu_ns, with the receiver's wake-up's core
 * time), and messages that many ranks send at once queue for those cores:
 * the machine gets through one message's latency and copies, over its
 * cores, after another. Returns when it is through this one (from `from`),
 * or 0 where hosts are machines of their own. */
static double machine_ns(const struct sim_model *m, double *q, int n, int inter, double from, double cpu_ns)
{
    if (m->machine_cores <= 0)
        return 0.0;
    double *busy = &q[SIM_QUEUE_DOUBLES(n) - 1];
    *busy = max2(*busy, from) + ((inter ? m->inter_alpha_ns : m->intra_alpha_ns) + cpu_ns) / m->machine_cores;
    return *busy;
}

/* The operation's buffers on c's host: c's footprint on each of the
 * host's ranks (they run the same operation). */
static double host_set(const struct impl *c, int slots)
{
    return c->footprint_bytes * ranks_on_host(c->model, slots, c->model_rank);
}

/* Hosts emulated on one machine (model_machine_cores): a message across
 * them still goes through the kernel's TCP path on the cores every rank
 * shares (veths and a bridge in place of loopback), so its bytes cost what
 * they cost within a host, as well as their time on the NIC. 0 where each
 * host is a machine of its own: the NIC moves them. */
static double emulated_cpu_ns(const struct sim_model *m, int inter, size_t bytes, double host_set)
{
    return inter && m->machine_cores > 0 ? link_ns(m, 0, bytes, host_set) : 0.0;
}

/* A host's NIC, in or out, as a token bucket shapes it (Linux's tbf):
 * tokens refill at the NIC's rate up to model_inter_burst bytes, and a
 * message passes as fast as its tokens last, then at the rate; with no
 * burst, a plain queue at the rate. *full is when the bucket is full again
 * (no burst: when the NIC is free). A message whose first byte reaches the
 * NIC at t takes its tokens; returns when its last byte has passed. */
static double nic_pass(const struct sim_model *m, double *full, double t, double bytes)
{
    *full = max2(*full, t) + bytes * m->inter_beta_ns;
    return max2(t, *full - m->inter_burst_bytes * m->inter_beta_ns);
}

int sim_model_send(struct impl *c, struct sim_req *r)
{
    const struct sim_model *m = c->model;
    double *q = model_queues(c);
    if (!q)
        return -1;
    int n = queue_slots(c), me = c->model_rank, host = host_of(m, me);
    const struct impl *dst = c->w->members[r->peer];
    int inter = host != host_of(m, dst ? dst->model_rank : r->peer);
    double b = (double)r->bytes, depart = max2(r->t_post, QUEUE(q, n, EGRESS, me)), occupy;
    if (inter) { /* it leaves once its tokens (the NIC's rate, past the burst) let it */
        double passed = nic_pass(m, &QUEUE(q, n, NIC_OUT, host), depart, b);
        depart = max2(depart, passed - b * m->inter_beta_ns);
        r->nic_ns = passed - depart;
        occupy = max2(r->nic_ns, b * m->inject_beta_ns) + rendezvous_ns(m, r->bytes);
        if (m->machine_cores > 0)
            occupy = max2(occupy, stretch(m, n, me) * (emulated_cpu_ns(m, inter, r->bytes, host_set(c, n)) +
                                                       rendezvous_ns(m, r->bytes)));
    } else {
        occupy = max2(link_ns(m, inter, r->bytes, host_set(c, n)), b * m->inject_beta_ns);
        occupy = (occupy + rendezvous_ns(m, r->bytes)) * stretch(m, n, me);
    }
    QUEUE(q, n, EGRESS, me) = depart + occupy;
    QUEUE(q, n, LAST_TO, me) = (double)(dst ? dst->model_rank : r->peer) + 1;
    QUEUE(q, n, LAST_SENT, me) = r->t_post;
    r->t_depart = depart;
    r->priced = 1;
    r->t_done = depart + occupy; /* the buffer is free once sent: eager */
    return 0;
}

/* The trace: one file per process, opened by the first message, each
 * message a complete event on its sender's row (Chrome's array format, whose
 * closing bracket is optional, so a run that stops midway still loads). */
static pthread_mutex_t trace_mu = PTHREAD_MUTEX_INITIALIZER;
static FILE *trace_file;

static void trace_message(const struct sim_model *m, int from, int to, const struct sim_req *send, double arrive)
{
    pthread_mutex_lock(&trace_mu);
    if (!trace_file && (trace_file = fopen(m->trace, "w")) != NULL)
        fputs("[\n", trace_file);
    if (trace_file) {
        fprintf(trace_file,
                "{\"name\":\"%zu B to %d\",\"cat\":\"message\",\"ph\":\"X\",\"pid\":0,\"tid\":%d,"
                "\"ts\":%.3f,\"dur\":%.3f,\"args\":{\"to\":%d,\"bytes\":%zu,\"tag\":%llu}},\n",
                send->bytes, to, from, send->t_depart / 1e3, (arrive - send->t_depart) / 1e3, to, send->bytes,
                (unsigned long long)send->tag);
        fflush(trace_file);
    }
    pthread_mutex_unlock(&trace_mu);
}

void sim_model_deliver(struct impl *sc, struct sim_req *send, struct sim_req *recv)
{
    const struct sim_model *m = sc->model;
    double *q = model_queues(sc);
    const struct impl *rc = sc->w->members[recv->owner];
    int n = queue_slots(sc), dst = rc ? rc->model_rank : recv->owner, host = host_of(m, dst);
    int inter = host_of(m, sc->model_rank) != host;
    double alpha = inter ? m->inter_alpha_ns : m->intra_alpha_ns;
    double b = (double)send->bytes, s = inter && m->machine_cores <= 0 ? 1.0 : stretch(m, n, dst);
    double copy = inter ? send->nic_ns : link_ns(m, inter, send->bytes, host_set(sc, n));
    /* Its time on the link: the NIC's across hosts (and the shared cores'
     * where they are emulated), the cores' within one. */
    double spent = inter ? max2(copy, s * emulated_cpu_ns(m, inter, send->bytes, host_set(sc, n))) : s * copy;
    /* A message above the eager limit leaves only once the receiver's
     * notice that it posted the receive reached the sender (tcp's
     * rendezvous): the notice's latency after the receive's post, and, on a
     * shared host, the sender's wake-up to read it. */
    if (m->eager_limit > 0 && send->bytes > m->eager_limit) {
        double s_sender = inter && m->machine_cores <= 0 ? 1.0 : stretch(m, n, sc->model_rank);
        double ready = recv->t_post + latency_ns(m, alpha, s_sender);
        if (ready > send->t_depart) { /* the send, and its copy on the sender's link, as much later */
            send->t_done += ready - send->t_depart;
            send->t_depart = ready;
            QUEUE(q, n, EGRESS, sc->model_rank) = max2(QUEUE(q, n, EGRESS, sc->model_rank), send->t_done);
        }
    }
    double arrive = send->t_depart + s * rendezvous_ns(m, send->bytes) + latency_ns(m, alpha, s) + spent;
    /* Arrivals share the receiver's link (and its host's NIC). */
    arrive = max2(arrive, QUEUE(q, n, INGRESS, dst) + max2(spent, s * b * m->inject_beta_ns));
    /* Within a host whose copies are serial, the receiver's core copies the
     * message in after its own sends' copies out (loopback tcp: each end
     * copies through the kernel on its own core), so a rank that sends and
     * receives at once takes both: priced when the receive completes, by
     * which time the receiver's sends posted before it are priced too
     * (here they may not be yet, whichever rank the world ran first). */
    recv->copy_in = !inter && m->intra_serial_copies ? s * copy : 0.0;
    recv->ack_from = !inter && m->intra_ack_ns > 0 ? sc->model_rank + 1 : 0;
    if (inter) /* through the receiving host's NIC, its bytes as they came from the sender's */
        arrive = max2(arrive, nic_pass(m, &QUEUE(q, n, NIC_IN, host), arrive - send->nic_ns, b));
    if (m->machine_cores > 0) {
        double cpu = link_ns(m, 0, send->bytes, host_set(sc, n)) + wake_cpu_ns(m, stretch(m, n, dst));
        arrive = max2(arrive, machine_ns(m, q, n, inter, send->t_depart, cpu));
    }
    QUEUE(q, n, INGRESS, dst) = arrive;
    recv->t_done = arrive;
    if (m->trace[0])
        trace_message(m, sc->model_rank, dst, send, arrive);
}

/* Loopback tcp acknowledges every segment it receives: in the next segment
 * the receiver sends back on that connection, or, where it sends none
 * soon, in a segment of its own, which both ends' kernels make and take
 * on their cores. An exchange answers (the receiver sent its own message
 * to the sender as it posted the receive, or since); a ring's, a tree's
 * or a fold's message does not. That CPU work delays the receiver where
 * it is sending in the same step too (a ring: every rank sends and
 * receives each step, and every core is busy), model_intra_ack, shared on
 * a time-shared host; a rank that only waits (a fold's, a tree's) has it
 * done while it waits. Priced once the receive completes, by when its rank
 * has posted the sends of its step. */
static double ack_ns(struct impl *c, struct sim_req *r, double *q)
{
    const struct sim_model *m = c->model;
    if (!r->ack_from || r->ack_priced || !q)
        return 0.0;
    r->ack_priced = 1;
    int n = queue_slots(c), me = c->model_rank;
    /* LAST_TO is 0 until the rank's first send: one that has not sent is not sending, whatever LAST_SENT's 0. */
    double last_to = QUEUE(q, n, LAST_TO, me);
    int sending = last_to > 0 && QUEUE(q, n, LAST_SENT, me) >= r->t_post, answered = last_to == (double)r->ack_from;
    return sending && !answered ? stretch(m, n, me) * m->intra_ack_ns : 0.0;
}

void sim_model_complete(struct impl *c, struct sim_req *r)
{
    if (!c->model->on || (r->is_coll && !r->timed))
        return;
    double *q = r->ack_from || r->copy_in > 0 ? model_queues(c) : NULL;
    r->t_done += ack_ns(c, r, q);
    double done = r->t_done;
    if (r->copy_in > 0 && q) /* after this rank's sends' copies */
        done = max2(done, QUEUE(q, queue_slots(c), EGRESS, c->model_rank) + r->copy_in);
    if (done > *c->clock_ns)
        *c->clock_ns = done;
    if (!c->fiber) /* a coroutine's is its fiber's: no thread-local per message */
        last_clock_ns = *c->clock_ns;
}

/* A reduction runs between a rank's waits, so it only delays the rank's
 * next message: its clock moves, and ranks now earlier run first. */
void sim_model_charge_reduce(void *comm, size_t bytes)
{
    struct impl *c = comm;
    if (!c->model->on || c->model->reduce_gamma_ns <= 0)
        return;
    sim_lock(c->w);
    double s = stretch(c->model, queue_slots(c), c->model_rank);
    *c->clock_ns += s * (double)bytes * c->model->reduce_gamma_ns;
    if (!c->fiber)
        last_clock_ns = *c->clock_ns;
    sim_unlock(c->w);
    if (c->fiber)
        sim_catch_up(c, NULL);
}

/* The core's generic algorithm begins an operation whose buffers on this
 * rank are bytes (0: it has ended); its messages' copies are priced by it
 * (link_ns). */
void sim_model_op_footprint(void *comm, size_t bytes)
{
    struct impl *c = comm;
    if (!c->model->on)
        return;
    sim_lock(c->w);
    c->footprint_bytes = (double)bytes;
    sim_unlock(c->w);
}

/* For tests and tools: the modelled clock of the calling rank (a
 * coroutine's, or a thread's as of its last completed wait). */
PLX_BACKEND_EXPORT double plexus_sim_model_clock_ns(void)
{
    struct sim_fiber *f = sim_fiber_self();
    return f ? *sim_fiber_clock(f) : last_clock_ns;
}

/* shm's native collectives (plugins/shm/coll.c, its default [shm] keys):
 * the bytes up to which an allreduce runs in one phase, and the rounds of
 * one slot. */
enum {
    SHM_SMALL_BYTES = 16 << 10,
    SHM_SLOT_BYTES = 1 << 20
};

int sim_model_native(const struct impl *c, int coll)
{
    const struct sim_model *m = c->model;
    int one_host = m->ranks_per_host == 0 || m->ranks_per_host >= queue_slots(c);
    return m->on && m->native_shm && one_host && (coll == PLX_COLL_ALLREDUCE || coll == PLX_COLL_ALLGATHER);
}

/* The ns a native collective's copy costs per byte. Each copy goes
 * between a rank's own buffer and a slot, and each side misses the cache
 * the ranks share (model_host_cache) by a set of its own (host_beyond).
 * The buffer side touches the operation's bytes once: its set is the
 * host's working set, every rank's buffers (an allreduce's one, in place;
 * an allgather's block in and P blocks out) and the slots in use. The slot
 * side reads what a peer wrote in the same round: its set is the round's,
 * the slots the round fills and the buffer bytes its copies stream through
 * the cache meanwhile. Each core in use holds its share of the working set
 * in its own cache, as far as that goes (private_share): a slot's lines
 * read there are still the writer's. */
static double native_byte_ns(const struct sim_model *m, double working_set, double round_set, int cores_in_use)
{
    return m->intra_beta_ns + private_share(m, working_set / cores_in_use) * m->intra_private_beta_ns +
           (host_beyond(m, working_set) + host_beyond(m, round_set)) / 2 * m->host_memory_beta_ns;
}

/* Every rank runs the same schedule, so the collective ends its cost after
 * the last rank arrives. A barrier is one line between the ranks (alpha);
 * time-shared, it also waits for every rank that is off the cores: the
 * ranks - cores of them, switched back in as many at a time as there are
 * cores, so ceil((ranks - cores) / cores) wake-ups (a message, which needs
 * its one receiver alone, pays the chance that it is off the cores). A
 * byte copied costs native_byte_ns, and each copy its head (head_ns); a
 * reduction gamma per byte; all of it
 * CPU work, shared by the host's ranks (stretch). In shm, a rank copies its
 * input into its slot, a barrier, then reads the others' slots: an
 * allgather copies each block in once and all P out, per slot-sized round;
 * an allreduce over SHM_SMALL_BYTES copies in the others' slices, reduces
 * its own slice (in pieces: a copy, P - 1 reductions and a copy out), a
 * second barrier, and copies the others' reduced slices out; up to it,
 * one barrier, and each rank reduces everything. */
double sim_model_native_ns(struct impl *c, const struct plx_coll_args *a)
{
    const struct sim_model *m = c->model;
    double s = stretch(m, queue_slots(c), c->model_rank), P = c->size;
    int cores = m->cores_per_host, off_cores = s > 1.0 ? ranks_on_host(m, queue_slots(c), c->model_rank) - cores : 0;
    double wakes = off_cores > 0 ? (double)((off_cores + cores - 1) / cores) : 0.0;
    double barrier = (m->yielding_waits ? 1.0 : s) * m->intra_alpha_ns + wakes * m->wake_ns;
    double bytes = (double)a->count * (double)sim_dtype_size(a->dtype), t = 0;
    int gather = a->coll == PLX_COLL_ALLGATHER;
    double round = bytes < SHM_SLOT_BYTES ? bytes : SHM_SLOT_BYTES, slots = 2.0 * P * round;
    int on_host = ranks_on_host(m, queue_slots(c), c->model_rank);
    int in_use = cores > 0 && cores < on_host ? cores : on_host;
    /* A round fills P slots and streams each rank's round of its buffer in
     * and out (an allgather's in, and P rounds out). */
    double round_set = P * round + P * (gather ? (P + 1) * round : 2 * round);
    double byte_ns = native_byte_ns(m, P * (gather ? (P + 1) * bytes : bytes) + slots, round_set, in_use);
    if (!gather && bytes <= SHM_SMALL_BYTES)
        return barrier + s * (2 * (bytes * byte_ns + head_ns(m, bytes)) + (P - 1) * bytes * m->reduce_gamma_ns);
    for (double off = 0; off < bytes; off += SHM_SLOT_BYTES) {
        double len = bytes - off < SHM_SLOT_BYTES ? bytes - off : SHM_SLOT_BYTES;
        if (gather) {
            t += barrier + s * (P + 1) * (len * byte_ns + head_ns(m, len));
            continue;
        }
        double slice = len / P;
        t += 2 * barrier + s * (2 * P * (slice * byte_ns + head_ns(m, slice)) + (P - 1) * slice * m->reduce_gamma_ns);
    }
    return t;
}
