// process_group.cpp - plexus.torch._C: the torch.distributed backend "plexus".
//
// The only C++ in plexus, and deliberately thin: it maps torch tensors and
// options to plexus's C API and plexus's work handles to c10d::Work. No
// algorithm lives here: every collective is one plexus call (lists of
// tensors are packed into one flat buffer first and unpacked after).
//
// One source for two torch APIs (GroupBase below): torch 1.x, where a
// backend is a c10d::ProcessGroup (Debian 12's 1.13), and torch 2.x, where
// the c10d::ProcessGroup dispatches each device's tensors to a
// c10d::Backend and a backend implements that (Debian 13's 2.6; registered
// for devices=["cpu"] by __init__.py). The virtual operations are the same
// in both; 2.x adds allreduce_sparse.
//
// Rendezvous: torch hands the creator its store (a c10d::Store, usually a
// PrefixStore over a TCPStore or FileStore); it is wrapped in
// struct plx_store_callbacks so plexus's backends bootstrap through it.
// The transport is what plexus is configured to use (PLEXUS_BACKEND, the
// configuration files), tcp between processes by default.
#include <torch/csrc/api/include/torch/version.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#if TORCH_VERSION_MAJOR >= 2
#include <torch/csrc/distributed/c10d/Backend.hpp>
#endif
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <torch/csrc/Dtype.h>
#include <torch/csrc/utils/pybind.h>

#include <ATen/core/ivalue.h>
#include <ATen/record_function.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>
#include <ATen/ops/full.h>
#include <ATen/ops/sparse_coo_tensor.h>
#include <pybind11/chrono.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <unordered_set>
#include <variant>
#include <vector>

#include <unistd.h>

#include "plexus/plexus.h"
#include "store_handover.hpp"

namespace plexus_torch {

using c10::intrusive_ptr;
using std::chrono::milliseconds;

#if TORCH_VERSION_MAJOR >= 2
#define PLEXUS_TORCH_BACKEND_API 1 // c10d::Backend, what torch 2.x dispatches to
using GroupBase = c10d::Backend;
#else
using GroupBase = c10d::ProcessGroup;
#endif

// ---- errors -----------------------------------------------------------------

// The words torch's own backends use for these failures, ahead of plexus's
// detail: torch's tests and users' scripts match " (Timed out|closed|timeout) ".
static std::string headline(int rc)
{
    switch (rc) {
    case PLX_ERR_TIMEOUT: return "Timed out (" + std::string(plx_err_name(rc)) + ")";
    case PLX_ERR_PEER_LOST: return "Connection closed (" + std::string(plx_err_name(rc)) + ")";
    case PLX_ERR_REMOTE: return "Connection closed by a failed rank (" + std::string(plx_err_name(rc)) + ")";
    case PLX_ERR_ABORTED: return "Aborted (" + std::string(plx_err_name(rc)) + ")";
    case PLX_ERR_REVOKED: return "Revoked (" + std::string(plx_err_name(rc)) + ")";
    default: return plx_err_name(rc);
    }
}

[[noreturn]] static void fail(int rc, const std::string &what)
{
    throw std::runtime_error("plexus: " + what + ": " + headline(rc) + ": " + plx_last_error());
}

[[noreturn]] static void refuse(const std::string &why)
{
    throw std::runtime_error("plexus: " + why);
}

// ---- the c10d::Store as plexus store callbacks ------------------------------

// The last exception a store callback caught on this thread, added to the
// error of a failed plx_comm_init (plexus only sees a status).
static thread_local std::string store_error;

struct StoreBridge {
    intrusive_ptr<c10d::Store> store;
    plx_store_callbacks cb;
};

static milliseconds store_timeout(const StoreBridge *b, int64_t ms)
{
    if (ms == PLX_TIMEOUT_INFINITE)
        return c10d::Store::kNoTimeout;
    if (ms < 0)
        return b->store->getTimeout();
    return milliseconds(ms > 0 ? ms : 1);
}

static int caught(const std::exception &e)
{
    store_error = e.what();
    auto nl = store_error.find('\n');
    if (nl != std::string::npos)
        store_error.resize(nl);
    return store_error.find("imeout") != std::string::npos || store_error.find("imed out") != std::string::npos
               ? PLX_ERR_TIMEOUT
               : PLX_ERR_SYSTEM;
}

static int s_set(void *u, const char *key, const void *val, size_t len)
{
    try {
        auto p = static_cast<const uint8_t *>(val);
        static_cast<StoreBridge *>(u)->store->set(key, std::vector<uint8_t>(p, p + len));
        return 0;
    } catch (const std::exception &e) {
        return caught(e);
    }
}

static int s_get(void *u, const char *key, void **val, size_t *len, int64_t timeout_ms)
{
    auto b = static_cast<StoreBridge *>(u);
    try {
        b->store->wait({key}, store_timeout(b, timeout_ms));
        std::vector<uint8_t> v = b->store->get(key);
        *val = malloc(v.size() ? v.size() : 1);
        if (!*val)
            return PLX_ERR_NOMEM;
        if (!v.empty())
            memcpy(*val, v.data(), v.size());
        *len = v.size();
        return 0;
    } catch (const std::exception &e) {
        return caught(e);
    }
}

static int s_add(void *u, const char *key, int64_t delta, int64_t *result)
{
    try {
        *result = static_cast<StoreBridge *>(u)->store->add(key, delta);
        return 0;
    } catch (const std::exception &e) {
        return caught(e);
    }
}

static int s_wait(void *u, const char *const *keys, size_t n, int64_t timeout_ms)
{
    auto b = static_cast<StoreBridge *>(u);
    try {
        b->store->wait(std::vector<std::string>(keys, keys + n), store_timeout(b, timeout_ms));
        return 0;
    } catch (const std::exception &e) {
        return caught(e);
    }
}

static int s_check(void *u, const char *key)
{
    try {
        return static_cast<StoreBridge *>(u)->store->check({key}) ? 1 : 0;
    } catch (const std::exception &e) {
        caught(e);
        return 0;
    }
}

static int s_del(void *u, const char *key)
{
    try {
        static_cast<StoreBridge *>(u)->store->deleteKey(key);
        return 0;
    } catch (const std::exception &e) {
        return caught(e);
    }
}

// b's callbacks, over store.
static void bridge_init(StoreBridge &b, const intrusive_ptr<c10d::Store> &store)
{
    b.store = store;
    b.cb = plx_store_callbacks{};
    b.cb.struct_size = sizeof b.cb;
    b.cb.user = &b;
    b.cb.set = s_set;
    b.cb.get = s_get;
    b.cb.add = s_add;
    b.cb.wait = s_wait;
    b.cb.check = s_check;
    b.cb.del = s_del;
}

// ---- tensors ----------------------------------------------------------------

static int dtype_of(const at::Tensor &t)
{
    switch (t.scalar_type()) {
    case at::kFloat: return PLX_F32;
    case at::kDouble: return PLX_F64;
    case at::kHalf: return PLX_F16;
    case at::kBFloat16: return PLX_BF16;
    case at::kInt: return PLX_I32;
    case at::kLong: return PLX_I64;
    case at::kChar: return PLX_I8;
    case at::kByte: return PLX_U8;
    case at::kBool: return PLX_U8;
    default:
        refuse(std::string("tensors of dtype ") + c10::toString(t.scalar_type()) +
               " are not supported (float32, float64, float16, bfloat16, int32, int64, int8, uint8, bool)");
    }
}

static int redop_of(const c10d::ReduceOp &op, const at::Tensor &t)
{
    int r;
    switch (static_cast<c10d::ReduceOp::RedOpType>(op)) {
    case c10d::ReduceOp::SUM: r = PLX_SUM; break;
    case c10d::ReduceOp::PRODUCT: r = PLX_PROD; break;
    case c10d::ReduceOp::MIN: r = PLX_MIN; break;
    case c10d::ReduceOp::MAX: r = PLX_MAX; break;
    case c10d::ReduceOp::AVG: r = PLX_AVG; break;
    default: refuse("reduce op " + std::to_string(int(static_cast<c10d::ReduceOp::RedOpType>(op))) + " is not supported (SUM, PRODUCT, MIN, MAX, AVG)");
    }
    if (t.scalar_type() == at::kBool && r != PLX_MIN && r != PLX_MAX)
        refuse("bool tensors reduce only with MIN and MAX");
    return r;
}

static void check_tensor(const at::Tensor &t)
{
    if (!t.device().is_cpu())
        refuse("only CPU tensors are supported by this build (got " + t.device().str() + ")");
    if (t.is_sparse())
        refuse("sparse tensors are not supported");
    dtype_of(t);
}

static const at::Tensor &one(const std::vector<at::Tensor> &v, const char *what)
{
    if (v.size() != 1)
        refuse(std::string(what) + " takes exactly one tensor per process (got " + std::to_string(v.size()) + ")");
    check_tensor(v[0]);
    return v[0];
}

// A contiguous tensor standing for t: t itself, or a copy whose result is
// copied back (copy_back) when the work completes.
static at::Tensor dense(const at::Tensor &t)
{
    return t.is_contiguous() ? t : t.contiguous();
}

static void same_layout(const std::vector<at::Tensor> &v, const at::Tensor &like, const char *what)
{
    for (const auto &t : v) {
        check_tensor(t);
        if (t.scalar_type() != like.scalar_type() || t.numel() != like.numel())
            refuse(std::string(what) + ": every tensor of the list must have the dtype and size of the input");
    }
}

// ---- work -------------------------------------------------------------------

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

