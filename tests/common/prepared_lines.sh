# prepared_lines.sh, sourced: prepared_everywhere OUT BACKEND NP checks a
# plexus-bench --prepared --check --coll all run's output (the core's debug
# log included): every element right, and every collective prepared in the
# backend (the core's debug line) on each of the NP ranks, none declined.
prepared_everywhere() {
    echo "$1" | grep -q "total wrong elements: 0" ||
        { echo "$1" | grep -v DEBUG | tail; echo "FAIL: no checked total"; return 1; }
    for coll in allreduce broadcast reduce allgather reduce_scatter gather scatter alltoall barrier; do
        n=$(echo "$1" | grep -o "plexus\[[0-9]*\] DEBUG core: $coll on 'world': prepared in backend '$2'" |
            cut -d' ' -f1 | sort -u | wc -l)
        [ "$n" = "$3" ] || { echo "FAIL: $n of $3 ranks prepared $coll in the backend"; return 1; }
    done
    if echo "$1" | grep -q "does not prepare it"; then
        echo "$1" | grep "does not prepare it" | head -3
        echo "FAIL: $2 declined a collective"
        return 1
    fi
}
