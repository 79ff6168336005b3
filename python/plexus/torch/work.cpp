// work.cpp - see work.hpp.
#include "work.hpp"

#include <torch/csrc/utils/pybind.h>

#include <ATen/core/ivalue.h>
#include <ATen/record_function.h>

#include <atomic>
#include <thread>

#include "errors.hpp"
#include "store_handover.hpp"

namespace plexus_torch {

namespace {
// The thread that runs Python's exit (drain_at_exit is its atexit hook),
// once it has begun; no thread's id before.
std::atomic<std::thread::id> exit_thread;

bool py_finalizing()
{
#if PY_VERSION_HEX >= 0x030D0000
    return Py_IsFinalizing() || !Py_IsInitialized();
#else
    return _Py_IsFinalizing() || !Py_IsInitialized();
#endif
}

// A daemon thread whose wait ends after the interpreter began finalizing
// would be ended as torch's binding takes the GIL back: inside a noexcept
// frame, so std::terminate aborts the whole process (gloo's too). Such a
// thread stays here instead, and the process's exit ends it.
void park_if_finalizing()
{
    std::thread::id exiting = exit_thread.load();
    if (exiting == std::thread::id() || exiting == std::this_thread::get_id() || !py_finalizing())
        return;
    for (;;)
        std::this_thread::sleep_for(std::chrono::hours(1));
}

// Works queued for a completer thread and not yet finished, in every group
// of the process, by communicator (a queued work holds its Comm, so every
// key is alive): drain_at_exit waits for them.
std::mutex queued_mu;
std::condition_variable queued_cv;
long queued_works = 0;
std::map<Comm *, long> queued_by_comm;

void queued_add(Comm *c)
{
    std::lock_guard<std::mutex> lk(queued_mu);
    queued_works++;
    queued_by_comm[c]++;
}

void queued_done(Comm *c)
{
    std::lock_guard<std::mutex> lk(queued_mu);
    if (--queued_by_comm[c] == 0)
        queued_by_comm.erase(c);
    if (--queued_works == 0)
        queued_cv.notify_all();
}

// Ctrl-C while exit waits: the groups still working are aborted, so their
// works fail at once and their callbacks run (with the error) before the
// interpreter goes; a second one is not waited for.
void abort_queued()
{
    std::lock_guard<std::mutex> lk(queued_mu);
    for (auto &q : queued_by_comm)
        if (q.first->comm)
            plx_comm_abort(q.first->comm);
}
} // namespace

void drain_at_exit()
{
    exit_thread.store(std::this_thread::get_id());
    // A slice at a time, so that a signal (Ctrl-C) still reaches Python.
    bool aborted = false;
    for (;;) {
        {
            pybind11::gil_scoped_release nogil;
            std::unique_lock<std::mutex> lk(queued_mu);
            if (queued_cv.wait_for(lk, milliseconds(100), [] { return queued_works == 0; }))
                break;
        }
        if (PyErr_CheckSignals() != 0) {
            if (aborted)
                throw pybind11::error_already_set();
            PyErr_Clear();
            aborted = true;
            pybind11::gil_scoped_release nogil;
            abort_queued();
        }
    }
    if (aborted) { // the interrupt, once the callbacks have run
        PyErr_SetNone(PyExc_KeyboardInterrupt);
        throw pybind11::error_already_set();
    }
}

Comm::~Comm()
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

void Comm::run()
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
        w.reset(); // may run Python (the future's last reference): before queued_done
        queued_done(this);
        lk.lock();
    }
}

void Comm::enqueue(intrusive_ptr<WorkPlexus> w)
{
    std::lock_guard<std::mutex> lk(mu);
    if (!completer.joinable())
        completer = std::thread([this] { run(); });
    queued_add(this);
    queue.push_back(std::move(w));
    cv.notify_one();
}

void Comm::stop()
{
    {
        std::lock_guard<std::mutex> lk(mu);
        stopping = true;
        cv.notify_one();
    }
    if (completer.joinable())
        completer.join();
}

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
    try {
        bool done = wait_here(timeout);
        park_if_finalizing();
        return done;
    } catch (...) {
        park_if_finalizing();
        throw;
    }
}

bool WorkPlexus::wait_here(milliseconds timeout)
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

} // namespace plexus_torch