    ~Comm() override
    {
        plx_comm_destroy(comm);
        if (!peer_hosts_store || store.use_count() > 1) // the last group of the store lets it go
            return;
        if (Py_IsInitialized() && PyGILState_Check()) {
            pybind11::gil_scoped_release nogil;
            release_and_wait_for_close(store->store, timeout);
        } else {
            release_and_wait_for_close(store->store, timeout);
        }
    }

    void flush_locked();
    void flush()
    {
        std::lock_guard<std::mutex> lk(submit_mu);
        flush_locked();
    }
    // Runs w blocking if it is still the pending one; true if it did.
    bool run_if_pending(WorkPlexus *w);

    void run()
    {
        std::unique_lock<std::mutex> lk(mu);
        for (;;) {
            cv.wait(lk, [&] { return stopping || !queue.empty(); });
            if (queue.empty())
                return;
            auto w = queue.front();
            queue.pop_front();
            lk.unlock();
            w->drive(PLX_TIMEOUT_INFINITE);
            w.reset();
            lk.lock();
        }
    }

    void enqueue(intrusive_ptr<WorkPlexus> w)
    {
        std::lock_guard<std::mutex> lk(mu);
        if (!completer.joinable())
            completer = std::thread([this] { run(); });
        queue.push_back(std::move(w));
        cv.notify_one();
    }

    void stop()
    {
        {
            std::lock_guard<std::mutex> lk(mu);
            stopping = true;
            cv.notify_one();
        }
        if (completer.joinable())
            completer.join();
    }
};

void Comm::flush_locked()
{
    if (pending) {
        auto w = std::move(pending);
        pending.reset();
        w->start_now();
    }
}

bool Comm::run_if_pending(WorkPlexus *w)
{
    std::lock_guard<std::mutex> lk(submit_mu);
    if (pending.get() != w)
        return false;
    auto self = std::move(pending); // keeps w alive
    pending.reset();
    self->run_inline();
    return true;
}

void WorkPlexus::start_now()
{
    plx_work *pw = nullptr;
    int rc = lazy.start(comm_->comm, &pw);
    lazy.kind = Lazy::NONE;
    if (rc != 0)
        complete(rc, std::string(what) + ": " + plx_last_error());
    else
        works.push_back(pw);
}

void WorkPlexus::run_inline()
{
    {
        std::lock_guard<std::mutex> lk(mutex_);
        claimed_ = true;
    }
    int rc = lazy.run(comm_->comm);
    lazy.kind = Lazy::NONE;
    complete(rc, rc ? std::string(what) + ": " + plx_last_error() : std::string());
}

WorkPlexus::~WorkPlexus()
{
    for (auto *w : works)
        plx_work_free(w); // waits for a pending one: plexus borrows our buffers until then
}

bool WorkPlexus::drive(int64_t timeout_ms)
{
    for (;;) {
        while (!works.empty()) {
            int rc = plx_work_wait(works.front(), timeout_ms);
            if (rc == PLX_ERR_TIMEOUT) {
                int fin = 0;
                plx_work_test(works.front(), &fin);
                if (!fin)
                    return false; // still pending: the caller may wait again
            }
            plx_work_free(works.front());
            works.erase(works.begin());
            if (rc != 0) {
                complete(rc, plx_last_error());
                return true;
            }
        }
        if (!next)
            break;
        auto stage = std::move(next);
        next = nullptr;
        try {
            works.push_back(stage());
        } catch (const std::exception &e) {
            complete(PLX_ERR_INTERNAL, e.what());
            return true;
        }
    }
    complete(0, "");
    return true;
}

