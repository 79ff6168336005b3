// point_to_point.cpp - ProcessGroupPlexus's send and recv. Each message is
// preceded by a 4-byte header with the sender's rank (tag 2t) ahead of the
// data (tag 2t+1), so a receive from any source learns its sender (plexus
// reports no source for a work).
#include "process_group.hpp"

#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>

namespace plexus_torch {

// Point-to-point: each message is preceded by a 4-byte header with the
// sender's rank (tag 2t) ahead of the data (tag 2t+1), so a receive from
// any source learns its sender (plexus reports no source for a work).
intrusive_ptr<c10d::Work> ProcessGroupPlexus::send(std::vector<at::Tensor> &tensors, int dst, int tag)
{
    const at::Tensor &t = one(tensors, "send");
    check_tag(tag);
    if (estimating_)
        return estimated(c10d::OpType::SEND, PLX_COLL_SEND, t.nbytes(), "send", {});
    auto w = make(c10d::OpType::SEND, {}, &tensors);
    at::Tensor buf = dense(t), hdr = at::full({1}, getRank(), at::kInt);
    start(w, "send", plx_isend(c(), hdr.data_ptr(), 1, PLX_I32, dst, 2 * tag, nullptr, slot(w)));
    start(w, "send", plx_isend(c(), buf.data_ptr(), buf.numel(), dtype_of(t), dst, 2 * tag + 1, nullptr, slot(w)));
    w->keep = {buf, hdr};
    return w;
}

intrusive_ptr<c10d::Work> ProcessGroupPlexus::recv(std::vector<at::Tensor> &tensors, int src, int tag)
{
    return receive(tensors, src, tag, c10d::OpType::RECV);
}

intrusive_ptr<c10d::Work> ProcessGroupPlexus::recvAnysource(std::vector<at::Tensor> &tensors, int tag)
{
    return receive(tensors, PLX_ANY_SOURCE, tag, c10d::OpType::RECVANYSOURCE); // its own profiler event
}

void ProcessGroupPlexus::check_tag(int tag)
{
    if (tag < 0 || tag > (1 << 29))
        refuse("tag " + std::to_string(tag) + " is out of range (0 .. 2^29)");
}

intrusive_ptr<c10d::Work> ProcessGroupPlexus::receive(std::vector<at::Tensor> &tensors, int src, int tag,
                                                      c10d::OpType type)
{
    const at::Tensor &t = one(tensors, "recv");
    check_tag(tag);
    if (estimating_)
        return estimated(type, PLX_COLL_RECV, t.nbytes(), "recv", tensors);
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

} // namespace plexus_torch
