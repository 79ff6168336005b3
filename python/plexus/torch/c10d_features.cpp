// c10d_features.cpp - the entries c10d::Backend gained after torch 2.0,
// each where the torch built against has it (PLEXUS_TORCH_HAS_*: meson's
// compile checks; C10D_BACKEND_HAS_*: torch's). Each maps onto one plexus
// call; nothing is decided here that plexus decides.
// supportsTimeEstimation is time_estimate.cpp's. Not overridden, so
// torch's default answers: the one-sided windows (supportsWindow false).
#include "process_group.hpp"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/utils/pybind.h>

#include <ATen/ops/cat.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <unordered_set>
#include <variant>

#include <unistd.h>

namespace plexus_torch {

// Runs f without the GIL if this thread holds it: torch reaches some
// entries from Python holding it, others from C++ without.
template <typename F> static int nogil(F f)
{
    if (Py_IsInitialized() && PyGILState_Check()) {
        pybind11::gil_scoped_release r;
        return f();
    }
    return f();
}

#ifdef PLEXUS_TORCH_BACKEND_API
// What endCoalescing returns: done when every work issued since
// startCoalescing is, failed with the first one's error.
class CoalescedWork : public c10d::Work {
  public:
    explicit CoalescedWork(std::vector<intrusive_ptr<c10d::Work>> works)
        : c10d::Work(-1, c10d::OpType::COALESCED), works_(std::move(works))
    {
    }
    bool isCompleted() override
    {
        for (auto &w : works_)
            if (!w->isCompleted())
                return false;
        return true;
    }
    bool isSuccess() const override
    {
        for (auto &w : works_)
            if (!w->isSuccess())
                return false;
        return true;
    }
    std::exception_ptr exception() const override
    {
        for (auto &w : works_)
            if (auto e = w->exception())
                return e;
        return nullptr;
    }
    bool wait(milliseconds timeout) override
    {
        for (auto &w : works_)
            w->wait(timeout);
        return true;
    }

