/* plexus-info - which backends exist, which work on this machine and why
 * not, their capabilities and keys; the effective configuration with the
 * origin of every value; whether rendezvous is authenticated. Exit status:
 * 0, or with --backend NAME, 0 only if that backend is usable. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "auth.h"
#include "estimates.h"
#include "tuner.h"
#include "plexus/backend.h"
#include "plexus/info.h"
#include "plexus/plugin.h"

static void json_str(const char *s)
{
    putchar('"');
    for (; s && *s; s++) {
        if (*s == '"' || *s == '\\')
            printf("\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            printf("\\u%04x", *s);
        else
            putchar(*s);
    }
    putchar('"');
}

static const char *const flag_names[] = {"async", "abort", "split", "thread-safe", "in-place",
                                         "multi-node", "any-source", "in-process", "p2p",
                                         "p2p-head", "shrink", "timing-only", "native-shrink", "own-bootstrap", "shrink-agrees"};

/* Names of the bits set in mask, from name(i). */
static void print_mask(uint32_t mask, int n, const char *(*name)(int), int json)
{
    int first = 1;
    for (int i = 0; i < n; i++)
        if (mask & (1u << i)) {
            if (json) {
                printf("%s", first ? "" : ", ");
                json_str(name(i));
            } else {
                printf("%s%s", first ? "" : " ", name(i));
            }
            first = 0;
        }
    if (first && !json)
        printf("-");
}

static const char *flag_name(int i)
{
    return flag_names[i];
}

static const char *mem_name(int i)
{
    return i == PLX_MEM_HOST ? "host" : i == PLX_MEM_CUDA ? "cuda" : "auto";
}

static void show_text(size_t i, const struct plx_backend_info *b)
{
    printf("%s\n", b->name);
    printf("  state:        %s%s%s\n", plx_backend_state_name(b->state), b->reason[0] ? ": " : "", b->reason);
    if (b->abi_major)
        printf("  ABI:          %u.%u (plexus %u.%u)\n", b->abi_major, b->abi_minor, PLX_ABI_MAJOR, PLX_ABI_MINOR);
    if (b->version[0])
        printf("  version:      %s\n", b->version);
    if (b->description[0])
        printf("  description:  %s\n", b->description);
    printf("  library:      %s\n", b->library);
    printf("  drop-in:      %s\n", b->dropin);
    printf("  priority:     %d\n", b->priority);
    if (b->abi_major) {
        printf("  flags:        ");
        print_mask(b->cap_flags, (int)(sizeof flag_names / sizeof *flag_names), flag_name, 0);
        printf("\n  collectives:  ");
        print_mask(b->collectives, PLX_COLL_SEND, plx_coll_name, 0);
        printf("\n  dtypes:       ");
        print_mask(b->dtypes, PLX_DTYPE_COUNT, plx_dtype_name, 0);
        printf("\n  ops:          ");
        print_mask(b->redops, PLX_REDOP_COUNT, plx_redop_name, 0);
        printf("\n  memory:       ");
        print_mask(b->mem_kinds, 3, mem_name, 0);
        printf("\n  prepared:     %s\n", b->prepared ? "in the backend (plx_coll_prepare)" : "by the core (each run a plain call)");
    }
    for (size_t j = 0; j < b->n_params; j++) {
        const char *k, *d, *h;
        if (plx_backend_param(i, j, &k, &d, &h) == 0)
            printf("  %s %-20s = %-8s %s\n", j ? "      " : "keys: ", k, d, h);
    }
}

static void show_json(size_t i, const struct plx_backend_info *b)
{
    printf("    {\"name\": ");
    json_str(b->name);
    printf(", \"state\": ");
    json_str(plx_backend_state_name(b->state));
    printf(", \"usable\": %s, \"reason\": ", b->state == PLX_STATE_USABLE ? "true" : "false");
    json_str(b->reason);
    printf(", \"abi\": \"%u.%u\", \"version\": ", b->abi_major, b->abi_minor);
    json_str(b->version);
    printf(", \"library\": ");
    json_str(b->library);
    printf(", \"dropin\": ");
    json_str(b->dropin);
    printf(", \"priority\": %d, \"collectives\": [", b->priority);
    print_mask(b->collectives, PLX_COLL_SEND, plx_coll_name, 1);
    printf("], \"dtypes\": [");
    print_mask(b->dtypes, PLX_DTYPE_COUNT, plx_dtype_name, 1);
    printf("], \"ops\": [");
    print_mask(b->redops, PLX_REDOP_COUNT, plx_redop_name, 1);
    printf("], \"flags\": [");
    print_mask(b->cap_flags, (int)(sizeof flag_names / sizeof *flag_names), flag_name, 1);
    printf("], \"memory\": [");
    print_mask(b->mem_kinds, 3, mem_name, 1);
    printf("], \"prepared\": %s, \"keys\": {", b->prepared ? "true" : "false");
    for (size_t j = 0; j < b->n_params; j++) {
        const char *k, *d, *h;
        if (plx_backend_param(i, j, &k, &d, &h) == 0) {
            printf("%s", j ? ", " : "");
            json_str(k);
            printf(": ");
            json_str(d);
        }
    }
    printf("}}");
}

