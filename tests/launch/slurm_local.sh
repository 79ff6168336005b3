#!/bin/sh
# slurm_local.sh - a private single-node Slurm for the tests: munged,
# slurmctld and slurmd on their own ports, sockets and state folders under
# one fresh directory, the local node with its CPUs. Runs the given command
# with SLURM_CONF pointing there once the node is idle, then stops every
# daemon it started (on every exit path) and removes the directory.
#   sh slurm_local.sh COMMAND [ARG...]
# Exit: the command's status; 77 (and the reason) where Slurm cannot run.
set -u
skip() { echo "SKIP: $*"; exit 77; }

for b in munged slurmctld slurmd srun sinfo; do
    command -v "$b" >/dev/null 2>&1 || skip "$b is not installed (sh scripts/deps.sh installs Slurm and munge)"
done
[ "$(id -u)" = 0 ] || skip "slurmd must run as root to start tasks (this user is $(id -un))"
[ $# -ge 1 ] || { echo "usage: $0 COMMAND [ARG...]" >&2; exit 2; }

dir=$(mktemp -d "${TMPDIR:-/tmp}/plexus-slurm.XXXXXX") || exit 1
chmod 700 "$dir"
pids=""
stop() {
    # slurmd first so its steps end before the controller goes.
    for p in $pids; do kill "$p" 2>/dev/null; done
    for p in $pids; do
        i=0
        while kill -0 "$p" 2>/dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
        kill -9 "$p" 2>/dev/null
    done
    # slurmstepd processes of this cluster, and the tasks they started (which
    # outlive a killed step: srun passes them SLURM_CONF), name the spool
    # folder in their environment, or (Slurm 26's slurmstepd, whose
    # environment is empty) hold a file open in it; end only those.
    for e in /proc/[0-9]*/environ; do
        p=${e#/proc/}
        p=${p%/environ}
        [ "$p" != $$ ] || continue
        if grep -q "$dir" "$e" 2>/dev/null || readlink "/proc/$p"/fd/* 2>/dev/null | grep -q "$dir"; then
            kill -9 "$p" 2>/dev/null
        fi
    done
    rm -rf "$dir"
}
trap 'stop' EXIT
trap 'exit 130' INT TERM HUP

# Ports no other run on this machine holds now: random in 10000-19999, used
# by no socket at all, listening or connected. That is below the kernel's
# ephemeral range (from 32768 by default; a client's connection there took
# slurmd's port once) and below the ports plexus derives for a step's store
# from the job and step ids (20000-31999, core/bootstrap/launcher_slurm.c):
# slurmd on a step's derived port once made that step's store fail to listen.
free_port() {
    while :; do
        p=$(( $(od -An -N2 -tu2 /dev/urandom) % 10000 + 10000 ))
        ss -Hatn "sport = :$p" 2>/dev/null | grep -q . || { echo "$p"; return; }
    done
}
ctld_port=$(free_port)
slurmd_port=$(free_port)
[ "$ctld_port" != "$slurmd_port" ] || slurmd_port=$((ctld_port + 1))

host=$(hostname -s)
cpus=$(nproc)
mkdir -p "$dir/munge" "$dir/ctld" "$dir/spool" "$dir/tmp" "$dir/log"
chmod 700 "$dir/munge"
dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 2>/dev/null
chmod 400 "$dir/munge/munge.key"
sock="$dir/munge/munge.socket"

munged --force --key-file="$dir/munge/munge.key" --socket="$sock" --pid-file="$dir/munge/munged.pid" \
    --seed-file="$dir/munge/seed" --log-file="$dir/log/munged.log" --foreground >/dev/null 2>&1 &
pids="$! $pids"
i=0
while [ ! -S "$sock" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
[ -S "$sock" ] || { cat "$dir/log/munged.log" 2>/dev/null; skip "munged did not start"; }

cat >"$dir/slurm.conf" <<EOF
ClusterName=plexus$$
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$sock
StateSaveLocation=$dir/ctld
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/ctld/slurmctld.pid
SlurmdPidFile=$dir/spool/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
TmpFS=$dir/tmp
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
KillWait=2
InactiveLimit=0
MinJobAge=5
PlugStackConfig=$dir/plugstack.conf
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus State=UNKNOWN
PartitionName=local Nodes=$host Default=YES MaxTime=30 State=UP OverSubscribe=FORCE:8
EOF
: >"$dir/plugstack.conf"
mkdir -p "$dir/spool/$host" # SlurmdSpoolDir's %n: Slurm 26 does not make it
# Slurm 23 and later start a cgroup plugin in slurmd whatever the task and
# proctrack plugins are; a chroot or container without cgroupfs has none.
major=$(slurmd -V 2>/dev/null | sed -n 's/^slurm[^ ]* \([0-9]*\)\..*/\1/p')
if [ "${major:-0}" -ge 23 ] && [ ! -d /sys/fs/cgroup/system.slice ] && ! grep -q cgroup /proc/mounts; then
    echo "CgroupPlugin=disabled" >"$dir/cgroup.conf"
fi
export SLURM_CONF="$dir/slurm.conf"

slurmctld -D -i -f "$SLURM_CONF" >"$dir/log/slurmctld.out" 2>&1 &
ctld_pid=$!
slurmd -D -N "$host" -f "$SLURM_CONF" >"$dir/log/slurmd.out" 2>&1 &
slurmd_pid=$!
pids="$slurmd_pid $ctld_pid $pids"

i=0
state=""
while [ $i -lt 300 ]; do
    state=$(sinfo -h -n "$host" -o %t 2>/dev/null)
    [ "$state" = idle ] && break
    # A daemon that could not start (no cgroupfs in a container) is said at once, not after a minute.
    for d in "slurmd $slurmd_pid" "slurmctld $ctld_pid"; do
        if ! kill -0 "${d#* }" 2>/dev/null; then
            tail -n 20 "$dir"/log/*.log "$dir"/log/*.out 2>/dev/null
            why=$(grep -h "error:" "$dir/log/${d% *}.log" "$dir/log/${d% *}.out" 2>/dev/null | tail -n 1)
            skip "${d% *} exited before the node came up${why:+ (${why#*error: })}"
        fi
    done
    sleep 0.2
    i=$((i + 1))
done
if [ "$state" != idle ]; then
    tail -n 20 "$dir"/log/*.log "$dir"/log/*.out 2>/dev/null
    skip "the private Slurm node did not become idle within 60 s (state '$state')"
fi

export PLEXUS_SLURM_DIR="$dir"
"$@"
