// tensors.hpp - torch tensors as plexus sees them: their plexus dtype and
// reduce op, the checks every operation makes of its tensors, and the flat
// buffer a list of tensors is packed into for one plexus call.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <vector>

namespace plexus_torch {

// t's plexus dtype (PLX_F32, ...); refuses one plexus has none for.
int dtype_of(const at::Tensor &t);

// op's plexus reduce op for tensors like t; refuses one plexus lacks.
int redop_of(const c10d::ReduceOp &op, const at::Tensor &t);

// Refuses what this build cannot carry: a non-CPU, sparse or unsupported tensor.
void check_tensor(const at::Tensor &t);

// The one tensor of v, checked; refuses any other count.
const at::Tensor &one(const std::vector<at::Tensor> &v, const char *what);

// A contiguous tensor standing for t: t itself, or a copy whose result is
// copied back (ProcessGroupPlexus::copy_back) when the work completes.
at::Tensor dense(const at::Tensor &t);

// Refuses a tensor of v whose dtype or size is not like's.
void same_layout(const std::vector<at::Tensor> &v, const at::Tensor &like, const char *what);

// Refuses a tensor of v whose dtype is not v[0]'s.
void same_dtype(const std::vector<at::Tensor> &v, const char *what);

// The bytes of v's tensors together.
size_t total_bytes(const std::vector<at::Tensor> &v);

// v's tensors as one-dimensional views (or copies where no view exists).
std::vector<at::Tensor> flatten(const std::vector<at::Tensor> &v);

// v's tensors concatenated, flat (an empty tensor like like's when v is empty).
at::Tensor pack(const std::vector<at::Tensor> &v, const at::Tensor &like);

} // namespace plexus_torch
