package zpoolagent

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/cairn-io/cairn/agents/execx"
	"github.com/cairn-io/cairn/storage/mmp"
	"github.com/cairn-io/cairn/storage/zpool"
)

// This file is the pure part of the agent's pool flow: given the desired state, what
// the agent knows about its own side of the pool, and (later) a verdict, a zpool error
// or a watcher observation, decide what to do. No I/O, no clock it is not given.

// Agent codes of a Status (beside the mmp verdict and watcher codes).
const (
	CodeNoHostID         = mmp.CodeNoHostID // no hostid on this host: nothing is checked or imported
	CodeHostIDActive     = "hostid_active"  // zpool: "pool is imported on HOST (hostid: 0x…)"
	CodeHostIDRequired   = "hostid_required"
	CodePreviouslyInUse  = "previously_in_use" // zpool: last used by another host, wants -f
	CodeRemoteIO         = "remote_io"         // the kernel's own activity check refused (EREMOTEIO)
	CodeNoSuchPool       = "no_such_pool"      // zpool found no pool of that name on the devices
	CodeNameTaken        = "pool_name_taken"   // a pool of that name is already imported here
	CodeZpoolError       = "zpool_error"       // any other zpool failure
	CodeZpoolTimeout     = "zpool_timeout"     // zpool ran into its timeout
	CodeChangedAfter     = "activity_after_check"
	CodeInvalidDesired   = "invalid_desired"     // the desired state is malformed or for another node
	CodeContestedGrant   = "contested_grant"     // this grant was contested here: no re-import under it
	CodeExportFailed     = "export_failed"       // zpool export refused (busy); retried
	CodeFenceFailed      = "fence_failed"        // zpool export -F failed; retried
	CodeObserveFailed    = "observe_failed"      // zpool list failed
	CodeAdopted          = "adopted"             // found imported at start (or under an older grant)
	CodeFenced           = "fenced"              // exported: fenced after a contest (the grant was then withdrawn)
	CodeWatchBlind       = "watch_blind"         // the leaves cannot be read after import
	CodeRefusedDestroyed = "pool_destroyed_here" // a destroyed pool is never imported by the agent
	CodeMMPOffNotForced  = "mmp_off_foreign"     // multihost off and last used elsewhere: no -f
	CodeMMPSuspended     = "mmp_suspended"       // the kernel suspended the pool: MMP writes failed (ZFS-8000-MM)
	CodeIOSuspended      = "io_suspended"        // the kernel suspended the pool: I/O failures
	CodeHealthFailed     = "health_failed"       // zpool list -o health failed
	CodeLatchUnreadable  = "latch_unreadable"    // the contested latch file exists but cannot be read: no import (fail closed)
)

// Want is the desired state of one pool subject: Present false is the empty message
// (this node must not have the pool imported).
type Want struct {
	Present bool
	Desired zpool.Desired
}

// Local is what the agent knows about its own side of one pool. The zero value is the
// state at start: nothing observed yet.
type Local struct {
	// Observed is true once the import state was read (zpool list) in this process.
	Observed bool
	// Imported: the pool is imported on this host.
	Imported bool
	// Grant is the GrantSeq the pool was imported or adopted under (0: found imported
	// at start, not yet adopted).
	Grant uint64
	// Contested is the GrantSeq under which another host wrote the pool and this host
	// fenced it (persisted across restarts when the agent has a state directory).
	Contested uint64
	// LatchBroken says why the contested latch file exists but could not be read: the
	// agent then imports under no grant (it cannot tell which one was contested).
	LatchBroken string
	// Failed is the GrantSeq whose last attempt was refused or failed; RetryAt is when
	// it may be tried again; Attempts counts the attempts under it.
	Failed   uint64
	RetryAt  time.Time
	Attempts int
	// HoldUntil delays the next observe, export or fence after one failed.
	HoldUntil time.Time
	// Reported is the phase last published with ReportedGrant, so that the same state
	// is not published again and again.
	Reported      string
	ReportedGrant uint64
	ReportedCode  string
}

// Action is what the agent does next for one pool.
type Action string

