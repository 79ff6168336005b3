#!/bin/sh
# sim_plot.sh [BUILD_DIR] OUT.png - busbw and time against size of each
# allreduce algorithm on a modelled cluster: plexus-whatif's CSV (timing
# only, the core's algorithms over sim's network model) drawn by
# tools/plexus-plot.py. The cluster, by default 1,024 ranks as 128 hosts x 8
# on 100 Gb/s NICs, comes from RANKS, HOSTS, INTER_LATENCY, INTER_BANDWIDTH,
# INTRA_LATENCY, INTRA_BANDWIDTH; sizes from MINBYTES to MAXBYTES by
# STEPFACTOR; CSV=FILE keeps the data. Exits 77 without matplotlib.
set -eu
[ $# -ge 1 ] || { echo "usage: sim_plot.sh [BUILD_DIR] OUT.png"; exit 2; }
if [ $# -ge 2 ]; then build=$1; shift; else build=build; fi
png=$1
src=$(cd "$(dirname "$0")/.." && pwd)
/usr/bin/python3 -c 'import matplotlib' 2>/dev/null ||
    { echo "SKIP: /usr/bin/python3 has no matplotlib (Debian: python3-matplotlib)"; exit 77; }
[ -x "$build/tools/plexus-whatif" ] || { echo "no $build/tools/plexus-whatif: build first"; exit 2; }
export PLEXUS_CONFIG_PATH=${PLEXUS_CONFIG_PATH:-$build/devconfig}
ranks=${RANKS:-1024} hosts=${HOSTS:-128}
csv=${CSV:-$(mktemp)}
[ -n "${CSV:-}" ] || trap 'rm -f "$csv"' EXIT
"$build/tools/plexus-whatif" --ranks "$ranks" --hosts "$hosts" \
    --intra-latency "${INTRA_LATENCY:-1us}" --intra-bandwidth "${INTRA_BANDWIDTH:-50G}" \
    --inter-latency "${INTER_LATENCY:-5us}" --inter-bandwidth "${INTER_BANDWIDTH:-12G}" \
    -b "${MINBYTES:-8}" -e "${MAXBYTES:-64M}" -f "${STEPFACTOR:-4}" --csv "$csv"
/usr/bin/python3 "$src/tools/plexus-plot.py" -o "$png" \
    --title "modelled allreduce, $ranks ranks on $hosts hosts (intra ${INTRA_LATENCY:-1us}, ${INTRA_BANDWIDTH:-50G}B/s; NIC ${INTER_LATENCY:-5us}, ${INTER_BANDWIDTH:-12G}B/s) - plexus-whatif" \
    "$csv"
echo "wrote $png"
