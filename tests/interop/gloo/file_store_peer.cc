// file_store_peer.cc - plexus's file:// store and libgloo's
// gloo::rendezvous::FileStore share one folder: each reads what the other
// wrote, waits for keys the other writes later, and sees the other's
// timeouts for keys nobody writes. The plexus side runs in a forked child,
// so the two meet only through the folder, as two ranks would.
// First checks that our file names are libstdc++'s std::hash, on keys of
// every length up to 80 bytes with random (including high) bytes. Last, a
// real 2-rank gloo job rendezvous through the folder: one rank on gloo's
// FileStore, the other on ours behind gloo's Store interface, then an
// allreduce between them.
// Usage: file_store_peer [DIR] (default: a fresh folder, removed after)
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <gloo/allreduce_ring.h>
#include <gloo/common/error.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>

#include "gloo_compat.h"

extern "C" {
#include "plexus/plexus.h"
#include "store.h"
#include "store_file.h"
}
#include "check.h"

static int failures;
static std::vector<char> pattern(size_t n, unsigned seed)
{
    std::vector<char> v(n);
    for (size_t i = 0; i < n; i++)
        v[i] = (char)((i * 131u + seed) >> 3);
    return v;
}

static void check_hash()
{
    std::mt19937_64 rng(12345);
    std::hash<std::string> h;
    int bad = 0;
    for (int round = 0; round < 50; round++)
        for (size_t len = 0; len <= 80; len++) {
            std::string k(len, '\0');
            for (auto &c : k)
                c = (char)(rng() & 0xff);
            if (h(k) != plx__store_file_hash(k.data(), k.size()) && bad++ < 5)
                fprintf(stderr, "hash differs for a %zu-byte key\n", len);
        }
    CHECK(bad == 0);
    printf("hash: %d of %d keys differ from std::hash\n", bad, 50 * 81);
}

static bool pget(plx_store *s, const char *key, std::vector<char> &out, int64_t ms)
{
    void *v = nullptr;
    size_t n = 0;
    if (plx__store_get(s, key, &v, &n, ms) != 0)
        return false;
    out.assign((char *)v, (char *)v + n);
    free(v);
    return true;
}

// The plexus rank: publishes, counts, then reads what gloo published.
static int plexus_side(const std::string &dir)
{
    alarm(60);
    plx_store *s = nullptr;
    std::string url = "file://" + dir;
    if (plx__store_open(url.c_str(), 1, 2, 20000, &s) != 0) {
        fprintf(stderr, "plexus: open: %s\n", plx_last_error());
        return 1;
    }
    auto big = pattern(1 << 20, 7);
    std::vector<char> bin(256);
    for (int i = 0; i < 256; i++)
        bin[i] = (char)i;
    CHECK(plx__store_set(s, "rank_0", "plexus-hello", 12) == 0);
    CHECK(plx__store_set(s, "bin", bin.data(), bin.size()) == 0);
    CHECK(plx__store_set(s, "big", big.data(), big.size()) == 0);
    int64_t r = 0;
    CHECK(plx__store_add(s, "ctr", 3, &r) == 0 && r == 3);
    CHECK(plx__store_add(s, "ctr", 39, &r) == 0 && r == 42);
    CHECK(plx__store_set(s, "plexus_done", "1", 1) == 0);

    // gloo writes these only after it read ours: this get has to wait.
    std::vector<char> v;
    CHECK(pget(s, "from_gloo", v, 20000) && std::string(v.begin(), v.end()) == "gloo-hello");
    CHECK(pget(s, "gloo_big", v, 20000) && v == pattern(3 << 20, 9));
    const char *keys[] = {"from_gloo", "gloo_big", "gloo_done"};
    CHECK(plx__store_wait(s, keys, 3, 20000) == 0);
    CHECK(s->ops->check(s, "from_gloo") == 1);
    CHECK(s->ops->check(s, "absent") == 0);
    // A counter gloo started: add continues from its decimal text.
    CHECK(plx__store_add(s, "gloo_ctr", 1, &r) == 0 && r == 101);
    CHECK(plx__store_get(s, "absent", nullptr, nullptr, 100) == PLX_ERR_TIMEOUT);
    CHECK(strstr(plx_last_error(), "'absent'") != nullptr);
    CHECK(plx__store_set(s, "plexus_read", "1", 1) == 0);
    plx__store_release(s);
    return failures ? 1 : 0;
}

static std::string str(const std::vector<char> &v)
{
    return std::string(v.begin(), v.end());
}

// The gloo rank: reads ours, then publishes its own.
static void gloo_side(const std::string &dir)
{
    gloo::rendezvous::FileStore store(dir);
    store.wait({"rank_0", "bin", "big", "plexus_done"}, std::chrono::seconds(20));
    CHECK(str(store.get("rank_0")) == "plexus-hello");
    auto bin = store.get("bin");
    CHECK(bin.size() == 256);
    for (size_t i = 0; i < bin.size(); i++)
        if ((unsigned char)bin[i] != i) {
            CHECK(!"bin byte differs");
            break;
        }
    CHECK(store.get("big") == pattern(1 << 20, 7));
    CHECK(str(store.get("ctr")) == "42");

    // Give the plexus side time to start polling for keys that are absent.
    usleep(200000);
    store.set("gloo_ctr", {'1', '0', '0'});
    store.set("gloo_big", pattern(3 << 20, 9));
    store.set("from_gloo", {'g', 'l', 'o', 'o', '-', 'h', 'e', 'l', 'l', 'o'});
    store.set("gloo_done", {'1'});
    store.wait({"plexus_read"}, std::chrono::seconds(20));
    CHECK(str(store.get("gloo_ctr")) == "101");

    bool threw = false;
    try {
        store.wait({"absent"}, std::chrono::milliseconds(100));
    } catch (const std::exception &e) {
        threw = true;
    }
    CHECK(threw);
}