const (
	ActNothing        Action = "nothing"         // desired and observed agree
	ActObserve        Action = "observe"         // read the import state (zpool list) first
	ActImport         Action = "import"          // hostid, activity check, zpool import, watch
	ActAdopt          Action = "adopt"           // imported already: verify with the watcher, report imported
	ActExport         Action = "export"          // zpool export (grant moved or pool released)
	ActFence          Action = "fence"           // zpool export -F (a contested grant is imported here)
	ActReportExported Action = "report_exported" // not imported and not wanted: say so once
	ActReportHeld     Action = "report_contested"
	ActInvalid        Action = "invalid"          // report failed: the desired state cannot be carried out
	ActLatchBroken    Action = "latch_unreadable" // report failed: the latch cannot be read, nothing is imported
	ActWait           Action = "wait"             // a refused or failed grant: retry at Local.RetryAt
)

// Decision is an Action and why.
type Decision struct {
	Action Action
	Reason string
}

// Decide returns the next action for one pool subject of node, given the desired state
// and the local state, at now. It is level-triggered: the same inputs give the same
// action, and an action that succeeded changes Local so that the next Decide says
// ActNothing. The rules, in order:
//
//   - a failed observe, export or fence backs off until Local.HoldUntil: wait;
//   - nothing observed yet: observe;
//   - not wanted: fence when imported under a contested grant, export when imported
//     otherwise; else report exported once (after a fence with code fenced; the latch
//     stays);
//   - wanted but malformed (another pool or node, no devices, no grant): invalid;
//   - a contested latch that exists but cannot be read: never import (fail closed),
//     report it once;
//   - wanted under the GrantSeq this host saw contested: fence if imported, else hold
//     (report contested once) and never import under that grant;
//   - imported under this grant: nothing; imported under another or unknown grant:
//     adopt (the watcher verifies that the labels still name this host);
//   - not imported: wait while a refused or failed attempt of this grant backs off,
//     else import.
func Decide(node, pool string, w Want, l Local, now time.Time) Decision {
	if now.Before(l.HoldUntil) {
		return Decision{ActWait, fmt.Sprintf("backing off after a failure until %s", l.HoldUntil.UTC().Format(time.RFC3339))}
	}
	if !l.Observed {
		return Decision{ActObserve, "import state not read yet"}
	}
	if !w.Present {
		switch {
		case l.Imported && l.Contested != 0 && l.Contested == l.Grant:
			return Decision{ActFence, fmt.Sprintf("grant %d was contested and the pool is still imported here", l.Grant)}
		case l.Imported:
			return Decision{ActExport, "this node no longer holds the grant"}
		case l.Reported != zpool.PhaseExported:
			return Decision{ActReportExported, "not imported and not wanted"}
		}
		return Decision{ActNothing, "exported"}
	}
	d := w.Desired
	if msg := validate(node, pool, d); msg != "" {
		if l.Imported && d.GrantSeq != 0 && d.GrantSeq == l.Contested {
			return Decision{ActFence, msg}
		}
		if l.Reported == zpool.PhaseFailed && l.ReportedGrant == d.GrantSeq && l.ReportedCode == CodeInvalidDesired {
			return Decision{ActNothing, msg}
		}
		return Decision{ActInvalid, msg}
	}
	if l.LatchBroken != "" && !l.Imported {
		if l.Reported == zpool.PhaseFailed && l.ReportedGrant == d.GrantSeq && l.ReportedCode == CodeLatchUnreadable {
			return Decision{ActNothing, "contested latch unreadable: held"}
		}
		return Decision{ActLatchBroken, "the contested latch cannot be read (" + l.LatchBroken + "): no import under any grant until an operator checks the pool and removes or repairs the latch file"}
	}
	if d.GrantSeq == l.Contested {
		if l.Imported {
			return Decision{ActFence, fmt.Sprintf("grant %d was contested here; the pool is imported again", d.GrantSeq)}
		}
		if l.Reported == zpool.PhaseContested && l.ReportedGrant == d.GrantSeq {
			return Decision{ActNothing, "contested grant: held"}
		}
		return Decision{ActReportHeld, fmt.Sprintf("grant %d was contested here: no import under it; a new grant is needed (pool.export, then pool.import)", d.GrantSeq)}
	}
	if l.Imported {
		if l.Grant == d.GrantSeq {
			return Decision{ActNothing, "imported under this grant"}
		}
		return Decision{ActAdopt, fmt.Sprintf("imported already (grant %d), now granted %d", l.Grant, d.GrantSeq)}
	}
	if l.Failed == d.GrantSeq && now.Before(l.RetryAt) {
		return Decision{ActWait, fmt.Sprintf("attempt %d under grant %d failed; retry at %s", l.Attempts, d.GrantSeq, l.RetryAt.UTC().Format(time.RFC3339))}
	}
	return Decision{ActImport, fmt.Sprintf("granted %d", d.GrantSeq)}
}

