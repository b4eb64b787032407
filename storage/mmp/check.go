package mmp

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/cairn-io/cairn/storage/zfs"
	"github.com/rs/zerolog"
)

// Clock is the time source of the check: Now for the deadline, Sleep between re-reads.
// Sleep returns ctx.Err() when ctx ends first.
type Clock interface {
	Now() time.Time
	Sleep(ctx context.Context, d time.Duration) error
}

// RealClock is the wall clock.
var RealClock Clock = realClock{}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Seen is an uberblock as the verdict reports it, with where it was read.
type Seen struct {
	Leaf          string `json:"leaf"`
	Label         int    `json:"label"`
	Slot          int    `json:"slot"`
	TXG           uint64 `json:"txg"`
	Timestamp     uint64 `json:"timestamp"`
	GUIDSum       uint64 `json:"guid_sum"`
	MMPValid      bool   `json:"mmp_valid"`
	MMPDelayNS    uint64 `json:"mmp_delay_ns"`
	MMPConfigBits uint64 `json:"mmp_config_valid_bits"`
	// Seq, IntervalMS and FailIntervals are present when their valid bit is set.
	Seq           *uint64 `json:"mmp_seq,omitempty"`
	IntervalMS    *uint64 `json:"mmp_interval_ms,omitempty"`
	FailIntervals *uint64 `json:"mmp_fail_intervals,omitempty"`
}

// SeenFrom describes a slot read from leaf.
func SeenFrom(leaf string, s zfs.Slot) *Seen {
	u := s.Uberblock
	v := &Seen{Leaf: leaf, Label: s.Label, Slot: s.Index, TXG: u.TXG, Timestamp: u.Timestamp, GUIDSum: u.GUIDSum,
		MMPValid: u.MMPValid()}
	if v.MMPValid {
		v.MMPDelayNS, v.MMPConfigBits = u.MMPDelay, u.MMPConfig&0xff
		if u.SeqValid() {
			x := u.MMPSeq()
			v.Seq = &x
		}
		if u.IntervalValid() {
			x := u.MMPInterval()
			v.IntervalMS = &x
		}
		if u.FailValid() {
			x := u.MMPFailIntervals()
			v.FailIntervals = &x
		}
	}
	return v
}

// Host is the host named by the pool's label: the last one to write the config.
type Host struct {
	HostID   HostID `json:"hostid"`
	Hostname string `json:"hostname,omitempty"`
}

// Verdict is the outcome of a check. Exactly one of Importable, Active, or neither (a
// refusal: Code says why) holds. ExitCode maps it to the CLI's exit status.
type Verdict struct {
	Importable bool `json:"importable"`
	// Active is true when another host was seen writing (CodeActivityDetected).
	Active  bool   `json:"active"`
	Code    string `json:"code"`
	Message string `json:"message"`

	Pool          string `json:"pool,omitempty"`
	PoolGUID      uint64 `json:"pool_guid,omitempty"`
	State         string `json:"state,omitempty"`
	LocalHostID   HostID `json:"local_hostid"`
	CheckRequired bool   `json:"check_required"`
	// LastHost is the host in the label of the leaf with the best uberblock, when known.
	LastHost *Host `json:"last_host,omitempty"`
	// Uberblock is the best uberblock at the start; Changed the first one that differed.
	Uberblock *Seen `json:"uberblock,omitempty"`
	Changed   *Seen `json:"changed,omitempty"`

	// Duration is the watch time used (rule plus jitter); zero when no check ran.
	Duration     time.Duration `json:"-"`
	DurationMS   int64         `json:"duration_ms"`
	DurationCase DurationCase  `json:"duration_case,omitempty"`
	JitterPct    float64       `json:"jitter_pct"`
	// Reads counts reads of the leaves during the watch (not the first one).
	Reads   int           `json:"reads"`
	Elapsed time.Duration `json:"-"`
	// ElapsedMS is the time the check took, on its clock.
	ElapsedMS int64 `json:"elapsed_ms"`
}

// ExitCode is the CLI status: 0 importable, 1 another host is active, 2 refused.
func (v Verdict) ExitCode() int {
	switch {
	case v.Importable:
		return 0
	case v.Active:
		return 1
	default:
		return 2
	}
}

