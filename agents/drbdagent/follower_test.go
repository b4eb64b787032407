package drbdagent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cairn-io/cairn/agents/execx"
	"github.com/cairn-io/cairn/drbd"
	"github.com/cairn-io/cairn/drbd/drbdutils"
	"github.com/cairn-io/cairn/test/testtools"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/rs/zerolog"
)

// A fake drbdsetup (a shell script run through the real executor: events2 needs the
// kernel module) prints a dump with one malformed line and exits. The follower parses
// every line, counts and skips the malformed one, and starts the stream again each
// time it ends.
func TestFollowerRestartsAndSkipsMalformedLines(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "drbdsetup")
	body := fmt.Sprintf(`#!/bin/sh
echo "$@" > %[1]s/argv
n=$(cat %[1]s/count 2>/dev/null || echo 0); n=$((n+1)); echo $n > %[1]s/count
echo "exists resource name:r1 role:Secondary suspended:no"
echo "exists device name:r1 volume:0 minor:1000 disk:UpToDate client:no size:4096"
echo "exists connection name:r1 peer-node-id:1 conn-name:h2 connection:Connected role:Secondary"
echo "exists peer-device name:r1 peer-node-id:1 conn-name:h2 volume:0 replication:Established peer-disk:UpToDate out-of-sync:0"
echo "this is not an events2 line"
echo "exists -"
echo "change peer-device name:r1 peer-node-id:1 conn-name:h2 volume:0 replication:SyncSource out-of-sync:$((n*100)) done:0.00"
echo "change peer-device name:r1 peer-node-id:1 conn-name:h2 volume:0 replication:Established out-of-sync:0"
echo "drbdsetup: stream ended $n" >&2
if [ $n -ge 3 ]; then sleep 60; fi
exit 1
`, dir)
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	runner := &execx.Runner{Log: zerolog.Nop()}
	k := &Real{Exec: runner, Lines: runner, Drbdsetup: script}
	fold := NewFold()
	malformed0, restarts0 := counterValue(metricEventMalformed), counterValue(metricEventRestarts)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() {
		(&Follower{Kernel: k, Fold: fold, Backoff: 10 * time.Millisecond, Log: zerolog.Nop()}).Run(ctx)
		close(done)
	}()
	eventually(t, "three streams, the third followed to its end", 10*time.Second, func() (bool, string) {
		b, _ := os.ReadFile(filepath.Join(dir, "count"))
		var st drbd.Status
		fold.Fill("r1", &st, nil)
		// The peer can be folded before its volume is: look at the volume once it is there.
		return strings.TrimSpace(string(b)) >= "3" && len(st.Peers) == 1 && len(st.Peers[0].Volumes) == 1 && st.Peers[0].Volumes[0].LastSyncKiB != nil &&
			*st.Peers[0].Volumes[0].LastSyncKiB == 300 && st.Peers[0].Volumes[0].Replication == "Established", string(b)
	})
	cancel()
	<-done
	if got := counterValue(metricEventMalformed) - malformed0; got < 3 {
		t.Errorf("malformed lines counted %v, want >= 3 (one per stream)", got)
	}
	if got := counterValue(metricEventRestarts) - restarts0; got < 2 {
		t.Errorf("restarts counted %v, want >= 2", got)
	}
	argv, _ := os.ReadFile(filepath.Join(dir, "argv"))
	if strings.TrimSpace(string(argv)) != "events2 --statistics all" {
		t.Errorf("drbdsetup called with %q", argv)
	}
	var st drbd.Status
	fold.Fill("r1", &st, map[int]string{1: "n2"})
	if st.Role != "Secondary" || len(st.Volumes) != 1 || st.Volumes[0].DiskState != "UpToDate" || len(st.Peers) != 1 {
		t.Fatalf("fold after the streams: %s", js(st))
	}
	pv := st.Peers[0].Volumes[0]
	if pv.Replication != "Established" || pv.SyncKind != "bitmap" || pv.LastSyncKiB == nil || *pv.LastSyncKiB%100 != 0 {
		t.Fatalf("peer volume %s, want a finished bitmap resync", js(pv))
	}
}

func TestFoldSyncKinds(t *testing.T) {
	lines := func(f *Fold, ls ...string) {
		for _, l := range ls {
			ev, err := drbdutils.ParseEvents2Line(l)
			if err != nil {
				t.Fatal(err)
			}
			f.Apply(ev, func(string, int) uint64 { return 4096 })
		}
	}
	kind := func(f *Fold) string {
		var st drbd.Status
		f.Fill("r1", &st, nil)
		return st.Peers[0].Volumes[0].SyncKind
	}
	pd := "peer-device name:r1 peer-node-id:1 conn-name:h2 volume:0 "
	for _, tt := range []struct {
		name  string
		lines []string
		want  string
	}{
		{"full: out-of-sync reaches the size", []string{"create " + pd + "replication:Off", "change " + pd + "replication:SyncTarget out-of-sync:4096", "change " + pd + "replication:Established out-of-sync:0"}, "full"},
		{"bitmap: less", []string{"create " + pd + "replication:Off", "change " + pd + "replication:SyncSource out-of-sync:400", "change " + pd + "replication:Established out-of-sync:0"}, "bitmap"},
		{"none: established without a resync", []string{"create " + pd + "replication:Off", "change " + pd + "replication:Established out-of-sync:0"}, "none"},
		{"dump: unknown", []string{"exists " + pd + "replication:Established out-of-sync:0"}, ""},
		{"connection lost: forgotten", []string{"create " + pd + "replication:Off", "change " + pd + "replication:SyncSource out-of-sync:400", "change " + pd + "replication:Established", "change " + pd + "replication:Off"}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := NewFold()
			lines(f, tt.lines...)
			if got := kind(f); got != tt.want {
				t.Fatalf("sync kind %q, want %q", got, tt.want)
			}
		})
	}
}

