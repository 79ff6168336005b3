#!/bin/sh
# cluster_rsh.sh ADDR CMD... - Open MPI's rsh agent on the cluster in a box
# (scripts/cluster.sh exec): runs CMD in the namespace of the host that has
# ADDR (CLUSTER_NET.<i+1>), as ssh would run it on that host.
set -eu
addr=$1
shift
i=$((${addr##*.} - 1))
exec ip netns exec "${CLUSTER_NETNS}$i" unshare -u sh -c 'hostname "$0" && exec sh -c "$*"' "host$i" "$*"