// Checker runs the activity check. The zero value uses the OpenZFS defaults, a uniform
// random jitter and no logging.
type Checker struct {
	Tunables
	// Jitter returns the random extra in 1/1000 of the duration, in [0, 250); nil is
	// uniform random.
	Jitter func() uint64
	// ReadEvery is the pause between re-reads; 0 is one second (as OpenZFS).
	ReadEvery time.Duration
	// Log gets one debug event per re-read and an info summary; the zero value is silent.
	Log zerolog.Logger
	// AlwaysCheck runs the check on a pool the labels say this host exported
	// (exported_by_this_host): for a host that fenced the pool, whose export may have
	// happened while another host was writing it.
	AlwaysCheck bool
}

// Check runs the activity check with the defaults (see Checker.Check).
func Check(ctx context.Context, leaves []zfs.Device, hostid uint32, clock Clock) Verdict {
	return Checker{}.Check(ctx, leaves, hostid, clock)
}

// Check reads every leaf vdev of the pool and decides whether this host (hostid, 0 =
// none set) may import it, as zpool import's activity check does:
//
//  1. Find the best uberblock over all labels of all leaves and the label config of the
//     leaf it came from; decide with CheckRequired whether a check is needed. If not, the
//     verdict is importable with that rule's code.
//  2. A needed check with hostid 0 is refused (CodeNoHostID): MMP cannot tell this host
//     from another one.
//  3. Otherwise watch for CheckDuration plus a random 0-25 %, re-reading every leaf
//     every ReadEvery; any change of txg, timestamp or MMP sequence of the best
//     uberblock means another host is writing (Active, CodeActivityDetected). The
//     re-reads go through a zfs.Tracker per leaf: per label the uberblock ring and the
//     config area's last 4 KiB, the whole config only when that changed, and only the
//     slots that changed decoded; a label that fails to read keeps what it last held.
//
// Refusals (exit 2): no leaves, a leaf that cannot be read or is not ZFS
// (CodeUnreadableVdev, at the first read or any re-read), no valid uberblock,
// leaves of different pools, ctx ending (CodeCanceled). Check never imports or writes;
// a verdict of importable holds only for the moment it was made.
func (c Checker) Check(ctx context.Context, leaves []zfs.Device, hostid uint32, clock Clock) Verdict {
	if clock == nil {
		clock = RealClock
	}
	start := clock.Now()
	v := Verdict{LocalHostID: HostID(hostid)}
	done := func(v Verdict) Verdict {
		v.Elapsed = clock.Now().Sub(start)
		v.ElapsedMS = v.Elapsed.Milliseconds()
		v.DurationMS = v.Duration.Milliseconds()
		return v
	}
	refuse := func(code, format string, args ...any) Verdict {
		v.Code, v.Message = code, fmt.Sprintf(format, args...)
		c.Log.Warn().Str("code", code).Str("pool", v.Pool).Int("reads", v.Reads).Msg(v.Message)
		return done(v)
	}
	if len(leaves) == 0 {
		return refuse(CodeInvalidArgument, "no leaf vdev given")
	}
	refuseRead := func(prefix string, err error) Verdict {
		code := CodeUnreadableVdev
		var rerr readError
		if errors.As(err, &rerr) {
			code = rerr.code
		}
		return refuse(code, "%s%v", prefix, err)
	}
	found, err := c.ReadBest(leaves)
	if err != nil {
		return refuseRead("", err)
	}
	v.Uberblock = SeenFrom(found.LeafName, found.Slot)
	var label *zfs.LabelConfig
	report := found.Config // what the verdict names; the decision uses only label
	if found.HasConfig {
		label = &found.Config
	} else if newer, ok := found.AnyConfig(); ok {
		report = newer // every label is newer than the uberblock: name the pool all the same
	}
	if label != nil || report.PoolGUID != 0 {
		v.Pool, v.PoolGUID = report.PoolName, report.PoolGUID
		state := uint64(zfs.StateActive)
		if report.HasState {
			state = report.State
		}
		v.State = zfs.StateName(state)
		if report.HasHostID {
			v.LastHost = &Host{HostID: HostID(report.HostID), Hostname: report.Hostname}
		}
	}
	req := CheckRequired(found.Slot.Uberblock, label, hostid)
	if !req.Required && req.Code == CodeExportedByThisHost && c.AlwaysCheck {
		req = Requirement{Required: true, Message: "pool was exported by this host, but this host fenced it: check required"}
	}
	v.CheckRequired = req.Required
	if hostid == 0 && found.Slot.MMPOn() && req.Code != CodeMMPOff {
		// OpenZFS refuses to import a multihost pool without a hostid whatever its state
		// (ZFS-8000-EY), a destroyed one included.
		return refuse(CodeNoHostID, "pool %q is multihost, but this system's hostid is not set (0): "+
			"it cannot be safely imported; set /etc/hostid (zgenhostid) or pass --hostid", v.Pool)
	}
	if !req.Required {
		v.Importable, v.Code, v.Message = true, req.Code, req.Message
		c.Log.Info().Str("pool", v.Pool).Str("code", v.Code).Msg(v.Message)
		return done(v)
	}
	if hostid == 0 {
		return refuse(CodeNoHostID, "pool %q needs an activity check, but this system's hostid is not set (0): "+
			"it cannot be safely imported; set /etc/hostid (zgenhostid) or pass --hostid", v.Pool)
	}

	base, rule := CheckDuration(found.Slot.Uberblock, c.Tunables)
	var permille uint64
	if c.Jitter != nil {
		permille = c.Jitter()
	} else {
		permille = rand.Uint64N(MaxJitterPermille)
	}
	v.Duration, v.DurationCase = WithJitter(base, permille), rule
	v.JitterPct = float64(min(permille, MaxJitterPermille-1)) / 10
	every := c.readEvery(found.Slot.Uberblock)
	c.Log.Info().Str("pool", v.Pool).Str("rule", string(rule)).Dur("duration_ms", v.Duration).
		Uint64("txg", found.Slot.TXG).Uint64("timestamp", found.Slot.Timestamp).
		Msgf("activity check: watching pool %q for %s", v.Pool, v.Duration.Round(time.Millisecond))

	trackers, err := trackLeaves(leaves)
	if err != nil {
		return refuseRead("", err)
	}
	expire := start.Add(v.Duration)
	// Re-read every `every` until the duration has passed, and once more at its end: a
	// check shorter than one period still compares two reads, and the last period is
	// watched too.
	for {
		if err := ctx.Err(); err != nil {
			return refuse(CodeCanceled, "activity check of pool %q canceled after %d re-reads: %v", v.Pool, v.Reads, err)
		}
		now := clock.Now()
		if err := clock.Sleep(ctx, min(every, max(expire.Sub(now), 0))); err != nil {
			return refuse(CodeCanceled, "activity check of pool %q canceled after %d re-reads: %v", v.Pool, v.Reads, err)
		}
		cur, err := readTracked(trackers)
		v.Reads++
		if err != nil {
			return refuseRead("during the activity check: ", err)
		}
		c.Log.Debug().Int("read", v.Reads).Uint64("txg", cur.Slot.TXG).Uint64("timestamp", cur.Slot.Timestamp).
			Uint64("seq", cur.Slot.MMPSeq()).Str("leaf", cur.LeafName).Int("label", cur.Slot.Label).
			Dur("remaining_ms", expire.Sub(clock.Now())).Msg("activity check: re-read")
		if zfs.Compare(cur.Slot.Uberblock, found.Slot.Uberblock) != 0 {
			v.Active, v.Code = true, CodeActivityDetected
			v.Changed = SeenFrom(cur.LeafName, cur.Slot)
			who := "another host"
			if cur.HasConfig && cur.Config.HasHostID {
				v.LastHost = &Host{HostID: HostID(cur.Config.HostID), Hostname: cur.Config.Hostname}
			}
			switch {
			case v.LastHost != nil && uint32(v.LastHost.HostID) == hostid:
				who = fmt.Sprintf("another host (the label still names this host, hostid %s)", v.LastHost.HostID)
			case v.LastHost != nil:
				who = fmt.Sprintf("host %q (hostid %s)", v.LastHost.Hostname, v.LastHost.HostID)
			}
			v.Message = fmt.Sprintf("pool %q is imported on %s: the best uberblock changed from txg %d timestamp %d seq %d to txg %d timestamp %d seq %d",
				v.Pool, who, found.Slot.TXG, found.Slot.Timestamp, found.Slot.MMPSeq(), cur.Slot.TXG, cur.Slot.Timestamp, cur.Slot.MMPSeq())
			c.Log.Info().Str("pool", v.Pool).Str("code", v.Code).Int("reads", v.Reads).Msg(v.Message)
			return done(v)
		}
		if !clock.Now().Before(expire) {
			break
		}
	}
	v.Importable, v.Code = true, CodeNoActivity
	v.Message = fmt.Sprintf("no activity on pool %q for %s (%d re-reads): it may be imported by hostid %s",
		v.Pool, v.Duration.Round(time.Millisecond), v.Reads, HostID(hostid))
	c.Log.Info().Str("pool", v.Pool).Str("code", v.Code).Int("reads", v.Reads).Dur("duration_ms", v.Duration).Msg(v.Message)
	return done(v)
}