static int show_config(int json)
{
    size_t n = plx_config_count();
    if (json)
        printf("{\"config\": [\n");
    for (size_t i = 0; i < n; i++) {
        struct plx_config_entry e = {.struct_size = sizeof e};
        if (plx_config_entry(i, &e))
            continue;
        if (json) {
            printf("  {\"section\": ");
            json_str(e.section);
            printf(", \"key\": ");
            json_str(e.key);
            printf(", \"value\": ");
            json_str(e.value ? e.value : "");
            printf(", \"origin\": ");
            json_str(e.origin ? e.origin : "");
            printf(", \"type\": ");
            json_str(e.type);
            printf("}%s\n", i + 1 < n ? "," : "");
        } else {
            printf("%s.%s = %s    # %s (%s)\n", e.section, e.key, e.value ? e.value : "", e.origin ? e.origin : "",
                   e.type);
        }
    }
    if (json)
        printf("]}\n");
    return 0;
}

/* The effective value of section.key, or NULL; where it was set in *origin. */
static const char *config_value_from(const char *section, const char *key, const char **origin)
{
    size_t n = plx_config_count();
    for (size_t i = 0; i < n; i++) {
        struct plx_config_entry e = {.struct_size = sizeof e};
        if (plx_config_entry(i, &e) == 0 && !strcasecmp(e.section, section) && !strcasecmp(e.key, key)) {
            *origin = e.origin;
            return e.value;
        }
    }
    return NULL;
}

static const char *config_value(const char *section, const char *key)
{
    const char *origin;
    return config_value_from(section, key, &origin);
}

/* How the generic allreduce picks its algorithm: forced, the built-in
 * rule, or the [core] tuner table (read as plx_comm_init reads it). */
static void show_tuner_text(void)
{
    const char *algo_from = "", *tab_from = "";
    const char *algo = config_value_from("core", "allreduce_algo", &algo_from);
    const char *tab = config_value_from("core", "tuner", &tab_from);
    if (algo && strcmp(algo, "auto")) {
        printf("allreduce algorithm: %s (core.allreduce_algo, %s)\n", algo, algo_from);
        return;
    }
    if (!tab || !*tab) {
        printf("allreduce tuner: built-in (recdbl up to core.small_bytes = %s, then rabenseifner at a power of two "
               "above 2 ranks, else ring)\n", config_value("core", "small_bytes"));
        return;
    }
    static struct plx__tuner t;
    char err[600];
    if (plx__tuner_load(&t, tab, err, sizeof err) != 0) {
        printf("allreduce tuner: BROKEN (core.tuner, %s; plx_comm_init fails): %s\n", tab_from, err);
        return;
    }
    printf("allreduce tuner: %s (core.tuner, %s):", tab, tab_from);
    for (int i = 0; i < t.n; i++) {
        if (i == 0 || t.rows[i].ranks != t.rows[i - 1].ranks)
            printf("%s from %d ranks:", i ? ";" : "", t.rows[i].ranks);
        printf(" %s from %zu B", plx__tuner_algo_name(t.rows[i].algo), t.rows[i].from_bytes);
    }
    printf("\n");
}

/* The [core] estimates table behind plx_comm_estimate (read as it reads
 * it): which backend, and per collective the world sizes and bytes its
 * rows cover. */
static void show_estimates_text(void)
{
    const char *from = "", *tab = config_value_from("core", "estimates", &from);
    if (!tab || !*tab) {
        printf("estimates: none (core.estimates unset: plx_comm_estimate answers PLX_ERR_UNSUPPORTED)\n");
        return;
    }
    struct plx__estimates t;
    char err[600];
    if (plx__estimates_load(&t, tab, err, sizeof err) != 0) {
        printf("estimates: BROKEN (core.estimates, %s; plx_comm_estimate fails): %s\n", from, err);
        plx__estimates_finish(&t);
        return;
    }
    printf("estimates: %s (core.estimates, %s): backend %s", tab, from, t.backend[0] ? t.backend : "any");
    for (int i = 0; i < t.n; i++) {
        const struct plx__estimate_row *r = &t.rows[i], *prev = i ? r - 1 : NULL;
        if (prev && prev->coll == r->coll && prev->ranks == r->ranks)
            continue;
        int last = i;
        while (last + 1 < t.n && t.rows[last + 1].coll == r->coll && t.rows[last + 1].ranks == r->ranks)
            last++;
        if (prev && prev->coll == r->coll)
            printf(", %d ranks", r->ranks);
        else
            printf("; %s at %d ranks", plx__estimates_coll_name(r->coll), r->ranks);
        if (t.rows[last].bytes == r->bytes)
            printf(" (%zu B)", r->bytes);
        else
            printf(" (%zu..%zu B)", r->bytes, t.rows[last].bytes);
    }
    printf("\n");
    plx__estimates_finish(&t);
}

