// collectives.cpp - ProcessGroupPlexus's collectives: each is one plexus
// call (a list of tensors packed into one buffer first, unpacked after), a
// small one started lazily (process_group.cpp's launch).
#include "process_group.hpp"

#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>
#include <ATen/ops/sparse_coo_tensor.h>

namespace plexus_torch {

intrusive_ptr<c10d::Work> ProcessGroupPlexus::broadcast(std::vector<at::Tensor> &tensors,
                                                        const c10d::BroadcastOptions &opts)
{
    const at::Tensor &t = one(tensors, "broadcast");
    if (estimating_)
        return estimated(c10d::OpType::BROADCAST, PLX_COLL_BROADCAST, t.nbytes(), "broadcast", tensors);
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
intrusive_ptr<c10d::Work> ProcessGroupPlexus::allreduce_sparse(std::vector<at::Tensor> &tensors,
                                                               const c10d::AllreduceOptions &opts)
{
    if (tensors.size() != 1 || !tensors[0].is_sparse())
        refuse("allreduce_sparse takes exactly one sparse tensor per process");
    return sparse_allreduce(tensors[0], opts);
}
#endif

intrusive_ptr<c10d::Work> ProcessGroupPlexus::allreduce(std::vector<at::Tensor> &tensors,
                                                        const c10d::AllreduceOptions &opts)
{
    if (tensors.size() == 1 && tensors[0].is_sparse())
        return sparse_allreduce(tensors[0], opts);
    const at::Tensor &t = one(tensors, "allreduce");
    int op = redop_of(opts.reduceOp, t);
    if (estimating_)
        return estimated(c10d::OpType::ALLREDUCE, PLX_COLL_ALLREDUCE, t.nbytes(), "allreduce", tensors);
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

// A sparse COO tensor summed over the ranks as gloo does it: every rank
// gathers every rank's indices and values (plexus allgather of the
// counts, then allgatherv), the duplicates are summed by coalescing,
// and the same tensor results on every rank. Runs to completion here.
intrusive_ptr<c10d::Work> ProcessGroupPlexus::sparse_allreduce(at::Tensor &t, const c10d::AllreduceOptions &opts)
{
    if (!t.device().is_cpu())
        refuse("sparse allreduce: only CPU tensors are supported by this build (got " + t.device().str() + ")");
    if (static_cast<c10d::ReduceOp::RedOpType>(opts.reduceOp) != c10d::ReduceOp::SUM)
        refuse("sparse allreduce supports only SUM (as gloo)");
    if (estimating_)
        no_estimate("sparse allreduce (its traffic depends on the tensors' nonzeros)");
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

// Several tensors of one dtype reduced by one collective over their
// concatenation.
intrusive_ptr<c10d::Work> ProcessGroupPlexus::allreduce_coalesced(std::vector<at::Tensor> &tensors,
                                                                  const c10d::AllreduceCoalescedOptions &opts)
{
    if (tensors.empty())
        refuse("allreduce_coalesced needs at least one tensor");
    same_dtype(tensors, "allreduce_coalesced");
    int op = redop_of(opts.reduceOp, tensors[0]);
    if (estimating_)
        return estimated(c10d::OpType::ALLREDUCE_COALESCED, PLX_COLL_ALLREDUCE, total_bytes(tensors),
                         "allreduce_coalesced", tensors);
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
intrusive_ptr<c10d::Work> ProcessGroupPlexus::allgather_coalesced(std::vector<std::vector<at::Tensor>> &outputs,
                                                                  std::vector<at::Tensor> &inputs,
                                                                  const c10d::AllgatherOptions &)
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
    if (estimating_)
        return estimated(c10d::OpType::ALLGATHER_COALESCED, PLX_COLL_ALLGATHER, total_bytes(inputs) * size_t(P),
                         "allgather_coalesced", all);
    at::Tensor src = pack(inputs, inputs[0]);
    at::Tensor flat = at::empty({src.numel() * P}, src.options());
    auto w = make(c10d::OpType::ALLGATHER_COALESCED, all, &inputs);
    start(w, "allgather_coalesced", plx_iallgather(c(), src.data_ptr(), flat.data_ptr(), src.numel(),
                                                   dtype_of(inputs[0]), nullptr, slot(w)));
    unpack(w, flat, all);
    w->keep = {src, flat};
    return w;
}

intrusive_ptr<c10d::Work> ProcessGroupPlexus::reduce(std::vector<at::Tensor> &tensors, const c10d::ReduceOptions &opts)
{
    const at::Tensor &t = one(tensors, "reduce");
    int op = redop_of(opts.reduceOp, t);
    if (estimating_)
        return estimated(c10d::OpType::REDUCE, PLX_COLL_REDUCE, t.nbytes(), "reduce", tensors);
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

intrusive_ptr<c10d::Work> ProcessGroupPlexus::allgather(std::vector<std::vector<at::Tensor>> &outputs,
                                                        std::vector<at::Tensor> &inputs,
                                                        const c10d::AllgatherOptions &opts)
{
    const at::Tensor &in = one(inputs, "allgather");
    if (outputs.size() != 1 || int(outputs[0].size()) != getSize())
        refuse("allgather needs one list of world_size output tensors");
    same_layout(outputs[0], in, "allgather");
    if (estimating_)
        return estimated(c10d::OpType::ALLGATHER, PLX_COLL_ALLGATHER, in.nbytes() * size_t(getSize()), "allgather",
                         outputs[0]);
    auto w = make(c10d::OpType::ALLGATHER, outputs[0], &inputs);
    at::Tensor src = dense(in), flat = at::empty({in.numel() * getSize()}, in.options());
    start(w, "allgather", plx_iallgather(c(), src.data_ptr(), flat.data_ptr(), in.numel(), dtype_of(in), nullptr,
                                         slot(w)));
    unpack(w, flat, outputs[0]);
    w->keep = {src, flat};
    return w;
}

intrusive_ptr<c10d::Work> ProcessGroupPlexus::_allgather_base(at::Tensor &out, at::Tensor &in,
                                                              const c10d::AllgatherOptions &)
{
    check_tensor(in);
    check_tensor(out);
    if (out.numel() != in.numel() * getSize() || out.scalar_type() != in.scalar_type())
        refuse("_allgather_base: the output must hold world_size times the input, of its dtype");
    std::vector<at::Tensor> outs{out}, ins{in};
    if (estimating_)
        return estimated(c10d::OpType::_ALLGATHER_BASE, PLX_COLL_ALLGATHER, out.nbytes(), "_allgather_base", outs);
    auto w = make(c10d::OpType::_ALLGATHER_BASE, outs, &ins);
    at::Tensor src = dense(in), dst = dense(out);
    start(w, "_allgather_base", plx_iallgather(c(), src.data_ptr(), dst.data_ptr(), in.numel(), dtype_of(in),
                                               nullptr, slot(w)));
    copy_back(w, out, dst);
    w->keep = {src, dst};
    return w;
}

intrusive_ptr<c10d::Work> ProcessGroupPlexus::gather(std::vector<std::vector<at::Tensor>> &outputs,
                                                     std::vector<at::Tensor> &inputs, const c10d::GatherOptions &opts)
{
    const at::Tensor &in = one(inputs, "gather");
    int root = int(opts.rootRank);
    bool is_root = getRank() == root;
    if (is_root && (outputs.size() != 1 || int(outputs[0].size()) != getSize()))
        refuse("gather needs one list of world_size output tensors on the root");
    if (is_root)
        same_layout(outputs[0], in, "gather");
    if (estimating_)
        return estimated(c10d::OpType::GATHER, PLX_COLL_GATHER, in.nbytes() * size_t(getSize()), "gather",
                         is_root ? outputs[0] : std::vector<at::Tensor>{});
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

intrusive_ptr<c10d::Work> ProcessGroupPlexus::scatter(std::vector<at::Tensor> &outputs,
                                                      std::vector<std::vector<at::Tensor>> &inputs,
                                                      const c10d::ScatterOptions &opts)
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
    if (estimating_)
        return estimated(c10d::OpType::SCATTER, PLX_COLL_SCATTER, out.nbytes() * size_t(getSize()), "scatter", outputs);
    auto w = make(c10d::OpType::SCATTER, outputs);
    at::Tensor dst = dense(out);
    start(w, "scatter", plx_iscatter(c(), is_root ? flat.data_ptr() : nullptr, dst.data_ptr(), out.numel(),
                                     dtype_of(out), root, nullptr, slot(w)));
    copy_back(w, out, dst);
    w->keep = {flat, dst};
    return w;
}

intrusive_ptr<c10d::Work> ProcessGroupPlexus::reduce_scatter(std::vector<at::Tensor> &outputs,
                                                             std::vector<std::vector<at::Tensor>> &inputs,
                                                             const c10d::ReduceScatterOptions &opts)
{
    const at::Tensor &out = one(outputs, "reduce_scatter");
    int op = redop_of(opts.reduceOp, out);
    if (inputs.size() != 1 || int(inputs[0].size()) != getSize())
        refuse("reduce_scatter needs one list of world_size input tensors");
    same_layout(inputs[0], out, "reduce_scatter");
    if (estimating_)
        return estimated(c10d::OpType::REDUCE_SCATTER, PLX_COLL_REDUCE_SCATTER, out.nbytes() * size_t(getSize()),
                         "reduce_scatter", outputs);
    at::Tensor flat = pack(inputs[0], out), dst = dense(out);
    auto w = make(c10d::OpType::REDUCE_SCATTER, outputs);
    start(w, "reduce_scatter", plx_ireduce_scatter(c(), flat.data_ptr(), dst.data_ptr(), out.numel(),
                                                   dtype_of(out), op, nullptr, slot(w)));
    copy_back(w, out, dst);
    w->keep = {flat, dst};
    return w;
}

intrusive_ptr<c10d::Work> ProcessGroupPlexus::_reduce_scatter_base(at::Tensor &out, at::Tensor &in,
                                                                   const c10d::ReduceScatterOptions &opts)
{
    check_tensor(in);
    check_tensor(out);
    int op = redop_of(opts.reduceOp, out);
    if (in.numel() != out.numel() * getSize() || out.scalar_type() != in.scalar_type())
        refuse("_reduce_scatter_base: the input must hold world_size times the output, of its dtype");
    if (estimating_)
        return estimated(c10d::OpType::_REDUCE_SCATTER_BASE, PLX_COLL_REDUCE_SCATTER, in.nbytes(),
                         "_reduce_scatter_base", {out});
    std::vector<at::Tensor> outs{out};
    auto w = make(c10d::OpType::_REDUCE_SCATTER_BASE, outs);
    at::Tensor src = dense(in), dst = dense(out);
    start(w, "_reduce_scatter_base", plx_ireduce_scatter(c(), src.data_ptr(), dst.data_ptr(), out.numel(),
                                                         dtype_of(out), op, nullptr, slot(w)));
    copy_back(w, out, dst);
    w->keep = {src, dst};
    return w;
}

// Split sizes along dim 0 (empty: equal) as element counts and packed displacements.
void ProcessGroupPlexus::splits(const at::Tensor &t, const std::vector<int64_t> &sp, std::vector<size_t> &cnt,
                                std::vector<size_t> &dsp, const char *which) const
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

intrusive_ptr<c10d::Work> ProcessGroupPlexus::alltoall_base(at::Tensor &out, at::Tensor &in,
                                                            std::vector<int64_t> &out_splits,
                                                            std::vector<int64_t> &in_splits,
                                                            const c10d::AllToAllOptions &)
{
    check_tensor(in);
    check_tensor(out);
    if (in.scalar_type() != out.scalar_type())
        refuse("all_to_all_single: input and output dtypes differ");
    // The whole input, as plexus-bench sizes an alltoall(v) row.
    if (estimating_)
        return estimated(c10d::OpType::ALLTOALL_BASE,
                         out_splits.empty() && in_splits.empty() ? PLX_COLL_ALLTOALL : PLX_COLL_ALLTOALLV,
                         in.nbytes(), "all_to_all_single", {out});
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

intrusive_ptr<c10d::Work> ProcessGroupPlexus::alltoall(std::vector<at::Tensor> &outputs,
                                                       std::vector<at::Tensor> &inputs, const c10d::AllToAllOptions &)
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
    if (estimating_)
        return estimated(c10d::OpType::ALLTOALL, PLX_COLL_ALLTOALLV, total_bytes(inputs), "all_to_all", outputs);
    at::Tensor flat_in = at_s ? at::cat(flatten(inputs)) : at::empty({0}, inputs[0].options());
    at::Tensor flat_out = at::empty({int64_t(at_r)}, inputs[0].options());
    auto w = make(c10d::OpType::ALLTOALL, outputs);
    start(w, "all_to_all", plx_ialltoallv(c(), flat_in.data_ptr(), sc.data(), sd.data(), flat_out.data_ptr(),
                                          rc.data(), rd.data(), dtype_of(inputs[0]), nullptr, slot(w)));
    unpack(w, flat_out, outputs);
    w->keep = {flat_in, flat_out};
    return w;
}

intrusive_ptr<c10d::Work> ProcessGroupPlexus::barrier(const c10d::BarrierOptions &)
{
    if (estimating_)
        return estimated(c10d::OpType::BARRIER, PLX_COLL_BARRIER, 0, "barrier", {});
    auto w = make_lazy(c10d::OpType::BARRIER, {});
    Lazy l;
    l.kind = Lazy::BARRIER;
    launch(w, "barrier", 0, l);
    return w;
}

// torch's monitored_barrier: plexus's own (plx_monitored_barrier), its
// outcome worded as gloo words it (torch's tests match those words).
void ProcessGroupPlexus::monitoredBarrier(const c10d::BarrierOptions &opts, bool waitAllRanks)
{
    if (estimating_) {
        estimated(c10d::OpType::BARRIER, PLX_COLL_BARRIER, 0, "monitoredBarrier", {});
        return;
    }
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

#ifdef PLEXUS_TORCH_BACKEND_API
// Several tensors of one dtype gathered by one allgather of their
// concatenation; output k is world_size times input k, rank after rank.
intrusive_ptr<c10d::Work> ProcessGroupPlexus::allgather_into_tensor_coalesced(std::vector<at::Tensor> &outputs,
                                                                              std::vector<at::Tensor> &inputs,
                                                                              const c10d::AllgatherOptions &)
{
    int P = getSize();
    if (inputs.empty() || outputs.size() != inputs.size())
        refuse("allgather_into_tensor_coalesced needs at least one input and one output per input");
    same_dtype(inputs, "allgather_into_tensor_coalesced");
    std::vector<int64_t> n;
    for (size_t k = 0; k < inputs.size(); k++) {
        check_tensor(outputs[k]);
        if (outputs[k].scalar_type() != inputs[k].scalar_type() || outputs[k].numel() != inputs[k].numel() * P)
            refuse("allgather_into_tensor_coalesced: output " + std::to_string(k) +
                   " must hold world_size times input " + std::to_string(k) + ", of its dtype");
        n.push_back(inputs[k].numel());
    }
    if (estimating_)
        return estimated(c10d::OpType::ALLGATHER_COALESCED, PLX_COLL_ALLGATHER, total_bytes(inputs) * size_t(P),
                         "allgather_into_tensor_coalesced", outputs);
    at::Tensor src = pack(inputs, inputs[0]);
    int64_t S = src.numel();
    at::Tensor flat = at::empty({S * P}, src.options());
    auto w = make(c10d::OpType::ALLGATHER_COALESCED, outputs, &inputs);
    start(w, "allgather_into_tensor_coalesced",
          plx_iallgather(c(), src.data_ptr(), flat.data_ptr(), size_t(S), dtype_of(inputs[0]), nullptr, slot(w)));
    std::vector<at::Tensor> dst = outputs;
    w->finish = [dst, flat, n, S, P]() mutable {
        int64_t off = 0;
        for (size_t k = 0; k < dst.size(); k++) {
            std::vector<at::Tensor> parts;
            for (int r = 0; r < P; r++)
                parts.push_back(flat.narrow(0, r * S + off, n[k]));
            dst[k].copy_(at::cat(parts).view(dst[k].sizes()));
            off += n[k];
        }
    };
    w->keep = {src, flat};
    return w;
}

// Several reduce_scatters by one: rank r's block is every input's r-th
// slice in turn; output k gets its part of the result.
intrusive_ptr<c10d::Work> ProcessGroupPlexus::reduce_scatter_tensor_coalesced(std::vector<at::Tensor> &outputs,
                                                                              std::vector<at::Tensor> &inputs,
                                                                              const c10d::ReduceScatterOptions &opts)
{
    int P = getSize();
    if (inputs.empty() || outputs.size() != inputs.size())
        refuse("reduce_scatter_tensor_coalesced needs at least one input and one output per input");
    same_dtype(inputs, "reduce_scatter_tensor_coalesced");
    int op = redop_of(opts.reduceOp, inputs[0]);
    std::vector<int64_t> n;
    int64_t S = 0;
    for (size_t k = 0; k < inputs.size(); k++) {
        check_tensor(outputs[k]);
        if (outputs[k].scalar_type() != inputs[k].scalar_type() || inputs[k].numel() != outputs[k].numel() * P)
            refuse("reduce_scatter_tensor_coalesced: input " + std::to_string(k) +
                   " must hold world_size times output " + std::to_string(k) + ", of its dtype");
        n.push_back(outputs[k].numel());
        S += n.back();
    }
    if (estimating_)
        return estimated(c10d::OpType::_REDUCE_SCATTER_BASE, PLX_COLL_REDUCE_SCATTER, total_bytes(inputs),
                         "reduce_scatter_tensor_coalesced", outputs);
    std::vector<at::Tensor> parts;
    for (int r = 0; r < P; r++)
        for (size_t k = 0; k < inputs.size(); k++)
            parts.push_back(inputs[k].reshape({-1}).narrow(0, r * n[k], n[k]));
    at::Tensor flat = at::cat(parts), dst = at::empty({S}, inputs[0].options());
    auto w = make(c10d::OpType::_REDUCE_SCATTER_BASE, outputs, &inputs);
    start(w, "reduce_scatter_tensor_coalesced", plx_ireduce_scatter(c(), flat.data_ptr(), dst.data_ptr(), size_t(S),
                                                                    dtype_of(inputs[0]), op, nullptr, slot(w)));
    std::vector<at::Tensor> outs = outputs;
    w->finish = [outs, dst, n]() mutable {
        int64_t off = 0;
        for (size_t k = 0; k < outs.size(); k++) {
            outs[k].copy_(dst.narrow(0, off, n[k]).view(outs[k].sizes()));
            off += n[k];
        }
    };
    w->keep = {flat, dst};
    return w;
}
#endif

} // namespace plexus_torch
