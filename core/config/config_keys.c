/* config_keys.c - every key the core reads. Add a key here and it gets a
 * default, validation, a line in plexus-info --config and in etc/plexus.ini. */
#include "config_keys.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

const struct plx__key plx__keys[] = {
    {"core", "backend", PLX_KEY_LIST, "auto", NULL,
     "Backend to use: auto (the usable one expected fastest for the placement; see prefer), a name, an ordered list such as nccl,tcp, "
     "or ^name to exclude one; INTRA+INTER (shm+tcp) composes a one-host backend with one across hosts, as "
     "auto does when a one-host backend refuses a job that spans hosts. PLEXUS_BACKEND overrides it."},
    {"core", "prefer", PLX_KEY_LIST, "", NULL,
     "Backends auto tries first, in this order, where usable (e.g. tcp,shm); after them auto goes by the "
     "placement: on one host a one-host transport (shm) before those across hosts (mpi, ucc, tcp), else by "
     "priority."},
    {"core", "timeout_ms", PLX_KEY_DURATION, "300000", NULL,
     "Default timeout of every blocking step: rendezvous, waits, collectives (bare numbers: ms; or 30s, 5m)."},
    {"core", "log_level", PLX_KEY_ENUM, "warn", "error|warn|info|debug|trace",
     "Messages at this level and above go to stderr. PLEXUS_DEBUG=loader,store,tcp adds debug categories."},
    {"core", "allreduce_algo", PLX_KEY_ENUM, "auto", "auto|ring|recdbl|tree|rabenseifner",
     "Generic allreduce algorithm: ring for bandwidth, rabenseifner (recursive halving + doubling: the "
     "ring's traffic in fewer rounds), recdbl (recursive doubling) for latency, tree, or auto (recdbl up to "
     "small_bytes; above, rabenseifner where the world size is a power of two above 2, else ring)."},
    {"core", "shrink_wait_ms", PLX_KEY_DURATION, "3000", NULL,
     "plx_comm_shrink and plx_comm_grow: a rank that has not joined the survivors' agreement this long after "
     "this rank did, or whose heartbeat in it stopped this long, counts as failed (a rank that comes later gets "
     "PLX_ERR_PEER_LOST). Set it alike on every rank."},
    {"core", "tuner", PLX_KEY_STRING, "", NULL,
     "A crossover table for allreduce_algo = auto: lines 'allreduce RANKS FROM_BYTES ALGORITHM' (what "
     "plexus-whatif --emit-tuning writes from a network model); empty: the built-in choice. Read once per "
     "communicator; a bad line fails plx_comm_init naming file:line."},
    {"core", "estimates", PLX_KEY_STRING, "", NULL,
     "A table of modelled collective times for plx_comm_estimate (torch's time estimation): lines 'COLL RANKS "
     "BYTES SECONDS', and 'backend NAME' to hold it to one backend (what plexus-whatif --emit-estimates writes "
     "from a calibrated model); empty: no estimates. Read at the first estimate, again when the file changes; a "
     "bad line fails the estimate naming file:line."},
    {"core", "small_bytes", PLX_KEY_SIZE, "64K", NULL,
     "Messages up to this many bytes use the latency algorithm when allreduce_algo = auto."},
    {"core", "segment_bytes", PLX_KEY_SIZE, "0", NULL,
     "Pipeline segment of the generic ring, rabenseifner and tree algorithms, in bytes; 0: 128 KiB with 2 "
     "ranks, 1 MiB with more (what measured fastest on loopback)."},
    {"core", "hier_chunk_bytes", PLX_KEY_SIZE, "4M", NULL,
     "A hierarchical allreduce of at least twice this many bytes runs its three steps over chunks of about "
     "this size, one chunk's cross step while the next is reduced and the last gathered within the host; 0: "
     "the whole buffer in one go."},
    {"core", "host_identity", PLX_KEY_STRING, "", NULL,
     "The host this rank counts as in a hierarchical communicator (INTRA+INTER); empty: the real one (boot id, "
     "host name, namespaces). Ranks of one process (sim) set it per rank to model several hosts."},
    {"core", "cuda_staging", PLX_KEY_BOOL, "false", NULL,
     "Stage CUDA buffers through host memory for backends that take host memory only."},
    {"core", "auth", PLX_KEY_ENUM, "auto", "auto|on|off",
     "Authenticate every connection to the tcp:// store (HMAC-SHA256 challenge-response, both ways) with the job "
     "secret PLEXUS_JOB_SECRET, which plexus-run sets: auto does so when the secret is set, on refuses to run "
     "without it, off speaks plain TCPStore (torch-compatible, unauthenticated). The tcp backend follows "
     "the secret too; [tcp] auth = off turns it off there."},
    {"core", "auth_timeout_ms", PLX_KEY_DURATION, "10000", NULL,
     "A connection that has not completed the authentication handshake within this many milliseconds is "
     "dropped (and logged with its address)."},
    {"core", "store_listen", PLX_KEY_STRING, "", NULL,
     "Address the tcp:// store server (rank 0) listens on: empty for the store URL's host (MASTER_ADDR), an "
     "address, or * for every interface."},
    {"core", "store_max_key_bytes", PLX_KEY_SIZE, "64K", NULL,
     "Longest key the tcp:// store server accepts; a client sending a longer one is dropped and logged."},
    {"core", "store_max_value_bytes", PLX_KEY_SIZE, "64M", NULL,
     "Largest value the tcp:// store server accepts; a client sending a larger one is dropped and logged."},
    {"core", "store_max_clients", PLX_KEY_UINT, "1024", NULL,
     "Most connections the tcp:// store server holds at once (authenticated or not); more are refused and "
     "logged."},
    {"core", "store_max_pending", PLX_KEY_UINT, "1024", NULL,
     "Most operations one tcp:// store client may have pending: the keys of its WAIT plus the requests it "
     "queued behind it; more drops the client with a log line."},
    {"core", "fingerprint", PLX_KEY_BOOL, "true", NULL,
     "Check in-band that every rank calls the same collective (kind, dtype, op, count, root) where the core "
     "owns the wire (its generic algorithms: tcp, sim without native collectives). A mismatch fails the "
     "operation with PLX_ERR_MISMATCH naming both calls. Set it alike on every rank."},
    {"core", "fingerprint_native", PLX_KEY_ENUM, "timeout", "timeout|every|off",
     "Native collectives of backends the core does not own (mpi, nccl, ucc): timeout compares the ranks' calls "
     "through the store when a wait fails; every allgathers the fingerprints before each operation (one small "
     "extra exchange, for debugging); off never compares."},
    {"core", "ledger_entries", PLX_KEY_UINT, "64", NULL,
     "Operations each communicator keeps in its memory-mapped ledger (read by plexus-top); 0: no ledger file. "
     "With fingerprint off too, no diagnosis at all: no position in the store, so a timeout cannot say where "
     "the ranks are."},
    {"core", "ledger_dir", PLX_KEY_STRING, "", NULL,
     "Folder of the ledger files: empty for $XDG_RUNTIME_DIR/plexus, else /tmp/plexus-$UID (created 0700)."},
    {"core", "diag_publish_ms", PLX_KEY_DURATION, "1000", NULL,
     "A rank publishes its last completed operation to the store at most this often (and from any wait "
     "longer than 500 ms), so a timeout can say where every rank is."},
    {"*", "library", PLX_KEY_STRING, NULL, NULL,
     "Backend sections (drop-ins): the plugin's .so, relative to the drop-in's folder or absolute."},
    {"*", "priority", PLX_KEY_INT, "50", NULL,
     "Backend sections: rank for backend = auto; the highest usable wins."},
    {"*", "enabled", PLX_KEY_BOOL, "true", NULL, "Backend sections: false disables the backend."},
    {"*", "alias", PLX_KEY_LIST, NULL, NULL,
     "Backend sections without a library: this name stands for the first usable backend of the list (e.g. "
     "[mpi] alias = mpi-openmpi, mpi-mpich picks the MPI that launched the job)."},
    {"*", "alias_reason", PLX_KEY_STRING, NULL, NULL,
     "Backend sections with alias: why the alias is unavailable when no backend of its list is usable here."},
    {"*", "requires_env", PLX_KEY_LIST, NULL, NULL,
     "Backend sections: the library is loaded (and probed) only when one of these variables is set, e.g. the MPI "
     "launcher's; otherwise the backend is unavailable and nothing of it enters the process."},
    {"*", "requires_reason", PLX_KEY_STRING, NULL, NULL,
     "Backend sections with requires_env: the reason shown when none of its variables is set."},
};