void WorkPlexus::complete(int rc, const std::string &msg)
{
    std::exception_ptr err;
    if (recordFunctionEndCallback_) {
        recordFunctionEndCallback_(); // the profiler's event for this operation ends here
        recordFunctionEndCallback_ = nullptr;
    }
    if (rc != 0) {
        comm_->note(rc);
        err = std::make_exception_ptr(std::runtime_error("plexus: " + headline(rc) + ": " + msg));
    } else if (finish) {
        try {
            finish();
        } catch (...) {
            err = std::current_exception();
        }
    }
    keep.clear();
    intrusive_ptr<c10::ivalue::Future> fut;
    {
        std::lock_guard<std::mutex> lk(mutex_);
        done_ = true;
        claimed_ = false;
        error_ = err;
        fut = future_;
    }
    cv_.notify_all();
    if (fut) {
        if (err)
            fut->setError(err);
        else
            fut->markCompleted(c10::IValue(outputs_));
    }
}

bool WorkPlexus::isCompleted()
{
    comm_->flush();
    std::unique_lock<std::mutex> lk(mutex_);
    if (done_ || claimed_ || works.empty())
        return done_;
    int fin = 0;
    plx_work_test(works.front(), &fin);
    if (!fin || works.size() > 1 || next)
        return false;
    claimed_ = true; // finished: collect it here
    lk.unlock();
    drive(0);
    return true;
}

bool WorkPlexus::isSuccess() const
{
    std::lock_guard<std::mutex> lk(mutex_);
    return done_ && !error_;
}

std::exception_ptr WorkPlexus::exception() const
{
    std::lock_guard<std::mutex> lk(mutex_);
    return error_;
}

int WorkPlexus::sourceRank() const
{
    std::lock_guard<std::mutex> lk(mutex_);
    return source;
}

bool WorkPlexus::wait(milliseconds timeout)
{
    // Run inline only an unbounded wait: a bounded one must be able to give up.
    if (timeout.count() <= 0 && comm_->run_if_pending(this)) {
        // Ran and completed in this thread just now: no other thread
        // writes error_ once done_ is set.
        if (error_)
            std::rethrow_exception(error_);
        return true;
    }
    int64_t ms = timeout.count() <= 0 ? PLX_TIMEOUT_DEFAULT : int64_t(timeout.count()); // 0: kNoTimeout
    comm_->flush(); // this work, if it has not started yet
    std::unique_lock<std::mutex> lk(mutex_);
    if (!done_ && !claimed_) {
        claimed_ = true;
        lk.unlock();
        bool finished = drive(ms);
        lk.lock();
        if (!finished) {
            claimed_ = false;
            cv_.notify_all();
            comm_->note(PLX_ERR_TIMEOUT);
            refuse("Timed out: work not finished after " + std::to_string(ms) +
                   " ms (still pending; wait again or abort)");
        }
    } else if (!done_) {
        auto pred = [&] { return done_; };
        if (ms < 0)
            cv_.wait(lk, pred);
        else if (!cv_.wait_for(lk, milliseconds(ms), pred)) {
            comm_->note(PLX_ERR_TIMEOUT);
            refuse("Timed out: work not finished after " + std::to_string(ms) + " ms (still pending)");
        }
    }
    if (error_)
        std::rethrow_exception(error_);
    return true;
}

c10::intrusive_ptr<c10::ivalue::Future> WorkPlexus::getFuture()
{
    comm_->flush();
    std::unique_lock<std::mutex> lk(mutex_);
    if (!future_)
        future_ = c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()));
    auto fut = future_;
    if (done_) {
        lk.unlock();
        if (!fut->completed()) {
            if (error_)
                fut->setError(error_);
            else
                fut->markCompleted(c10::IValue(outputs_));
        }
    } else if (!claimed_) {
        claimed_ = true; // the completer waits for it
        lk.unlock();
        comm_->enqueue(intrusive_ptr<WorkPlexus>::unsafe_reclaim_from_nonowning(this));
    }
    return fut;
}

// ---- the process group ------------------------------------------------------

class ProcessGroupPlexus : public GroupBase {
  public:
    // deferred: torch's enable_reconfigure: no communicator (and no
    // rendezvous) until reconfigure makes one; operations before it refuse.
    ProcessGroupPlexus(const intrusive_ptr<c10d::Store> &store, int rank, int size, milliseconds timeout,
                       const std::string &name, bool deferred = false)
        : GroupBase(rank, size), comm_(c10::make_intrusive<Comm>())
    {
#ifdef PLEXUS_TORCH_BACKEND_API
        init(); // c10d::Backend's logging setup, as its implementations must
#endif
        comm_->name = name;
        comm_->group_timeout = timeout;
        for (const char *op : kOpWords)
            comm_->titles.push_back(name + ":" + op);
        auto &b = *comm_->store;
        bridge_init(b, store);
        if (deferred)
            return;
        plx_comm_options o;
        plx_comm_options_init(&o);
        o.rank = rank;
        o.size = size;
        o.timeout_ms = timeout.count() > 0 ? timeout.count() : -1;
        o.store = &b.cb;
        store_error.clear();
        int rc;
        {
            pybind11::gil_scoped_release nogil;
            bool host = publish_if_host(store);
            rc = plx_comm_init(&o, &comm_->comm);
            if (rc == 0 && !host) {
                comm_->peer_hosts_store = peer_hosts(store);
                comm_->timeout = timeout.count() > 0 ? timeout : milliseconds(30 * 60 * 1000);
            }
        }
        if (rc != 0)
            throw std::runtime_error(std::string("plexus: init_process_group(rank ") + std::to_string(rank) +
                                     " of " + std::to_string(size) + "): " + headline(rc) + ": " +
                                     plx_last_error() +
                                     (store_error.empty() ? "" : " (the store said: " + store_error + ")"));
    }

    // A group over child, a communicator plexus made from parent's (split,
    // shrink): it shares parent's store and inherits its name and timeout.
    ProcessGroupPlexus(const intrusive_ptr<Comm> &parent, plx_comm *child)
        : GroupBase(plx_comm_rank(child), plx_comm_size(child)), comm_(c10::make_intrusive<Comm>())
    {
#ifdef PLEXUS_TORCH_BACKEND_API
        init();
#endif
        comm_->comm = child;
        comm_->store = parent->store;
        comm_->peer_hosts_store = parent->peer_hosts_store;
        comm_->timeout = parent->timeout;
        comm_->name = parent->name;
        comm_->group_timeout = parent->group_timeout;
        comm_->titles = parent->titles;
    }

