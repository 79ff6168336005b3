// store_handover.hpp - a TCPStore one rank hosts, handed over between
// successive process groups.
//
// torch's env:// and tcp:// rendezvous make a TCPStore whose server lives in
// rank 0's process and dies with rank 0's group. A rank that destroys its
// group and at once calls init_process_group again (same MASTER_PORT) joins
// the old server if rank 0 still holds it, and loses it in the middle of
// the next rendezvous when rank 0 lets it go. So a rank that lets go of the
// last reference to a store a peer hosts waits, in the destroy, until that
// server has closed (at most the group's timeout).
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>

namespace plexus_torch {

// At init, before the rendezvous: if this process runs the server of the
// TCPStore under store, says so in store (the peers learn it in
// peer_hosts after the rendezvous). Returns whether it does.
bool publish_if_host(const c10::intrusive_ptr<c10d::Store> &store);

// After the rendezvous: whether another rank of the group hosts the store.
bool peer_hosts(const c10::intrusive_ptr<c10d::Store> &store);

// When a peer hosts the store (peer_hosts): takes over store (the group's
// reference; null after) and lets it go; if that was the last reference
// anyone in this process held to the TCPStore under it, waits until that
// server closes or timeout passes. Does not throw.
void release_and_wait_for_close(c10::intrusive_ptr<c10d::Store> &store, std::chrono::milliseconds timeout);

} // namespace plexus_torch
