// process_group.hpp - ProcessGroupPlexus, the torch.distributed backend
// "plexus" that plexus.torch._C (module.cpp) gives Python.
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
// in both; 2.x adds allreduce_sparse and the entries of c10d_features.cpp.
//
// Rendezvous: torch hands the creator its store (a c10d::Store, usually a
// PrefixStore over a TCPStore or FileStore); it is wrapped in
// struct plx_store_callbacks (store_bridge.hpp) so plexus's backends
// bootstrap through it. The transport is what plexus is configured to use
// (PLEXUS_BACKEND, the configuration files), tcp between processes by default.
//
// Where each part lives: process_group.cpp makes the group and starts its
// operations; collectives.cpp the collectives; point_to_point.cpp send and
// recv; c10d_features.cpp what c10d::Backend gained after torch 2.0 (split,
// shrink, reconfigure, abort, getError, coalescing); time_estimate.cpp
// torch's time estimator; work.cpp the work handles; tensors.cpp the
// tensors' checks and packing.
#pragma once

#include <torch/csrc/api/include/torch/version.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#if TORCH_VERSION_MAJOR >= 2
#include <torch/csrc/distributed/c10d/Backend.hpp>
#endif
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <pybind11/pytypes.h>

#include <atomic>
#include <string>
#include <vector>

#include "errors.hpp"
#include "plexus/plexus.h"
#include "tensors.hpp"
#include "work.hpp"

namespace plexus_torch {

#if TORCH_VERSION_MAJOR >= 2
#define PLEXUS_TORCH_BACKEND_API 1 // c10d::Backend, what torch 2.x dispatches to
using GroupBase = c10d::Backend;
#else
using GroupBase = c10d::ProcessGroup;
#endif

class ProcessGroupPlexus : public GroupBase {
  public:
    // deferred: torch's enable_reconfigure: no communicator (and no
    // rendezvous) until reconfigure makes one; operations before it refuse.
    ProcessGroupPlexus(const intrusive_ptr<c10d::Store> &store, int rank, int size, milliseconds timeout,
                       const std::string &name, bool deferred = false);
    // A group over child, a communicator plexus made from parent's (split,
    // shrink): it shares parent's store and inherits its name and timeout.
    ProcessGroupPlexus(const intrusive_ptr<Comm> &parent, plx_comm *child);
    ~ProcessGroupPlexus() override;

    const std::string getBackendName() const override { return "plexus"; }

    // torch's sequence numbers (it asks a group it takes for gloo): the
    // collectives issued on this group, from 0 on every rank (a new group).
    void setSequenceNumberForGroup() override { seq_ = 0; }
    uint64_t getSequenceNumberForGroup() override { return seq_; }
    std::string transport() const { return plx_comm_backend(c()); }

    // plexus.torch's own entries (process_group.cpp).
    void revoke();
    at::Tensor alloc(const std::vector<int64_t> &sizes, const pybind11::object &dtype);

    // Collectives (collectives.cpp).
    intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor> &tensors, const c10d::BroadcastOptions &opts) override;
#ifdef PLEXUS_TORCH_BACKEND_API
    intrusive_ptr<c10d::Work> allreduce_sparse(std::vector<at::Tensor> &tensors,
                                               const c10d::AllreduceOptions &opts) override;
#endif
    intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor> &tensors, const c10d::AllreduceOptions &opts) override;
    intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor> &tensors,
                                                  const c10d::AllreduceCoalescedOptions &opts) override;
    intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>> &outputs,
                                                  std::vector<at::Tensor> &inputs,
                                                  const c10d::AllgatherOptions &) override;
    intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor> &tensors, const c10d::ReduceOptions &opts) override;
    intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>> &outputs, std::vector<at::Tensor> &inputs,
                                        const c10d::AllgatherOptions &opts) override;
    intrusive_ptr<c10d::Work> _allgather_base(at::Tensor &out, at::Tensor &in,
                                              const c10d::AllgatherOptions &) override;
    intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>> &outputs, std::vector<at::Tensor> &inputs,
                                     const c10d::GatherOptions &opts) override;
    intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor> &outputs, std::vector<std::vector<at::Tensor>> &inputs,
                                      const c10d::ScatterOptions &opts) override;
    intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor> &outputs,
                                             std::vector<std::vector<at::Tensor>> &inputs,
                                             const c10d::ReduceScatterOptions &opts) override;
    intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor &out, at::Tensor &in,
                                                   const c10d::ReduceScatterOptions &opts) override;
    intrusive_ptr<c10d::Work> alltoall_base(at::Tensor &out, at::Tensor &in, std::vector<int64_t> &out_splits,
                                            std::vector<int64_t> &in_splits, const c10d::AllToAllOptions &) override;
    intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor> &outputs, std::vector<at::Tensor> &inputs,
                                       const c10d::AllToAllOptions &) override;
    intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions &) override;
    void monitoredBarrier(const c10d::BarrierOptions &opts, bool waitAllRanks) override;

    // Point-to-point (point_to_point.cpp).
    intrusive_ptr<c10d::Work> send(std::vector<at::Tensor> &tensors, int dst, int tag) override;
    intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor> &tensors, int src, int tag) override;
    intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor> &tensors, int tag) override;

    // c10d::Backend's entries after torch 2.0, each where the torch built
    // against has it (PLEXUS_TORCH_HAS_*: meson's compile checks;
    // C10D_BACKEND_HAS_*: torch's own macros) (c10d_features.cpp).