    ~ProcessGroupPlexus() override
    {
        comm_->flush();
        comm_->stop();
    }

#include "process_group_c10d.inc"

    const std::string getBackendName() const override { return "plexus"; }

    // torch's sequence numbers (it asks a group it takes for gloo): the
    // collectives issued on this group, from 0 on every rank (a new group).
    void setSequenceNumberForGroup() override { seq_ = 0; }
    uint64_t getSequenceNumberForGroup() override { return seq_; }
    std::string transport() const { return plx_comm_backend(c()); }

    // plx_comm_revoke: every pending and later operation of the group fails
    // on every rank, including ranks blocked in a collective, so no rank
    // stays waiting for one that gave up. Not queued behind this rank's
    // pending work (that is what it ends); revoking twice is fine.
    void revoke()
    {
        plx_comm *cm = c();
        int rc;
        {
            pybind11::gil_scoped_release nogil;
            rc = plx_comm_revoke(cm);
        }
        if (rc != 0 && rc != PLX_ERR_REVOKED)
            fail(rc, "revoke");
    }

    // A CPU tensor in memory that every rank of this host maps
    // (plx_mem_alloc): collectives whose tensors live there may go single
    // pass (shm's allreduce). Collective, like any operation on the group:
    // every rank asks for the same shape and dtype, in the same order. The
    // tensor keeps the communicator alive; freeing is local.
    at::Tensor alloc(const std::vector<int64_t> &sizes, const pybind11::object &dtype)
    {
        if (!THPDtype_Check(dtype.ptr()))
            refuse("alloc: dtype must be a torch.dtype");
        at::ScalarType st = reinterpret_cast<THPDtype *>(dtype.ptr())->scalar_type;
        int64_t n = 1;
        for (int64_t d : sizes) {
            if (d < 0)
                refuse("alloc: negative dimension " + std::to_string(d));
            n *= d;
        }
        size_t bytes = (size_t)std::max<int64_t>(n, 1) * c10::elementSize(st);
        comm_->flush();
        void *p = nullptr;
        int rc;
        {
            pybind11::gil_scoped_release nogil;
            rc = plx_mem_alloc(c(), bytes, &p);
        }
        if (rc != 0)
            fail(rc, "alloc");
        intrusive_ptr<Comm> keep = comm_;
        return at::from_blob(p, sizes, [keep](void *q) { plx_mem_free(keep->comm, q); },
                             at::TensorOptions().dtype(st).device(at::kCPU));
    }

    intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor> &tensors, const c10d::BroadcastOptions &opts) override
    {
        const at::Tensor &t = one(tensors, "broadcast");
        auto w = make_lazy(c10d::OpType::BROADCAST, tensors);
        at::Tensor buf = dense(t);
        Lazy l;
        l.kind = Lazy::BROADCAST;
        l.p = buf.data_ptr();
        l.n = buf.numel();
        l.dt = dtype_of(t);
        l.root = int(opts.rootRank);
        copy_back(w, t, buf);
        launch(w, "broadcast", buf.nbytes(), l);
        return w;
    }

#ifdef PLEXUS_TORCH_BACKEND_API
    // torch 2.x hands sparse tensors to this entry.
    intrusive_ptr<c10d::Work> allreduce_sparse(std::vector<at::Tensor> &tensors,
                                               const c10d::AllreduceOptions &opts) override
    {
        if (tensors.size() != 1 || !tensors[0].is_sparse())
            refuse("allreduce_sparse takes exactly one sparse tensor per process");
        return sparse_allreduce(tensors[0], opts);
    }
