#!/bin/sh
# Save on 4 tcp processes (FSDP FULL_SHARD), then load into 4, 3, 2 and 1
# processes in the FSDP layout and the DDP layout; every load checks that
# each full tensor is bit-identical to the saved one. An asynchronous save
# over a previous checkpoint at the same path is loaded too.
#   ckpt_reshard.sh PLEXUS_RUN CKPT_ROUNDTRIP
set -eu
run=$1 prog=$2
dir=$(mktemp -d "${TMPDIR:-/tmp}/plexus-ckpt-XXXXXX")
trap 'rm -rf "$dir"' EXIT
job() { n=$1; shift; "$run" -n "$n" --backend tcp --timeout 60 "$prog" "$@"; }
job 4 save "$dir/ck"
for n in 4 3 2 1; do
    job "$n" load-fsdp "$dir/ck"
    job "$n" load-ddp "$dir/ck"
done
# The same path again, asynchronously: the previous checkpoint is replaced.
job 3 save "$dir/ck" --async
job 2 load-fsdp "$dir/ck"
ls "$dir/ck" | grep -q 'rank-00003' && { echo "FAIL: a shard of the replaced checkpoint is still there"; exit 1; }
[ ! -e "$dir/ck.tmp" ] || { echo "FAIL: $dir/ck.tmp left behind"; exit 1; }
echo "ok: 4 -> 4, 3, 2, 1 ranks in FSDP and DDP layouts; async save replaced it"
