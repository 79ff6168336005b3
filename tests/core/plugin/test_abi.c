/* Pins the layout of every struct that crosses the plugin boundary (and the
 * caller-filled option structs of the API) on x86_64 / LP64. A failure here
 * means an ABI break: append fields and bump PLX_ABI_MINOR instead. */
#include <stddef.h>
#include <stdio.h>

#include "plexus/backend.h"
#include "plexus/info.h"

static int failures;
#define PIN(expr, value)                                                                  \
    do {                                                                                  \
        if ((size_t)(expr) != (size_t)(value)) {                                          \
            fprintf(stderr, "%s is %zu, pinned at %zu\n", #expr, (size_t)(expr), (size_t)(value)); \
            failures++;                                                                   \
        }                                                                                 \
    } while (0)

int main(void)
{
    PIN(PLX_ABI_MAJOR, 1);
    PIN(PLX_ABI_MINOR, 14);

    PIN(sizeof(struct plx_caps), 32);
    PIN(offsetof(struct plx_caps, flags), 4);
    PIN(offsetof(struct plx_caps, collectives), 8);
    PIN(offsetof(struct plx_caps, mem_kinds), 20);
    PIN(offsetof(struct plx_caps, max_message_bytes), 24);

    PIN(sizeof(struct plx_probe_result), 264);
    PIN(offsetof(struct plx_probe_result, reason), 8);

    PIN(sizeof(struct plx_param), 24);

    PIN(sizeof(struct plx_host), 136); /* 128 up to ABI 1.10 */
    PIN(offsetof(struct plx_host, ctx), 8);
    PIN(offsetof(struct plx_host, log), 16);
    PIN(offsetof(struct plx_host, error), 24);
    PIN(offsetof(struct plx_host, config_get), 32);
    PIN(offsetof(struct plx_host, clock_ns), 40);
    PIN(offsetof(struct plx_host, reduce), 48);
    PIN(offsetof(struct plx_host, scale_div), 56);
    PIN(offsetof(struct plx_host, store_set), 64);
    PIN(offsetof(struct plx_host, store_wait), 88);
    PIN(offsetof(struct plx_host, free), 96);
    PIN(offsetof(struct plx_host, config_str), 104); /* ABI 1.3 */
    PIN(offsetof(struct plx_host, config_bool), 112);
    PIN(offsetof(struct plx_host, config_int), 120);
    PIN(offsetof(struct plx_host, last_error), 128); /* ABI 1.11 */

    PIN(sizeof(struct plx_comm_args), 80); /* 56 up to ABI 1.4, 64 up to 1.9, 72 up to 1.13 */
    PIN(offsetof(struct plx_comm_args, machine_ranks), 72); /* ABI 1.14 */
    PIN(offsetof(struct plx_comm_args, create_timeout_ms), 64); /* ABI 1.10 */
    PIN(offsetof(struct plx_comm_args, host), 56); /* ABI 1.5 */
    PIN(offsetof(struct plx_comm_args, config), 48); /* ABI 1.3 */
    PIN(offsetof(struct plx_comm_args, name), 24);
    PIN(offsetof(struct plx_comm_args, store), 32);
    PIN(offsetof(struct plx_comm_args, timeout_ms), 40);

    PIN(sizeof(struct plx_coll_args), 112); /* 80 up to ABI 1.3 */
    PIN(offsetof(struct plx_coll_args, flags), 72);
    PIN(offsetof(struct plx_coll_args, send_counts), 80); /* ABI 1.4 */
    PIN(offsetof(struct plx_coll_args, send_displs), 88);
    PIN(offsetof(struct plx_coll_args, recv_counts), 96);
    PIN(offsetof(struct plx_coll_args, recv_displs), 104);
    PIN(offsetof(struct plx_coll_args, send), 8);
    PIN(offsetof(struct plx_coll_args, count), 24);
    PIN(offsetof(struct plx_coll_args, mem_kind), 44);
    PIN(offsetof(struct plx_coll_args, stream), 48);
    PIN(offsetof(struct plx_coll_args, seq), 64);

    PIN(sizeof(struct plx_p2p_args), 72); /* 56 up to ABI 1.4 */
    PIN(offsetof(struct plx_p2p_args, head), 56); /* ABI 1.5 */
    PIN(offsetof(struct plx_p2p_args, head_bytes), 64);
    PIN(offsetof(struct plx_p2p_args, buf), 8);
    PIN(offsetof(struct plx_p2p_args, tag), 24);
    PIN(offsetof(struct plx_p2p_args, timeout_ms), 48);

    PIN(sizeof(struct plx_backend), 272); /* 176 up to ABI 1.4, 208 up to 1.5, 216 up to 1.6, 224 up to 1.7, 232 up to 1.8, 240 up to 1.10, 248 at 1.11 */
    PIN(offsetof(struct plx_backend, req_size), 176); /* ABI 1.5 */
    PIN(offsetof(struct plx_backend, mem_alloc), 184);
    PIN(offsetof(struct plx_backend, mem_free), 192);
    PIN(offsetof(struct plx_backend, comm_revoke), 200);
    PIN(offsetof(struct plx_backend, reserved_1_6), 208); /* ABI 1.6 */
    PIN(offsetof(struct plx_backend, comm_lost_ranks), 216); /* ABI 1.7 */
    PIN(offsetof(struct plx_backend, comm_shrink), 224); /* ABI 1.8 */
    PIN(offsetof(struct plx_backend, reserved_1_9), 232); /* ABI 1.9 */
    PIN(offsetof(struct plx_backend, extension), 240); /* ABI 1.11 */
    PIN(offsetof(struct plx_backend, coll_prepare), 248); /* ABI 1.12 */
    PIN(offsetof(struct plx_backend, coll_run), 256);
    PIN(offsetof(struct plx_backend, coll_unprepare), 264);
    PIN(sizeof(struct plx_ext_sim), 24);
    PIN(offsetof(struct plx_ext_sim, charge_reduce), 8);
    PIN(offsetof(struct plx_ext_sim, op_footprint), 16);
    PIN(PLX_CAP_NATIVE_SHRINK, 1u << 12);
    PIN(PLX_CAP_OWN_BOOTSTRAP, 1u << 13);
    PIN(PLX_CAP_SHRINK_AGREES, 1u << 14);
    PIN(offsetof(struct plx_backend, name), 8);
    PIN(offsetof(struct plx_backend, params), 32);
    PIN(offsetof(struct plx_backend, probe), 40);
    PIN(offsetof(struct plx_backend, comm_create), 64);
    PIN(offsetof(struct plx_backend, isend), 88);
    PIN(offsetof(struct plx_backend, collective), 104);
    PIN(offsetof(struct plx_backend, req_free), 128);
    PIN(offsetof(struct plx_backend, comm_split), 136); /* ABI 1.1 */
    PIN(offsetof(struct plx_backend, finalize), 144);
    PIN(offsetof(struct plx_backend, comm_losses), 152); /* ABI 1.2 */
    PIN(offsetof(struct plx_backend, keys), 160);        /* ABI 1.3 */
    PIN(offsetof(struct plx_backend, wait_until), 168);

    PIN(sizeof(struct plx_key), 40);
    PIN(offsetof(struct plx_key, type), 8);
    PIN(offsetof(struct plx_key, default_value), 16);
    PIN(offsetof(struct plx_key, choices), 24);
    PIN(offsetof(struct plx_key, help), 32);

    PIN(sizeof(struct plx_comm_options), 80);
    PIN(offsetof(struct plx_comm_options, init), 32);
    PIN(offsetof(struct plx_comm_options, overrides), 64);
    PIN(offsetof(struct plx_comm_options, store), 72); /* appended for issue 20 */
    PIN(sizeof(struct plx_store_callbacks), 64);
    PIN(offsetof(struct plx_store_callbacks, wait), 40);
    PIN(offsetof(struct plx_store_callbacks, del), 56);
    PIN(sizeof(struct plx_op_options), 24);

    PIN(sizeof(struct plx_backend_info), 112); /* 104 up to ABI 1.11 */
    PIN(offsetof(struct plx_backend_info, prepared), 104); /* ABI 1.12 */
    PIN(offsetof(struct plx_backend_info, n_params), 100);
    PIN(sizeof(struct plx_config_entry), 56);
    PIN(offsetof(struct plx_config_entry, type), 48); /* appended with ABI 1.3 */
    if (failures)
        fprintf(stderr, "%d layout pin(s) failed\n", failures);
    return failures != 0;
}