const size_t plx__nkeys = sizeof plx__keys / sizeof plx__keys[0];

const struct plx__key *plx__key_find(const char *section, const char *key)
{
    for (size_t i = 0; i < plx__nkeys; i++)
        if (!strcasecmp(plx__keys[i].key, key) &&
            (!strcasecmp(plx__keys[i].section, section) ||
             (!strcmp(plx__keys[i].section, "*") && strcasecmp(section, "core"))))
            return &plx__keys[i];
    return NULL;
}

const char *plx__key_type_name(int type)
{
    static const char *const names[] = {"string", "bool", "int", "uint", "size", "duration", "enum", "list"};
    return type >= 0 && type <= PLX_KEY_LIST ? names[type] : "?";
}

/* Is word (n bytes) one of "a|b|c"? */
static int is_choice(const char *choices, const char *word, size_t n)
{
    for (const char *c = choices; c && *c;) {
        const char *bar = strchr(c, '|');
        size_t m = bar ? (size_t)(bar - c) : strlen(c);
        if (m == n && !strncasecmp(c, word, n))
            return 1;
        c = bar ? bar + 1 : NULL;
    }
    return 0;
}

static int bool_value(const char *v)
{
    static const char *const yes[] = {"true", "on", "yes", "1"}, *const no[] = {"false", "off", "no", "0"};
    for (int i = 0; i < 4; i++) {
        if (!strcasecmp(v, yes[i]))
            return 1;
        if (!strcasecmp(v, no[i]))
            return 0;
    }
    return -1;
}