  private:
    std::vector<intrusive_ptr<c10d::Work>> works_;
};

// The operations between startCoalescing and endCoalescing start as they
// are issued (plexus orders them per group); endCoalescing's work waits for
// them all, which is what torch's batch_isend_irecv and
// _coalescing_manager ask of a backend that coalesces.
void ProcessGroupPlexus::startCoalescing()
{
    if (comm_->coalescing)
        refuse("startCoalescing: the group is already coalescing (endCoalescing first)");
    comm_->coalesced.clear();
    comm_->coalescing = true;
}

intrusive_ptr<c10d::Work> ProcessGroupPlexus::endCoalescing()
{
    if (!comm_->coalescing)
        refuse("endCoalescing without startCoalescing");
    comm_->coalescing = false;
    auto works = std::move(comm_->coalesced);
    comm_->coalesced.clear();
    return c10::make_intrusive<CoalescedWork>(std::move(works));
}
#endif

#ifdef PLEXUS_TORCH_HAS_SPLIT
c10::intrusive_ptr<c10d::Backend::Options> ProcessGroupPlexus::getBackendOptions()
{
    auto t = comm_->group_timeout.count() > 0 ? comm_->group_timeout : kBackendDefaultTimeout;
    return c10::make_intrusive<c10d::Backend::Options>(comm_->name, t);
}

// torch's split_group: collective over this group, as NCCL's split (every
// rank calls it). ranks: this rank's new group in its new order, or a group
// without this rank (which then takes no part and gets null). The groups
// are disjoint, so each one's lowest rank is its plx_comm_split color.
c10::intrusive_ptr<c10d::Backend> ProcessGroupPlexus::split(const c10::intrusive_ptr<c10d::Store> &,
                                                            const std::vector<int> &ranks,
                                                            const c10::intrusive_ptr<c10d::Backend::Options> &)
{
    auto me = std::find(ranks.begin(), ranks.end(), getRank());
    int color = PLX_UNDEFINED, key = 0;
    if (me != ranks.end()) {
        color = *std::min_element(ranks.begin(), ranks.end());
        key = int(me - ranks.begin());
    }
    comm_->flush();
    plx_comm *out = nullptr;
    int rc = nogil([&] { return plx_comm_split(c(), color, key, &out); });
    if (rc != 0) {
        comm_->note(rc);
        fail(rc, "split");
    }
    if (!out)
        return nullptr;
    return c10::make_intrusive<ProcessGroupPlexus>(comm_, out);
}
#endif

#ifdef PLEXUS_TORCH_HAS_SHRINK
// torch's shrink_group: plx_comm_shrink among the ranks that call it (the
// excluded ones must not). plexus finds who is gone by itself (its failure
// detector, or a rank not calling within shrink_wait_ms); the survivors
// then check that it left out exactly ranks_to_exclude. SHRINK_ABORT (1 in
// torch) revokes the group first, ending what is pending on every rank.
c10::intrusive_ptr<c10d::Backend> ProcessGroupPlexus::shrink(const std::vector<int64_t> &excluded, int flags,
                                                             const c10::intrusive_ptr<c10d::Backend::Options> &)
{
    int P = getSize();
    std::vector<char> gone(size_t(P), 0);
    for (int64_t r : excluded) {
        if (r < 0 || r >= P)
            refuse("shrink: rank " + std::to_string(r) + " is not in the group of " + std::to_string(P));
        gone[size_t(r)] = 1;
    }
    if (gone[size_t(getRank())])
        refuse("shrink: rank " + std::to_string(getRank()) + " is in ranks_to_exclude and must not call shrink");
    int rc = 0;
    if (flags & 1)
        rc = nogil([&] { return plx_comm_revoke(c()); });
    if (rc != 0 && rc != PLX_ERR_REVOKED)
        fail(rc, "shrink (SHRINK_ABORT's revoke)");
    plx_comm *out = nullptr;
    rc = nogil([&] { return plx_comm_shrink(c(), &out); });
    if (rc != 0) {
        comm_->note(rc);
        fail(rc, "shrink");
    }
    std::vector<int32_t> kept(size_t(plx_comm_size(out))), want;
    int32_t mine = getRank();
    rc = nogil([&] { return plx_allgather(out, &mine, kept.data(), 1, PLX_I32); });
    for (int r = 0; r < P; r++)
        if (!gone[size_t(r)])
            want.push_back(r);
    if (rc != 0 || kept != want) {
        plx_comm_destroy(out);
        if (rc != 0)
            fail(rc, "shrink (the survivors' check)");
        auto list = [](const std::vector<int32_t> &v) {
            std::string s;
            for (int32_t r : v)
                s += (s.empty() ? "" : ", ") + std::to_string(r);
            return "[" + s + "]";
        };
        refuse("shrink: plexus kept ranks " + list(kept) + " but ranks_to_exclude leaves " + list(want) +
               " (another rank failed too, or an excluded one took part)");
    }
    return c10::make_intrusive<ProcessGroupPlexus>(comm_, out);
}
#endif

#ifdef C10D_BACKEND_HAS_RECONFIGURE
// torch's fault-tolerance reconfigure: get_reconfigure_handle names this
// process (host, pid and a random tag, fixed for its life); the members
// exchange their handles out of band and each calls reconfigure with the
// same list. That is plx_comm_init of a new communicator among them, this
// rank's handle's place in the list its rank (in sorted order for a set).
// They meet on the job's whole store (under every prefix of the group's),
// so a replacement whose own group lives elsewhere on that store server
// joins survivors; the meeting's name holds the uuid and a digest of the
// members, so two groups given one uuid do not meet each other. The old
// communicator, which may have lost ranks, is destroyed after.
c10::intrusive_ptr<c10d::Work> ProcessGroupPlexus::reconfigure(const c10d::ReconfigureOptions &opts)
{
    std::vector<std::string> members;
    if (auto v = std::get_if<std::vector<c10d::ReconfigureHandle>>(&opts.handles)) {
        members = *v;
    } else {
        auto &set = std::get<std::unordered_set<c10d::ReconfigureHandle>>(opts.handles);
        members.assign(set.begin(), set.end());
        std::sort(members.begin(), members.end());
    }
    auto me = std::find(members.begin(), members.end(), reconfigure_handle_);
    if (me == members.end())
        refuse("reconfigure: this process's handle " + reconfigure_handle_ + " is not among the " +
               std::to_string(members.size()) + " given");
    if (std::count(members.begin(), members.end(), reconfigure_handle_) > 1)
        refuse("reconfigure: this process's handle is listed twice");
    int rank = int(me - members.begin()), size = int(members.size());
    uint64_t digest = 1469598103934665603ull; // FNV-1a over the members, in rank order
    for (const auto &m : members)
        for (unsigned char ch : m + '\n')
            digest = (digest ^ ch) * 1099511628211ull;
    char hex[17];
    snprintf(hex, sizeof hex, "%016llx", (unsigned long long)digest);
    std::string name = "plexus-reconfigure/" + std::to_string(opts.uuid) + "/" + hex;
    auto meet = std::make_shared<StoreBridge>();
    auto whole = comm_->store->store;
    if (auto prefixed = c10::dynamic_intrusive_pointer_cast<c10d::PrefixStore>(whole))
        whole = prefixed->getUnderlyingNonPrefixStore();
    bridge_init(*meet, whole);
    plx_comm_options o;
    plx_comm_options_init(&o);
    o.rank = rank;
    o.size = size;
    o.name = name.c_str();
    milliseconds t = opts.timeout ? *opts.timeout : comm_->group_timeout;
    o.timeout_ms = t.count() > 0 ? t.count() : -1;
    o.store = &meet->cb;
    comm_->flush();
    plx_comm *fresh = nullptr;
    int rc = nogil([&] { return plx_comm_init(&o, &fresh); });
    if (rc != 0)
        fail(rc, "reconfigure (rank " + std::to_string(rank) + " of " + std::to_string(size) + ", uuid " +
                     std::to_string(opts.uuid) + ")");
    plx_comm *old = comm_->comm; // null for a group made with enable_reconfigure
    auto old_store = comm_->store; // the old communicator's, until it is gone
    comm_->comm = fresh;
    comm_->store = meet;
    comm_->error = 0;
    rank_ = rank;
    size_ = size;
    nogil([&] { return plx_comm_destroy(old); });
    auto w = c10::make_intrusive<WorkPlexus>(comm_, c10d::OpType::UNKNOWN, std::vector<at::Tensor>{}, nullptr,
                                             std::vector<at::Tensor>{});
    w->complete(0, "");
    return w;
}

// "host:pid:tag": unique among the processes that may meet again.
std::string ProcessGroupPlexus::new_reconfigure_handle()
{
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    std::random_device rd;
    return std::string(host) + ":" + std::to_string(getpid()) + ":" + std::to_string(rd()) + std::to_string(rd());
}
#endif

#ifdef PLEXUS_TORCH_HAS_ERROR
// The group's first failure in torch's words: TIMEOUT; REMOTE_ERROR where
// another rank failed, was lost or revoked the group; COMM_ERROR otherwise.
c10d::ErrorType ProcessGroupPlexus::getError()
{
    switch (comm_->error.load()) {
    case 0: return c10d::ErrorType::SUCCESS;
    case PLX_ERR_TIMEOUT: return c10d::ErrorType::TIMEOUT;
    case PLX_ERR_PEER_LOST:
    case PLX_ERR_REMOTE:
    case PLX_ERR_REVOKED: return c10d::ErrorType::REMOTE_ERROR;
    default: return c10d::ErrorType::COMM_ERROR;
    }
}
#endif

#ifdef C10D_BACKEND_HAS_HOOKS
// Called by abort() before it aborts (torch's debug-information hooks).
void ProcessGroupPlexus::registerAbortHook(int64_t id, c10d::AbortHook hook)
{
    std::lock_guard<std::mutex> lk(comm_->mu);
    comm_->abort_hooks[id] = std::move(hook);
}

void ProcessGroupPlexus::unregisterAbortHook(int64_t id)
{
    std::lock_guard<std::mutex> lk(comm_->mu);
    comm_->abort_hooks.erase(id);
}
#endif

#ifdef PLEXUS_TORCH_HAS_ABORT
// plx_comm_abort: every pending and later operation of this rank's group
// fails with PLX_ERR_ABORTED, one blocked in another thread too. Not queued
// behind this rank's work: that is what it ends.
void ProcessGroupPlexus::abort()
{
#ifdef C10D_BACKEND_HAS_HOOKS
    std::map<int64_t, c10d::AbortHook> hooks;
    {
        std::lock_guard<std::mutex> lk(comm_->mu);
        hooks = comm_->abort_hooks;
    }
    for (auto &h : hooks)
        h.second();
#endif
    if (comm_->comm) // none yet (enable_reconfigure): nothing to end
        nogil([&] { return plx_comm_abort(comm_->comm); });
}

// The group is done with: what was issued starts, the completer thread
// finishes what it holds and ends.
void ProcessGroupPlexus::shutdown()
{
    comm_->flush();
    comm_->stop();
}
#endif

} // namespace plexus_torch
