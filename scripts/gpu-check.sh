#!/bin/sh
# On a fresh Debian machine with an NVIDIA GPU, its driver and NCCL: build
# plexus and run the gpu suite (every NCCL collective on device memory against
# a host reference). NCCL is found on the system path, in [nccl]
# library_path (PLEXUS_NCCL_LIBRARY_PATH) or under /usr/local/cuda.
set -eu
cd "$(dirname "$0")/.."
sh scripts/setup.sh
meson devenv -C build plexus-info --backend nccl || { echo "nccl is not usable here (reason above)"; exit 1; }
meson test -C build --suite gpu --print-errorlogs
