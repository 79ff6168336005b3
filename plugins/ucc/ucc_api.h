/* ucc_api.h - our declarations of the UCC 1.x subset the plugin uses
 * (layouts of UCC v1.3.0's ucc.h, whose structs are append-only and gated
 * by mask bits; SONAME libucc.so.1 since v1.0). Checked against a real
 * ucc.h by tests/plugins/ucc when one is found. Stability: internal. */
#ifndef PLX_UCC_API_H
#define PLX_UCC_API_H

#include <stddef.h>
#include <stdint.h>

typedef int ucc_status_t;
enum { UCC_OK = 0, UCC_INPROGRESS = 1, UCC_OPERATION_INITIALIZED = 2 };

typedef struct ucc_lib_info *ucc_lib_h;
typedef struct ucc_lib_config *ucc_lib_config_h;
typedef struct ucc_context *ucc_context_h;
typedef struct ucc_context_config *ucc_context_config_h;
typedef struct ucc_team *ucc_team_h;
typedef struct ucc_coll_req {
    ucc_status_t status;
} ucc_coll_req_t, *ucc_coll_req_h;

typedef uint64_t ucc_datatype_t;
#define UCC_PREDEFINED_DT(id) ((uint64_t)(id) << 3)
enum {
    UCC_THREAD_SINGLE = 0, UCC_THREAD_MULTIPLE = 2,
    UCC_NO_SYNC_COLLECTIVES = 0,
    UCC_CONTEXT_EXCLUSIVE = 0,
    UCC_MEMORY_TYPE_HOST = 0, UCC_MEMORY_TYPE_CUDA = 1,
    UCC_EP_MAP_FULL = 1,
    UCC_ERR_TYPE_LOCAL = 0,
};
enum {
    UCC_OP_SUM = 0, UCC_OP_PROD = 1, UCC_OP_MAX = 2, UCC_OP_MIN = 3, UCC_OP_BAND = 7, UCC_OP_BOR = 8, UCC_OP_BXOR = 9,
    UCC_OP_AVG = 12,
};
#define UCC_BIT(i) (1ul << (i))
enum {
    UCC_COLL_TYPE_ALLGATHER = 1 << 0, UCC_COLL_TYPE_ALLREDUCE = 1 << 2, UCC_COLL_TYPE_ALLTOALL = 1 << 3,
    UCC_COLL_TYPE_BARRIER = 1 << 5, UCC_COLL_TYPE_BCAST = 1 << 6, UCC_COLL_TYPE_GATHER = 1 << 9,
    UCC_COLL_TYPE_REDUCE = 1 << 11, UCC_COLL_TYPE_REDUCE_SCATTER = 1 << 12, UCC_COLL_TYPE_SCATTER = 1 << 14,
};
#define UCC_LIB_PARAM_FIELD_THREAD_MODE UCC_BIT(0)
#define UCC_CONTEXT_PARAM_FIELD_OOB UCC_BIT(2)
#define UCC_TEAM_PARAM_FIELD_EP UCC_BIT(2)
#define UCC_TEAM_PARAM_FIELD_EP_RANGE UCC_BIT(4)
#define UCC_TEAM_PARAM_FIELD_OOB UCC_BIT(7)
#define UCC_COLL_ARGS_FIELD_FLAGS UCC_BIT(0)
#define UCC_COLL_ARGS_FLAG_IN_PLACE UCC_BIT(0)
#define UCC_COLL_ARGS_FLAG_PERSISTENT UCC_BIT(1)
#define UCC_COLL_ARGS_FLAG_COUNT_64BIT UCC_BIT(2)
enum { UCC_COLLECTIVE_EP_RANGE_CONTIG = 0 };

typedef struct {
    uint64_t mask;
    int thread_mode;
    uint64_t coll_types;
    uint64_t reduction_types;
    int sync_type;
} ucc_lib_params_t;

typedef struct {
    ucc_status_t (*allgather)(void *src, void *dst, size_t size, void *info, void **req);
    ucc_status_t (*req_test)(void *req);
    ucc_status_t (*req_free)(void *req);
    void *coll_info;
    uint32_t n_oob_eps;
    uint32_t oob_ep;
} ucc_oob_coll_t;

typedef struct {
    void *segments;
    uint64_t n_segments;
} ucc_mem_map_params_t;

typedef struct {
    uint64_t mask;
    int type;
    int sync_type;
    ucc_oob_coll_t oob;
    uint64_t ctx_id;
    ucc_mem_map_params_t mem_params;
} ucc_context_params_t;

