#!/bin/sh
# typos.sh PLEXUS_BENCH - the config corpus of a user's typos, each with the
# warning or error it must give (a 2-rank sim job runs each case):
# a misspelt section in a file, a misspelt variable, a misspelt section in a
# variable, a misspelt backend name, a misspelt key of the backend in use,
# and durations with units.
set -u
bench=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
job() { "$bench" --backend sim --ranks 2 -b 8 -e 8 -n 1 -w 0 >"$tmp/out" 2>&1; }
# expect CASE STATUS(ok|fail) TEXT
expect() {
    st=ok
    [ "$rc" = 0 ] || st=fail
    if [ "$st" != "$2" ] || ! grep -qF -- "$3" "$tmp/out"; then
        echo "FAILED $1: wanted exit $2 and '$3', got exit $rc:"
        sed 's/^/    /' "$tmp/out" | grep -v '^ *[0-9]' | head -5
        fail=1
    else
        echo "ok $1"
    fi
}
unset PLEXUS_BACKEND PLEXUS_CONFIG

printf '[core]\nlog_level = warn\n[tpc]\nifname = eth0\n' >"$tmp/plexus.ini"
PLEXUS_CONFIG=$tmp/plexus.ini job; rc=$?
expect section-in-file ok "$tmp/plexus.ini:4: unknown section [tpc]: no backend of that name is installed, its keys are ignored; did you mean [tcp]?"

PLEXUS_BAKCEND=tcp job; rc=$?
expect variable ok "environment PLEXUS_BAKCEND is not a plexus setting and is ignored (did you mean PLEXUS_BACKEND?)"

PLEXUS_TPC_IFNAME=eth0 job; rc=$?
expect section-in-variable ok "environment PLEXUS_TPC_IFNAME is not a plexus setting and is ignored (did you mean PLEXUS_TCP_IFNAME?)"

"$bench" --backend tpc --ranks 2 -b 8 -e 8 -n 1 >"$tmp/out" 2>&1; rc=$?
expect backend-name fail "unknown backend 'tpc' (did you mean 'tcp'?)"

PLEXUS_SIM_FAIL_OPP=3 job; rc=$?
expect key-of-backend-in-use fail "unknown key 'fail_opp' in [sim] (did you mean 'fail_op'?)"

PLEXUS_CORE_TIMEOUT_MS=5s job; rc=$?
expect duration-seconds ok "wrong"
printf '[core]\ntimeout_ms = 2m\n' >"$tmp/plexus.ini"
PLEXUS_CONFIG=$tmp/plexus.ini job; rc=$?
expect duration-minutes-in-file ok "wrong"
PLEXUS_CORE_TIMEOUT_MS=5parsecs job; rc=$?
expect duration-bad-unit fail "core.timeout_ms = '5parsecs' is not a duration (a number with ns, us, ms, s, m or h)"
exit $fail