#endif

    intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor> &tensors, const c10d::AllreduceOptions &opts) override
    {
        if (tensors.size() == 1 && tensors[0].is_sparse())
            return sparse_allreduce(tensors[0], opts);
        const at::Tensor &t = one(tensors, "allreduce");
        int op = redop_of(opts.reduceOp, t);
        auto w = make_lazy(c10d::OpType::ALLREDUCE, tensors);
        at::Tensor buf = dense(t);
        Lazy l;
        l.kind = Lazy::ALLREDUCE;
        l.p = buf.data_ptr();
        l.n = buf.numel();
        l.dt = dtype_of(t);
        l.op = op;
        copy_back(w, t, buf);
        launch(w, "allreduce", buf.nbytes(), l);
        return w;
    }

    // Several tensors of one dtype reduced by one collective over their
    // concatenation.
    intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor> &tensors,
                                                  const c10d::AllreduceCoalescedOptions &opts) override
    {
        if (tensors.empty())
            refuse("allreduce_coalesced needs at least one tensor");
        same_dtype(tensors, "allreduce_coalesced");
        int op = redop_of(opts.reduceOp, tensors[0]);
        at::Tensor flat = pack(tensors, tensors[0]);
        auto w = make(c10d::OpType::ALLREDUCE_COALESCED, tensors);
        start(w, "allreduce_coalesced", plx_iallreduce(c(), flat.data_ptr(), flat.data_ptr(), flat.numel(),
                                                       dtype_of(tensors[0]), op, nullptr, slot(w)));
        unpack(w, flat, tensors);
        w->keep = {flat};
        return w;
    }

    // Every rank's list of tensors (one dtype, any shapes, the same on every
    // rank) by one allgather of their concatenation.
    intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>> &outputs,
                                                  std::vector<at::Tensor> &inputs, const c10d::AllgatherOptions &) override
    {
        int P = getSize();
        if (inputs.empty())
            refuse("allgather_coalesced needs at least one input tensor");
        same_dtype(inputs, "allgather_coalesced");
        if (int(outputs.size()) != P)
            refuse("allgather_coalesced needs world_size output lists (got " + std::to_string(outputs.size()) + ")");
        std::vector<at::Tensor> all;
        for (const auto &list : outputs) {
            if (list.size() != inputs.size())
                refuse("allgather_coalesced: every output list must have as many tensors as the input list");
            for (size_t j = 0; j < list.size(); j++) {
                check_tensor(list[j]);
                if (list[j].scalar_type() != inputs[j].scalar_type() || list[j].numel() != inputs[j].numel())
                    refuse("allgather_coalesced: output tensor " + std::to_string(j) +
                           " must have the dtype and size of input tensor " + std::to_string(j));
                all.push_back(list[j]);
            }
        }
        at::Tensor src = pack(inputs, inputs[0]);
        at::Tensor flat = at::empty({src.numel() * P}, src.options());
        auto w = make(c10d::OpType::ALLGATHER_COALESCED, all, &inputs);
        start(w, "allgather_coalesced", plx_iallgather(c(), src.data_ptr(), flat.data_ptr(), src.numel(),
                                                       dtype_of(inputs[0]), nullptr, slot(w)));
        unpack(w, flat, all);
        w->keep = {src, flat};
        return w;
    }

    intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor> &tensors, const c10d::ReduceOptions &opts) override
    {
        const at::Tensor &t = one(tensors, "reduce");
        int op = redop_of(opts.reduceOp, t);
        auto w = make_lazy(c10d::OpType::REDUCE, tensors);
        at::Tensor buf = dense(t);
        Lazy l;
        l.kind = Lazy::REDUCE;
        l.p = buf.data_ptr();
        l.n = buf.numel();
        l.dt = dtype_of(t);
        l.op = op;
        l.root = int(opts.rootRank);
        copy_back(w, t, buf);
        launch(w, "reduce", buf.nbytes(), l);
        return w;
    }

    intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>> &outputs, std::vector<at::Tensor> &inputs,
                                        const c10d::AllgatherOptions &opts) override
    {
        const at::Tensor &in = one(inputs, "allgather");
        if (outputs.size() != 1 || int(outputs[0].size()) != getSize())
            refuse("allgather needs one list of world_size output tensors");
        same_layout(outputs[0], in, "allgather");
        auto w = make(c10d::OpType::ALLGATHER, outputs[0], &inputs);
        at::Tensor src = dense(in), flat = at::empty({in.numel() * getSize()}, in.options());
        start(w, "allgather", plx_iallgather(c(), src.data_ptr(), flat.data_ptr(), in.numel(), dtype_of(in), nullptr,
                                             slot(w)));
        unpack(w, flat, outputs[0]);
        w->keep = {src, flat};
        return w;
    }

    intrusive_ptr<c10d::Work> _allgather_base(at::Tensor &out, at::Tensor &in, const c10d::AllgatherOptions &) override
    {
        check_tensor(in);
        check_tensor(out);
        if (out.numel() != in.numel() * getSize() || out.scalar_type() != in.scalar_type())
            refuse("_allgather_base: the output must hold world_size times the input, of its dtype");
        std::vector<at::Tensor> outs{out}, ins{in};
        auto w = make(c10d::OpType::_ALLGATHER_BASE, outs, &ins);
        at::Tensor src = dense(in), dst = dense(out);
        start(w, "_allgather_base", plx_iallgather(c(), src.data_ptr(), dst.data_ptr(), in.numel(), dtype_of(in),
                                                   nullptr, slot(w)));
        copy_back(w, out, dst);
        w->keep = {src, dst};
        return w;
    }

    intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>> &outputs, std::vector<at::Tensor> &inputs,
                                     const c10d::GatherOptions &opts) override
    {
        const at::Tensor &in = one(inputs, "gather");
        int root = int(opts.rootRank);
        bool is_root = getRank() == root;
        if (is_root && (outputs.size() != 1 || int(outputs[0].size()) != getSize()))
            refuse("gather needs one list of world_size output tensors on the root");
        if (is_root)
            same_layout(outputs[0], in, "gather");
        auto w = make(c10d::OpType::GATHER, is_root ? outputs[0] : std::vector<at::Tensor>{}, &inputs);
        at::Tensor src = dense(in), flat;
        if (is_root)
            flat = at::empty({in.numel() * getSize()}, in.options());
        start(w, "gather", plx_igather(c(), src.data_ptr(), is_root ? flat.data_ptr() : nullptr, in.numel(),
                                       dtype_of(in), root, nullptr, slot(w)));
        if (is_root)
            unpack(w, flat, outputs[0]);
        w->keep = {src, flat};
        return w;
    }

    intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor> &outputs, std::vector<std::vector<at::Tensor>> &inputs,
                                      const c10d::ScatterOptions &opts) override
    {
        const at::Tensor &out = one(outputs, "scatter");
        int root = int(opts.rootRank);
        bool is_root = getRank() == root;
        at::Tensor flat;
        if (is_root) {
            if (inputs.size() != 1 || int(inputs[0].size()) != getSize())
                refuse("scatter needs one list of world_size input tensors on the root");
            same_layout(inputs[0], out, "scatter");
            flat = pack(inputs[0], out);
        }
        auto w = make(c10d::OpType::SCATTER, outputs);
        at::Tensor dst = dense(out);
        start(w, "scatter", plx_iscatter(c(), is_root ? flat.data_ptr() : nullptr, dst.data_ptr(), out.numel(),
                                         dtype_of(out), root, nullptr, slot(w)));
        copy_back(w, out, dst);
        w->keep = {flat, dst};
        return w;
    }

    intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor> &outputs,
                                             std::vector<std::vector<at::Tensor>> &inputs,
                                             const c10d::ReduceScatterOptions &opts) override
    {
        const at::Tensor &out = one(outputs, "reduce_scatter");
        int op = redop_of(opts.reduceOp, out);
        if (inputs.size() != 1 || int(inputs[0].size()) != getSize())
            refuse("reduce_scatter needs one list of world_size input tensors");
        same_layout(inputs[0], out, "reduce_scatter");
        at::Tensor flat = pack(inputs[0], out), dst = dense(out);
        auto w = make(c10d::OpType::REDUCE_SCATTER, outputs);
        start(w, "reduce_scatter", plx_ireduce_scatter(c(), flat.data_ptr(), dst.data_ptr(), out.numel(),
                                                       dtype_of(out), op, nullptr, slot(w)));
        copy_back(w, out, dst);
        w->keep = {flat, dst};
        return w;
    }

    intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor &out, at::Tensor &in,
                                                   const c10d::ReduceScatterOptions &opts) override
    {
        check_tensor(in);
        check_tensor(out);
        int op = redop_of(opts.reduceOp, out);
        if (in.numel() != out.numel() * getSize() || out.scalar_type() != in.scalar_type())
            refuse("_reduce_scatter_base: the input must hold world_size times the output, of its dtype");
        std::vector<at::Tensor> outs{out};
        auto w = make(c10d::OpType::_REDUCE_SCATTER_BASE, outs);
        at::Tensor src = dense(in), dst = dense(out);
        start(w, "_reduce_scatter_base", plx_ireduce_scatter(c(), src.data_ptr(), dst.data_ptr(), out.numel(),
                                                             dtype_of(out), op, nullptr, slot(w)));
        copy_back(w, out, dst);
        w->keep = {src, dst};
        return w;
    }

    intrusive_ptr<c10d::Work> alltoall_base(at::Tensor &out, at::Tensor &in, std::vector<int64_t> &out_splits,
                                            std::vector<int64_t> &in_splits, const c10d::AllToAllOptions &) override
    {
        check_tensor(in);
        check_tensor(out);
        if (in.scalar_type() != out.scalar_type())
            refuse("all_to_all_single: input and output dtypes differ");
        std::vector<at::Tensor> outs{out};
        auto w = make(c10d::OpType::ALLTOALL_BASE, outs);
        at::Tensor src = dense(in), dst = dense(out);
        int P = getSize();
        if (out_splits.empty() && in_splits.empty()) {
            if (in.numel() % P || out.numel() != in.numel())
                refuse("all_to_all_single without splits needs equal tensors divisible by world_size");
            start(w, "all_to_all_single", plx_ialltoall(c(), src.data_ptr(), dst.data_ptr(), in.numel() / P,
                                                        dtype_of(in), nullptr, slot(w)));
        } else {
            std::vector<size_t> sc, sd, rc, rd;
            splits(in, in_splits, sc, sd, "input");
            splits(out, out_splits, rc, rd, "output");
            start(w, "all_to_all_single", plx_ialltoallv(c(), src.data_ptr(), sc.data(), sd.data(), dst.data_ptr(),
                                                         rc.data(), rd.data(), dtype_of(in), nullptr, slot(w)));
        }
        copy_back(w, out, dst);
        w->keep = {src, dst};
        return w;
    }

    intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor> &outputs, std::vector<at::Tensor> &inputs,
                                       const c10d::AllToAllOptions &) override
    {
        int P = getSize();
        if (int(outputs.size()) != P || int(inputs.size()) != P)
            refuse("all_to_all needs world_size input and output tensors");
        std::vector<size_t> sc(P), sd(P), rc(P), rd(P);
        size_t at_s = 0, at_r = 0;
        for (int j = 0; j < P; j++) {
            check_tensor(inputs[j]);
            check_tensor(outputs[j]);
            if (inputs[j].scalar_type() != inputs[0].scalar_type() || outputs[j].scalar_type() != inputs[0].scalar_type())
                refuse("all_to_all: every tensor must have one dtype");
            sc[j] = inputs[j].numel();
            sd[j] = at_s;
            at_s += sc[j];
            rc[j] = outputs[j].numel();
            rd[j] = at_r;
            at_r += rc[j];
        }
        at::Tensor flat_in = at_s ? at::cat(flatten(inputs)) : at::empty({0}, inputs[0].options());
        at::Tensor flat_out = at::empty({int64_t(at_r)}, inputs[0].options());
        auto w = make(c10d::OpType::ALLTOALL, outputs);
        start(w, "all_to_all", plx_ialltoallv(c(), flat_in.data_ptr(), sc.data(), sd.data(), flat_out.data_ptr(),
                                              rc.data(), rd.data(), dtype_of(inputs[0]), nullptr, slot(w)));
        unpack(w, flat_out, outputs);
        w->keep = {flat_in, flat_out};
        return w;
    }

    intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions &) override
    {
        auto w = make_lazy(c10d::OpType::BARRIER, {});
        Lazy l;
        l.kind = Lazy::BARRIER;
        launch(w, "barrier", 0, l);
        return w;
    }

    // torch's monitored_barrier: plexus's own (plx_monitored_barrier), its
    // outcome worded as gloo words it (torch's tests match those words).
    void monitoredBarrier(const c10d::BarrierOptions &opts, bool waitAllRanks) override
    {
        comm_->flush();
        int64_t ms = opts.timeout != c10d::kUnsetTimeout ? int64_t(opts.timeout.count()) : comm_->timeout.count();
        int me = getRank(), n = getSize(); // torch's binding has released the GIL
        std::vector<int> late(size_t(n), -1);
        int nlate = 0;
        int rc = plx_monitored_barrier(c(), ms, waitAllRanks ? 1 : 0, late.data(), n, &nlate);
        if (rc == 0)
            return;
        std::string why = " (plexus: " + std::string(plx_err_name(rc)) + ": " + plx_last_error() + ")";
        if (me != 0)
            throw std::runtime_error("Rank " + std::to_string(me) + " successfully reached monitoredBarrier, but "
                                     "received errors while waiting for send/recv from rank 0. Please check rank 0 "
                                     "logs for faulty rank." + why);
        if (nlate == 0 && rc == PLX_ERR_TIMEOUT)
            throw std::runtime_error("Rank 0 timed out in monitoredBarrier after " + std::to_string(ms) + " ms." + why);
        if (nlate == 0)
            fail(rc, "monitoredBarrier");
        std::string ranks;
        for (int i = 0; i < nlate && i < n; i++)
            ranks += (ranks.empty() ? "" : ", ") + std::to_string(late[size_t(i)]);
        throw std::runtime_error((waitAllRanks ? "Ranks " : "Rank ") + ranks + " failed to pass monitoredBarrier in " +
                                 std::to_string(ms) + " ms" + why);
    }

    // Point-to-point: each message is preceded by a 4-byte header with the
    // sender's rank (tag 2t) ahead of the data (tag 2t+1), so a receive from
    // any source learns its sender (plexus reports no source for a work).
    intrusive_ptr<c10d::Work> send(std::vector<at::Tensor> &tensors, int dst, int tag) override
    {
        const at::Tensor &t = one(tensors, "send");
        check_tag(tag);
        auto w = make(c10d::OpType::SEND, {}, &tensors);
        at::Tensor buf = dense(t), hdr = at::full({1}, getRank(), at::kInt);
        start(w, "send", plx_isend(c(), hdr.data_ptr(), 1, PLX_I32, dst, 2 * tag, nullptr, slot(w)));
        start(w, "send", plx_isend(c(), buf.data_ptr(), buf.numel(), dtype_of(t), dst, 2 * tag + 1, nullptr, slot(w)));
        w->keep = {buf, hdr};
        return w;
    }

    intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor> &tensors, int src, int tag) override
    {
        return receive(tensors, src, tag, c10d::OpType::RECV);
    }

    intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor> &tensors, int tag) override
    {
        return receive(tensors, PLX_ANY_SOURCE, tag, c10d::OpType::RECVANYSOURCE); // its own profiler event
    }

  private:
    plx_comm *c() const
    {
        if (!comm_->comm)
            refuse("the group was made with enable_reconfigure=True and has no communicator yet: "
                   "reconfigure it first (dist._reconfigure with every member's handle)");
        return comm_->comm;
    }

    static void same_dtype(const std::vector<at::Tensor> &v, const char *what)
    {
        for (const auto &t : v) {
            check_tensor(t);
            if (t.scalar_type() != v[0].scalar_type())
                refuse(std::string(what) + ": every tensor must have one dtype (got " +
                       c10::toString(v[0].scalar_type()) + " and " + c10::toString(t.scalar_type()) + ")");
        }
    }

    // A sparse COO tensor summed over the ranks as gloo does it: every rank
    // gathers every rank's indices and values (plexus allgather of the
    // counts, then allgatherv), the duplicates are summed by coalescing,
    // and the same tensor results on every rank. Runs to completion here.
    intrusive_ptr<c10d::Work> sparse_allreduce(at::Tensor &t, const c10d::AllreduceOptions &opts)
    {
        if (!t.device().is_cpu())
            refuse("sparse allreduce: only CPU tensors are supported by this build (got " + t.device().str() + ")");
        if (static_cast<c10d::ReduceOp::RedOpType>(opts.reduceOp) != c10d::ReduceOp::SUM)
            refuse("sparse allreduce supports only SUM (as gloo)");
        std::vector<at::Tensor> outs{t};
        auto w = make(c10d::OpType::ALLREDUCE, outs);
        int P = getSize();
        int64_t sd = t.sparse_dim();
        // Indices as [nnz, sparse_dim] rows and values as [nnz, ...] rows, so
        // that the ranks' blocks concatenate along the first dimension.
        at::Tensor idx = t._indices().t().contiguous(), val = t._values().contiguous();
        int vdt = dtype_of(val);
        int64_t nnz = idx.size(0), row = 1;
        for (int64_t d = 1; d < val.dim(); d++)
            row *= val.size(d);
        at::Tensor mine = at::full({1}, nnz, at::kLong), counts = at::empty({P}, at::kLong);
        int rc = plx_allgather(c(), mine.data_ptr(), counts.data_ptr(), 1, PLX_I64);
        if (rc != 0)
            fail(rc, "sparse allreduce (counts)");
        std::vector<size_t> ic(P), vc(P);
        int64_t total = 0;
        for (int j = 0; j < P; j++) {
            int64_t n = counts.data_ptr<int64_t>()[j];
            ic[j] = size_t(n * sd);
            vc[j] = size_t(n * row);
            total += n;
        }
        std::vector<int64_t> vshape = val.sizes().vec();
        vshape[0] = total;
        at::Tensor all_idx = at::empty({total, sd}, at::kLong), all_val = at::empty(vshape, val.options());
        rc = plx_allgatherv(c(), idx.data_ptr(), ic[getRank()], all_idx.data_ptr(), ic.data(), nullptr, PLX_I64);
        if (rc == 0)
            rc = plx_allgatherv(c(), val.data_ptr(), vc[getRank()], all_val.data_ptr(), vc.data(), nullptr, vdt);
        if (rc != 0)
            fail(rc, "sparse allreduce (indices and values)");
        at::Tensor sum = at::sparse_coo_tensor(all_idx.t(), all_val, t.sizes(), t.options()).coalesce();
        t.copy_(sum);
        w->complete(0, "");
        return w;
    }

    // gloo's words for the operations, indexed by c10d::OpType.
    static constexpr const char *kOpWords[] = {
        "broadcast", "all_reduce", "all_reduce", "reduce", "all_gather", "all_gather_into_tensor", "all_gather",
        "gather", "scatter", "reduce_scatter", "all_to_all", "all_to_all", "send", "recv", "recvAnySource",
        "barrier", "reduce_scatter_tensor"};

    // The profiler's title for type (null when nothing records: the title
    // costs c10d::Work an allocation per operation).
    const char *title(c10d::OpType type) const
    {
        size_t i = size_t(type);
        if (i >= comm_->titles.size() || !at::hasCallbacks())
            return nullptr;
        return comm_->titles[i].c_str();
    }

    // Every operation starts here: a small collective still waiting to
    // start goes first (program order on every rank). inputs: what the
    // profiler shows as the operation's input (default: the outputs).
    intrusive_ptr<WorkPlexus> make(c10d::OpType type, std::vector<at::Tensor> outputs,
                                   const std::vector<at::Tensor> *inputs = nullptr)
    {
        if (type != c10d::OpType::SEND && type != c10d::OpType::RECV && type != c10d::OpType::RECVANYSOURCE)
            seq_++;
        comm_->flush();
        const char *t = title(type);
        return coalesce(c10::make_intrusive<WorkPlexus>(comm_, type, outputs, t, inputs ? *inputs : outputs));
    }

    // Between startCoalescing and endCoalescing every work is also kept
    // for the one endCoalescing returns.
    intrusive_ptr<WorkPlexus> coalesce(intrusive_ptr<WorkPlexus> w)
    {
        if (comm_->coalescing)
            comm_->coalesced.push_back(w);
        return w;
    }

    // An operation that goes through launch: launch starts what is
    // pending first, under the one lock it takes anyway.
    intrusive_ptr<WorkPlexus> make_lazy(c10d::OpType type, std::vector<at::Tensor> outputs)
    {
        c(); // refuses while there is no communicator
        seq_++;
        const char *t = title(type);
        return coalesce(c10::make_intrusive<WorkPlexus>(comm_, type, outputs, t, outputs));
    }

    // Up to this size a collective starts lazily (see Comm::pending).
    static constexpr size_t kLazyBytes = 64 << 10;

    void launch(const intrusive_ptr<WorkPlexus> &w, const char *what, size_t bytes, const Lazy &l)
    {
        std::lock_guard<std::mutex> lk(comm_->submit_mu);
        comm_->flush_locked();
        if (bytes <= kLazyBytes) {
            w->what = what;
            w->lazy = l;
            comm_->pending = w;
            return;
        }
        start(w, what, l.start(c(), slot(w)));
    }

    static plx_work **slot(const intrusive_ptr<WorkPlexus> &w)
    {
        w->works.push_back(nullptr);
        return &w->works.back();
    }

    static void start(const intrusive_ptr<WorkPlexus> &w, const char *what, int rc)
    {
        if (rc != 0) {
            w->comm_->note(rc);
            w->works.pop_back(); // the slot that was never filled
            fail(rc, what);
        }
    }

    // buf is t itself (already held by the work's outputs) or a contiguous
    // copy, held until completion and copied back into t after it.
    static void copy_back(const intrusive_ptr<WorkPlexus> &w, const at::Tensor &t, const at::Tensor &buf)
    {
        if (!buf.is_same(t)) {
            w->keep.push_back(buf);
            at::Tensor dst = t, src = buf;
            w->finish = [dst, src]() mutable { dst.copy_(src); };
        }
    }

    static void unpack(const intrusive_ptr<WorkPlexus> &w, const at::Tensor &flat, const std::vector<at::Tensor> &outs)
    {
        std::vector<at::Tensor> dst = outs;
        at::Tensor src = flat;
        w->finish = [dst, src]() mutable {
            int64_t at = 0;
            for (auto &t : dst) {
                t.copy_(src.narrow(0, at, t.numel()).view(t.sizes()));
                at += t.numel();
            }
        };
    }

    static std::vector<at::Tensor> flatten(const std::vector<at::Tensor> &v)
    {
        std::vector<at::Tensor> out;
        out.reserve(v.size());
        for (const auto &t : v)
            out.push_back(t.reshape({-1}));
        return out;
    }

    static at::Tensor pack(const std::vector<at::Tensor> &v, const at::Tensor &like)
    {
        return v.empty() ? at::empty({0}, like.options()) : at::cat(flatten(v));
    }

    // Split sizes along dim 0 (empty: equal) as element counts and packed displacements.
    void splits(const at::Tensor &t, const std::vector<int64_t> &sp, std::vector<size_t> &cnt, std::vector<size_t> &dsp,
                const char *which) const
    {
        int P = getSize();
        int64_t rows = t.dim() ? t.size(0) : 1, row = rows ? t.numel() / rows : 0;
        cnt.assign(P, 0);
        dsp.assign(P, 0);
        if (sp.empty()) {
            if (rows % P)
                refuse(std::string("all_to_all_single: ") + which + " has " + std::to_string(rows) +
                       " rows, not divisible by world_size " + std::to_string(P));
        } else if (int(sp.size()) != P) {
            refuse(std::string("all_to_all_single: ") + which + " split sizes have " + std::to_string(sp.size()) +
                   " entries, need world_size " + std::to_string(P));
        }
        int64_t at = 0;
        for (int j = 0; j < P; j++) {
            int64_t n = sp.empty() ? rows / P : sp[j];
            if (n < 0)
                refuse(std::string("all_to_all_single: ") + which + " split size " + std::to_string(j) + " is negative");
            cnt[j] = size_t(n * row);
            dsp[j] = size_t(at * row);
            at += n;
        }
        if (at != rows)
            refuse(std::string("all_to_all_single: ") + which + " split sizes add up to " + std::to_string(at) +
                   " rows but the tensor has " + std::to_string(rows));
    }

    static void check_tag(int tag)
    {
        if (tag < 0 || tag > (1 << 29))
            refuse("tag " + std::to_string(tag) + " is out of range (0 .. 2^29)");
    }

    intrusive_ptr<c10d::Work> receive(std::vector<at::Tensor> &tensors, int src, int tag, c10d::OpType type)
    {
        const at::Tensor &t = one(tensors, "recv");
        check_tag(tag);
        auto w = make(type, tensors);
        at::Tensor buf = dense(t), hdr = at::empty({1}, at::kInt);
        start(w, "recv", plx_irecv(c(), hdr.data_ptr(), 1, PLX_I32, src, 2 * tag, nullptr, slot(w)));
        plx_comm *comm = c();
        WorkPlexus *raw = w.get();
        int dtype = dtype_of(t);
        // The data comes from whoever sent the header.
        w->next = [comm, raw, hdr, buf, dtype, tag]() mutable {
            int from = hdr.data_ptr<int32_t>()[0];
            raw->source = from;
            plx_work *d = nullptr;
            int rc = plx_irecv(comm, buf.data_ptr(), buf.numel(), dtype, from, 2 * tag + 1, nullptr, &d);
            if (rc != 0)
                fail(rc, "recv");
            return d;
        };
        copy_back(w, t, buf);
        w->keep.push_back(hdr);
        return w;
    }

    intrusive_ptr<Comm> comm_;
    std::atomic<uint64_t> seq_{0};
};

} // namespace plexus_torch

