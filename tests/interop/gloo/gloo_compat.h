// gloo_compat.h - the few calls whose form differs between the gloo
// versions the project meets (meson finds which form compiles):
// connectFullMesh takes a Store& up to 2025-04 and a std::shared_ptr<Store>
// since (GLOO_PEER_SHARED_STORE).
#ifndef PLEXUS_GLOO_COMPAT_H
#define PLEXUS_GLOO_COMPAT_H

#include <memory>

#include <gloo/rendezvous/context.h>
#include <gloo/transport/device.h>

template <class S>
static void full_mesh(gloo::rendezvous::Context &ctx, const std::shared_ptr<S> &store,
                      std::shared_ptr<gloo::transport::Device> &dev)
{
#ifdef GLOO_PEER_SHARED_STORE
    ctx.connectFullMesh(std::shared_ptr<gloo::rendezvous::Store>(store), dev);
#else
    ctx.connectFullMesh(*store, dev);
#endif
}

#endif
