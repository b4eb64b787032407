// Package mmp decides whether a multihost (MMP) ZFS pool may be imported on this host:
// the OpenZFS activity check (spa_activity_check_* in spa.c), done from user space on the
// leaf vdevs read by storage/zfs, and a watch for foreign writes after import.
//
// The rules (when a check is needed, how long it lasts) are pure functions of plain
// values in this file; check.go runs the timed re-reads with an injected clock and random
// source; watch.go keeps reading after import. Nothing here imports a pool or writes.
package mmp

import (
	"fmt"
	"math"
	"math/bits"
	"time"

	"github.com/cairn-io/cairn/storage/zfs"
)

// OpenZFS defaults and limits (mmp.h).
const (
	DefaultInterval        = 1000 * time.Millisecond // zfs_multihost_interval
	MinInterval            = 100 * time.Millisecond  // MMP_MIN_INTERVAL
	DefaultImportIntervals = 20                      // zfs_multihost_import_intervals
	DefaultFailIntervals   = 10                      // zfs_multihost_fail_intervals
	importSafetyFactor     = 200                     // MMP_IMPORT_SAFETY_FACTOR, percent
	// MaxJitterPermille bounds the random extra: 0-25 % of the duration, in 1/1000.
	MaxJitterPermille = 250
	// ReadEvery is the pause between two re-reads of the best uberblock.
	ReadEvery = time.Second
)

// Tunables are this host's MMP settings, the ones zpool import would use.
type Tunables struct {
	// Interval is the local zfs_multihost_interval. 0 selects DefaultInterval; values
	// below MinInterval count as MinInterval (MMP_INTERVAL_OK).
	Interval time.Duration
	// ImportIntervals is zfs_multihost_import_intervals. 0 selects the default 20 (in
	// OpenZFS 0 counts as 1; pass 1 for that).
	ImportIntervals uint64
}

func (t Tunables) interval() time.Duration {
	if t.Interval == 0 {
		return DefaultInterval
	}
	return max(t.Interval, MinInterval)
}

func (t Tunables) importIntervals() uint64 {
	if t.ImportIntervals == 0 {
		return DefaultImportIntervals
	}
	return t.ImportIntervals
}

// DurationCase names which of the four rules of spa_activity_check_duration applied.
type DurationCase string

const (
	// CaseFailIntervals: the writer recorded its interval and a non-zero fail interval
	// count, so it suspends the pool after fail × interval without a landed write:
	// wait fail × interval × 2 (the import safety factor), tunables ignored.
	CaseFailIntervals DurationCase = "fail_intervals"
	// CaseNeverSuspends: interval recorded, fail intervals 0 (the writer never
	// suspends): max(base, (ub interval + mmp_delay) × import_intervals).
	CaseNeverSuspends DurationCase = "never_suspends"
	// CaseDelayOnly: MMP magic but no interval/fail bits (OpenZFS 0.7 writers):
	// max(base, (local interval + mmp_delay) × import_intervals).
	CaseDelayOnly DurationCase = "mmp_delay_only"
	// CaseLocalTunables: no MMP fields: base = max(1 s, import_intervals × local interval).
	CaseLocalTunables DurationCase = "local_tunables"
)

// CheckDuration returns how long the activity check watches the pool before adding the
// random 0-25 %, from the best uberblock and the local tunables, and which rule applied.
// See the DurationCase constants for the four rules; base is
// max(1 s, import_intervals × local interval).
func CheckDuration(ub zfs.Uberblock, t Tunables) (time.Duration, DurationCase) {
	n := t.importIntervals()
	local := uint64(t.interval())
	base := max(uint64(time.Second), satMul(n, local))
	const ms = uint64(time.Millisecond)
	var d uint64
	var c DurationCase
	switch {
	case ub.IntervalValid() && ub.FailValid() && ub.MMPFailIntervals() > 0:
		// An interval of 0 on disk counts as MinInterval (MMP_INTERVAL_OK), so the
		// check never lasts 0 s.
		x := satMul(ub.MMPFailIntervals(), satMul(max(ub.MMPInterval(), uint64(MinInterval/time.Millisecond)), ms))
		d = satAdd(satMul(x/100, importSafetyFactor), x%100*importSafetyFactor/100) // x × 200 / 100
		c = CaseFailIntervals
	case ub.IntervalValid() && ub.FailValid():
		d = max(base, satMul(satAdd(satMul(ub.MMPInterval(), ms), ub.MMPDelay), n))
		c = CaseNeverSuspends
	case ub.MMPValid():
		d = max(base, satMul(satAdd(local, ub.MMPDelay), n))
		c = CaseDelayOnly
	default:
		d, c = base, CaseLocalTunables
	}
	return time.Duration(min(d, math.MaxInt64)), c
}

