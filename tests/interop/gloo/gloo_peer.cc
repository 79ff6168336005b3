// gloo_peer.cc - one rank of a 2-rank job that mixes a libgloo rank (the
// Debian release's: 2022, 2023-12 or 2025-09) with a plexus tcp rank at the
// transport level. Both sides rendezvous through gloo's FileStore layout
// (the plexus side drives the tcp plugin directly, with a host whose store
// is gloo::rendezvous::FileStore) and run the same script of unbound-buffer
// sends and receives:
//   0 B, 1 B, 64 MiB both ways at once, five messages in flight on one slot,
//   receive-from-any both ways.
// Usage: gloo_peer gloo|plexus DIR RANK [PLUGIN.so]
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>

#include "gloo_compat.h"

extern "C" {
#include "plexus/backend.h"
}
#define CHECK_DETAIL() "-" /* not linked to libplexus: the plugin is dlopened */
#include "check.h"

static int failures;
// ---- two implementations of one tiny p2p interface -----------------------

struct Peer {
    virtual ~Peer() {}
    virtual void *send(int to, uint64_t slot, void *buf, size_t n) = 0;
    virtual void *recv(int from, uint64_t slot, void *buf, size_t n) = 0; // from -1: any
    virtual bool wait(void *h) = 0;                                        // true on success
};

struct GlooPeer : Peer {
    std::shared_ptr<gloo::rendezvous::Context> ctx;
    struct H {
        std::unique_ptr<gloo::transport::UnboundBuffer> b;
        bool is_send;
    };
    GlooPeer(const std::string &dir, int rank)
    {
        gloo::transport::tcp::attr attr;
        attr.hostname = "127.0.0.1";
        auto dev = gloo::transport::tcp::CreateDevice(attr);
        ctx = std::make_shared<gloo::rendezvous::Context>(rank, 2);
        ctx->setTimeout(std::chrono::seconds(30));
        full_mesh(*ctx, std::make_shared<gloo::rendezvous::FileStore>(dir), dev);
    }
    void *send(int to, uint64_t slot, void *buf, size_t n) override
    {
        auto *h = new H{ctx->createUnboundBuffer(buf, n), true};
        h->b->send(to, slot, 0, n);
        return h;
    }
    void *recv(int from, uint64_t slot, void *buf, size_t n) override
    {
        auto *h = new H{ctx->createUnboundBuffer(buf, n), false};
        if (from < 0)
            h->b->recv(std::vector<int>{1 - ctx->rank}, slot, 0, n);
        else
            h->b->recv(from, slot, 0, n);
        return h;
    }
    bool wait(void *p) override
    {
        auto *h = static_cast<H *>(p);
        bool ok;
        try {
            ok = h->is_send ? h->b->waitSend(std::chrono::seconds(30)) : h->b->waitRecv(std::chrono::seconds(30));
        } catch (const std::exception &e) {
            fprintf(stderr, "gloo: %s\n", e.what());
            ok = false;
        }
        delete h;
        return ok;
    }
};

// The plexus side: a host whose store is gloo's FileStore.
static gloo::rendezvous::FileStore *g_store;
static std::string g_dir;
static char g_err[512];

static void h_log(void *, int level, const char *fmt, ...)
{
    if (level > PLX_LOG_WARN)
        return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}
static int h_error(void *, int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_err, sizeof g_err, fmt, ap);
    va_end(ap);
    return status;
}
static const char *h_config(void *, const char *) { return nullptr; }
static uint64_t h_clock()
{
    return (uint64_t)std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}