func validate(node, pool string, d zpool.Desired) string {
	switch {
	case d.Node != node:
		return fmt.Sprintf("desired state names node %q, this agent is %q", d.Node, node)
	case d.Pool != pool:
		return fmt.Sprintf("desired state names pool %q but came on the subject of pool %q", d.Pool, pool)
	case d.GrantSeq == 0:
		return "desired state has no grant_seq"
	case len(d.Devices) == 0:
		return "desired state lists no devices"
	}
	for _, dev := range d.Devices {
		if dev == "" || strings.HasPrefix(dev, "-") {
			return fmt.Sprintf("device %q is not a path", dev)
		}
	}
	return ""
}

// Backoff is the wait before attempt n+1 (n ≥ 1) of a refused or failed grant: base,
// doubling, at most limit.
func Backoff(n int, base, limit time.Duration) time.Duration {
	d := base
	for i := 1; i < n && d < limit; i++ {
		d *= 2
	}
	return min(d, limit)
}

// Plan is what to do with a verdict of the activity check.
type Plan struct {
	// Import: go ahead; Force: with -f.
	Import bool
	Force  bool
	// Phase, Code, Reason: the status to report when not importing.
	Phase, Code, Reason string
	// ForeignHostID and ForeignHost name the other host when the verdict saw it active.
	ForeignHostID, ForeignHost string
}

// PlanImport decides from the activity check's verdict whether to import and whether
// with -f. zpool import refuses, without -f, a pool whose label is not EXPORTED and
// names another hostid ("previously in use from another system") — the failover case,
// a pool left active by a crashed owner. Cairn passes -f only when its own check has
// just watched the pool for the whole duration and seen no write (no_activity) and the
// label names another host; never for a pool with multihost off (the label hostid is
// then zpool's only guard, and no check ran) and never for a destroyed pool. For a
// multihost pool -f does not disable OpenZFS's own activity check in the kernel: it
// still refuses a live pool (EREMOTEIO), a second, independent check.
func PlanImport(v mmp.Verdict, hostid uint32) Plan {
	foreign := v.LastHost != nil && uint32(v.LastHost.HostID) != hostid && v.State != "exported"
	switch {
	case !v.Importable:
		p := Plan{Phase: zpool.PhaseRefused, Code: v.Code, Reason: v.Message}
		if v.Code == mmp.CodeCanceled || v.Code == mmp.CodeUnreadableVdev {
			p.Phase = zpool.PhaseFailed
		}
		if v.Active && v.LastHost != nil {
			p.ForeignHostID, p.ForeignHost = v.LastHost.HostID.String(), v.LastHost.Hostname
		}
		return p
	case v.Code == mmp.CodePoolDestroyed:
		return Plan{Phase: zpool.PhaseRefused, Code: CodeRefusedDestroyed,
			Reason: fmt.Sprintf("pool %q is destroyed on disk; the agent does not import destroyed pools (zpool import -D is an operator's decision)", v.Pool)}
	case v.Code == mmp.CodeMMPOff && foreign:
		return Plan{Phase: zpool.PhaseRefused, Code: CodeMMPOffNotForced,
			ForeignHostID: v.LastHost.HostID.String(), ForeignHost: v.LastHost.Hostname,
			Reason: fmt.Sprintf("pool %q has multihost off and was last used by host %q (hostid %s) without an export: no activity check can prove it idle, so the agent will not force the import; "+
				"turn multihost on, or export it on that host", v.Pool, v.LastHost.Hostname, v.LastHost.HostID)}
	case v.Code == mmp.CodeNoActivity:
		return Plan{Import: true, Force: foreign}
	}
	return Plan{Import: true}
}

var (
	reImportedOn = regexp.MustCompile(`pool is imported on (\S+) \(hostid: (0x[0-9a-fA-F]+)\)`)
	// reActiveOn is libzfs's wording of the kernel's EREMOTEIO (its activity check saw
	// another host) for an import with -f.
	reActiveOn = regexp.MustCompile(`pool is imported on host '([^']*)' \(hostid=(?:0x)?([0-9a-fA-F]+)\)`)
	reLastBy   = regexp.MustCompile(`[Ll]ast accessed by (\S+) \(hostid=(?:0x)?([0-9a-fA-F]+)\)`)
)

// Refusal is a zpool failure mapped to a status.
type Refusal struct {
	Phase, Code                string
	ForeignHost, ForeignHostID string
	Message                    string
}

