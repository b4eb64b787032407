#!/usr/bin/env bash
# fetch-zfs.sh DIR: fetch the OpenZFS 2.1.11 userspace packages from Debian bookworm contrib
# and extract them (dpkg -x, no install scripts, nothing installed on the system) into DIR.
# Afterwards DIR/sbin/zdb, DIR/lib/x86_64-linux-gnu/libzpool.so.5 (with libzpool.so links in
# DIR/usr/lib/x86_64-linux-gnu for the linker) and the headers under DIR/usr/include/libzfs exist.
# Run zdb with LD_LIBRARY_PATH=DIR/lib/x86_64-linux-gnu.
# Idempotent: a DIR that already holds zdb and the headers is left as it is.
# Exit 0 on success, 1 when the packages cannot be fetched (callers skip the live tests then).
set -euo pipefail
dir=${1:?usage: fetch-zfs.sh DIR}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
if [ -x "$dir/sbin/zdb" ] && [ -e "$dir/usr/include/libzfs/sys/spa.h" ] && [ -e "$dir/usr/lib/x86_64-linux-gnu/libzpool.so" ]; then
  echo "fetch-zfs: $dir already holds the tools"
  exit 0
fi

pkgs=(libzpool5linux libnvpair3linux libzfs4linux libuutil3linux zfsutils-linux libzfslinux-dev)

# contrib for the same mirror as the system's main sources, in a private apt state so that the
# system's package lists and sources stay as they are.
state=$(mktemp -d)
trap 'rm -rf "$state"' EXIT
mkdir -p "$state/lists/partial" "$state/cache/archives/partial" "$state/sources.list.d"
uris=$(grep -h '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{print $2}' | grep -v -- -security | head -1 || true)
[ -n "$uris" ] || uris=$(awk '$1 == "deb" && $2 !~ /security/ {print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
[ -n "$uris" ] || uris=http://deb.debian.org/debian
codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")
cat >"$state/sources.list.d/contrib.sources" <<SRC
Types: deb
URIs: $uris
Suites: $codename
Components: main contrib
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
opts=(-o "Dir::State::Lists=$state/lists" -o "Dir::Cache=$state/cache"
      -o "Dir::Etc::SourceList=/dev/null" -o "Dir::Etc::SourceParts=$state/sources.list.d"
      -o "Debug::NoLocking=1" -q)
if ! apt-get "${opts[@]}" update >"$state/update.log" 2>&1; then
  echo "fetch-zfs: apt-get update failed:" >&2; tail -5 "$state/update.log" >&2; exit 1
fi
(cd "$state/cache" && apt-get "${opts[@]}" download "${pkgs[@]}") >"$state/download.log" 2>&1 || {
  echo "fetch-zfs: apt-get download failed:" >&2; tail -5 "$state/download.log" >&2; exit 1; }
for deb in "$state"/cache/*.deb; do
  dpkg -x "$deb" "$dir"
done
# The -dev package's unversioned .so links point at /lib, absolute: point them into DIR.
for l in zpool nvpair uutil zfs zfs_core zfsbootenv; do
  f=$(ls "$dir"/lib/x86_64-linux-gnu/lib$l.so.*.* 2>/dev/null | head -1 || true)
  [ -n "$f" ] && ln -sfn "$f" "$dir/usr/lib/x86_64-linux-gnu/lib$l.so"
done
echo "fetch-zfs: extracted ${pkgs[*]} into $dir"
ls "$state"/cache/*.deb | xargs -n1 basename
