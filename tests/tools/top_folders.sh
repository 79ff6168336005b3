#!/bin/sh
# plexus-top PLEXUS_TOP: a --dir that cannot be read is an error that says why
# (status 2), not "no ledgers"; files named *.ledger that are not ledgers
# (another version's, damaged) are said to be skipped, not passed over in silence.
top=$1
fail=0
dir=$(mktemp -d "${TMPDIR:-/tmp}/plexus-top-folders.XXXXXX")
trap 'rm -rf "$dir"' EXIT
check() { # WANT_STATUS WANT_TEXT ARGS...
    want=$1 text=$2
    shift 2
    out=$("$top" "$@" 2>&1)
    st=$?
    if [ $st != "$want" ] || ! echo "$out" | grep -qF "$text"; then
        echo "FAILED: plexus-top $*: status $st (want $want), output: $out (want '$text')"
        fail=1
    fi
}
check 2 "cannot read the folder $dir/none: No such file or directory" --once --dir "$dir/none"
: >"$dir/file"
check 2 "cannot read the folder $dir/file: Not a directory" --once --dir "$dir/file"
check 1 "no live ledgers in $dir" --once --dir "$dir"
head -c 4096 /dev/urandom >"$dir/1.world.ledger"
: >"$dir/2.world.ledger"
check 1 "2 file(s) named *.ledger in $dir are not ledgers of version" --once --all --dir "$dir"
[ $fail = 0 ] && echo ok
exit $fail