static int h_set(plx_store *, const char *key, const void *val, size_t len)
{
    const char *v = static_cast<const char *>(val);
    g_store->set(key, std::vector<char>(v, v + len));
    return 0;
}
static int h_get(plx_store *, const char *key, void **val, size_t *len, int64_t timeout_ms)
{
    try {
        g_store->wait({key}, std::chrono::milliseconds(timeout_ms));
        auto v = g_store->get(key);
        *val = malloc(v.size() ? v.size() : 1);
        memcpy(*val, v.data(), v.size());
        *len = v.size();
        return 0;
    } catch (const std::exception &e) {
        return h_error(nullptr, PLX_ERR_TIMEOUT, "store: %s", e.what());
    }
}
// gloo's FileStore has no add (before 2025 none at all): counters live in
// files of their own beside it, changed under a lock on the folder.
static int h_add(plx_store *, const char *key, int64_t delta, int64_t *result)
{
    std::string name;
    for (const char *k = key; *k; k++)
        name += isalnum((unsigned char)*k) ? *k : '_';
    int lock = open((g_dir + "/.plexus-add.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (lock < 0 || flock(lock, LOCK_EX))
        return h_error(nullptr, PLX_ERR_SYSTEM, "store: cannot lock %s: %s", g_dir.c_str(), strerror(errno));
    std::string path = g_dir + "/.plexus-add-" + name;
    long long v = 0;
    if (FILE *f = fopen(path.c_str(), "r")) {
        if (fscanf(f, "%lld", &v) != 1)
            v = 0;
        fclose(f);
    }
    v += delta;
    FILE *f = fopen(path.c_str(), "w");
    int ok = f && fprintf(f, "%lld", v) > 0;
    if (f)
        ok = !fclose(f) && ok;
    close(lock);
    if (!ok)
        return h_error(nullptr, PLX_ERR_SYSTEM, "store: cannot write %s", path.c_str());
    *result = v;
    return 0;
}
static int h_wait(plx_store *, const char *const *, size_t, int64_t) { return PLX_ERR_UNSUPPORTED; }

static plx_host make_host()
{
    plx_host h;
    memset(&h, 0, sizeof h);
    h.struct_size = sizeof h;
    h.abi_minor = 4; // a 1.4 core: the plugin keeps its own requests (this harness holds none)
    h.log = h_log;
    h.error = h_error;
    h.config_get = h_config;
    h.clock_ns = h_clock;
    h.store_set = h_set;
    h.store_get = h_get;
    h.store_add = h_add;
    h.store_wait = h_wait;
    h.free = free;
    return h;
}
static plx_host g_host = make_host();

// The listener address in what a rank of 2 published: gloo 2022's list of
// one 136-byte address, or gloo 2023's record (size_t host length, host,
// size_t 136, the address, pair identifiers).
static const char *listener(const std::vector<char> &v)
{
    if (v.size() == 136)
        return v.data();
    uint64_t hl;
    memcpy(&hl, v.data(), 8);
    return v.data() + 16 + hl;
}

struct PlexusPeer : Peer {
    const plx_backend *b = nullptr;
    void *comm = nullptr;
    PlexusPeer(const std::string &dir, int rank, const char *plugin)
    {
        void *so = dlopen(plugin, RTLD_NOW | RTLD_LOCAL);
        auto entry = so ? (plx_backend_entry_v1_fn)dlsym(so, PLX_BACKEND_ENTRY_V1_NAME) : nullptr;
        uint32_t minor = PLX_ABI_MINOR;
        if (!entry || entry(&g_host, &minor, &b)) {
            fprintf(stderr, "cannot load %s\n", plugin);
            exit(1);
        }
        g_store = new gloo::rendezvous::FileStore(dir);
        g_dir = dir;
        plx_comm_args a;
        memset(&a, 0, sizeof a);
        a.struct_size = sizeof a;
        a.rank = rank;
        a.size = 2;
        a.local_size = 2;
        a.local_rank = rank;
        a.name = "interop";
        a.store = reinterpret_cast<plx_store *>(g_store);
        a.timeout_ms = 30000;
        if (b->comm_create(&a, &comm)) {
            fprintf(stderr, "plexus comm_create: %s\n", g_err);
            exit(1);
        }
        // Which side of gloo's connect rule this run exercised (addresses,
        // then raw port values; the listeners' ports differ), and in which
        // of gloo's layouts.
        auto mine = g_store->get(std::to_string(rank)), theirs = g_store->get(std::to_string(1 - rank));
        bool rec = mine.size() != 136;
        const char *lm = listener(mine), *lt = listener(theirs);
        int cmp = memcmp(lm + 4, lt + 4, 4);
        if (!cmp)
            cmp = (int)*(const uint16_t *)(lm + 2) - (int)*(const uint16_t *)(lt + 2);
        printf("role: plexus rank %d %s (%s layout)\n", rank, cmp > 0 ? "connects" : "accepts",
               rec ? "2023" : "2022");
    }
    ~PlexusPeer() override { b->comm_destroy(comm); }
    void *post(bool snd, int peer, uint64_t slot, void *buf, size_t n)
    {
        plx_p2p_args a;
        memset(&a, 0, sizeof a);
        a.struct_size = sizeof a;
        a.peer = peer < 0 ? PLX_ANY_SOURCE : peer;
        a.buf = buf;
        a.bytes = n;
        a.tag = slot;
        void *r = nullptr;
        int rc = snd ? b->isend(comm, &a, &r) : b->irecv(comm, &a, &r);
        if (rc) {
            fprintf(stderr, "plexus post: %s\n", g_err);
            exit(1);
        }
        return r;
    }
    void *send(int to, uint64_t slot, void *buf, size_t n) override { return post(true, to, slot, buf, n); }
    void *recv(int from, uint64_t slot, void *buf, size_t n) override { return post(false, from, slot, buf, n); }
    bool wait(void *r) override
    {
        int rc = b->wait(comm, r, 30000);
        if (rc)
            fprintf(stderr, "plexus wait: %s\n", g_err);
        b->req_free(comm, r);
        return rc == 0;
    }
};

// ---- the script -------------------------------------------------------------

static unsigned char pat(int from, size_t i, int k) { return (unsigned char)(from * 77 + i * 31 + k * 5 + (i >> 16)); }

static std::vector<unsigned char> fill(int from, size_t n, int k)
{
    std::vector<unsigned char> v(n + 1);
    for (size_t i = 0; i < n; i++)
        v[i] = pat(from, i, k);
    return v;
}

static bool same(const std::vector<unsigned char> &v, int from, size_t n, int k)
{
    for (size_t i = 0; i < n; i++)
        if (v[i] != pat(from, i, k)) {
            fprintf(stderr, "byte %zu of a %zu-byte message (k=%d) is wrong\n", i, n, k);
            return false;
        }
    return true;
}

static void exchange(Peer &p, int me, size_t n, uint64_t slot, int k)
{
    auto out = fill(me, n, k);
    std::vector<unsigned char> in(n + 1, 0xee);
    void *r = p.recv(1 - me, slot, in.data(), n);
    void *s = p.send(1 - me, slot, out.data(), n);
    CHECK(p.wait(r));
    CHECK(p.wait(s));
    CHECK(same(in, 1 - me, n, k));
    CHECK(in[n] == 0xee);
    printf("rank %d: exchanged %zu bytes both ways on slot %llu\n", me, n, (unsigned long long)slot);
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: gloo_peer gloo|plexus DIR RANK [PLUGIN.so]\n");
        return 2;
    }
    int me = atoi(argv[3]);
    std::unique_ptr<Peer> p;
    if (!strcmp(argv[1], "gloo"))
        p.reset(new GlooPeer(argv[2], me));
    else
        p.reset(new PlexusPeer(argv[2], me, argc > 4 ? argv[4] : "plexus-tcp.so"));
    printf("rank %d (%s): connected\n", me, argv[1]);
    exchange(*p, me, 0, 1, 0);
    exchange(*p, me, 1, 2, 1);
    exchange(*p, me, 64u << 20, 3, 2);
    // Five in flight on one slot, rank 0 -> rank 1, sizes on both sides of
    // the eager limit; the receiver posts three now and two later.
    const size_t sizes[5] = {8, 100 << 10, 0, 1 << 20, 3};
    std::vector<std::vector<unsigned char>> bufs;
    std::vector<void *> hs;
    for (int k = 0; k < 5; k++) {
        if (me == 0) {
            bufs.push_back(fill(0, sizes[k], 10 + k));
            hs.push_back(p->send(1, 4, bufs.back().data(), sizes[k]));
        } else {
            if (k == 3)
                usleep(50000);
            bufs.emplace_back(sizes[k] + 1, 0);
            hs.push_back(p->recv(0, 4, bufs.back().data(), sizes[k]));
        }
    }
    for (int k = 0; k < 5; k++) {
        CHECK(p->wait(hs[k]));
        if (me == 1)
            CHECK(same(bufs[k], 0, sizes[k], 10 + k));
    }
    printf("rank %d: five messages in order on one slot\n", me);
    // Receive-from-any both ways (rank 1 sends first to rank 0, then back).
    for (int dir = 0; dir < 2; dir++) {
        int sender = dir;
        uint32_t v = 0xabc0 + (uint32_t)dir, got = 0;
        if (me == sender) {
            usleep(20000);
            CHECK(p->wait(p->send(1 - me, 5 + dir, &v, sizeof v)));
        } else {
            CHECK(p->wait(p->recv(-1, 5 + dir, &got, sizeof got)));
            CHECK(got == 0xabc0 + (uint32_t)dir);
        }
    }
    printf("rank %d: receive-from-any ok\n", me);
    // A last exchange so that neither side closes while the other still reads.
    exchange(*p, me, 4, 9, 3);
    p.reset();
    printf("rank %d: %s\n", me, failures ? "FAILED" : "ok");
    return failures ? 1 : 0;
}
