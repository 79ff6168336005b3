/* ledger_format.h - the layout of a ledger file, shared by the core
 * (ledger.c, the writer) and plexus-top (a reader in another process).
 *
 * One file per communicator and process under the runtime folder
 * ($XDG_RUNTIME_DIR/plexus, else /tmp/plexus-$UID; [core] ledger_dir), mode
 * 0600 in a 0700 folder, removed by plx_comm_destroy. The entry of
 * operation seq is entries[seq % nentries], so the file never grows. Each
 * entry has one writer at a time and a seqlock: the writer makes `lock` odd,
 * writes, makes it even; a reader retries while it is odd or changed.
 * Times are CLOCK_MONOTONIC ns (one clock for every process of a host).
 * Stability: internal, versioned by `version`. */
#ifndef PLX_LEDGER_FORMAT_H
#define PLX_LEDGER_FORMAT_H

#include <stdint.h>

#define PLX_LEDGER_MAGIC "PLXLEDG1"
#define PLX_LEDGER_VERSION 1u

struct plx_ledger_entry {
    uint32_t lock;  /* seqlock: odd while being written */
    uint32_t state; /* enum plx__op_state: 1 posted, 2 running, 3 done, 4 failed */
    uint64_t seq;
    int32_t coll, dtype;
    uint64_t count, bytes;
    uint64_t start_ns, end_ns; /* posted / finished */
};

struct plx__ledger_file {
    char magic[8];
    uint32_t version, nentries;
    int32_t rank, size, pid, pad;
    char job[128];
    char comm[128];
    char backend[32];
    uint64_t created_ns;
    uint64_t posted1; /* newest posted seq + 1 */
    uint64_t done1;   /* newest completed seq + 1 */
    uint64_t heartbeat_ns; /* last time this process touched the ledger */
    struct plx_ledger_entry entries[];
};

#endif
