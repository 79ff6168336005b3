// work.hpp - plexus's work handles as c10d::Work, and the communicator they
// share (Comm): the lazy start of small collectives, the completer thread
// that finishes the works whose future was asked for, the group's error.
#pragma once

#include <torch/csrc/api/include/torch/version.h>
#if TORCH_VERSION_MAJOR >= 2
#include <torch/csrc/distributed/c10d/Backend.hpp> // c10d::AbortHook, C10D_BACKEND_HAS_*
#endif
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "plexus/plexus.h"
#include "store_bridge.hpp"

namespace plexus_torch {

using c10::intrusive_ptr;
using std::chrono::milliseconds;

struct Comm;
class ProcessGroupPlexus;

// A small collective's arguments, kept until it starts (Comm::pending).
// Plain values rather than closures: this is the path every small
// all_reduce takes, and a std::function per call is a heap allocation.
struct Lazy {
    enum Kind { NONE, ALLREDUCE, BROADCAST, REDUCE, BARRIER } kind = NONE;
    void *p = nullptr;
    size_t n = 0;
    int dt = 0, op = 0, root = 0;

    int start(plx_comm *c, plx_work **o) const
    {
        switch (kind) {
        case ALLREDUCE: return plx_iallreduce(c, p, p, n, dt, op, nullptr, o);
        case BROADCAST: return plx_ibroadcast(c, p, n, dt, root, nullptr, o);
        case REDUCE: return plx_ireduce(c, p, p, n, dt, op, root, nullptr, o);
        case BARRIER: return plx_ibarrier(c, nullptr, o);
        case NONE: break;
        }
        return PLX_ERR_INTERNAL;
    }
    int run(plx_comm *c) const
    {
        switch (kind) {
        case ALLREDUCE: return plx_allreduce(c, p, p, n, dt, op);
        case BROADCAST: return plx_broadcast(c, p, n, dt, root);
        case REDUCE: return plx_reduce(c, p, p, n, dt, op, root);
        case BARRIER: return plx_barrier(c);
        case NONE: break;
        }
        return PLX_ERR_INTERNAL;
    }
};

// One torch operation: one or more plexus works waited for in order (a
// send is a header and the data; a receive from any source first learns
// the sender), then `finish` (unpacking into the caller's tensors).
class WorkPlexus : public c10d::Work {
  public:
    // title: the profiler's name for the operation ("<backend>:<op>"), or
    // null when no profiler listens (c10d::Work then records nothing).
    WorkPlexus(intrusive_ptr<Comm> comm, c10d::OpType type, std::vector<at::Tensor> outputs, const char *title,
               const std::vector<at::Tensor> &inputs)
        : c10d::Work(-1, type, title, title ? c10::optional<std::vector<at::Tensor>>(inputs) : c10::nullopt),
          comm_(std::move(comm)), outputs_(std::move(outputs))
    {
    }
    ~WorkPlexus() override;

    std::vector<plx_work *> works;           // waited for in order
    // A small collective starts lazily (Comm::pending): start_now starts
    // it nonblocking, run_inline runs it blocking in the waiting thread.
    Lazy lazy;
    const char *what = "";
    void start_now();
    void run_inline();
    std::function<plx_work *()> next;        // a further stage once works are done (any-source recv)
    std::function<void()> finish;            // after success
    std::vector<at::Tensor> keep;            // buffers plexus borrows until completion
    int source = -1;                         // recv: the sender

    bool isCompleted() override;
    bool isSuccess() const override;
    std::exception_ptr exception() const override;
    int sourceRank() const override;
    std::vector<at::Tensor> result() override { return outputs_; }
    bool wait(milliseconds timeout) override;
    c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;

    // Wait for completion in this thread; returns false on a timeout
    // (still pending). Call only while holding the claim.
    bool drive(int64_t timeout_ms);

  private:
    friend struct Comm;
    friend class ProcessGroupPlexus;
    bool wait_here(milliseconds timeout); // wait's work, without its exit guard
    void complete(int rc, const std::string &msg);

    intrusive_ptr<Comm> comm_;
    std::vector<at::Tensor> outputs_;
    bool done_ = false, claimed_ = false;
    std::exception_ptr error_;
    intrusive_ptr<c10::ivalue::Future> future_;
};

// The plexus communicator, kept alive by the process group and by every
// work still holding it; a thread completes the works whose future was
// asked for (DDP's communication hooks wait on futures, not on works).
struct Comm : c10::intrusive_ptr_target {
    plx_comm *comm = nullptr;
    // Shared with the communicators split or shrunk from this one (plexus's
    // children keep using the parent's store).
    std::shared_ptr<StoreBridge> store = std::make_shared<StoreBridge>();
    std::mutex mu;
    std::condition_variable cv;
    std::deque<intrusive_ptr<WorkPlexus>> queue;
    bool stopping = false;
    std::thread completer;
    // Submission order: a small collective waits here until the caller
    // waits for it (then it runs blocking, in the caller's thread, as
    // plexus-bench does: no hand-off to plexus's executor thread) or until
    // anything else touches the group (another operation, a test, a
    // future), which starts it first, so every rank issues in program order.
    std::mutex submit_mu;
    intrusive_ptr<WorkPlexus> pending;
    // The profiler's names, "<name>:<op>" with gloo's op words (torch's
    // tests look for "gloo:all_reduce" when plexus stands in for gloo);
    // kept here because a profiler event holds the pointer until it ends.
    std::vector<std::string> titles;

    // Another rank hosts the store's server (see store_handover.hpp).
    bool peer_hosts_store = false;
    milliseconds timeout{0};
    // What the group was made with: torch's name for the backend and the
    // group's timeout (a split or shrunk group inherits them).
    std::string name = "plexus";
    milliseconds group_timeout{0};
    // The first failure of an operation (a plexus status), for getError.
    std::atomic<int> error{0};
    // Works issued between startCoalescing and endCoalescing.
    bool coalescing = false;
    std::vector<intrusive_ptr<c10d::Work>> coalesced;
#ifdef C10D_BACKEND_HAS_HOOKS
    std::map<int64_t, c10d::AbortHook> abort_hooks; // under mu
#endif

    // Records rc as the group's error state if it is the first failure that
    // says something about the group (not a caller's bad argument).
    void note(int rc)
    {
        if (rc == 0 || rc == PLX_ERR_INVALID_ARG || rc == PLX_ERR_UNSUPPORTED)
            return;
        int none = 0;
        error.compare_exchange_strong(none, rc);
    }

    // Destroys the communicator; the last group of a store a peer hosts
    // waits there for its server to close (store_handover.hpp).
    ~Comm() override;

    void flush_locked();
    void flush()
    {
        std::lock_guard<std::mutex> lk(submit_mu);
        flush_locked();
    }
    // Runs w blocking if it is still the pending one; true if it did.
    bool run_if_pending(WorkPlexus *w);

    // The completer thread: drives the queued works in order.
    void run();
    // Queues w for the completer, starting it on first use.
    void enqueue(intrusive_ptr<WorkPlexus> w);
    // Ends the completer once it has finished what it holds.
    void stop();
};

// Waits, the GIL released, until every work queued for a completer thread
// in this process has finished (each within its own timeout). Registered
// with Python's atexit: a future's callbacks (DDP's hooks, .then) run in
// the completer, and once the interpreter finalizes, a thread that takes
// the GIL is ended in a noexcept frame: std::terminate, SIGABRT at exit.
void drain_at_exit();

} // namespace plexus_torch