PYBIND11_MODULE(_C, m)
{
    using plexus_torch::ProcessGroupPlexus;
    m.doc() = "plexus.torch: the torch.distributed backend 'plexus' (torch " TORCH_VERSION " build)";
    pybind11::class_<ProcessGroupPlexus, plexus_torch::GroupBase, c10::intrusive_ptr<ProcessGroupPlexus>>(
        m, "ProcessGroupPlexus")
        .def(pybind11::init([](const c10::intrusive_ptr<c10d::Store> &store, int rank, int size,
                               std::chrono::duration<float> timeout, const std::string &name,
                               bool enable_reconfigure) {
                 return c10::make_intrusive<ProcessGroupPlexus>(
                     store, rank, size, std::chrono::duration_cast<std::chrono::milliseconds>(timeout), name,
                     enable_reconfigure);
             }),
             pybind11::arg("store"), pybind11::arg("rank"), pybind11::arg("size"), pybind11::arg("timeout"),
             pybind11::arg("name") = "plexus", pybind11::arg("enable_reconfigure") = false,
             "name: the backend name torch knows the group by, which the profiler's events carry "
             "(\"<name>:all_reduce\"); enable_reconfigure: make no communicator (no rendezvous) until "
             "reconfigure, as torch's init_process_group(enable_reconfigure=True) asks")
        .def_property_readonly("transport", &ProcessGroupPlexus::transport,
                               "the plexus backend carrying the traffic (tcp, mpi-openmpi, ...)")
        .def("revoke", &ProcessGroupPlexus::revoke,
             "plx_comm_revoke: every pending and later operation of the group fails on every rank "
             "(RuntimeError, PLX_ERR_REVOKED), including ranks blocked in a collective")
        .def("alloc", &ProcessGroupPlexus::alloc, pybind11::arg("sizes"), pybind11::arg("dtype"),
             "a zeroed CPU tensor in memory every rank of this host maps (plx_mem_alloc); collective: "
             "every rank calls it with the same shape and dtype, in the same order");
    m.def("version", [] { return std::string(plx_version()); });
}