// readEvery is the pause between re-reads: ReadEvery (1 s when 0), but never longer
// than the writer's MMP interval recorded in ub (at least MinInterval), so that a short
// check still sees several MMP writes.
func (c Checker) readEvery(ub zfs.Uberblock) time.Duration {
	every := c.ReadEvery
	if every <= 0 {
		every = ReadEvery
	}
	if ub.IntervalValid() {
		every = min(every, max(time.Duration(ub.MMPInterval())*time.Millisecond, MinInterval))
	}
	return every
}

// readError is a refusal found while reading: a code and a message, and the read error
// of the leaf when there is one (kept for errors.Is: zfs.ErrNotZFS, zfs.ErrTooSmall, ...).
type readError struct {
	code, msg string
	err       error
}

func (e readError) Error() string { return e.msg }

func (e readError) Unwrap() error { return e.err }

// ErrorCode returns the refusal code an error of this package carries (CodeMixedPools,
// CodeUnreadableVdev, Identify's codes, …), or "" for other errors.
func ErrorCode(err error) string {
	var re readError
	if errors.As(err, &re) {
		return re.code
	}
	return ""
}

// ReadBest reads every leaf as the check does and returns the best uberblock over all
// of them. Errors: an unreadable leaf, no valid uberblock, or leaves that fail Identify
// (not all of one pool, or not all of it).
func (c Checker) ReadBest(devs []zfs.Device) (zfs.Found, error) {
	leaves, err := readLeaves(devs)
	if err != nil {
		return zfs.Found{}, err
	}
	return judge(leaves)
}

