// store_bridge.cpp - see store_bridge.hpp.
#include "store_bridge.hpp"

#include <cstdlib>
#include <cstring>
#include <vector>

namespace plexus_torch {

using c10::intrusive_ptr;
using std::chrono::milliseconds;

thread_local std::string store_error;

static milliseconds store_timeout(const StoreBridge *b, int64_t ms)
{
    if (ms == PLX_TIMEOUT_INFINITE)
        return c10d::Store::kNoTimeout;
    if (ms < 0)
        return b->store->getTimeout();
    return milliseconds(ms > 0 ? ms : 1);
}

static int caught(const std::exception &e)
{
    store_error = e.what();
    auto nl = store_error.find('\n');
    if (nl != std::string::npos)
        store_error.resize(nl);
    return store_error.find("imeout") != std::string::npos || store_error.find("imed out") != std::string::npos
               ? PLX_ERR_TIMEOUT
               : PLX_ERR_SYSTEM;
}

static int s_set(void *u, const char *key, const void *val, size_t len)
{
    try {
        auto p = static_cast<const uint8_t *>(val);
        static_cast<StoreBridge *>(u)->store->set(key, std::vector<uint8_t>(p, p + len));
        return 0;
    } catch (const std::exception &e) {
        return caught(e);
    }
}

static int s_get(void *u, const char *key, void **val, size_t *len, int64_t timeout_ms)
{
    auto b = static_cast<StoreBridge *>(u);
    try {
        b->store->wait({key}, store_timeout(b, timeout_ms));
        std::vector<uint8_t> v = b->store->get(key);
        *val = malloc(v.size() ? v.size() : 1);
        if (!*val)
            return PLX_ERR_NOMEM;
        if (!v.empty())
            memcpy(*val, v.data(), v.size());
        *len = v.size();
        return 0;
    } catch (const std::exception &e) {
        return caught(e);
    }
}

static int s_add(void *u, const char *key, int64_t delta, int64_t *result)
{
    try {
        *result = static_cast<StoreBridge *>(u)->store->add(key, delta);
        return 0;
    } catch (const std::exception &e) {
        return caught(e);
    }
}

static int s_wait(void *u, const char *const *keys, size_t n, int64_t timeout_ms)
{
    auto b = static_cast<StoreBridge *>(u);
    try {
        b->store->wait(std::vector<std::string>(keys, keys + n), store_timeout(b, timeout_ms));
        return 0;
    } catch (const std::exception &e) {
        return caught(e);
    }
}

static int s_check(void *u, const char *key)
{
    try {
        return static_cast<StoreBridge *>(u)->store->check({key}) ? 1 : 0;
    } catch (const std::exception &e) {
        caught(e);
        return 0;
    }
}

static int s_del(void *u, const char *key)
{
    try {
        static_cast<StoreBridge *>(u)->store->deleteKey(key);
        return 0;
    } catch (const std::exception &e) {
        return caught(e);
    }
}

void bridge_init(StoreBridge &b, const intrusive_ptr<c10d::Store> &store)
{
    b.store = store;
    b.cb = plx_store_callbacks{};
    b.cb.struct_size = sizeof b.cb;
    b.cb.user = &b;
    b.cb.set = s_set;
    b.cb.get = s_get;
    b.cb.add = s_add;
    b.cb.wait = s_wait;
    b.cb.check = s_check;
    b.cb.del = s_del;
}

} // namespace plexus_torch