/* Whether the tcp:// store and the tcp transport authenticate their peers,
 * decided by the policy they apply themselves (plx__auth_policy): per side
 * 1 (it proves the job secret), 0 (plain protocol) or -1 (plx_comm_init
 * refuses to start), and why. */
struct auth_side {
    int state;
    char why[200];
};

static void auth_state(struct auth_side *store, struct auth_side *tcp)
{
    const char *secret = getenv(PLX__AUTH_ENV), *use = NULL;
    /* None set, and the job meets through PMIx or PMI: rank 0 makes one and
     * shares it in the job's key-value space (launcher_store.c). */
    char boot[1024] = "";
    int shared = (!secret || !*secret) && plx_bootstrap_describe(NULL, boot, sizeof boot) == 0 &&
                 (strstr(boot, "rendezvous: PMIx at ") || strstr(boot, "rendezvous: PMI at "));
    if (shared)
        secret = "a secret rank 0 makes: 64 hex characters";
    int rc = plx__auth_policy("core", config_value("core", "auth"), secret, &use, store->why, sizeof store->why);
    store->state = rc ? -1 : use != NULL;
    rc = plx__auth_policy("tcp", config_value("tcp", "auth"), secret, &use, tcp->why, sizeof tcp->why);
    tcp->state = rc ? -1 : use != NULL;
    const char *how = "it proves the job secret rank 0 makes and shares through the process manager's key-value "
                      "space, which only the job reads (no PLEXUS_JOB_SECRET set)";
    if (shared && store->state > 0)
        snprintf(store->why, sizeof store->why, "%s", how);
    if (shared && tcp->state > 0)
        snprintf(tcp->why, sizeof tcp->why, "%s", how);
}

static const char *side_state(const struct auth_side *s, const char *plain)
{
    return s->state > 0 ? "authenticated" : s->state < 0 ? "REFUSED (plx_comm_init fails)" : plain;
}

static void show_auth_text(void)
{
    struct auth_side store, tcp;
    auth_state(&store, &tcp);
    if (store.state > 0 && tcp.state > 0) {
        printf("rendezvous: authenticated: tcp:// store and tcp transport connections prove PLEXUS_JOB_SECRET\n"
               "            (HMAC-SHA256 challenge-response, both ways)\n");
        if (strstr(store.why, "rank 0 makes"))
            printf("            %s\n", store.why);
        return;
    }
    if (!store.state && !tcp.state && !strcmp(store.why, tcp.why)) {
        printf("rendezvous: UNAUTHENTICATED (torch-compatible: plain TCPStore and Gloo pair protocol):\n"
               "            %s\n", store.why);
    } else {
        printf("rendezvous: tcp:// store %s: %s\n", side_state(&store, "UNAUTHENTICATED (plain TCPStore)"), store.why);
        printf("            tcp transport %s: %s\n", side_state(&tcp, "UNAUTHENTICATED (plain Gloo pairs)"), tcp.why);
    }
    if (!store.state || !tcp.state)
        printf("            any process that reaches an unauthenticated port can join the job\n");
}

/* The sample plexus.ini: every [core] key at its default, with its help. */
static int sample_config(void)
{
    printf("# plexus.ini - the main configuration of plexus. Every key is shown at its\n"
           "# default, commented out. Later layers win: this file (in ${sysconfdir}/plexus),\n"
           "# $XDG_CONFIG_HOME/plexus/plexus.ini, $PLEXUS_CONFIG, PLEXUS_<SECTION>_<KEY>\n"
           "# variables, then options given to plx_comm_init. Backends are declared by\n"
           "# drop-ins in backends.d/ (one per backend package). Generated by\n"
           "# `plexus-info --sample-config`.\n\n[core]\n");
    size_t n = plx_config_count();
    for (size_t i = 0; i < n; i++) {
        struct plx_config_entry e = {.struct_size = sizeof e};
        if (plx_config_entry(i, &e) || strcmp(e.section, "core") || strcmp(e.origin, "default"))
            continue;
        printf("\n");
        /* Wrap the help at about 76 columns. */
        const char *h = e.help;
        while (*h) {
            int len = (int)strlen(h), cut = len;
            if (len > 74) {
                cut = 74;
                while (cut > 0 && h[cut] != ' ')
                    cut--;
                if (cut == 0)
                    cut = 74;
            }
            printf("# %.*s\n", cut, h);
            h += cut;
            while (*h == ' ')
                h++;
        }
        printf("# Type: %s.\n;%s = %s\n", e.type, e.key, e.value);
    }
    return 0;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: plexus-info [--backend NAME] [--config] [--json] [--sample-config]\n"
               "  (no option)      every backend: state and reason, ABI, version, library,\n"
               "                   drop-in, capabilities, configuration keys\n"
               "  --backend NAME   one backend; exit status 0 only if it is usable here\n"
               "  --config         the effective configuration, each value with its origin\n"
               "  --json           machine-readable output\n"
               "  --sample-config  print a plexus.ini with every core key at its default\n");
}