func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return -1
	}
	return m.GetCounter().GetValue()
}

func TestParseDumpMDWithRealDrbdmeta(t *testing.T) {
	testtools.Need(t, drbdutils.Drbdadm, drbdutils.Drbdmeta)
	disk := filepath.Join(t.TempDir(), "d.img")
	if err := os.WriteFile(disk, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(disk, 8<<20); err != nil {
		t.Fatal(err)
	}
	ex := newCountingExec(t)
	run := func(argv []string) []byte {
		out, err := ex.Run(context.Background(), argv, execx.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	run(drbdutils.CreateMD(1000, disk, 7))
	run(drbdutils.SetGI(1000, disk, 3, "1234:BBBB:CCCC:DDDD:1:1"))
	run(drbdutils.SetGI(1000, disk, 30, ":EEEE::::"))
	u, err := parseDumpMD(run(drbdutils.DumpMD(1000, disk)))
	if err != nil {
		t.Fatal(err)
	}
	if u.current != 0x1234 || u.history != [2]drbd.UUID{0xCCCC, 0xDDDD} || u.bitmap[3] != 0xBBBB || u.bitmap[30] != 0xEEEE || u.bitmap[0] != 0 {
		t.Fatalf("dump-md parsed as %+v", u)
	}
}

// logLine is one zerolog JSON line.
type logLine struct {
	Level, Message, Missing, Error string
}

// parseLogs splits zerolog JSON output into its lines.
func parseLogs(t *testing.T, out []byte) []logLine {
	t.Helper()
	var ls []logLine
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var v logLine
		if err := json.Unmarshal([]byte(l), &v); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		ls = append(ls, v)
	}
	return ls
}

// followFake runs a Follower on the Real kernel with drbdsetup the shell script body
// (%[1]s is dir; the script counts its runs in dir/count) and proc as ProcDRBD, until
// done says so; it returns what the follower logged.
func followFake(t *testing.T, dir, body, proc string, done func(runs int, fold *Fold) bool) []logLine {
	t.Helper()
	script := filepath.Join(dir, "drbdsetup")
	if err := os.WriteFile(script, []byte(fmt.Sprintf(body, dir)), 0o755); err != nil {
		t.Fatal(err)
	}
	runner := &execx.Runner{Log: zerolog.Nop()}
	k := &Real{Exec: runner, Lines: runner, Drbdsetup: script, ProcDRBD: proc}
	var logs bytes.Buffer
	fold := NewFold()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stopped := make(chan struct{})
	go func() {
		(&Follower{Kernel: k, Fold: fold, Missing: k.Missing, Backoff: 5 * time.Millisecond, Log: zerolog.New(&logs)}).Run(ctx)
		close(stopped)
	}()
	eventually(t, "the fake drbdsetup's runs", 10*time.Second, func() (bool, string) {
		b, _ := os.ReadFile(filepath.Join(dir, "count"))
		n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		return done(n, fold), string(b)
	})
	cancel()
	<-stopped
	return parseLogs(t, logs.Bytes())
}

const fakeCount = `#!/bin/sh
n=$(cat %[1]s/count 2>/dev/null || echo 0); n=$((n+1)); echo $n > %[1]s/count
`

// On a host without the DRBD module drbdsetup events2 fails at once (exit 20 after a
// failed modprobe, /proc/drbd absent). The follower warns once, saying what is missing
// and what it means, retries at debug level, and logs at info when the module is
// there and the stream works.
func TestFollowerWarnsOnceWhileDRBDIsMissing(t *testing.T) {
	dir := t.TempDir()
	proc := filepath.Join(dir, "proc_drbd")
	body := fakeCount + `if [ $n -le 4 ]; then echo "Failed to modprobe drbd (No such file or directory)" >&2; exit 20; fi
touch ` + proc + `
echo "exists resource name:r1 role:Secondary suspended:no"
echo "exists -"
sleep 60
`
	logs := followFake(t, dir, body, proc, func(runs int, fold *Fold) bool { return runs >= 5 && fold.Up("r1") })
	var warns, debugs, infos []logLine
	for _, l := range logs {
		switch l.Level {
		case "warn":
			warns = append(warns, l)
		case "debug":
			debugs = append(debugs, l)
		case "info":
			infos = append(infos, l)
		}
	}
	if len(warns) != 1 || !strings.Contains(warns[0].Message, "no DRBD resources are observed until the module is loaded") ||
		warns[0].Missing != "the DRBD kernel module (no "+proc+")" || !strings.Contains(warns[0].Error, "exit 20") {
		t.Fatalf("warnings %+v, want one saying the module is missing", warns)
	}
	if len(debugs) != 3 {
		t.Errorf("debug lines %+v, want the 3 later failures", debugs)
	}
	if len(infos) != 1 || infos[0].Message != "DRBD is available: events2 stream started" {
		t.Errorf("info lines %+v, want one: the stream started", infos)
	}
}

// Any other failure (the module is there) is a warning every time, as before.
func TestFollowerWarnsAtEveryOtherFailure(t *testing.T) {
	dir := t.TempDir()
	proc := filepath.Join(dir, "proc_drbd")
	if err := os.WriteFile(proc, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	body := fakeCount + `echo "something else broke" >&2; exit 10
`
	logs := followFake(t, dir, body, proc, func(runs int, _ *Fold) bool { return runs >= 3 })
	if len(logs) < 2 {
		t.Fatalf("logs %+v, want a warning per failure", logs)
	}
	for _, l := range logs {
		if l.Level != "warn" || l.Message != "events2 stream ended" || l.Missing != "" {
			t.Fatalf("log line %+v, want events2 stream ended at warn", l)
		}
	}
}

// What Real.Missing makes of the errors a stream ends with, by whether /proc/drbd
// exists.
func TestRealMissing(t *testing.T) {
	dir := t.TempDir()
	present, absent := filepath.Join(dir, "proc_drbd"), filepath.Join(dir, "none")
	if err := os.WriteFile(present, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	runner := &execx.Runner{Log: zerolog.Nop()}
	startErr := func(drbdsetup string) error {
		return (&Real{Lines: runner, Drbdsetup: drbdsetup}).Events(t.Context(), func(string) {})
	}
	notInPath := startErr("cairn-no-such-drbdsetup")
	noFile := startErr(filepath.Join(dir, "no", "drbdsetup"))
	exit20 := &execx.Error{Argv: EventsArgv(""), ExitCode: 20, Stderr: "Failed to modprobe drbd (No such file or directory)"}
	tests := []struct {
		name, drbdsetup, proc string
		err                   error
		want                  string
	}{
		{"module missing", "", absent, exit20, "the DRBD kernel module (no " + absent + ")"},
		{"drbdsetup not in PATH", "cairn-no-such-drbdsetup", present, notInPath, `drbdsetup ("cairn-no-such-drbdsetup" not found)`},
		{"drbdsetup path absent", filepath.Join(dir, "no", "drbdsetup"), present, noFile, `drbdsetup ("` + filepath.Join(dir, "no", "drbdsetup") + `" not found)`},
		{"both", "", absent, notInPath, `drbdsetup ("drbdsetup" not found), the DRBD kernel module (no ` + absent + ")"},
		{"module there: another failure", "", present, exit20, ""},
		{"ended on its own, module there", "", present, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := (&Real{Drbdsetup: tt.drbdsetup, ProcDRBD: tt.proc}).Missing(tt.err); got != tt.want {
				t.Fatalf("Missing(%v) = %q, want %q", tt.err, got, tt.want)
			}
		})
	}
}

// TestFoldResyncRateAndETA: a resync's rate is what it copied since it started over the
// time since (events2 --statistics reports out-of-sync as it goes), and the time left
// is the rest at that rate; nothing before a second, nothing once Established.
func TestFoldResyncRateAndETA(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	f := NewFold()
	f.Now = func() time.Time { return now }
	pd := "peer-device name:r1 peer-node-id:1 conn-name:h2 volume:0 "
	apply := func(l string) {
		ev, err := drbdutils.ParseEvents2Line(l)
		if err != nil {
			t.Fatal(err)
		}
		f.Apply(ev, func(string, int) uint64 { return 1 << 20 })
	}
	rate := func() (*uint64, *uint64) {
		var st drbd.Status
		f.Fill("r1", &st, nil)
		v := st.Peers[0].Volumes[0]
		return v.SyncRateKiBs, v.SyncETASeconds
	}
	apply("create " + pd + "replication:Off")
	apply("change " + pd + "replication:SyncSource out-of-sync:100000 done:0.00")
	if r, e := rate(); r != nil || e != nil {
		t.Fatalf("at the start: rate %v eta %v", r, e)
	}
	now = now.Add(10 * time.Second)
	apply("change " + pd + "out-of-sync:60000 done:40.00")
	r, e := rate()
	if r == nil || e == nil || *r != 4000 || *e != 15 {
		t.Fatalf("after 40,000 KiB in 10 s: rate %v eta %v, want 4000 KiB/s and 15 s", r, e)
	}
	now = now.Add(5 * time.Second)
	apply("change " + pd + "replication:Established out-of-sync:0")
	if r, e := rate(); r != nil || e != nil {
		t.Fatalf("after the resync: rate %v eta %v", r, e)
	}
}