#ifdef PLEXUS_TORCH_BACKEND_API
    intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(std::vector<at::Tensor> &outputs,
                                                              std::vector<at::Tensor> &inputs,
                                                              const c10d::AllgatherOptions &) override;
    intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(std::vector<at::Tensor> &outputs,
                                                              std::vector<at::Tensor> &inputs,
                                                              const c10d::ReduceScatterOptions &opts) override;
    void startCoalescing() override;
    intrusive_ptr<c10d::Work> endCoalescing() override;
#endif
#ifdef PLEXUS_TORCH_HAS_COALESCING
    bool supportsCoalescing() const override { return true; }
#endif
#ifdef PLEXUS_TORCH_HAS_SPLIT
    bool supportsSplitting() const override { return true; }
    intrusive_ptr<c10d::Backend::Options> getBackendOptions() override;
    intrusive_ptr<c10d::Backend> split(const intrusive_ptr<c10d::Store> &, const std::vector<int> &ranks,
                                       const intrusive_ptr<c10d::Backend::Options> &) override;
#endif
#ifdef PLEXUS_TORCH_HAS_SHRINK
    bool supportsShrinking() const override { return true; }
    intrusive_ptr<c10d::Backend> shrink(const std::vector<int64_t> &excluded, int flags,
                                        const intrusive_ptr<c10d::Backend::Options> &) override;
#endif
#ifdef C10D_BACKEND_HAS_RECONFIGURE
    bool supportsReconfigure() const override { return true; }
    c10d::ReconfigureHandle get_reconfigure_handle() const override { return reconfigure_handle_; }
    intrusive_ptr<c10d::Work> reconfigure(const c10d::ReconfigureOptions &opts) override;
#endif
#ifdef PLEXUS_TORCH_HAS_ERROR
    c10d::ErrorType getError() override;
#endif
#ifdef C10D_BACKEND_HAS_HOOKS
    void registerAbortHook(int64_t id, c10d::AbortHook hook) override;
    void unregisterAbortHook(int64_t id) override;
#endif
#ifdef PLEXUS_TORCH_HAS_ABORT
    void abort() override;
    void shutdown() override;
#endif

    // torch's collective time estimator (dist._time_estimator) on the
    // core's model ([core] estimates) (time_estimate.cpp).
#ifdef PLEXUS_TORCH_HAS_TIME_ESTIMATION
    bool supportsTimeEstimation() const override { return can_estimate(); }
#endif
    bool can_estimate() const;
    void start_time_estimate();
    double end_time_estimate();

  private:
    // How an operation starts (process_group.cpp).
    plx_comm *c() const;
    const char *title(c10d::OpType type) const;
    intrusive_ptr<WorkPlexus> make(c10d::OpType type, std::vector<at::Tensor> outputs,
                                   const std::vector<at::Tensor> *inputs = nullptr);
    intrusive_ptr<WorkPlexus> coalesce(intrusive_ptr<WorkPlexus> w);
    intrusive_ptr<WorkPlexus> make_lazy(c10d::OpType type, std::vector<at::Tensor> outputs);
    void launch(const intrusive_ptr<WorkPlexus> &w, const char *what, size_t bytes, const Lazy &l);
    static plx_work **slot(const intrusive_ptr<WorkPlexus> &w);
    static void start(const intrusive_ptr<WorkPlexus> &w, const char *what, int rc);
    static void copy_back(const intrusive_ptr<WorkPlexus> &w, const at::Tensor &t, const at::Tensor &buf);
    static void unpack(const intrusive_ptr<WorkPlexus> &w, const at::Tensor &flat, const std::vector<at::Tensor> &outs);

    // gloo's words for the operations, indexed by c10d::OpType.
    static constexpr const char *kOpWords[] = {
        "broadcast", "all_reduce", "all_reduce", "reduce", "all_gather", "all_gather_into_tensor", "all_gather",
        "gather", "scatter", "reduce_scatter", "all_to_all", "all_to_all", "send", "recv", "recvAnySource",
        "barrier", "reduce_scatter_tensor"};
    // Up to this size a collective starts lazily (see Comm::pending).
    static constexpr size_t kLazyBytes = 64 << 10;

    // Collectives' helpers (collectives.cpp).
    intrusive_ptr<c10d::Work> sparse_allreduce(at::Tensor &t, const c10d::AllreduceOptions &opts);
    void splits(const at::Tensor &t, const std::vector<int64_t> &sp, std::vector<size_t> &cnt,
                std::vector<size_t> &dsp, const char *which) const;

    // Point-to-point's helpers (point_to_point.cpp).
    static void check_tag(int tag);
    intrusive_ptr<c10d::Work> receive(std::vector<at::Tensor> &tensors, int src, int tag, c10d::OpType type);

    // Between start_time_estimate and end_time_estimate (time_estimate.cpp).
    intrusive_ptr<c10d::Work> estimated(c10d::OpType type, int coll, size_t bytes, const char *what,
                                        std::vector<at::Tensor> outputs);
    [[noreturn]] void no_estimate(const std::string &what);

#ifdef C10D_BACKEND_HAS_RECONFIGURE
    static std::string new_reconfigure_handle();
    std::string reconfigure_handle_ = new_reconfigure_handle();
#endif

    intrusive_ptr<Comm> comm_;
    std::atomic<uint64_t> seq_{0};
    // Estimating: the collectives add their modelled time and run not.
    bool estimating_ = false;
    double estimated_us_ = 0;
};

} // namespace plexus_torch
