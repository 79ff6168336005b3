// store_bridge.hpp - torch's rendezvous store (a c10d::Store, usually a
// PrefixStore over a TCPStore or FileStore) as plexus's store callbacks
// (struct plx_store_callbacks), so plexus's backends bootstrap through it.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <string>

#include "plexus/plexus.h"

namespace plexus_torch {

struct StoreBridge {
    c10::intrusive_ptr<c10d::Store> store;
    plx_store_callbacks cb;
};

// The last exception a store callback caught on this thread, added to the
// error of a failed plx_comm_init (plexus only sees a status).
extern thread_local std::string store_error;

// b's callbacks, over store.
void bridge_init(StoreBridge &b, const c10::intrusive_ptr<c10d::Store> &store);

} // namespace plexus_torch
