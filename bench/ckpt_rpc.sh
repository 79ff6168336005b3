#!/bin/sh
# Checkpoint throughput against dd, and RPC latency, on tcp processes.
#   bench/ckpt_rpc.sh BUILD_DIR [RANKS] [MIB] [DIR]
# Saves MIB MiB (default $CKPT_MIB or 256) split over RANKS processes (default 2) into
# DIR (default BUILD_DIR/bench-ckpt, i.e. the build's disk), loads it back,
# and writes/reads the same bytes per rank with dd (conv=fsync, as the save
# fsyncs) to the same disk in the same run. The load and dd's read are
# served from the page cache (caches are not dropped on a shared machine).
# Then rpc_sync round trips of 8 B and 1 MiB between 2 processes.
set -eu
build=$(cd "$1" && pwd) ranks=${2:-2} mib=${3:-${CKPT_MIB:-256}} dir=${4:-$build/bench-ckpt}
export PLEXUS_CONFIG_PATH=$build/devconfig
export LD_LIBRARY_PATH=$build/core${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
run="$build/tools/plexus-run" prog="$build/bench/ckpt_rpc_bench"
mkdir -p "$dir"
trap 'rm -rf "$dir"' EXIT
per=$((mib / ranks))
echo "== $mib MiB over $ranks ranks ($per MiB a rank), $(df -T "$dir" | awk 'NR==2 {print $2}') at $dir"
"$run" -n "$ranks" --backend tcp "$prog" save "$dir/ck" "$mib"
"$run" -n "$ranks" --backend tcp "$prog" load "$dir/ck" "$mib"
"$run" -n "$ranks" --backend tcp "$prog" load-noverify "$dir/ck" "$mib"
i=0
while [ $i -lt "$ranks" ]; do
    dd if=/dev/zero of="$dir/dd.$i" bs=1M count="$per" conv=fsync 2>"$dir/dd.$i.log" &
    i=$((i + 1))
done
wait
echo "dd write, $ranks in parallel, conv=fsync:"; tail -qn1 "$dir"/dd.*.log
i=0
while [ $i -lt "$ranks" ]; do
    dd if="$dir/dd.$i" of=/dev/null bs=1M 2>"$dir/dd.$i.log" &
    i=$((i + 1))
done
wait
echo "dd read, $ranks in parallel:"; tail -qn1 "$dir"/dd.*.log
"$run" -n 2 --backend tcp "$prog" rpc
