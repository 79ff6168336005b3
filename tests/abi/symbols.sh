#!/bin/sh
# The symbols libplexus.so exports must equal the committed baseline: a
# removal breaks users, an addition must be deliberate (update the baseline).
lib=$1 baseline=$2
now=$(nm -D --defined-only "$lib" | awk '$2 == "T" || $2 == "D" || $2 == "B" || $2 == "R" {print $3}' | sort)
if ! echo "$now" | diff -u "$baseline" - ; then
    echo "FAIL: exported symbols differ from $baseline ('-' removed, '+' added)"
    exit 1
fi
echo "$(echo "$now" | wc -l) exported symbols match the baseline"
