#!/usr/bin/env bash
# Builds nats-server-clockstep: the real nats-server (the version .ci/run installs) whose wall
# clock can be stepped while it runs, for the lease's clock-step test (test/lease_test.go).
# libfaketime cannot reach a static Go binary, so the step is built in with `go build
# -overlay`: Go's time.Now adds the milliseconds written in the file $CLOCK_STEP_FILE (read
# every 20 ms; the monotonic clock is untouched, as with a real step of the wall clock).
# Nothing else of nats-server changes. Usage: build.sh DESTDIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dest=${1:?usage: build.sh DESTDIR}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
goroot=$(go env GOROOT)
cp "$goroot/src/time/time.go" "$work/time.go"
# One line of Now changes: the wall reading is stepped before it is encoded.
if ! grep -q '^	sec, nsec, mono := runtimeNow()$' "$work/time.go"; then
  echo "build.sh: time.Now of $(go version) is not the shape this patch expects" >&2
  exit 1
fi
sed -i 's/^	sec, nsec, mono := runtimeNow()$/	sec, nsec, mono := runtimeNow()\n	sec, nsec = cairnStepped(sec, nsec)/' "$work/time.go"
cp "$here/step.go.txt" "$work/step.go"
printf '{"Replace":{"%s":"%s","%s":"%s"}}\n' \
  "$goroot/src/time/time.go" "$work/time.go" "$goroot/src/time/zz_clockstep.go" "$work/step.go" >"$work/overlay.json"
GOBIN="$work/bin" go install -overlay="$work/overlay.json" github.com/nats-io/nats-server/v2@v2.15.2
mkdir -p "$dest"
mv "$work/bin/nats-server" "$dest/nats-server-clockstep"