// judge finds the best uberblock of leaves and checks they are all of one pool.
func judge(leaves []*zfs.Leaf) (zfs.Found, error) {
	f, err := bestOf(leaves)
	if err != nil {
		return zfs.Found{}, err
	}
	if _, err := Identify(leaves, &f.Slot.Uberblock); err != nil {
		return zfs.Found{}, err
	}
	return f, nil
}

// trackLeaves starts a zfs.Tracker per leaf and reads each once as its baseline.
func trackLeaves(devs []zfs.Device) ([]*zfs.Tracker, error) {
	trackers := make([]*zfs.Tracker, len(devs))
	for i, d := range devs {
		t, err := zfs.NewTracker(d)
		if err != nil {
			return nil, readError{CodeUnreadableVdev, fmt.Sprintf("cannot read leaf vdev: %v", err), err} // err names it
		}
		trackers[i] = t
	}
	if _, err := readTracked(trackers); err != nil {
		return nil, err
	}
	return trackers, nil
}

// readTracked refreshes every tracker (zfs.EachLeaf: up to 8 at a time) and judges what
// they know, as ReadBest judges what it read. Errors: a leaf none of whose labels could
// be read, and what judge refuses.
func readTracked(trackers []*zfs.Tracker) (zfs.Found, error) {
	errs := make([]error, len(trackers))
	zfs.EachLeaf(len(trackers), func(i int) { _, errs[i] = trackers[i].Refresh() })
	leaves := make([]*zfs.Leaf, len(trackers))
	for i, t := range trackers {
		if errs[i] != nil {
			return zfs.Found{}, readError{CodeUnreadableVdev, fmt.Sprintf("cannot read leaf vdev: %v", errs[i]), errs[i]} // errs[i] names it
		}
		leaves[i] = t.Leaf()
	}
	return judge(leaves)
}

func readLeaves(devs []zfs.Device) ([]*zfs.Leaf, error) {
	named := func(d zfs.Device) (*zfs.Leaf, error) {
		lf, err := zfs.ReadLeaf(d)
		if err != nil {
			msg := fmt.Sprintf("cannot read leaf vdev: %v", err)
			if !strings.Contains(err.Error(), d.Name) {
				msg = fmt.Sprintf("cannot read leaf vdev %s: %v", d.Name, err)
			}
			return nil, readError{CodeUnreadableVdev, msg, err}
		}
		return lf, nil
	}
	return zfs.ReadLeaves(devs, named)
}

func bestOf(leaves []*zfs.Leaf) (zfs.Found, error) {
	f, ok := zfs.Best(leaves)
	if !ok {
		return zfs.Found{}, readError{code: CodeNoUberblock, msg: "no valid uberblock on any leaf vdev"}
	}
	return f, nil
}
