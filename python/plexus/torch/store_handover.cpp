// store_handover.cpp - see store_handover.hpp.
#include "store_handover.hpp"

#include <torch/csrc/api/include/torch/version.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <dirent.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <vector>

namespace plexus_torch {

// The TCPStore under store's PrefixStores, or null if it is another kind.
static c10::intrusive_ptr<c10d::Store> tcp_store_under(const c10::intrusive_ptr<c10d::Store> &store)
{
    c10::intrusive_ptr<c10d::Store> s = store;
    while (auto *p = dynamic_cast<c10d::PrefixStore *>(s.get()))
        s = p->getUnderlyingStore();
    return dynamic_cast<c10d::TCPStore *>(s.get()) ? s : c10::intrusive_ptr<c10d::Store>();
}

static int port_of(const struct sockaddr_storage &a)
{
    if (a.ss_family == AF_INET)
        return ntohs(reinterpret_cast<const struct sockaddr_in *>(&a)->sin_port);
    if (a.ss_family == AF_INET6)
        return ntohs(reinterpret_cast<const struct sockaddr_in6 *>(&a)->sin6_port);
    return -1;
}

// The process's sockets, listening or connected (by the flag), whose own
// address (listening) or peer's (connected) has port want.
static std::vector<int> sockets_on_port(int want, bool listening_ones)
{
    std::vector<int> fds;
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return fds;
    int dir_fd = dirfd(d);
    while (struct dirent *e = readdir(d)) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        int fd = atoi(e->d_name);
        struct stat st;
        int listening = 0;
        socklen_t len = sizeof listening;
        if (fd == dir_fd || fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode) ||
            getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) != 0 || (listening != 0) != listening_ones)
            continue;
        struct sockaddr_storage a;
        socklen_t alen = sizeof a;
        int got = listening_ones ? getsockname(fd, reinterpret_cast<struct sockaddr *>(&a), &alen)
                                 : getpeername(fd, reinterpret_cast<struct sockaddr *>(&a), &alen);
        if (got == 0 && port_of(a) == want)
            fds.push_back(fd);
    }
    closedir(d);
    return fds;
}

// Whether this process runs the server of tcp (a TCPStore): it holds a
// listening socket on the store's port.
static bool hosts_server(const c10::intrusive_ptr<c10d::Store> &tcp)
{
    auto *t = dynamic_cast<c10d::TCPStore *>(tcp.get());
    return t && !sockets_on_port(t->getPort(), true).empty();
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

// Waits until the peer has closed every connection fds holds (the
// server's end of a TCPStore client), or until deadline. It only polls:
// a store call on a closed connection makes torch 2.x log an error with a
// C++ stack, and the client itself reads nothing meanwhile.
static void wait_for_hangup(std::vector<int> fds, std::chrono::steady_clock::time_point deadline)
{
    while (!fds.empty()) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0)
            return;
        std::vector<struct pollfd> p(fds.size());
        for (size_t i = 0; i < fds.size(); i++)
            p[i] = {fds[i], POLLRDHUP, 0};
        int n = poll(p.data(), p.size(), static_cast<int>(std::min<int64_t>(left.count(), 1000)));
        if (n < 0 && errno != EINTR)
            return;
        std::vector<int> open;
        for (size_t i = 0; i < fds.size(); i++)
            if (!(p[i].revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)))
                open.push_back(fds[i]);
        fds.swap(open);
    }
}

void release_and_wait_for_close(c10::intrusive_ptr<c10d::Store> &store, std::chrono::milliseconds timeout)
{
    try {
        bool last = last_use(store);
        c10::intrusive_ptr<c10d::Store> tcp = tcp_store_under(store);
        store.reset();
        if (!last || !tcp)
            return;
        // The client's connections to the server: the ones to the store's
        // port (the process holds no other live store on that port now).
        auto *t = static_cast<c10d::TCPStore *>(tcp.get());
        wait_for_hangup(sockets_on_port(t->getPort(), false), std::chrono::steady_clock::now() + timeout);
    } catch (const std::exception &) {
        // Nothing to wait for.
    }
}

} // namespace plexus_torch
