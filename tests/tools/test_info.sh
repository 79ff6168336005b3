#!/bin/sh
# plexus-info on the build tree: sim is listed usable; an unknown backend
# exits non-zero with the list of known names; --config shows origins;
# etc/plexus.ini is exactly what --sample-config prints (no drift); tcp's
# keys (all of them, typed) are listed; authentication is reported as the
# store and tcp decide it; whether each prepares collectives itself.
set -u
info="$1"
src="$2"
fail=0
out=$("$info") || { echo "plexus-info failed"; fail=1; }
echo "$out" | grep -q "^sim$" || { echo "sim not listed"; fail=1; }
echo "$out" | sed -n '/^sim$/,/^$/p' | grep -q "state: *usable" || { echo "sim not usable"; fail=1; }
"$info" --backend sim >/dev/null || { echo "--backend sim should exit 0"; fail=1; }
err=$("$info" --backend nosuch 2>&1) && { echo "--backend nosuch should fail"; fail=1; }
echo "$err" | grep -q "unknown backend 'nosuch'.*known: .*sim" || { echo "no suggestion: $err"; fail=1; }
err=$("$info" --backend sin 2>&1) && { echo "--backend sin should fail"; fail=1; }
echo "$err" | grep -q "did you mean 'sim'" || { echo "no did-you-mean: $err"; fail=1; }
PLEXUS_CORE_TIMEOUT_MS=1234 "$info" --config | grep -q "core.timeout_ms = 1234 *# env PLEXUS_CORE_TIMEOUT_MS" ||
    { echo "--config lacks the env origin"; fail=1; }
"$info" --json | python3 -c 'import json,sys; d=json.load(sys.stdin); assert any(b["name"]=="sim" and b["usable"] for b in d["backends"])' ||
    { echo "--json is not valid or lacks sim"; fail=1; }
# Whether a backend prepares collectives itself is its run-time answer
# (ABI 1.12's coll_prepare): shm does, sim does not.
"$info" --json | python3 -c 'import json,sys; d={b["name"]: b for b in json.load(sys.stdin)["backends"]}
assert d["sim"]["prepared"] is False, d["sim"]
assert "shm" not in d or not d["shm"]["usable"] or d["shm"]["prepared"] is True, d["shm"]' ||
    { echo "--json: prepared is not false for sim and true for a usable shm"; fail=1; }
"$info" --backend sim | grep -q "^  prepared: *by the core" || { echo "sim's text lacks its prepared line"; fail=1; }
# Every key tcp reads is declared (typed), so both listings show it.
if "$info" --backend tcp >/dev/null 2>&1; then
    cfg=$("$info" --config)
    keys=$("$info" --backend tcp)
    for k in auth auth_timeout_ms max_handshakes busy_poll_us max_early_bytes; do
        echo "$cfg" | grep -q "^tcp\.$k = .*# default (" || { echo "--config lacks tcp.$k"; fail=1; }
        echo "$keys" | grep -q "^ *\(keys: *\)\?$k *=" || { echo "--backend tcp lacks the key $k"; fail=1; }
    done
    PLEXUS_TCP_AUTH_TIMEOUT_MS=2s "$info" --config | grep -q "^tcp.auth_timeout_ms = 2s *# env PLEXUS_TCP_AUTH_TIMEOUT_MS (duration)" ||
        { echo "--config lacks tcp.auth_timeout_ms from the environment"; fail=1; }
fi
# Authentication as the store and tcp decide it (one policy): [core] auth =
# on without a secret is a refusal, not a plain store; a short secret too.
out=$(env -u PLEXUS_JOB_SECRET PLEXUS_CORE_AUTH=on "$info" 2>&1)
echo "$out" | grep -q "tcp:// store REFUSED (plx_comm_init fails): \[core\] auth = on, but PLEXUS_JOB_SECRET is not set" ||
    { echo "auth = on without a secret is not shown as refused"; fail=1; }
out=$(PLEXUS_JOB_SECRET=short "$info" 2>&1)
echo "$out" | grep -q "tcp:// store REFUSED (plx_comm_init fails): PLEXUS_JOB_SECRET has 5 characters" ||
    { echo "a short secret is not shown as refused"; fail=1; }
out=$(PLEXUS_JOB_SECRET=0123456789abcdef0123 PLEXUS_TCP_AUTH=off "$info" 2>&1)
echo "$out" | grep -q "tcp:// store authenticated" && echo "$out" | grep -q "tcp transport UNAUTHENTICATED.*\[tcp\] auth = off" ||
    { echo "[tcp] auth = off with a secret: not shown per side"; fail=1; }
"$info" --sample-config | diff -u "$src/etc/plexus.ini" - || { echo "etc/plexus.ini differs from --sample-config"; fail=1; }
[ $fail = 0 ] && echo "plexus-info checks passed"
exit $fail
