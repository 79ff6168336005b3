#!/bin/sh
# run_owns_ranks.sh PLEXUS_RUN PLEXUS_BENCH - plexus-run's ranks never
# outlive it. For each way it can end (SIGTERM, SIGKILL, SIGINT, its output
# pipe closed) and each thing the ranks may be doing (spinning in
# collectives, sleeping, spinning under a wrapper script that does not exec
# it), start a 2-rank job, end plexus-run that way, and require that no
# process of the ranks (a wrapper's children too) is left 2 s later. Then a
# job whose ranks exit leaving a detached child (setsid): gone when plexus-run ends.
set -u
run=$1
bench=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

# ranks_of PID: the pids of plexus-run PID's children.
ranks_of() { cat /proc/"$1"/task/*/children 2>/dev/null; }
# tree_of PID: the pids of every descendant of PID.
tree_of() {
    for c in $(ranks_of "$1"); do
        echo "$c"
        tree_of "$c"
    done
}

# alive PIDS: how many still run. A process whose memory is gone (empty
# cmdline: the kernel has let go of its mm) is exiting, not a zombie yet:
# a sanitizer's huge mappings can take seconds to tear down under load.
alive() {
    n=0
    for p in $1; do
        [ -d /proc/"$p" ] && [ "$(awk '{print $3}' /proc/"$p"/stat 2>/dev/null)" != Z ] &&
            [ -n "$(tr -d '\0' 2>/dev/null </proc/"$p"/cmdline)" ] && n=$((n + 1))
    done
    echo $n
}

# check HOW WHAT: start, wait until both ranks run, end it HOW, judge.
check() {
    how=$1 what=$2
    case $what in
        spin) printf '#!/bin/sh\necho started\nexec %s --backend tcp -b 8 -e 8 -n 100000000 -w 0\n' "$bench" ;;
        sleep) printf '#!/bin/sh\necho started\nexec sleep 1000\n' ;;
        # the shape of `plexus-run -n 2 sh -c 'plexus-bench ...; echo done'`
        wrap) printf '#!/bin/sh\necho started\n%s --backend tcp -b 8 -e 8 -n 100000000 -w 0\necho done\n' "$bench" ;;
    esac >"$tmp/rank.sh"
    chmod +x "$tmp/rank.sh"
    rm -f "$tmp/go"
    if [ "$how" = pipe ]; then
        # The ranks print a line first; head reads it once they are counted
        # here ($tmp/go; 20 s at most) and closes the pipe.
        sh -c "echo \$\$ >$tmp/pid; exec $run -n 2 $tmp/rank.sh" |
            { i=0; while [ ! -f "$tmp/go" ] && [ $i -lt 200 ]; do sleep 0.1; i=$((i + 1)); done; head -n 1 >/dev/null; } &
    else
        sh -c "echo \$\$ >$tmp/pid; exec $run -n 2 $tmp/rank.sh" >"$tmp/out" 2>&1 &
    fi
    waiter=$!
    i=0
    while [ $i -lt 100 ]; do
        pid=$(cat "$tmp/pid" 2>/dev/null)
        [ -n "$pid" ] && [ "$(echo $(ranks_of "$pid") | wc -w)" -ge 2 ] && break
        sleep 0.1
        i=$((i + 1))
    done
    # the wrapped programs are started too
    [ "$what" != wrap ] || while [ $i -lt 100 ] && [ "$(echo $(tree_of "$pid") | wc -w)" -lt 4 ]; do
        sleep 0.1
        i=$((i + 1))
    done
    kids=$(tree_of "$pid")
    touch "$tmp/go"
    [ "$(echo $kids | wc -w)" -ge 2 ] || { echo "FAILED $how/$what: the ranks did not start"; cat "$tmp/out"; fail=1; return; }
    sleep 0.5
    case $how in
        term) kill -TERM "$pid" ;;
        kill) kill -KILL "$pid" ;;
        int) kill -INT "$pid" ;;
        pipe) ;; # head closes it
    esac
    # Judged as soon as every rank is gone, at the latest 2 s after.
    i=0
    while [ "$(alive "$kids")" != 0 ] && [ $i -lt 20 ]; do
        sleep 0.1
        i=$((i + 1))
    done
    left=$(alive "$kids")
    if [ "$left" != 0 ]; then
        echo "FAILED $how/$what: $left rank process(es) still alive 2 s after plexus-run ended:"
        for p in $kids; do [ -d /proc/"$p" ] && tr '\0' ' ' </proc/"$p"/cmdline && echo; done
        fail=1
    else
        echo "ok $how/$what"
    fi
    for p in $kids; do kill -KILL "$p" 2>/dev/null; done
    kill -KILL "$pid" 2>/dev/null
    wait $waiter 2>/dev/null
    rm -f "$tmp/pid"
}

for how in term kill int pipe; do
    for what in spin sleep wrap; do
        check $how $what
    done
done

# Ranks that exit 0 leaving a detached child (its own session, not in the
# ranks' group): plexus-run ends the job, and that child with it.
printf '#!/bin/sh\nsetsid sleep 1000 </dev/null >/dev/null 2>&1 &\necho $! >"$1.$RANK"\n' >"$tmp/detach.sh"
chmod +x "$tmp/detach.sh"
if ! "$run" -n 2 "$tmp/detach.sh" "$tmp/detached" >"$tmp/out" 2>&1; then
    echo "FAILED detach: plexus-run failed"; cat "$tmp/out"; fail=1
fi
i=0
while [ "$(alive "$(cat "$tmp"/detached.* 2>/dev/null)")" != 0 ] && [ $i -lt 20 ]; do
    sleep 0.1
    i=$((i + 1))
done
left=$(alive "$(cat "$tmp"/detached.* 2>/dev/null)")
if [ -z "$(cat "$tmp"/detached.* 2>/dev/null)" ]; then
    echo "FAILED detach: the ranks did not start their children"; cat "$tmp/out"; fail=1
elif [ "$left" != 0 ]; then
    echo "FAILED detach: $left detached child(ren) of the ranks still alive after plexus-run exited"; fail=1
else
    echo "ok detach"
fi
for p in $(cat "$tmp"/detached.* 2>/dev/null); do kill -KILL "$p" 2>/dev/null; done
exit $fail
