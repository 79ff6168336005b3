#!/bin/sh
# view_old.sh MODULE PROGRAM: declare MODULE (the ABI 1.2 plugin viewold) in
# a drop-in of its own and run PROGRAM against it.
module=$1 prog=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
mkdir "$dir/backends.d"
printf '[viewold]\nlibrary = %s\npriority = 1\n' "$module" > "$dir/backends.d/90-viewold.ini"
PLEXUS_CONFIG_PATH="$PLEXUS_CONFIG_PATH:$dir" "$prog"
