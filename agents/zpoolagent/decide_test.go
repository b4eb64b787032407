package zpoolagent

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cairn-io/cairn/agents/execx"
	"github.com/cairn-io/cairn/storage/mmp"
	"github.com/cairn-io/cairn/storage/zpool"
	"github.com/cockroachdb/datadriven"
)

// TestDecide runs testdata/decide: each case's input sets the desired state ("desired
// none", or overrides of pool tank, node n1, devices /dev/a, grant 7) and what the agent
// knows ("local observed imported grant=7 …", times relative to now); the output is the
// action and its reason.
func TestDecide(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	datadriven.RunTest(t, "testdata/decide", func(t *testing.T, d *datadriven.TestData) string {
		if d.Cmd != "decide" {
			t.Fatalf("unknown command %q", d.Cmd)
		}
		want := Want{Present: true, Desired: zpool.Desired{Pool: "tank", Node: "n1", Devices: []string{"/dev/a"}, GrantSeq: 7}}
		var local Local
		for _, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
			fields := strings.Fields(line)
			if len(fields) == 0 {
				continue
			}
			for _, f := range fields[1:] {
				key, val, _ := strings.Cut(f, "=")
				switch fields[0] + " " + key {
				case "desired none":
					want = Want{}
				case "desired node":
					want.Desired.Node = val
				case "desired pool":
					want.Desired.Pool = val
				case "desired devices":
					want.Desired.Devices = nil
					if v := strings.Trim(val, "()"); v != "" {
						want.Desired.Devices = strings.Split(v, ",")
					}
				case "desired grant":
					want.Desired.GrantSeq = num(t, val)
				case "local observed":
					local.Observed = true
				case "local imported":
					local.Imported = true
				case "local grant":
					local.Grant = num(t, val)
				case "local contested":
					local.Contested = num(t, val)
				case "local failed":
					local.Failed = num(t, val)
				case "local attempts":
					local.Attempts = int(num(t, val))
				case "local retry":
					local.RetryAt = now.Add(duration(t, val))
				case "local hold":
					local.HoldUntil = now.Add(duration(t, val))
				case "local reported":
					local.Reported = val
				case "local reported-grant":
					local.ReportedGrant = num(t, val)
				case "local reported-code":
					local.ReportedCode = val
				default:
					t.Fatalf("%s: unknown %q", line, f)
				}
			}
		}
		got := Decide("n1", "tank", want, local, now)
		if got.Reason == "" {
			t.Fatalf("%s without a reason", got.Action)
		}
		return fmt.Sprintf("%s: %s\n", got.Action, got.Reason)
	})
}

func num(t *testing.T, s string) uint64 {
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	return n
}

func duration(t *testing.T, s string) time.Duration {
	d, err := time.ParseDuration(strings.TrimPrefix(s, "+"))
	if err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	return d
}

func TestBackoff(t *testing.T) {
	for n, want := range map[int]time.Duration{1: 30 * time.Second, 2: time.Minute, 3: 2 * time.Minute, 4: 4 * time.Minute, 5: 5 * time.Minute, 50: 5 * time.Minute} {
		if got := Backoff(n, 30*time.Second, 5*time.Minute); got != want {
			t.Errorf("Backoff(%d) = %s, want %s", n, got, want)
		}
	}
}

func TestPlanImport(t *testing.T) {
	const me = 0x44444444
	other := &mmp.Host{HostID: 0x22222222, Hostname: "host-b"}
	self := &mmp.Host{HostID: me, Hostname: "n1"}
	for _, tc := range []struct {
		name          string
		v             mmp.Verdict
		imp, force    bool
		phase, code   string
		foreignHostID string
	}{
		{"idle after a full check, last used elsewhere: -f", mmp.Verdict{Importable: true, Code: mmp.CodeNoActivity, State: "active", LastHost: other}, true, true, "", "", ""},
		{"idle after a full check, exported elsewhere: no -f", mmp.Verdict{Importable: true, Code: mmp.CodeNoActivity, State: "exported", LastHost: other}, true, false, "", "", ""},
		{"idle, this host crashed with it: no -f", mmp.Verdict{Importable: true, Code: mmp.CodeNoActivity, State: "active", LastHost: self}, true, false, "", "", ""},
		{"exported by this host", mmp.Verdict{Importable: true, Code: mmp.CodeExportedByThisHost, State: "exported", LastHost: self}, true, false, "", "", ""},
		{"multihost off, exported", mmp.Verdict{Importable: true, Code: mmp.CodeMMPOff, State: "exported", LastHost: other}, true, false, "", "", ""},
		{"multihost off, active elsewhere: never -f", mmp.Verdict{Importable: true, Code: mmp.CodeMMPOff, State: "active", LastHost: other}, false, false, zpool.PhaseRefused, CodeMMPOffNotForced, "0x22222222"},
		{"destroyed", mmp.Verdict{Importable: true, Code: mmp.CodePoolDestroyed, State: "destroyed"}, false, false, zpool.PhaseRefused, CodeRefusedDestroyed, ""},
		{"active on another host", mmp.Verdict{Active: true, Code: mmp.CodeActivityDetected, LastHost: other, Message: "busy"}, false, false, zpool.PhaseRefused, mmp.CodeActivityDetected, "0x22222222"},
		{"no hostid", mmp.Verdict{Code: mmp.CodeNoHostID}, false, false, zpool.PhaseRefused, mmp.CodeNoHostID, ""},
		{"unreadable leaf", mmp.Verdict{Code: mmp.CodeUnreadableVdev}, false, false, zpool.PhaseFailed, mmp.CodeUnreadableVdev, ""},
		{"mixed pools", mmp.Verdict{Code: mmp.CodeMixedPools}, false, false, zpool.PhaseRefused, mmp.CodeMixedPools, ""},
		{"canceled", mmp.Verdict{Code: mmp.CodeCanceled}, false, false, zpool.PhaseFailed, mmp.CodeCanceled, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := PlanImport(tc.v, me)
			if p.Import != tc.imp || p.Force != tc.force || p.Phase != tc.phase || p.Code != tc.code || p.ForeignHostID != tc.foreignHostID {
				t.Fatalf("PlanImport = %+v", p)
			}
			if !p.Import && p.Reason == "" && tc.v.Message != "" {
				t.Fatal("no reason")
			}
		})
	}
}

