#!/bin/sh
# cluster_mpi_host.sh MPI_LOOP RANKS_PER_HOST ITERS BYTES... - Open MPI over
# tcp on the cluster in a box (run by scripts/cluster.sh exec): host 0
# starts mpirun with every host's address and bench/cluster_rsh.sh as its
# rsh agent (the daemons start in the other hosts' namespaces); the other
# hosts have nothing to do. One mpirun per size: "BYTES US" lines.
set -eu
[ "$HOST" = 0 ] || exit 0
loop=$1 rph=$2 iters=$3
shift 3
here=$(cd "$(dirname "$0")" && pwd)
hosts="" i=0
while [ $i -lt "$HOSTS" ]; do
    hosts="$hosts${hosts:+,}$CLUSTER_NET.$((i + 1)):$rph"
    i=$((i + 1))
done
for b in "$@"; do
    mpirun --allow-run-as-root --oversubscribe -np $((HOSTS * rph)) --host "$hosts" \
        --mca plm_rsh_agent "$here/cluster_rsh.sh" --mca pml ob1 --mca btl tcp,self \
        --mca btl_tcp_if_include eth0 --mca oob_tcp_if_include eth0 "$loop" "$b" "$iters"
done
