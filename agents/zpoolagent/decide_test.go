package zpoolagent

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cairn-io/cairn/agents"
	"github.com/cairn-io/cairn/events"
	"github.com/cairn-io/cairn/internal/execx"
	"github.com/cairn-io/cairn/storage/mmp"
	"github.com/cairn-io/cairn/storage/zpool"
)

func TestDecide(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	d := zpool.Desired{Pool: "tank", Node: "n1", Devices: []string{"/dev/a"}, GrantSeq: 7}
	want := Want{Present: true, Desired: d}
	with := func(f func(*zpool.Desired)) Want { w := want; f(&w.Desired); return w }
	none := Want{}
	obs := Local{Observed: true}
	for _, tc := range []struct {
		name string
		w    Want
		l    Local
		act  Action
	}{
		{"nothing observed yet", want, Local{}, ActObserve},
		{"nothing observed, empty desired", none, Local{}, ActObserve},
		{"hold after a failed observe", want, Local{HoldUntil: now.Add(time.Second)}, ActWait},
		{"grant, not imported", want, obs, ActImport},
		{"grant, imported under it: no new check", want, Local{Observed: true, Imported: true, Grant: 7}, ActNothing},
		{"grant, found imported at start", want, Local{Observed: true, Imported: true}, ActAdopt},
		{"new grant while imported under an older one", want, Local{Observed: true, Imported: true, Grant: 5}, ActAdopt},
		{"refused grant backs off", want, Local{Observed: true, Failed: 7, RetryAt: now.Add(time.Minute), Attempts: 1}, ActWait},
		{"refused grant retried after the backoff", want, Local{Observed: true, Failed: 7, RetryAt: now.Add(-time.Second)}, ActImport},
		{"a new grant does not wait for an old refusal", want, Local{Observed: true, Failed: 6, RetryAt: now.Add(time.Minute)}, ActImport},
		{"contested grant: never imported again", want, Local{Observed: true, Contested: 7}, ActReportHeld},
		{"contested grant, held and reported", want, Local{Observed: true, Contested: 7, Reported: zpool.PhaseContested, ReportedGrant: 7}, ActNothing},
		{"contested grant imported again: fence", want, Local{Observed: true, Imported: true, Grant: 7, Contested: 7}, ActFence},
		{"a new grant after a contest imports", with(func(d *zpool.Desired) { d.GrantSeq = 9 }), Local{Observed: true, Contested: 7}, ActImport},
		{"empty, imported: export", none, Local{Observed: true, Imported: true, Grant: 7}, ActExport},
		{"empty, imported under a contested grant: fence", none, Local{Observed: true, Imported: true, Grant: 7, Contested: 7}, ActFence},
		{"empty, not imported: report once", none, obs, ActReportExported},
		{"empty, reported", none, Local{Observed: true, Reported: zpool.PhaseExported}, ActNothing},
		{"empty after a fence: exported (the latch stays)", none, Local{Observed: true, Contested: 7, Reported: zpool.PhaseContested}, ActReportExported},
		{"another node's desired state", with(func(d *zpool.Desired) { d.Node = "n2" }), obs, ActInvalid},
		{"another pool's desired state", with(func(d *zpool.Desired) { d.Pool = "other" }), obs, ActInvalid},
		{"no devices", with(func(d *zpool.Desired) { d.Devices = nil }), obs, ActInvalid},
		{"a device that is an option", with(func(d *zpool.Desired) { d.Devices = []string{"-f"} }), obs, ActInvalid},
		{"no grant", with(func(d *zpool.Desired) { d.GrantSeq = 0 }), obs, ActInvalid},
		{"invalid, reported", with(func(d *zpool.Desired) { d.Devices = nil }),
			Local{Observed: true, Reported: zpool.PhaseFailed, ReportedGrant: 7, ReportedCode: CodeInvalidDesired}, ActNothing},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Decide("n1", "tank", tc.w, tc.l, now)
			if got.Action != tc.act {
				t.Fatalf("Decide = %s (%s), want %s", got.Action, got.Reason, tc.act)
			}
			if got.Reason == "" {
				t.Fatal("no reason")
			}
		})
	}
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

type recordingReconciler struct{ subjects []string }

func (r *recordingReconciler) Reconcile(_ context.Context, subject string, _ []byte) error {
	r.subjects = append(r.subjects, subject)
	return nil
}

func TestMux(t *testing.T) {
	z, d := &recordingReconciler{}, &recordingReconciler{}
	m := Mux{Names: events.NewNames(""), Kinds: map[string]agents.Reconciler{"zpool": z}, Default: d}
	for _, s := range []string{"cairn.node.n1.zpool.tank", "cairn.node.n1.drbd.r1", "cairn.node.n1.zpool.t2"} {
		if err := m.Reconcile(context.Background(), s, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Reconcile(context.Background(), "cairn.status.n1.zpool.tank", nil); err == nil {
		t.Fatal("a status subject routed")
	}
	if len(z.subjects) != 2 || len(d.subjects) != 1 || d.subjects[0] != "cairn.node.n1.drbd.r1" {
		t.Fatalf("zpool %v, default %v", z.subjects, d.subjects)
	}
	if err := (Mux{Names: events.NewNames("")}).Reconcile(context.Background(), "cairn.node.n1.lvm.x", nil); err != nil {
		t.Fatal("a kind without a reconciler is recorded only, not an error")
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
