// time_estimate.cpp - torch's collective time estimator on plexus:
//
//     with dist._time_estimator(group) as cm:
//         dist.all_reduce(t, group=group)        # estimated, not run
//     cm.estimated_time                          # microseconds, as NCCL's
//
// torch asks supportsTimeEstimation, calls _start_time_estimate, runs the
// block and takes _end_time_estimate. In between every collective this
// shim serves adds the core's modelled time for it (plx_comm_estimate:
// the table of [core] estimates that plexus-whatif --emit-estimates
// writes) and returns a work already complete: nothing is sent and the
// tensors are not touched. Each operation's bytes are sized as
// plx_comm_estimate counts them (as plexus-bench sizes a row). A
// collective the model has no answer for raises, naming it, rather than
// counting 0.
#include "process_group.hpp"

namespace plexus_torch {

// Whether the core has a model for this group: any collective the shim
// serves answering at some size. The table's rows start at its own
// smallest size (plexus-whatif's -b, 8 bytes unless told), so the sizes
// tried are 0 and the powers of two; with no table every answer is a
// quick no.
bool ProcessGroupPlexus::can_estimate() const
{
    if (!comm_->comm)
        return false;
    static const int colls[] = {PLX_COLL_ALLREDUCE,  PLX_COLL_ALLGATHER, PLX_COLL_REDUCE_SCATTER, PLX_COLL_BROADCAST,
                                PLX_COLL_REDUCE,     PLX_COLL_GATHER,    PLX_COLL_SCATTER,        PLX_COLL_ALLTOALL,
                                PLX_COLL_ALLTOALLV, PLX_COLL_BARRIER,   PLX_COLL_SEND,           PLX_COLL_RECV};
    for (int coll : colls)
        for (int shift = -1; shift < 48; shift++) {
            double s = 0;
            if (plx_comm_estimate(comm_->comm, coll, shift < 0 ? 0 : size_t(1) << shift, &s) == 0)
                return true;
        }
    return false;
}

void ProcessGroupPlexus::start_time_estimate()
{
    c(); // refuses while there is no communicator
    comm_->flush(); // what was issued before runs
    estimating_ = true;
    estimated_us_ = 0;
}

double ProcessGroupPlexus::end_time_estimate()
{
    if (!estimating_)
        refuse("_end_time_estimate without _start_time_estimate (or after an estimate failed, which ends it)");
    estimating_ = false;
    return estimated_us_;
}

// A failure ends the estimation: torch's _time_estimator does not call
// _end_time_estimate when its block raises, and the group's later
// collectives must run, not be estimated.
intrusive_ptr<c10d::Work> ProcessGroupPlexus::estimated(c10d::OpType type, int coll, size_t bytes, const char *what,
                                                        std::vector<at::Tensor> outputs)
{
    double s = 0;
    int rc = plx_comm_estimate(c(), coll, bytes, &s);
    if (rc != 0) {
        estimating_ = false;
        fail(rc, std::string("time estimate of ") + what + " (" + std::to_string(bytes) + " B on " +
                     std::to_string(getSize()) + " ranks)");
    }
    estimated_us_ += s * 1e6;
    auto w = coalesce(c10::make_intrusive<WorkPlexus>(comm_, type, std::move(outputs), nullptr,
                                                      std::vector<at::Tensor>{}));
    w->complete(0, "");
    return w;
}

void ProcessGroupPlexus::no_estimate(const std::string &what)
{
    estimating_ = false;
    refuse("time estimate of " + what + ": plexus has no model for it");
}

} // namespace plexus_torch
