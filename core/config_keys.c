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
    {"core", "allreduce_algo", PLX__KEY_ENUM, "auto", "auto|ring|recdbl|tree",
     "Generic allreduce algorithm: ring for bandwidth, recdbl (recursive doubling) for latency, tree, or "
     "auto (recdbl up to small_bytes, ring above)."},
    {"core", "small_bytes", PLX__KEY_INT, "65536", NULL,
     "Messages up to this many bytes use the latency algorithm when allreduce_algo = auto."},
    {"core", "segment_bytes", PLX__KEY_INT, "1048576", NULL,
     "Pipeline segment of the generic ring and tree algorithms, in bytes."},
    {"core", "cuda_staging", PLX__KEY_BOOL, "false", NULL,
     "Stage CUDA buffers through host memory for backends that take host memory only."},
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
