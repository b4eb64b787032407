#!/usr/bin/env bash
# build-mmpgen.sh TOOLS OUTPUT: compile mmpgen.c against the OpenZFS headers and libraries
# that fetch-zfs.sh extracted into TOOLS. The binary finds its libraries through an rpath
# into TOOLS, so it runs without LD_LIBRARY_PATH.
set -euo pipefail
tools=$(cd "${1:?usage: build-mmpgen.sh TOOLS OUTPUT}" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
gcc -O1 -w -o "${2:?usage: build-mmpgen.sh TOOLS OUTPUT}" "$here/mmpgen.c" \
  -D_GNU_SOURCE -D_REENTRANT -DNDEBUG \
  -I"$tools/usr/include/libspl" -I"$tools/usr/include/libzfs" \
  -L"$tools/usr/lib/x86_64-linux-gnu" -lzpool -lzfs_core -lnvpair -luutil -lpthread \
  -Wl,-rpath,"$tools/lib/x86_64-linux-gnu"
