// process_group.cpp - ProcessGroupPlexus made (a communicator over torch's
// store, or one plexus split or shrank from another), plexus.torch's own
// entries (revoke, alloc), and how each operation starts: a work, a small
// collective kept to start lazily, the caller's tensors copied back or
// unpacked when the work completes.
#include "process_group.hpp"

#include <torch/csrc/Dtype.h>
#include <torch/csrc/utils/pybind.h>

#include <ATen/ops/from_blob.h>
#include <ATen/record_function.h>

#include <algorithm>

#include "store_handover.hpp"

namespace plexus_torch {

ProcessGroupPlexus::ProcessGroupPlexus(const intrusive_ptr<c10d::Store> &store, int rank, int size,
                                       milliseconds timeout, const std::string &name, bool deferred)
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

ProcessGroupPlexus::ProcessGroupPlexus(const intrusive_ptr<Comm> &parent, plx_comm *child)
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

ProcessGroupPlexus::~ProcessGroupPlexus()
{
    comm_->flush();
    comm_->stop();
}

// plx_comm_revoke: every pending and later operation of the group fails
// on every rank, including ranks blocked in a collective, so no rank
// stays waiting for one that gave up. Not queued behind this rank's
// pending work (that is what it ends); revoking twice is fine.
void ProcessGroupPlexus::revoke()
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
at::Tensor ProcessGroupPlexus::alloc(const std::vector<int64_t> &sizes, const pybind11::object &dtype)
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

plx_comm *ProcessGroupPlexus::c() const
{
    if (!comm_->comm)
        refuse("the group was made with enable_reconfigure=True and has no communicator yet: "
               "reconfigure it first (dist._reconfigure with every member's handle)");
    return comm_->comm;
}

// The profiler's title for type (null when nothing records: the title
// costs c10d::Work an allocation per operation).
const char *ProcessGroupPlexus::title(c10d::OpType type) const
{
    size_t i = size_t(type);
    if (i >= comm_->titles.size() || !at::hasCallbacks())
        return nullptr;
    return comm_->titles[i].c_str();
}

// Every operation starts here: a small collective still waiting to
// start goes first (program order on every rank). inputs: what the
// profiler shows as the operation's input (default: the outputs).
intrusive_ptr<WorkPlexus> ProcessGroupPlexus::make(c10d::OpType type, std::vector<at::Tensor> outputs,
                                                   const std::vector<at::Tensor> *inputs)
{
    if (type != c10d::OpType::SEND && type != c10d::OpType::RECV && type != c10d::OpType::RECVANYSOURCE)
        seq_++;
    comm_->flush();
    const char *t = title(type);
    return coalesce(c10::make_intrusive<WorkPlexus>(comm_, type, outputs, t, inputs ? *inputs : outputs));
}

// Between startCoalescing and endCoalescing every work is also kept
// for the one endCoalescing returns.
intrusive_ptr<WorkPlexus> ProcessGroupPlexus::coalesce(intrusive_ptr<WorkPlexus> w)
{
    if (comm_->coalescing)
        comm_->coalesced.push_back(w);
    return w;
}

// An operation that goes through launch: launch starts what is
// pending first, under the one lock it takes anyway.
intrusive_ptr<WorkPlexus> ProcessGroupPlexus::make_lazy(c10d::OpType type, std::vector<at::Tensor> outputs)
{
    c(); // refuses while there is no communicator
    seq_++;
    const char *t = title(type);
    return coalesce(c10::make_intrusive<WorkPlexus>(comm_, type, outputs, t, outputs));
}

void ProcessGroupPlexus::launch(const intrusive_ptr<WorkPlexus> &w, const char *what, size_t bytes, const Lazy &l)
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

plx_work **ProcessGroupPlexus::slot(const intrusive_ptr<WorkPlexus> &w)
{
    w->works.push_back(nullptr);
    return &w->works.back();
}

void ProcessGroupPlexus::start(const intrusive_ptr<WorkPlexus> &w, const char *what, int rc)
{
    if (rc != 0) {
        w->comm_->note(rc);
        w->works.pop_back(); // the slot that was never filled
        fail(rc, what);
    }
}

// buf is t itself (already held by the work's outputs) or a contiguous
// copy, held until completion and copied back into t after it.
void ProcessGroupPlexus::copy_back(const intrusive_ptr<WorkPlexus> &w, const at::Tensor &t, const at::Tensor &buf)
{
    if (!buf.is_same(t)) {
        w->keep.push_back(buf);
        at::Tensor dst = t, src = buf;
        w->finish = [dst, src]() mutable { dst.copy_(src); };
    }
}

void ProcessGroupPlexus::unpack(const intrusive_ptr<WorkPlexus> &w, const at::Tensor &flat,
                                const std::vector<at::Tensor> &outs)
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

} // namespace plexus_torch
