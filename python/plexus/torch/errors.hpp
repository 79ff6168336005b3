// errors.hpp - how the shim fails: a std::runtime_error (Python's
// RuntimeError) whose text starts "plexus: ", in torch's words where torch
// has words for the failure.
#pragma once

#include <string>

namespace plexus_torch {

// The words torch's own backends use for plexus status rc, ahead of
// plexus's detail: torch's tests and users' scripts match
// " (Timed out|closed|timeout) ".
std::string headline(int rc);

// Throws for a failed plexus call: what, rc's headline and plx_last_error().
[[noreturn]] void fail(int rc, const std::string &what);

// Throws for what the shim refuses (a bad argument, an unsupported case).
[[noreturn]] void refuse(const std::string &why);

} // namespace plexus_torch