/* The json output's closing part: who authenticates, and how the ranks meet. */
static void json_trailer(void)
{
    struct auth_side store, tcp;
    auth_state(&store, &tcp);
    printf("], \"auth\": {\"store\": %s, \"tcp\": %s, \"reason\": ", store.state > 0 ? "true" : "false",
           tcp.state > 0 ? "true" : "false");
    json_str(store.state > 0 && tcp.state > 0 ? "PLEXUS_JOB_SECRET (HMAC-SHA256 challenge-response, both ways)"
             : store.state <= 0 ? store.why : tcp.why);
    char boot[1024];
    plx_bootstrap_describe(NULL, boot, sizeof boot);
    printf("}, \"bootstrap\": ");
    json_str(boot);
    printf("}\n");
}

/* The text output's closing part: the backend chosen and why, auth,
 * bootstrap, tuning, the copy routine. */
static void text_trailer(void)
{
    char chose[400] = "";
    int sel = plx_backend_select_why(NULL, chose, sizeof chose);
    struct plx_backend_info b = {.struct_size = sizeof b};
    if (sel >= 0 && plx_backend_info((size_t)sel, &b) == 0)
        printf("\nselected by the configuration: %s (%s)\n", b.name, chose);
    else
        printf("\nselected by the configuration: none (%s)\n", plx_last_error());
    show_auth_text();
    char boot[1024];
    plx_bootstrap_describe(NULL, boot, sizeof boot);
    printf("bootstrap: %s\n", boot);
    show_tuner_text();
    show_estimates_text();
    char why[200];
    plx_plugin_copy_measure(why, sizeof why);
    printf("bulk copies between misaligned buffers (plugins, measured per process): %s\n", why);
}

/* Every backend (or only the one named): exit status 0, or with only, 0
 * if it is usable here. */
static int show_backends(const char *only, int json)
{
    size_t n = plx_backend_count();
    size_t from = 0, to = n;
    if (only) {
        int i = plx_backend_find(only);
        if (i < 0) {
            fprintf(stderr, "plexus-info: %s\n", plx_last_error());
            return 1;
        }
        from = (size_t)i;
        to = from + 1;
    }
    if (json)
        printf("{\"plexus\": \"%s\", \"abi\": \"%d.%d\", \"backends\": [\n", plx_version(), PLX_ABI_MAJOR,
               PLX_ABI_MINOR);
    else if (!only)
        printf("plexus %s, plugin ABI %d.%d, %zu backend(s)\n\n", plx_version(), PLX_ABI_MAJOR, PLX_ABI_MINOR, n);
    int usable = 0;
    for (size_t i = from; i < to; i++) {
        struct plx_backend_info b = {.struct_size = sizeof b};
        if (plx_backend_info(i, &b))
            continue;
        usable = b.state == PLX_STATE_USABLE;
        if (json) {
            show_json(i, &b);
            printf("%s\n", i + 1 < to ? "," : "");
        } else {
            show_text(i, &b);
            if (i + 1 < to)
                printf("\n");
        }
    }
    if (json)
        json_trailer();
    if (!only && !json)
        text_trailer();
    return only ? !usable : 0;
}

int main(int argc, char **argv)
{
    static const struct option longs[] = {{"backend", 1, 0, 'b'}, {"config", 0, 0, 'c'},
                                          {"json", 0, 0, 'j'},    {"sample-config", 0, 0, 's'},
                                          {"help", 0, 0, 'h'},    {0, 0, 0, 0}};
    const char *only = NULL;
    int config = 0, json = 0, sample = 0, ch;
    while ((ch = getopt_long(argc, argv, "b:cjh", longs, NULL)) != -1) {
        switch (ch) {
        case 'b': only = optarg; break;
        case 'c': config = 1; break;
        case 'j': json = 1; break;
        case 's': sample = 1; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    int rc = plx_backends_discover(NULL);
    if (rc) {
        fprintf(stderr, "plexus-info: %s: %s\n", plx_err_name(rc), plx_last_error());
        return 2;
    }
    if (sample)
        return sample_config();
    if (config)
        return show_config(json);

    return show_backends(only, json);
}
