/* config_keys.c - every key the core reads. Add a key here and it gets a
 * default, validation, a line in plexus-info --config and in etc/plexus.ini. */
#include "config_keys.h"

#include <string.h>
#include <strings.h>

const struct plx__key plx__keys[] = {
    {"core", "backend", PLX__KEY_STRING, "auto", NULL,
     "Backend to use: auto (the highest-priority usable one), a name, an ordered list such as nccl,tcp, "
     "or ^name to exclude one. PLEXUS_BACKEND overrides it."},
    {"core", "timeout_ms", PLX__KEY_INT, "300000", NULL,
     "Default timeout in milliseconds of every blocking step: rendezvous, waits, collectives."},
    {"core", "log_level", PLX__KEY_ENUM, "warn", "error|warn|info|debug|trace",
     "Messages at this level and above go to stderr. PLEXUS_DEBUG=loader,store,tcp adds debug categories."},
    {"core", "allreduce_algo", PLX__KEY_ENUM, "auto", "auto|ring|recdbl|tree|rabenseifner",
     "Generic allreduce algorithm: ring for bandwidth, rabenseifner (recursive halving + doubling: the "
     "ring's traffic in fewer rounds), recdbl (recursive doubling) for latency, tree, or auto (recdbl up to "
     "small_bytes; above, rabenseifner where the world size is a power of two above 2, else ring)."},
    {"core", "small_bytes", PLX__KEY_INT, "65536", NULL,
     "Messages up to this many bytes use the latency algorithm when allreduce_algo = auto."},
    {"core", "segment_bytes", PLX__KEY_INT, "0", NULL,
     "Pipeline segment of the generic ring, rabenseifner and tree algorithms, in bytes; 0: 128 KiB with 2 "
     "ranks, 1 MiB with more (what measured fastest on loopback)."},
    {"core", "cuda_staging", PLX__KEY_BOOL, "false", NULL,
     "Stage CUDA buffers through host memory for backends that take host memory only."},
    {"core", "auth", PLX__KEY_ENUM, "auto", "auto|on|off",
     "Authenticate every connection to the tcp:// store (HMAC-SHA256 challenge-response, both ways) with the job "
     "secret PLEXUS_JOB_SECRET, which plexus-run sets: auto does so when the secret is set, on refuses to run "
     "without it, off speaks plain TCPStore (torch-compatible, unauthenticated). The tcp backend follows "
     "the secret too; [tcp] auth = off turns it off there."},
    {"core", "auth_timeout_ms", PLX__KEY_INT, "10000", NULL,
     "A connection that has not completed the authentication handshake within this many milliseconds is "
     "dropped (and logged with its address)."},
    {"core", "store_listen", PLX__KEY_STRING, "", NULL,
     "Address the tcp:// store server (rank 0) listens on: empty for the store URL's host (MASTER_ADDR), an "
     "address, or * for every interface."},
    {"core", "store_max_key_bytes", PLX__KEY_INT, "65536", NULL,
     "Longest key the tcp:// store server accepts; a client sending a longer one is dropped and logged."},
    {"core", "store_max_value_bytes", PLX__KEY_INT, "67108864", NULL,
     "Largest value the tcp:// store server accepts; a client sending a larger one is dropped and logged."},
    {"core", "store_max_clients", PLX__KEY_INT, "1024", NULL,
     "Most connections the tcp:// store server holds at once (authenticated or not); more are refused and "
     "logged."},
    {"core", "store_max_pending", PLX__KEY_INT, "1024", NULL,
     "Most operations one tcp:// store client may have pending: the keys of its WAIT plus the requests it "
     "queued behind it; more drops the client with a log line."},
    {"core", "fingerprint", PLX__KEY_BOOL, "true", NULL,
     "Check in-band that every rank calls the same collective (kind, dtype, op, count, root) where the core "
     "owns the wire (its generic algorithms: tcp, sim without native collectives). A mismatch fails the "
     "operation with PLX_ERR_MISMATCH naming both calls. Set it alike on every rank."},
    {"core", "fingerprint_native", PLX__KEY_ENUM, "timeout", "timeout|every|off",
     "Native collectives of backends the core does not own (mpi, nccl, ucc): timeout compares the ranks' calls "
     "through the store when a wait fails; every allgathers the fingerprints before each operation (one small "
     "extra exchange, for debugging); off never compares."},
    {"core", "ledger_entries", PLX__KEY_INT, "64", NULL,
     "Operations each communicator keeps in its memory-mapped ledger (read by plexus-top); 0: no ledger file."},
    {"core", "ledger_dir", PLX__KEY_STRING, "", NULL,
     "Folder of the ledger files: empty for $XDG_RUNTIME_DIR/plexus, else /tmp/plexus-$UID (created 0700)."},
    {"core", "diag_publish_ms", PLX__KEY_INT, "1000", NULL,
     "A rank publishes its last completed operation to the store at most this often (and from any wait "
     "longer than 500 ms), so a timeout can say where every rank is."},
    {"*", "library", PLX__KEY_STRING, NULL, NULL,
     "Backend sections (drop-ins): the plugin's .so, relative to the drop-in's folder or absolute."},
    {"*", "priority", PLX__KEY_INT, "50", NULL,
     "Backend sections: rank for backend = auto; the highest usable wins."},
    {"*", "enabled", PLX__KEY_BOOL, "true", NULL, "Backend sections: false disables the backend."},
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
