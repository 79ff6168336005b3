#!/bin/sh
# Training resumed from a checkpoint continues with the same losses.
#   ckpt_train.sh sim CKPT_TRAIN                 3 sim ranks, one job
#   ckpt_train.sh tcp CKPT_TRAIN PLEXUS_RUN      4 tcp processes; then saved on
#                                                4 and resumed on 2 and 3
set -eu
kind=$1 prog=$2
dir=$(mktemp -d "${TMPDIR:-/tmp}/plexus-ckpt-XXXXXX")
trap 'rm -rf "$dir"' EXIT
if [ "$kind" = sim ]; then
    "$prog" same "$dir/a" --ranks 3
    exit 0
fi
run=$3
job() { n=$1; shift; "$run" -n "$n" --backend tcp --timeout 60 "$prog" "$@"; }
job 4 same "$dir/a"
job 4 save "$dir/b"
job 2 resume "$dir/b"
job 3 resume "$dir/b"
