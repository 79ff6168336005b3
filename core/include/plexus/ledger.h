/* ledger.h - the on-disk format of a communicator's ledger: the recent
 * operations of one rank, which another process (plexus-top, a job's own
 * monitor) reads while the job runs, without asking it anything.
 *
 * Stability: stable file format, versioned. A reader checks magic and
 * version and refuses any other; a change of layout bumps
 * PLX_LEDGER_VERSION (and the magic's last character).
 *
 * Where: one file per communicator and process in the ledger folder,
 * [core] ledger_dir if set, else $XDG_RUNTIME_DIR/plexus, else
 * /tmp/plexus-$UID (a folder of mode 0700 the user owns; a folder owned by
 * someone else is never written in). The file is named
 * "PID.COMM.SERIAL.rRANK.ledger" (COMM: the communicator's name, '/' and ' '
 * as '_'; SERIAL: a per-process counter), mode 0600. plx_comm_destroy
 * removes it; a file whose PID is gone is stale (the process was killed) and
 * the next communicator created in that folder removes it.
 *
 * Layout: struct plx_ledger_file, then nentries struct plx_ledger_entry. The
 * file never grows: operation seq lives in entries[seq % nentries]. The
 * writer fills the header and writes magic last, so a reader that sees the
 * magic sees a whole header. Times are CLOCK_MONOTONIC nanoseconds (one
 * clock for every process of a host).
 *
 * Reading an entry (a seqlock; each entry has one writer at a time): load
 * lock (acquire); if odd, it is being written: retry; copy the entry; fence
 * (acquire); load lock again: if it changed, retry. posted1, done1 and
 * heartbeat_ns are single 64-bit words written atomically. */
#ifndef PLEXUS_LEDGER_H
#define PLEXUS_LEDGER_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PLX_LEDGER_MAGIC "PLXLEDG1" /* 8 bytes, no NUL */
#define PLX_LEDGER_VERSION 1u
#define PLX_LEDGER_SUFFIX ".ledger"

/* plx_ledger_entry.state */
enum plx_ledger_state {
    PLX_LEDGER_EMPTY = 0,   /* no operation here yet */
    PLX_LEDGER_POSTED = 1,  /* submitted, not started (queued behind another) */
    PLX_LEDGER_RUNNING = 2, /* started */
    PLX_LEDGER_DONE = 3,    /* completed */
    PLX_LEDGER_FAILED = 4,  /* completed with an error */
};

/* One operation. 56 bytes, no padding. */
struct plx_ledger_entry {
    uint32_t lock;             /* seqlock: odd while being written */
    uint32_t state;            /* enum plx_ledger_state */
    uint64_t seq;              /* the communicator's collective sequence number */
    int32_t coll, dtype;       /* enum plx_coll, enum plx_dtype (plexus.h); dtype -1 for a barrier */
    uint64_t count, bytes;     /* elements as passed; bytes this rank contributes */
    uint64_t start_ns, end_ns; /* posted; finished (0 until then) */
};

/* The header. 352 bytes, then the entries. */
struct plx_ledger_file {
    char magic[8];           /* PLX_LEDGER_MAGIC, written last */
    uint32_t version;        /* PLX_LEDGER_VERSION */
    uint32_t nentries;       /* entries that follow, at least 1 */
    int32_t rank, size, pid; /* this rank of the communicator; its process */
    int32_t pad;
    char job[128];           /* the job's store url (or where rank and size came from), NUL-terminated */
    char comm[128];          /* the communicator's name, NUL-terminated */
    char backend[32];        /* the backend's name, NUL-terminated */
    uint64_t created_ns;
    uint64_t posted1;        /* newest posted seq + 1 (0: none yet) */
    uint64_t done1;          /* newest completed seq + 1 (0: none yet) */
    uint64_t heartbeat_ns;   /* the last time this process touched the ledger */
    struct plx_ledger_entry entries[];
};

#ifdef __cplusplus
}
#endif
#endif