// gloo's Store interface over our file:// store.
struct PlexusStore : gloo::rendezvous::Store {
    plx_store *s = nullptr;
    explicit PlexusStore(const std::string &dir)
    {
        if (plx__store_open(("file://" + dir).c_str(), 1, 2, 30000, &s) != 0)
            throw gloo::IoException(plx_last_error());
    }
    ~PlexusStore() override { plx__store_release(s); }
    void set(const std::string &key, const std::vector<char> &data) override
    {
        if (plx__store_set(s, key.c_str(), data.data(), data.size()) != 0)
            throw gloo::IoException(plx_last_error());
    }
    std::vector<char> get(const std::string &key) override
    {
        std::vector<char> v;
        if (!pget(s, key.c_str(), v, -1))
            throw gloo::IoException(plx_last_error());
        return v;
    }
    void wait(const std::vector<std::string> &keys) override { wait(keys, kDefaultTimeout); }
    void wait(const std::vector<std::string> &keys, const std::chrono::milliseconds &timeout) override
    {
        std::vector<const char *> k;
        for (auto &key : keys)
            k.push_back(key.c_str());
        if (plx__store_wait(s, k.data(), k.size(), timeout.count()) != 0)
            throw gloo::IoException(plx_last_error());
    }
};

// One rank of a gloo job; rank 1 rendezvous through our store.
static int gloo_job_rank(const std::string &dir, int rank)
{
    alarm(60);
    try {
        gloo::transport::tcp::attr attr;
        attr.hostname = "127.0.0.1";
        auto dev = gloo::transport::tcp::CreateDevice(attr);
        auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, 2);
        ctx->setTimeout(std::chrono::seconds(30));
        std::shared_ptr<gloo::rendezvous::Store> store;
        if (rank == 0)
            store.reset(new gloo::rendezvous::FileStore(dir));
        else
            store.reset(new PlexusStore(dir));
        full_mesh(*ctx, store, dev);
        std::vector<float> x(1000);
        for (size_t i = 0; i < x.size(); i++)
            x[i] = (float)(rank + 1) * (float)i;
        gloo::AllreduceRing<float>(ctx, {x.data()}, (int)x.size()).run();
        for (size_t i = 0; i < x.size(); i++)
            if (x[i] != 3.0f * (float)i) {
                fprintf(stderr, "gloo job rank %d: element %zu is %g\n", rank, i, x[i]);
                return 1;
            }
        // Neither rank closes its connection while the other may still read
        // from it (a rank that finished first and exited left the other with
        // "Connection closed by peer" once in a CI run): each says it is done
        // through its own store and waits for the other's word.
        store->set("done/" + std::to_string(rank), std::vector<char>{'1'});
        store->wait({"done/" + std::to_string(1 - rank)}, std::chrono::seconds(30));
    } catch (const std::exception &e) {
        fprintf(stderr, "gloo job rank %d (%s store): %s\n", rank, rank ? "our" : "gloo's", e.what());
        return 1;
    }
    return 0;
}

static void gloo_job(const std::string &dir)
{
    pid_t pid[2];
    for (int r = 0; r < 2; r++)
        if ((pid[r] = fork()) == 0)
            _exit(gloo_job_rank(dir, r));
    for (int r = 0; r < 2; r++) {
        int st = 0;
        if (waitpid(pid[r], &st, 0) != pid[r] || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            fprintf(stderr, "gloo job rank %d failed (status 0x%x)\n", r, st);
            failures++;
        }
    }
    printf("gloo job: rendezvous through both stores and allreduce %s\n", failures ? "FAILED" : "ok");
}

int main(int argc, char **argv)
{
    char tmp[] = "/tmp/plexus-gloo-filestore-XXXXXX";
    if (argc > 2 || (argc == 1 && !mkdtemp(tmp))) {
        fprintf(stderr, "usage: file_store_peer [DIR]\n");
        return 2;
    }
    alarm(90);
    check_hash();
    std::string dir = argc == 2 ? argv[1] : tmp;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0)
        _exit(plexus_side(dir));
    try {
        gloo_side(dir);
    } catch (const std::exception &e) {
        fprintf(stderr, "gloo side: %s\n", e.what());
        failures++;
    }
    int st = 0;
    if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "plexus side failed (status 0x%x)\n", st);
        failures++;
    }
    // A fresh subfolder: a folder serves one job.
    std::string job = dir + "/job";
    fflush(stdout);
    if (mkdir(job.c_str(), 0700) == 0)
        gloo_job(job);
    else
        failures++;
    if (argc == 1 && system(("rm -rf '" + dir + "'").c_str()) != 0)
        fprintf(stderr, "could not remove %s\n", dir.c_str());
    printf(failures ? "FAILED\n" : "ok\n");
    return failures ? 1 : 0;
}
