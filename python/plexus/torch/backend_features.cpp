// backend_features.cpp - run by meson at configure time: prints the name of
// each c10d::Backend entry the torch found has (that torch gives no feature
// macro for), so the shim overrides exactly those (PLEXUS_TORCH_HAS_<NAME>).
#include <torch/csrc/distributed/c10d/Backend.hpp>

#include <cstdio>
#include <type_traits>

#define PROBE(name, ...)                                                                                    \
    template <typename T, typename = void> struct name : std::false_type {};                               \
    template <typename T> struct name<T, std::void_t<__VA_ARGS__>> : std::true_type {};

using Split = c10::intrusive_ptr<c10d::Backend> (c10d::Backend::*)(const c10::intrusive_ptr<c10d::Store> &,
                                                                     const std::vector<int> &,
                                                                     const c10::intrusive_ptr<c10d::Backend::Options> &);
PROBE(HasSplit, decltype(static_cast<Split>(&T::split)), decltype(&T::getBackendOptions))
PROBE(HasShrink, decltype(&T::shrink), decltype(&T::supportsShrinking))
PROBE(HasError, decltype(&T::getError))
PROBE(HasAbort, decltype(&T::abort), decltype(&T::shutdown))
PROBE(HasCoalescing, decltype(&T::supportsCoalescing))
PROBE(HasTimeEstimation, decltype(&T::supportsTimeEstimation))

int main()
{
    const struct {
        const char *name;
        bool has;
    } entries[] = {{"SPLIT", HasSplit<c10d::Backend>::value},   {"SHRINK", HasShrink<c10d::Backend>::value},
                   {"ERROR", HasError<c10d::Backend>::value},   {"ABORT", HasAbort<c10d::Backend>::value},
                   {"COALESCING", HasCoalescing<c10d::Backend>::value},
                   {"TIME_ESTIMATION", HasTimeEstimation<c10d::Backend>::value}};
    for (const auto &e : entries)
        if (e.has)
            std::printf("%s\n", e.name);
    return 0;
}