func zerr(code int, stderr string) error {
	return &execx.Error{Argv: []string{"zpool", "import", "tank"}, ExitCode: code, Stderr: stderr}
}

func TestClassifyImport(t *testing.T) {
	for _, tc := range []struct {
		name       string
		err        error
		phase      string
		code       string
		host, hid  string
		msgContain string
	}{
		{"imported on another host", zerr(1, "cannot import 'tank': pool is imported on host-b (hostid: 0x22222222)\nExport the pool on the other system, then run 'zpool import'."),
			zpool.PhaseRefused, CodeHostIDActive, "host-b", "0x22222222", "host-b"},
		{"status text", zerr(1, "   status: The pool is currently imported by another system."), zpool.PhaseRefused, CodeHostIDActive, "", "", ""},
		{"hostid required (2.1)", zerr(1, "cannot import 'tank': pool has the multihost property on and the\nsystem's hostid is not set. Set a unique hostid with the zgenhostid(8) command."),
			zpool.PhaseRefused, CodeHostIDRequired, "", "", ""},
		{"hostid required (status)", zerr(1, "The pool has the multihost property on.  It cannot be safely imported when the system hostid is not set."),
			zpool.PhaseRefused, CodeHostIDRequired, "", "", ""},
		{"previously in use", zerr(1, "cannot import 'tank': pool was previously in use from another system.\nLast accessed by host-b (hostid=22222222) at Tue Dec  1 22:08:51 2026\nThe pool can be imported, use 'zpool import -f' to import the pool."),
			zpool.PhaseRefused, CodePreviouslyInUse, "host-b", "0x22222222", ""},
		{"EREMOTEIO", zerr(1, "cannot import 'tank': Remote I/O error"), zpool.PhaseRefused, CodeRemoteIO, "", "", ""},
		// With -f the kernel's activity check refuses a live pool (EREMOTEIO), and zpool
		// says so in its own words (libzfs, EZFS_ACTIVE_POOL), with or without the host.
		{"kernel activity refusal, host known", zerr(1, "cannot import 'tank': pool is imported on host 'node-b' (hostid=2222abcd).\nExport the pool on the other system, then run 'zpool import'."),
			zpool.PhaseRefused, CodeRemoteIO, "node-b", "0x2222abcd", "node-b"},
		{"kernel activity refusal, host unknown", zerr(1, "cannot import 'tank': pool is imported on a different host"),
			zpool.PhaseRefused, CodeRemoteIO, "", "", "different host"},
		{"no such pool", zerr(1, "cannot import 'tank': no such pool available"), zpool.PhaseFailed, CodeNoSuchPool, "", "", ""},
		{"name taken", zerr(1, "cannot import 'tank': a pool with that name already exists"), zpool.PhaseFailed, CodeNameTaken, "", "", ""},
		{"timeout", &execx.Error{Argv: []string{"zpool"}, ExitCode: -1, Err: execx.ErrTimeout}, zpool.PhaseFailed, CodeZpoolTimeout, "", "", "timed out"},
		{"other", zerr(1, "internal error: out of memory"), zpool.PhaseFailed, CodeZpoolError, "", "", "out of memory"},
		{"not an exec error", errors.New("boom"), zpool.PhaseFailed, CodeZpoolError, "", "", "boom"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := ClassifyImport(tc.err)
			if r.Phase != tc.phase || r.Code != tc.code || r.ForeignHost != tc.host || r.ForeignHostID != tc.hid || !strings.Contains(r.Message, tc.msgContain) {
				t.Fatalf("ClassifyImport = %+v", r)
			}
		})
	}
}

