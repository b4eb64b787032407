#!/usr/bin/env bash
# make-images.sh TOOLS OUT: build mmpgen against the OpenZFS packages extracted by
# fetch-zfs.sh into TOOLS, make the MMP fixture pools on 64 MiB sparse files, and write
# each leaf gzip-compressed as OUT/<image>/<leaf>.img.gz with `zdb -lluuuu` of the leaf
# beside it (<leaf>.zdb). OUT is normally storage/zfs/testdata.
#
# Images (hostids are fixed so that tests can name them):
#   single-exported   1 file, multihost=on, hostid 0x11111111 host-a, cleanly exported
#   mirror-exported   2-way mirror, ashift 12, multihost=on, hostid 0x11111111 host-a, exported
#   mirror-active     2-way mirror, ashift 12, multihost=on, hostid 0x22222222 host-b, writer killed -9
#   single-off        1 file, multihost=off, hostid 0x11111111 host-a, writer killed -9
#   single-fast       1 file, multihost=on, zfs_multihost_interval=100 ms, hostid 0x33333333
#                     host-c, writer killed -9
set -euo pipefail
tools=$(cd "${1:?usage: make-images.sh TOOLS OUT}" && pwd)
out=${2:?usage: make-images.sh TOOLS OUT}
mkdir -p "$out"; out=$(cd "$out" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
lib="$tools/lib/x86_64-linux-gnu"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

"$here/build-mmpgen.sh" "$tools" "$work/mmpgen"
gen="$work/mmpgen"

# mkpool NAME MODE HOSTID ARGS... -- LEAVES...: run mmpgen in $work/NAME on fresh 64 MiB files.
mkpool() {
  local name=$1 mode=$2 hostid=$3; shift 3
  local args=() leaves=()
  while [ "$1" != -- ]; do args+=("$1"); shift; done; shift
  mkdir -p "$work/$name"
  for l in "$@"; do truncate -s 64M "$work/$name/$l.img"; leaves+=("$work/$name/$l.img"); done
  if [ "$mode" = export ]; then
    ZFS_HOSTID=$hostid "$gen" "${args[@]}" -c "$work/$name/cache" -s 3 -x export pool-"$name" "${leaves[@]}"
  else
    # hold, let MMP write heartbeats for a few intervals, then kill -9 (no export, no final sync)
    ZFS_HOSTID=$hostid "$gen" "${args[@]}" -c "$work/$name/cache" -x hold pool-"$name" "${leaves[@]}" >"$work/$name/out" &
    local pid=$!
    for _ in $(seq 100); do grep -q ready "$work/$name/out" 2>/dev/null && break; sleep 0.1; done
    grep -q ready "$work/$name/out" || { echo "make-images: $name: writer did not start" >&2; exit 1; }
    sleep 4
    kill -9 "$pid"; wait "$pid" 2>/dev/null || true
  fi
  rm -rf "${out:?}/$name"; mkdir -p "$out/$name"
  for l in "$@"; do
    LD_LIBRARY_PATH="$lib" "$tools/sbin/zdb" -lluuuu "$work/$name/$l.img" >"$out/$name/$l.zdb" || true
    gzip -9 -n <"$work/$name/$l.img" >"$out/$name/$l.img.gz"
  done
  echo "make-images: $name: $(du -ch "$out/$name"/*.gz | tail -1)"
}

mkpool single-exported export 0x11111111 -m -n host-a -- disk0
mkpool mirror-exported export 0x11111111 -m -M -a 12 -n host-a -- disk0 disk1
mkpool mirror-active   hold   0x22222222 -m -M -a 12 -n host-b -- disk0 disk1
mkpool single-off      hold   0x11111111 -n host-a -- disk0
mkpool single-fast     hold   0x33333333 -m -i 100 -n host-c -- disk0
