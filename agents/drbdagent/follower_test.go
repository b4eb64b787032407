package drbdagent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairn-io/cairn/drbd"
	"github.com/cairn-io/cairn/internal/execx"
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
		return strings.TrimSpace(string(b)) >= "3" && len(st.Peers) == 1 && st.Peers[0].Volumes[0].LastSyncKiB != nil &&
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
			ev, err := drbd.ParseEvents2Line(l)
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
	needDrbdUtils(t)
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
	run(drbd.CreateMD(1000, disk, 7))
	run(drbd.SetGI(1000, disk, 3, "1234:BBBB:CCCC:DDDD:1:1"))
	run(drbd.SetGI(1000, disk, 30, ":EEEE::::"))
	u, err := parseDumpMD(run(drbd.DumpMD(1000, disk)))
	if err != nil {
		t.Fatal(err)
	}
	if u.current != 0x1234 || u.history != [2]drbd.UUID{0xCCCC, 0xDDDD} || u.bitmap[3] != 0xBBBB || u.bitmap[30] != 0xEEEE || u.bitmap[0] != 0 {
		t.Fatalf("dump-md parsed as %+v", u)
	}
}