// ClassifyImport maps a failed zpool import to a status. OpenZFS's refusals become phase
// refused: "pool is imported on HOST (hostid: 0x…)" and "The pool is currently imported
// by another system" (hostid_active, naming the host when zpool does), "cannot be safely
// imported when the system hostid is not set" / "hostid is not set" (hostid_required,
// ZFS-8000-EY), "previously in use from another system" (previously_in_use), and the
// kernel's own activity check refusing an import with -f (remote_io): libzfs words it
// "pool is imported on host 'HOST' (hostid=…)" or "pool is imported on a different
// host" (EREMOTEIO / "Remote I/O error" from other front ends too). Anything
// else is phase failed: no such pool, a name already imported, a timeout, other errors.
func ClassifyImport(err error) Refusal {
	msg := err.Error()
	var stderr string
	var xe *execx.Error
	if errors.As(err, &xe) {
		stderr = xe.Stderr
	}
	text := stderr + "\n" + msg
	r := Refusal{Phase: zpool.PhaseRefused, Message: msg}
	switch {
	case reActiveOn.MatchString(text):
		m := reActiveOn.FindStringSubmatch(text)
		r.Code, r.ForeignHost, r.ForeignHostID = CodeRemoteIO, m[1], normHostID(m[2])
	case strings.Contains(text, "pool is imported on a different host"):
		r.Code = CodeRemoteIO
	case reImportedOn.MatchString(text):
		m := reImportedOn.FindStringSubmatch(text)
		r.Code, r.ForeignHost, r.ForeignHostID = CodeHostIDActive, m[1], normHostID(m[2])
	case strings.Contains(text, "currently imported by another system"):
		r.Code = CodeHostIDActive
	case strings.Contains(text, "hostid is not set") || strings.Contains(text, "ZFS-8000-EY"):
		r.Code = CodeHostIDRequired
	case strings.Contains(text, "previously in use from another system") || strings.Contains(text, "in use from another system"):
		r.Code = CodePreviouslyInUse
		if m := reLastBy.FindStringSubmatch(text); m != nil {
			r.ForeignHost, r.ForeignHostID = m[1], normHostID(m[2])
		}
	case strings.Contains(text, "EREMOTEIO") || strings.Contains(text, "Remote I/O error"):
		r.Code = CodeRemoteIO
	case errors.Is(err, execx.ErrTimeout):
		r.Phase, r.Code = zpool.PhaseFailed, CodeZpoolTimeout
	case strings.Contains(text, "no such pool"):
		r.Phase, r.Code = zpool.PhaseFailed, CodeNoSuchPool
	case strings.Contains(text, "pool with that name already exists"):
		r.Phase, r.Code = zpool.PhaseFailed, CodeNameTaken
	default:
		r.Phase, r.Code = zpool.PhaseFailed, CodeZpoolError
	}
	return r
}

func normHostID(s string) string {
	s = strings.TrimPrefix(strings.ToLower(s), "0x")
	if v, err := mmp.ParseHostID(s); err == nil {
		return mmp.HostID(v).String()
	}
	return "0x" + s
}

// UberblockChanged reports whether the best uberblock now differs from the one the
// check ended with (txg, timestamp or MMP sequence): someone wrote the pool between
// the check and the import, the window the OpenZFS talk describes.
func UberblockChanged(checked, now *mmp.Seen) bool {
	if checked == nil || now == nil {
		return checked != now
	}
	seq := func(s *mmp.Seen) uint64 {
		if s.Seq == nil {
			return 0
		}
		return *s.Seq
	}
	return checked.TXG != now.TXG || checked.Timestamp != now.Timestamp || seq(checked) != seq(now)
}

// WatchStep is what to do after one poll of the watcher.
type WatchStep struct {
	Fence bool // a foreign write: fence
	// Blind is true when the leaves could not be read for maxBlind polls in a row: report
	// it (the pool stays imported; a read error is no proof of another writer).
	Blind bool
	// Failures is the new count of consecutive failed polls.
	Failures int
}

// OnPoll decides after a poll: a foreign observation fences; an error counts a failure
// and reports blindness once at maxBlind consecutive failures; a good poll resets.
func OnPoll(obs mmp.Observation, err error, failures, maxBlind int) WatchStep {
	if err != nil {
		failures++
		return WatchStep{Failures: failures, Blind: failures == maxBlind}
	}
	return WatchStep{Fence: obs.Foreign}
}
