// store_handover.cpp - see store_handover.hpp.
#include "store_handover.hpp"

#include <torch/csrc/api/include/torch/version.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <cstdlib>
#include <thread>

namespace plexus_torch {

// The TCPStore under store's PrefixStores, or null if it is another kind.
static c10::intrusive_ptr<c10d::Store> tcp_store_under(const c10::intrusive_ptr<c10d::Store> &store)
{
    c10::intrusive_ptr<c10d::Store> s = store;
    while (auto *p = dynamic_cast<c10d::PrefixStore *>(s.get()))
        s = p->getUnderlyingStore();
    return dynamic_cast<c10d::TCPStore *>(s.get()) ? s : c10::intrusive_ptr<c10d::Store>();
}

// Whether this process runs the server of tcp (a TCPStore): it holds a
// listening socket on the store's port.
static bool hosts_server(const c10::intrusive_ptr<c10d::Store> &tcp)
{
    auto *t = dynamic_cast<c10d::TCPStore *>(tcp.get());
    if (!t)
        return false;
    int want = t->getPort();
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return false;
    bool found = false;
    while (struct dirent *e = readdir(d)) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        int fd = atoi(e->d_name);
        struct stat st;
        int listening = 0;
        socklen_t len = sizeof listening;
        if (fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode) ||
            getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) != 0 || !listening)
            continue;
        struct sockaddr_storage a;
        socklen_t alen = sizeof a;
        if (getsockname(fd, reinterpret_cast<struct sockaddr *>(&a), &alen) != 0)
            continue;
        int port = a.ss_family == AF_INET    ? ntohs(reinterpret_cast<struct sockaddr_in *>(&a)->sin_port)
                   : a.ss_family == AF_INET6 ? ntohs(reinterpret_cast<struct sockaddr_in6 *>(&a)->sin6_port)
                                             : -1;
        if (port == want) {
            found = true;
            break;
        }
    }
    closedir(d);
    return found;
}

static const char kHostKey[] = "plexus-torch/store-host";

bool publish_if_host(const c10::intrusive_ptr<c10d::Store> &store)
{
    if (!hosts_server(tcp_store_under(store)))
        return false;
    store->set(kHostKey, std::vector<uint8_t>{'1'});
    return true;
}

bool peer_hosts(const c10::intrusive_ptr<c10d::Store> &store)
{
    return store->check({kHostKey});
}

// Whether store (held by the caller only) is the last use of the
// TCPStore under it in this process: every level of its PrefixStore chain
// is held only by the level above, except that torch 2.x's ProcessGroup
// also holds the level right under its backend's store until it is
// destroyed itself, just after its backends.
static bool last_use(const c10::intrusive_ptr<c10d::Store> &store)
{
#if TORCH_VERSION_MAJOR >= 2
    const size_t group_holds = 1;
#else
    const size_t group_holds = 0;
#endif
    if (store.use_count() > 1)
        return false;
    c10::intrusive_ptr<c10d::Store> s = store;
    for (int level = 0;; level++) {
        auto *p = dynamic_cast<c10d::PrefixStore *>(s.get());
        if (!p)
            break;
        c10::intrusive_ptr<c10d::Store> under = p->getUnderlyingStore();
        // under's holders: p, this copy, and any others.
        size_t others = under.use_count() - 2;
        if (others > (level == 0 ? group_holds : 0))
            return false;
        s = under;
    }
    return dynamic_cast<c10d::TCPStore *>(s.get()) != nullptr;
}

void release_and_wait_for_close(c10::intrusive_ptr<c10d::Store> &store, std::chrono::milliseconds timeout)
{
    try {
        bool last = last_use(store);
        c10::intrusive_ptr<c10d::Store> tcp = tcp_store_under(store);
        store.reset();
        if (!last || !tcp)
            return;
        auto deadline = std::chrono::steady_clock::now() + timeout;
        while (std::chrono::steady_clock::now() < deadline) {
            // Throws once the server has closed the connection.
            tcp->check({kHostKey});
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
    } catch (const std::exception &) {
        // The server has gone: done.
    }
}

} // namespace plexus_torch
