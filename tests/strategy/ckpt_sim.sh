#!/bin/sh
# Save on S sim ranks, load on L sim ranks in the FSDP and DDP layouts
# (and an asynchronous save loaded the same way; and, for an even S, a
# HYBRID_SHARD save).
#   ckpt_sim.sh CKPT_ROUNDTRIP S L
set -eu
prog=$1 s=$2 l=$3
dir=$(mktemp -d "${TMPDIR:-/tmp}/plexus-ckpt-XXXXXX")
trap 'rm -rf "$dir"' EXIT
"$prog" save "$dir/ck" --ranks "$s"
"$prog" load-fsdp "$dir/ck" --ranks "$l"
"$prog" load-ddp "$dir/ck" --ranks "$l"
"$prog" save "$dir/ck2" --ranks "$s" --async
"$prog" load-fsdp "$dir/ck2" --ranks "$l"
# HYBRID_SHARD (groups of 2) saved: replicas write the same pieces twice.
if [ $((s % 2)) = 0 ]; then
    "$prog" save "$dir/ck3" --ranks "$s" --hybrid 2
    "$prog" load-fsdp "$dir/ck3" --ranks "$l"
    "$prog" load-ddp "$dir/ck3" --ranks "$l"
fi