// satMul and satAdd saturate at MaxUint64: the inputs come from disk and flags.
func satMul(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	if hi != 0 {
		return math.MaxUint64
	}
	return lo
}

func satAdd(a, b uint64) uint64 {
	s, carry := bits.Add64(a, b, 0)
	if carry != 0 {
		return math.MaxUint64
	}
	return s
}

// WithJitter adds permille/1000 of d to d (OpenZFS: import_delay × random_in_range(250)
// / 1000), so that hosts importing at the same moment do not finish together. permille
// is clamped to [0, MaxJitterPermille).
func WithJitter(d time.Duration, permille uint64) time.Duration {
	permille = min(permille, MaxJitterPermille-1)
	extra := d / 1000 * time.Duration(permille) // no overflow for any d
	extra += d % 1000 * time.Duration(permille) / 1000
	if d > math.MaxInt64-extra {
		return math.MaxInt64
	}
	return d + extra
}

// Stable verdict codes (snake_case, part of the CLI's JSON contract).
const (
	CodeMMPOff             = "mmp_off"               // importable: multihost off, no check
	CodePoolDestroyed      = "pool_destroyed"        // importable: destroyed pool, no check
	CodeExportedByThisHost = "exported_by_this_host" // importable: we exported it, no check
	CodeNoActivity         = "no_activity"           // importable: checked, nothing changed
	CodeActivityDetected   = "activity_detected"     // another host is writing
	CodeNoHostID           = "no_hostid"             // refused: a check is needed, hostid 0
	CodeUnreadableVdev     = "unreadable_vdev"       // refused: a leaf could not be read
	CodeNoUberblock        = "no_uberblock"          // refused: no valid uberblock anywhere
	CodeMixedPools         = "mixed_pools"           // refused: leaves of different pools
	CodeCanceled           = "canceled"              // refused: the context ended first
	CodeInvalidArgument    = "invalid_argument"      // refused: no leaves given
)

// Requirement is the when-to-check decision.
type Requirement struct {
	Required bool
	// Code is CodeMMPOff, CodePoolDestroyed or CodeExportedByThisHost when no check
	// is needed; "" when one is.
	Code    string
	Message string
}

// CheckRequired decides whether the activity check must run (the OpenZFS 2.3.6+ rule,
// spa_activity_check_required): not when MMP is off (no MMP magic, or mmp_delay 0), not
// when the label says the pool is DESTROYED, not when it was EXPORTED by this same
// non-zero hostid; in every other case it must, including a pool last used by this
// hostid but not exported (a crash), and a pool without a label config (label nil).
// It does not look at whether localHostID is 0: the caller refuses a needed check then.
func CheckRequired(ub zfs.Uberblock, label *zfs.LabelConfig, localHostID uint32) Requirement {
	if !ub.MMPOn() {
		return Requirement{Code: CodeMMPOff, Message: "multihost is off for this pool (no MMP fields or mmp_delay 0): no activity check"}
	}
	if label == nil {
		return Requirement{Required: true, Message: "no label config for the best uberblock: check required"}
	}
	state := uint64(zfs.StateActive)
	if label.HasState {
		state = label.State
	}
	if localHostID != 0 && label.HasHostID && label.HostID == uint64(localHostID) && state == zfs.StateExported {
		return Requirement{Code: CodeExportedByThisHost, Message: fmt.Sprintf("pool was cleanly exported by this host (hostid %s): no activity check", HostID(localHostID))}
	}
	if state == zfs.StateDestroyed {
		return Requirement{Code: CodePoolDestroyed, Message: "pool was destroyed: no activity check"}
	}
	return Requirement{Required: true, Message: fmt.Sprintf("multihost pool in state %s: check required", zfs.StateName(state))}
}

// HostID is a 32-bit ZFS hostid; it prints and marshals as 0x%08x.
type HostID uint32

func (h HostID) String() string { return fmt.Sprintf("0x%08x", uint32(h)) }

// MarshalText implements encoding.TextMarshaler.
func (h HostID) MarshalText() ([]byte, error) { return []byte(h.String()), nil }
