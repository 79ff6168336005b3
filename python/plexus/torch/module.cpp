// module.cpp - plexus.torch._C: ProcessGroupPlexus and plexus's version for
// Python (__init__.py registers the backend "plexus" with torch).
#include "process_group.hpp"

#include <torch/csrc/utils/pybind.h>

#include <pybind11/chrono.h>

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
             "every rank calls it with the same shape and dtype, in the same order")
#ifdef PLEXUS_TORCH_HAS_TIME_ESTIMATION
        // What torch's _time_estimator calls, by ProcessGroupNCCL's names.
        .def("_start_time_estimate", &ProcessGroupPlexus::start_time_estimate,
             "from here on each collective adds its modelled time ([core] estimates) and does not run")
        .def("_end_time_estimate", &ProcessGroupPlexus::end_time_estimate,
             "the estimated collectives' modelled time since _start_time_estimate, in microseconds; "
             "collectives run again")
#endif
        ;
    m.def("version", [] { return std::string(plx_version()); });
    m.def("_drain_at_exit", &plexus_torch::drain_at_exit,
          "wait for the works queued for completer threads (their futures' callbacks need the "
          "interpreter): plexus.torch registers it with atexit");
}
