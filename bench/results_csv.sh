# results_csv.sh - sourced by bench/compare*.sh: write their figures as
# plexus-bench --output csv files (the same columns), one per peer and rank
# count, for tools/plexus-plot.py. Allreduce f32 sum; a row's time is the
# median over the reps.
#   results_median FILE...             the median of the numbers > 0 in the files, or nothing
#   results_file FILE TOOL BACKEND NP  start FILE with the header
#   results_row FILE TOOL BACKEND NP BYTES ITERS PLACE US [MEMCPY_GBS]
#   results_peer NAME TOOL BACKEND [MEMCPY]
#       $RESULTS/NAME-npN.csv for every N of $nps, a row per size of $sizes from the
#       rep files $out/NAME.N.SIZE.*, in place, iterations from the caller's iters_for;
#       MEMCPY non-empty: the memcpy reference from $out/memcpy.N.SIZE.*; a file with
#       no row is removed.

results_median() {
    cat "$@" 2>/dev/null | awk 'NF == 1 && $1 > 0' | sort -g |
        awk '{ v[n++] = $1 } END { if (n) print n % 2 ? v[(n - 1) / 2] : (v[n / 2 - 1] + v[n / 2]) / 2 }'
}

results_file() {
    echo "tool,backend,ranks,hosts,host,cpu,dtype,op,iterations,warmup,coll,redop,root,place,size_bytes,count,time_us,algbw_gbs,busbw_gbs,wrong,memcpy_gbs" >"$1"
}

results_row() {
    [ -n "$8" ] || return 0
    awk -v tool="$2" -v be="$3" -v np="$4" -v s="$5" -v it="$6" -v place="$7" -v t="$8" -v m="${9:-}" \
        -v host="$(hostname -s)" -v cpu="$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo | tr -d '"')" \
        'BEGIN { alg = s / t / 1e3
        printf "%s,\"%s\",%d,1,\"%s\",\"%s\",f32,sum,%d,5,allreduce,sum,-1,%s,%d,%d,%.4f,%.6f,%.6f,,%s\n",
            tool, be, np, host, cpu, it, place, s, s / 4, t, alg, alg * 2 * (np - 1) / np, m }' >>"$1"
}

results_peer() {
    for np in $nps; do
        f="$RESULTS/$1-np$np.csv"
        results_file "$f"
        for s in $sizes; do
            m=""
            [ -n "${4:-}" ] && m=$(results_median "$out/memcpy.$np.$s."*)
            results_row "$f" "$2" "$3" "$np" "$s" "$(iters_for "$s")" in "$(results_median "$out/$1.$np.$s."*)" "$m"
        done
        [ "$(wc -l <"$f")" -gt 1 ] || rm -f "$f"
    done
}
