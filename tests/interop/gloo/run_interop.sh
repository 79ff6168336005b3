#!/bin/sh
# run_interop.sh GLOO_PEER PLUGIN.so LAYOUT - wire interop between a Debian
# libgloo rank and a plexus tcp rank: both rank orders, repeated until the
# plexus side has been seen on both sides of gloo's connect rule (listener
# ports are random, so the role is too). Each run uses a fresh FileStore
# directory. LAYOUT (2022 or 2023) is the rendezvous layout this libgloo
# speaks: the plexus rank must have found it by itself.
set -u
peer=$1
plugin=$2
layout=${3:-2022}
# The gloo rank listens on 127.0.0.1; the job is on this host, so the plexus
# rank publishes loopback too (its rendezvous host), and which side connects
# then depends on the ports, as the test needs.
export MASTER_ADDR=127.0.0.1
connects=0
accepts=0
tries=0
for attempt in 1 2 3 4 5 6 7 8 9 10; do
    for plexus_rank in 0 1; do
        dir=$(mktemp -d)
        if [ $plexus_rank = 0 ]; then a=plexus; b=gloo; else a=gloo; b=plexus; fi
        timeout 90 "$peer" $a "$dir" 0 "$plugin" >"$dir.0" 2>&1 &
        pid=$!
        timeout 90 "$peer" $b "$dir" 1 "$plugin" >"$dir.1" 2>&1
        rc1=$?
        wait $pid
        rc0=$?
        sed 's/^/[rank 0] /' "$dir.0"
        sed 's/^/[rank 1] /' "$dir.1"
        if grep -q "^role: " "$dir.0" "$dir.1" && ! grep -q "^role: .*($layout layout)" "$dir.0" "$dir.1"; then
            echo "FAILED: the plexus rank did not speak gloo's $layout layout"
            exit 1
        fi
        if grep -q "role: .* connects" "$dir.0" "$dir.1"; then connects=$((connects + 1)); fi
        if grep -q "role: .* accepts" "$dir.0" "$dir.1"; then accepts=$((accepts + 1)); fi
        rm -rf "$dir" "$dir.0" "$dir.1"
        tries=$((tries + 1))
        if [ $rc0 != 0 ] || [ $rc1 != 0 ]; then
            echo "FAILED: plexus as rank $plexus_rank (exit $rc0 / $rc1)"
            exit 1
        fi
    done
    if [ $tries -ge 4 ] && [ $connects -gt 0 ] && [ $accepts -gt 0 ]; then
        break
    fi
done
echo "runs: $tries ($layout layout); plexus connected in $connects, accepted in $accepts"
if [ $connects = 0 ] || [ $accepts = 0 ]; then
    echo "FAILED: did not see both connect roles"
    exit 1
fi
echo ok
