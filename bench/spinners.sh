# spinners.sh - foreign busy processes, one per online core, loading the
# cores as a training job's compute would (sourced by busy_table.sh and
# tuning.sh).
#   start_spinners  one `sh -c 'while :; do :; done'` (nice 0) per core
#   stop_spinners   ends them; the caller's EXIT trap should call it too
spinners=""
start_spinners() {
    _n=$(nproc)
    while [ "$_n" -gt 0 ]; do
        sh -c 'while :; do :; done' &
        spinners="$spinners $!"
        _n=$((_n - 1))
    done
    sleep 0.2
}
stop_spinners() {
    for p in $spinners; do kill "$p" 2>/dev/null; done
    for p in $spinners; do wait "$p" 2>/dev/null; done
    spinners=""
}