typedef struct {
    int (*conn_info_lookup)(void *, uint64_t, void **, void *);
    int (*conn_info_release)(void *);
    void *conn_ctx;
    ucc_status_t (*req_test)(void *);
    ucc_status_t (*req_free)(void *);
} ucc_team_p2p_conn_t;

typedef struct {
    int type;
    uint64_t ep_num;
    union {
        struct { uint64_t start; int64_t stride; } strided;
        struct { void *map; size_t elem_size; } array;
        struct { uint64_t (*cb)(uint64_t, void *); void *cb_ctx; } cb;
    };
} ucc_ep_map_t;

typedef struct {
    uint64_t mask;
    uint64_t flags;
    int ordering;
    uint64_t outstanding_colls;
    uint64_t ep;
    uint64_t *ep_list;
    int ep_range;
    uint64_t team_size;
    int sync_type;
    ucc_oob_coll_t oob;
    ucc_team_p2p_conn_t p2p_conn;
    ucc_mem_map_params_t mem_params;
    ucc_ep_map_t ep_map;
    uint64_t id;
} ucc_team_params_t;

typedef struct {
    void *buffer;
    uint64_t count;
    ucc_datatype_t datatype;
    int mem_type;
} ucc_coll_buffer_info_t;

typedef struct {
    void *buffer;
    uint64_t *counts;
    uint64_t *displacements;
    ucc_datatype_t datatype;
    int mem_type;
} ucc_coll_buffer_info_v_t;

typedef struct {
    uint64_t mask;
    int coll_type;
    union {
        ucc_coll_buffer_info_t info;
        ucc_coll_buffer_info_v_t info_v;
    } src;
    union {
        ucc_coll_buffer_info_t info;
        ucc_coll_buffer_info_v_t info_v;
    } dst;
    int op;
    uint64_t flags;
    uint64_t root;
    int error_type;
    uint16_t tag;
    void *global_work_buffer;
    struct {
        void (*cb)(void *data, ucc_status_t status);
        void *data;
    } cb;
    double timeout;
    struct {
        uint64_t start;
        int64_t stride;
        uint64_t size;
    } active_set;
} ucc_coll_args_t;

/* UCC API version we ask for: 1.0, accepted by every 1.x library. */
#define PLX_UCC_API_MAJOR 1u
#define PLX_UCC_API_MINOR 0u

#define PLX_UCC_FUNCS(X)                                                                                 \
    X(ucc_status_t, ucc_lib_config_read, (const char *prefix, const char *file, ucc_lib_config_h *cfg))  \
    X(void, ucc_lib_config_release, (ucc_lib_config_h cfg))                                              \
    X(ucc_status_t, ucc_init_version, (unsigned major, unsigned minor, const ucc_lib_params_t *p,        \
                                       const ucc_lib_config_h cfg, ucc_lib_h *lib))                      \
    X(ucc_status_t, ucc_finalize, (ucc_lib_h lib))                                                       \
    X(ucc_status_t, ucc_context_config_read, (ucc_lib_h lib, const char *file, ucc_context_config_h *cfg)) \
    X(void, ucc_context_config_release, (ucc_context_config_h cfg))                                      \
    X(ucc_status_t, ucc_context_create, (ucc_lib_h lib, const ucc_context_params_t *p,                   \
                                         const ucc_context_config_h cfg, ucc_context_h *ctx))            \
    X(ucc_status_t, ucc_context_progress, (ucc_context_h ctx))                                           \
    X(ucc_status_t, ucc_context_destroy, (ucc_context_h ctx))                                            \
    X(ucc_status_t, ucc_team_create_post, (ucc_context_h * ctxs, uint32_t n, const ucc_team_params_t *p, \
                                           ucc_team_h *team))                                            \
    X(ucc_status_t, ucc_team_create_test, (ucc_team_h team))                                             \
    X(ucc_status_t, ucc_team_destroy, (ucc_team_h team))                                                 \
    X(ucc_status_t, ucc_collective_init, (ucc_coll_args_t * a, ucc_coll_req_h *req, ucc_team_h team))    \
    X(ucc_status_t, ucc_collective_post, (ucc_coll_req_h req))                                           \
    X(ucc_status_t, ucc_collective_finalize, (ucc_coll_req_h req))                                       \
    X(const char *, ucc_get_version_string, (void))                                                      \
    X(const char *, ucc_status_string, (ucc_status_t s))

#endif