func TestImportArgv(t *testing.T) {
	got := strings.Join(ImportArgv("zpool", "tank", []string{"/dev/a", "/dev/b"}, false), " ")
	if got != "zpool import -d /dev/a -d /dev/b -N -o cachefile=none tank" {
		t.Fatal(got)
	}
	got = strings.Join(ImportArgv("/sbin/zpool", "tank", []string{"/dev/a"}, true), " ")
	if got != "/sbin/zpool import -d /dev/a -N -o cachefile=none -f tank" {
		t.Fatal(got)
	}
}

func TestUberblockChanged(t *testing.T) {
	s1, s2 := uint64(1), uint64(2)
	a := &mmp.Seen{TXG: 9, Timestamp: 100, Seq: &s1}
	for _, tc := range []struct {
		b    *mmp.Seen
		want bool
	}{
		{&mmp.Seen{TXG: 9, Timestamp: 100, Seq: &s1, Label: 3}, false}, // another label, same uberblock
		{&mmp.Seen{TXG: 9, Timestamp: 100, Seq: &s2}, true},
		{&mmp.Seen{TXG: 9, Timestamp: 101, Seq: &s1}, true},
		{&mmp.Seen{TXG: 10, Timestamp: 100, Seq: &s1}, true},
		{&mmp.Seen{TXG: 9, Timestamp: 100}, true},
		{nil, true},
	} {
		if got := UberblockChanged(a, tc.b); got != tc.want {
			t.Errorf("UberblockChanged(%+v) = %v", tc.b, got)
		}
	}
}

func TestOnPoll(t *testing.T) {
	if s := OnPoll(mmp.Observation{Foreign: true, Code: mmp.ObsForeignHostID}, nil, 3, 10); !s.Fence || s.Failures != 0 {
		t.Fatalf("foreign: %+v", s)
	}
	if s := OnPoll(mmp.Observation{Code: mmp.ObsOwnWrites}, nil, 3, 10); s.Fence || s.Blind || s.Failures != 0 {
		t.Fatalf("own writes: %+v", s)
	}
	if s := OnPoll(mmp.Observation{}, errors.New("EIO"), 8, 10); s.Blind || s.Failures != 9 {
		t.Fatalf("9th failure: %+v", s)
	}
	if s := OnPoll(mmp.Observation{}, errors.New("EIO"), 9, 10); !s.Blind || s.Fence || s.Failures != 10 {
		t.Fatalf("10th failure: %+v", s)
	}
	if s := OnPoll(mmp.Observation{}, errors.New("EIO"), 10, 10); s.Blind {
		t.Fatalf("blind reported once: %+v", s)
	}
}

func TestParseSubject(t *testing.T) {
	r, _ := New(Options{Node: "n1", Zpool: Zpool{Exec: &execx.Recorder{}}, Publisher: PublisherFunc(nil)})
	defer r.Close()
	names := r.opts.Names
	if n, p, ok := ParseSubject(names, "cairn.node.n1.zpool.tank"); !ok || n != "n1" || p != "tank" {
		t.Fatal(n, p, ok)
	}
	for _, s := range []string{"cairn.node.n1.drbd.r1", "cairn.node.n1.zpool", "other.node.n1.zpool.tank", "cairn.node.n1.zpool.a.b"} {
		if _, _, ok := ParseSubject(names, s); ok {
			t.Errorf("%s parsed", s)
		}
	}
	if err := r.Reconcile(t.Context(), "cairn.node.n2.zpool.tank", nil); err == nil {
		t.Error("another node's subject accepted")
	}
	if err := r.Reconcile(t.Context(), "cairn.node.n1.zpool.tank", []byte("{")); err == nil {
		t.Error("bad JSON accepted")
	}
}

// TestNextWake: past holds and retries do not wake the worker (no spinning); pending
// ones and the watcher's next poll do.
func TestNextWake(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	w := &worker{r: &Reconciler{opts: Options{Now: func() time.Time { return now }}}}
	w.want, w.haveWant = Want{Present: true, Desired: zpool.Desired{GrantSeq: 7}}, true
	w.local = Local{Observed: true, HoldUntil: now.Add(-time.Second), Failed: 7, RetryAt: now.Add(-time.Second)}
	if got := w.nextWake(); !got.IsZero() {
		t.Fatalf("past hold and retry wake at %v", got)
	}
	w.local.RetryAt = now.Add(time.Minute)
	if got := w.nextWake(); !got.Equal(now.Add(time.Minute)) {
		t.Fatalf("pending retry: %v", got)
	}
	w.local.Imported, w.local.Grant, w.nextPoll = true, 7, now.Add(time.Second)
	if got := w.nextWake(); !got.Equal(now.Add(time.Second)) {
		t.Fatalf("watcher poll: %v", got)
	}
	w.local.Contested = 7
	if got := w.nextWake(); !got.Equal(now.Add(time.Minute)) {
		t.Fatalf("no polls after a contest: %v", got)
	}
}
