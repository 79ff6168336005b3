#!/bin/sh
# tsan.sh [BUILD_DIR] - ThreadSanitizer: configure BUILD_DIR (default
# build-tsan) with -Db_sanitize=thread, build it, and run the tests whose
# threads share state: the sim suite (ranks as threads), the store tests
# (tests/core/store, tests/core/comm), the tcp suites (plugin driven directly, and real
# processes) and the fault tests. Every report fails its test (TSan's exit
# code 66) and is also written to BUILD_DIR/tsan-reports/; the last line
# counts them. Suppressions: tests/tsan.supp, each entry with its reason.
# CC defaults to gcc (Debian's libtsan); CC=clang works as well.
#   sh scripts/tsan.sh --build [BUILD_DIR]  only configure and build (CI does
#                                           it while the main suite runs)
set -u
cd "$(dirname "$0")/.."
build_only=0
[ "${1:-}" = --build ] && { build_only=1; shift; }
dir=${1:-build-tsan}
start=$(date +%s)
# Without the MPI plugins: Open MPI pulls in UCX, whose libucm hooks madvise
# and takes a lock in it from exiting threads, which crashes TSan's
# interceptors (SIGSEGV in __tsan::MutexPreReadLock under ucm_madvise); the
# runs here need only sim and tcp.
if [ ! -d "$dir" ]; then
    CC=${CC:-gcc} meson setup "$dir" -Db_sanitize=thread -Db_lundef=false -Dmpi=disabled -Dtorch=disabled -Dpython=disabled >/dev/null ||
        { echo "tsan: setup failed"; exit 1; }
fi
ninja -C "$dir" >/dev/null || { echo "tsan: build failed"; exit 1; }
[ $build_only = 0 ] || exit 0
reports="$PWD/$dir/tsan-reports"
rm -rf "$reports"
mkdir -p "$reports"
# second_deadlock_stack: both stacks of a lock-order report; history_size:
# the older side of a race is still known after a long test.
export TSAN_OPTIONS="suppressions=$PWD/tests/tsan.supp log_path=$reports/tsan second_deadlock_stack=1 history_size=4 ${TSAN_OPTIONS:-}"
# The 8-rank sim matrices and the 64 MiB tcp runs are left out: they take
# the same paths as the 4-rank and 1 MiB ones at several times the cost
# (about 6 minutes more under TSan on 2 cores).
list() { meson test -C "$dir" --list "$@" 2>/dev/null | sed -n 's|^plexus:[^ ]* / ||p'; }
# The shm matrices and the multi-process training runs are left out too:
# TSan sees the threads of one process, not ranks sharing a segment, and
# the training runs take the tcp paths the tcp tests already cover. Of
# shm's point-to-point runs, the 2-rank ones (user thread and executor
# thread on one ring lock) stay; more ranks repeat the same paths. The
# 50-round kill loop is left out as well: one round takes the paths of
# tcp_fault_kill_*, which stay; so is the shrink loop (one round is
# faults_shrink_kill1), and the 1,600-round churn test (it measures resident
# memory, which TSan's shadow grows; its rounds are init, split and destroy,
# which other faults tests run). Of the 3-rank sim matrices two stay (one
# blocking, one nonblocking): TSan looks for races in the sim plugin and the
# executor, which every algorithm drives the same way. Of the 4-rank ones,
# native nonblocking and generic blocking stay (the named algorithms run
# through the same executor as the generic default). The sim model's scale
# (1,024 and 16,384 ranks) and 16-host tests are left out too: thousands of
# coroutine ranks under TSan's shadow memory, and the 64-rank model test
# takes the same paths; so is
# plexus-whatif's formula check (64 rank threads per sweep point, the same
# sim paths again). Of the 1- and 2-rank sim matrices one and two stay, and
# one 3-rank one: the same executor and plugin paths at a fraction of the
# 4-rank ones' interleavings. Of tcp's dtype x op runs, f32 sum at each rank
# count and bf16 avg at 2 ranks stay: the other pairs change the reduction
# kernel (test_reduce checks those under ASan), not what threads share.
# Of the chunked hierarchy's two matrices the nonblocking one stays: its
# hierarchy runs on one executor and hands each chunk's cross step to
# another, which is all the blocking one does.
tests=$( (list --suite sim --suite tcp --suite multiproc --suite faults --no-suite soak |
              grep -v -e '_P8_' -e '_64M$' -e '^shm_matrix_' -e '^train_' -e '^shm_hier_two_hosts' \
                  -e '^shm_p2p_P[34]' -e '^shm_p2p_.*cma_on' -e '^collv_shm_P[34]' -e '^faults_kill_loop$' \
                  -e '^faults_shrink_loop$' -e '^faults_churn_tcp$' -e '^shm_hier_chunked_P4_blocking$' \
                  -e '^sim_matrix_P3_generic_\(nonblocking\|recdbl\|tree\|ring\|rabenseifner\)$' \
                  -e '^sim_matrix_P3_native_blocking$' -e '^test_sim_model_scale' -e '^test_sim_model_hier$' \
                  -e '^sim_matrix_P4_generic_\(nonblocking\|recdbl\|tree\|ring\|rabenseifner\)$' \
                  -e '^sim_matrix_P4_native_blocking$' \
                  -e '^sim_whatif_formula$' \
                  -e '^sim_matrix_P1_\(generic_nonblocking\|native_blocking\|native_nonblocking\)$' \
                  -e '^sim_matrix_P2_\(generic_blocking\|native_nonblocking\)$' -e '^sim_matrix_P3_native_nonblocking$' \
                  -e '^tcp_P[234]_\(i32_max\|u8_prod\|f64_min\|i32_bxor\|u8_band\)$' -e '^tcp_P[34]_bf16_avg$'
          list --suite unit | grep -e '^test_store' -e '^test_rendezvous' -e '^test_ledger'
          list --suite strategy | grep -e '^rpc_sim' -e '^ddp_reducer_P4' -e '^ddp_order_sim') | sort -u)
status=0
# shellcheck disable=SC2086 # one test name per word
meson test -C "$dir" --print-errorlogs $tests || status=1
n=$(cat "$reports"/tsan.* 2>/dev/null | grep -c '^WARNING: ThreadSanitizer' || true)
[ "$n" = 0 ] || { status=1; echo "tsan: reports in $reports:"; grep -h '^SUMMARY' "$reports"/tsan.* | sort | uniq -c; }
echo "tsan: $n reports, $(( $(date +%s) - start )) s"
exit $status
