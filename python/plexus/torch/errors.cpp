// errors.cpp - see errors.hpp.
#include "errors.hpp"

#include <stdexcept>

#include "plexus/plexus.h"

namespace plexus_torch {

std::string headline(int rc)
{
    switch (rc) {
    case PLX_ERR_TIMEOUT: return "Timed out (" + std::string(plx_err_name(rc)) + ")";
    case PLX_ERR_PEER_LOST: return "Connection closed (" + std::string(plx_err_name(rc)) + ")";
    case PLX_ERR_REMOTE: return "Connection closed by a failed rank (" + std::string(plx_err_name(rc)) + ")";
    case PLX_ERR_ABORTED: return "Aborted (" + std::string(plx_err_name(rc)) + ")";
    case PLX_ERR_REVOKED: return "Revoked (" + std::string(plx_err_name(rc)) + ")";
    default: return plx_err_name(rc);
    }
}

void fail(int rc, const std::string &what)
{
    throw std::runtime_error("plexus: " + what + ": " + headline(rc) + ": " + plx_last_error());
}

void refuse(const std::string &why)
{
    throw std::runtime_error("plexus: " + why);
}

} // namespace plexus_torch
