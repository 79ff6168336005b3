// tensors.cpp - see tensors.hpp.
#include "tensors.hpp"

#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>

#include <string>

#include "errors.hpp"
#include "plexus/plexus.h"

namespace plexus_torch {

int dtype_of(const at::Tensor &t)
{
    switch (t.scalar_type()) {
    case at::kFloat: return PLX_F32;
    case at::kDouble: return PLX_F64;
    case at::kHalf: return PLX_F16;
    case at::kBFloat16: return PLX_BF16;
    case at::kInt: return PLX_I32;
    case at::kLong: return PLX_I64;
    case at::kChar: return PLX_I8;
    case at::kByte: return PLX_U8;
    case at::kBool: return PLX_U8;
    default:
        refuse(std::string("tensors of dtype ") + c10::toString(t.scalar_type()) +
               " are not supported (float32, float64, float16, bfloat16, int32, int64, int8, uint8, bool)");
    }
}

static std::string op_name(const c10d::ReduceOp &op)
{
    switch (static_cast<c10d::ReduceOp::RedOpType>(op)) {
    case c10d::ReduceOp::BAND: return "BAND";
    case c10d::ReduceOp::BOR: return "BOR";
    case c10d::ReduceOp::BXOR: return "BXOR";
    case c10d::ReduceOp::PREMUL_SUM: return "PREMUL_SUM";
    default: return std::to_string(int(static_cast<c10d::ReduceOp::RedOpType>(op)));
    }
}

int redop_of(const c10d::ReduceOp &op, const at::Tensor &t)
{
    int r;
    switch (static_cast<c10d::ReduceOp::RedOpType>(op)) {
    case c10d::ReduceOp::SUM: r = PLX_SUM; break;
    case c10d::ReduceOp::PRODUCT: r = PLX_PROD; break;
    case c10d::ReduceOp::MIN: r = PLX_MIN; break;
    case c10d::ReduceOp::MAX: r = PLX_MAX; break;
    case c10d::ReduceOp::AVG: r = PLX_AVG; break;
    case c10d::ReduceOp::BAND: r = PLX_BAND; break;
    case c10d::ReduceOp::BOR: r = PLX_BOR; break;
    case c10d::ReduceOp::BXOR: r = PLX_BXOR; break;
    default:
        refuse(std::string("ReduceOp.") + op_name(op) +
               " is not supported (SUM, PRODUCT, MIN, MAX, AVG, BAND, BOR, BXOR)");
    }
    // Refused here, on every rank alike, before any transfer (gloo's words).
    if (r >= PLX_BAND && at::isFloatingType(t.scalar_type()))
        refuse(std::string("Cannot use ReduceOp.") + op_name(op) + " with non-integral dtype " +
               c10::toString(t.scalar_type()) + ": bitwise reductions take integer and bool tensors");
    // bool is u8 holding 0 or 1: the bitwise ops keep it so, as MIN and MAX do.
    if (t.scalar_type() == at::kBool && r != PLX_MIN && r != PLX_MAX && r < PLX_BAND)
        refuse("bool tensors reduce only with MIN, MAX, BAND, BOR and BXOR");
    return r;
}

void check_tensor(const at::Tensor &t)
{
    if (!t.device().is_cpu())
        refuse("only CPU tensors are supported by this build (got " + t.device().str() + ")");
    if (t.is_sparse())
        refuse("sparse tensors are not supported");
    dtype_of(t);
}

const at::Tensor &one(const std::vector<at::Tensor> &v, const char *what)
{
    if (v.size() != 1)
        refuse(std::string(what) + " takes exactly one tensor per process (got " + std::to_string(v.size()) + ")");
    check_tensor(v[0]);
    return v[0];
}

at::Tensor dense(const at::Tensor &t)
{
    return t.is_contiguous() ? t : t.contiguous();
}

void same_layout(const std::vector<at::Tensor> &v, const at::Tensor &like, const char *what)
{
    for (const auto &t : v) {
        check_tensor(t);
        if (t.scalar_type() != like.scalar_type() || t.numel() != like.numel())
            refuse(std::string(what) + ": every tensor of the list must have the dtype and size of the input");
    }
}

void same_dtype(const std::vector<at::Tensor> &v, const char *what)
{
    for (const auto &t : v) {
        check_tensor(t);
        if (t.scalar_type() != v[0].scalar_type())
            refuse(std::string(what) + ": every tensor must have one dtype (got " +
                   c10::toString(v[0].scalar_type()) + " and " + c10::toString(t.scalar_type()) + ")");
    }
}

size_t total_bytes(const std::vector<at::Tensor> &v)
{
    size_t n = 0;
    for (const auto &t : v)
        n += t.nbytes();
    return n;
}

std::vector<at::Tensor> flatten(const std::vector<at::Tensor> &v)
{
    std::vector<at::Tensor> out;
    out.reserve(v.size());
    for (const auto &t : v)
        out.push_back(t.reshape({-1}));
    return out;
}

at::Tensor pack(const std::vector<at::Tensor> &v, const at::Tensor &like)
{
    return v.empty() ? at::empty({0}, like.options()) : at::cat(flatten(v));
}

} // namespace plexus_torch