/* The unit of a bare duration, from the key's name. */
static int64_t bare_unit_ns(const char *key)
{
    size_t n = strlen(key);
    if (n > 3 && !strcmp(key + n - 3, "_ns"))
        return 1;
    if (n > 3 && !strcmp(key + n - 3, "_us"))
        return 1000;
    if (n > 2 && !strcmp(key + n - 2, "_s"))
        return 1000000000;
    return 1000000;
}

/* Number with an optional unit; 0 on success. */
static int parse_number(const char *key, int type, const char *v, int64_t *out)
{
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (!*v || end == v || errno || (type != PLX_KEY_INT && (x < 0 || *v == '-')))
        return -1;
    if (type == PLX_KEY_INT || type == PLX_KEY_UINT) {
        *out = x;
        return *end ? -1 : 0;
    }
    int64_t mul = 0;
    if (type == PLX_KEY_SIZE) {
        static const char units[] = "BKMGT";
        const char *u = *end ? strchr(units, toupper((unsigned char)*end)) : units;
        if (!u || !*u || (*end && end[1] && strcasecmp(end + 1, "iB") && strcasecmp(end + 1, "B")))
            return -1;
        mul = (int64_t)1 << (10 * (u - units));
    } else { /* DURATION */
        static const struct { const char *name; int64_t ns; } units[] = {
            {"ns", 1}, {"us", 1000}, {"ms", 1000000}, {"s", 1000000000}, {"m", 60000000000}, {"h", 3600000000000},
        };
        if (!*end)
            mul = bare_unit_ns(key);
        for (size_t i = 0; !mul && i < sizeof units / sizeof units[0]; i++)
            if (!strcmp(end, units[i].name))
                mul = units[i].ns;
        if (!mul)
            return -1;
    }
    if (x > INT64_MAX / mul)
        return -1;
    *out = x * mul;
    return 0;
}

int plx__key_check(const char *section, const char *key, int type, const char *choices, const char *value,
                   char *msg, size_t len)
{
    int64_t x;
    switch (type) {
    case PLX_KEY_BOOL:
        if (bool_value(value) >= 0)
            return 0;
        snprintf(msg, len, "%s.%s = '%s' is not a boolean (true or false)", section, key, value);
        return -1;
    case PLX_KEY_INT:
    case PLX_KEY_UINT:
    case PLX_KEY_SIZE:
    case PLX_KEY_DURATION: {
        if (is_choice(choices, value, strlen(value)) || parse_number(key, type, value, &x) == 0)
            return 0;
        static const char *const what[] = {
            [PLX_KEY_INT] = "an integer", [PLX_KEY_UINT] = "a non-negative integer",
            [PLX_KEY_SIZE] = "a size (bytes, or with K, M, G)",
            [PLX_KEY_DURATION] = "a duration (a number with ns, us, ms, s, m or h)",
        };
        snprintf(msg, len, "%s.%s = '%s' is not %s%s%s", section, key, value, what[type], choices ? " or " : "",
                 choices ? choices : "");
        return -1;
    }
    case PLX_KEY_ENUM:
        if (is_choice(choices, value, strlen(value)))
            return 0;
        snprintf(msg, len, "%s.%s = '%s' is not one of %s", section, key, value, choices);
        return -1;
    case PLX_KEY_LIST: {
        /* Items between commas, trimmed; none may be empty, and there must be one. */
        const char *p = value;
        for (;;) {
            while (*p == ' ' || *p == '\t')
                p++;
            const char *comma = strchr(p, ','), *e = comma ? comma : p + strlen(p);
            const char *q = e;
            while (q > p && (q[-1] == ' ' || q[-1] == '\t'))
                q--;
            if (q == p) {
                snprintf(msg, len, "%s.%s = '%s' has an empty item: expected a comma-separated list of names",
                         section, key, value);
                return -1;
            }
            if (choices && !is_choice(choices, p, (size_t)(q - p))) {
                snprintf(msg, len, "%s.%s = '%s': '%.*s' is not one of %s", section, key, value, (int)(q - p), p,
                         choices);
                return -1;
            }
            if (!comma)
                break;
            p = comma + 1;
        }
        return 0;
    }
    default:
        return 0;
    }
}

int64_t plx__key_number(const char *key, int type, const char *value)
{
    int64_t x = -1;
    if (type == PLX_KEY_BOOL)
        return bool_value(value) == 1;
    if (parse_number(key, type, value, &x) != 0)
        return -1; /* a choice word such as "auto" */
    return x;
}
