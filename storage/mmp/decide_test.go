package mmp_test

import (
	"math"
	"testing"
	"time"

	"github.com/cairn-io/cairn/storage/mmp"
	"github.com/cairn-io/cairn/storage/zfs"
	"github.com/cairn-io/cairn/storage/zfs/zfsimage"
)

// ub returns an uberblock with MMP magic, delay in ms and the config parts (-1: invalid).
func ub(delayMS int64, intervalMS, seq, fail int64) zfs.Uberblock {
	return zfs.Uberblock{Magic: zfs.UberblockMagic, TXG: 10, Timestamp: 1000, MMPMagic: zfs.MMPMagic, GUIDSum: zfsimage.PoolGUIDSum(77),
		MMPDelay: uint64(delayMS) * uint64(time.Millisecond), MMPConfig: zfsimage.MMPConfig(intervalMS, seq, fail)}
}

func TestCheckDuration(t *testing.T) {
	noMMP := zfs.Uberblock{Magic: zfs.UberblockMagic, TXG: 10}
	sec := time.Second
	for _, tc := range []struct {
		name string
		ub   zfs.Uberblock
		tun  mmp.Tunables
		want time.Duration
		rule mmp.DurationCase
	}{
		// fail intervals > 0: fail × ub interval × 2, tunables and the 1 s floor ignored.
		{"fail 10 × 1 s", ub(1000, 1000, 0, 10), mmp.Tunables{}, 20 * sec, mmp.CaseFailIntervals},
		{"fail 10 × 100 ms", ub(100, 100, 3, 10), mmp.Tunables{}, 2 * sec, mmp.CaseFailIntervals},
		{"fail 2 × 100 ms, below 1 s", ub(100, 100, 3, 2), mmp.Tunables{Interval: 5 * sec}, 400 * time.Millisecond, mmp.CaseFailIntervals},
		{"fail ignores mmp_delay", ub(60_000, 1000, 0, 10), mmp.Tunables{}, 20 * sec, mmp.CaseFailIntervals},
		// A sync uberblock with interval 0 on disk: the interval counts as 100 ms
		// (MMP_INTERVAL_OK), never a 0 s check.
		{"fail 10 × interval 0", ub(100, 0, 0, 10), mmp.Tunables{}, 2 * sec, mmp.CaseFailIntervals},
		{"fail saturates nowhere", ub(0, 0xffffff, 0, 0xffff), mmp.Tunables{}, time.Duration(0xffff) * 0xffffff * time.Millisecond * 2, mmp.CaseFailIntervals},
		// fail intervals == 0: max(base, (ub interval + delay) × import intervals).
		{"never suspends, long delay", ub(1000, 1000, 0, 0), mmp.Tunables{}, 40 * sec, mmp.CaseNeverSuspends},
		{"never suspends, base wins", ub(100, 100, 0, 0), mmp.Tunables{}, 20 * sec, mmp.CaseNeverSuspends},
		{"never suspends, 5 intervals", ub(500, 1000, 0, 0), mmp.Tunables{ImportIntervals: 5}, 7500 * time.Millisecond, mmp.CaseNeverSuspends},
		{"never suspends, delay saturates", zfs.Uberblock{Magic: zfs.UberblockMagic, MMPMagic: zfs.MMPMagic, MMPDelay: math.MaxUint64, MMPConfig: zfsimage.MMPConfig(1000, 0, 0)},
			mmp.Tunables{}, math.MaxInt64, mmp.CaseNeverSuspends},
		// MMP magic only (0.7 writers), or bits missing: max(base, (local interval + delay) × n).
		{"delay only", ub(500, -1, -1, -1), mmp.Tunables{}, 30 * sec, mmp.CaseDelayOnly},
		{"interval without fail bit", ub(500, 1000, 0, -1), mmp.Tunables{}, 30 * sec, mmp.CaseDelayOnly},
		{"fail without interval bit", ub(500, -1, 0, 10), mmp.Tunables{}, 30 * sec, mmp.CaseDelayOnly},
		{"delay only, local 2 s × 3", ub(0, -1, -1, -1), mmp.Tunables{Interval: 2 * sec, ImportIntervals: 3}, 6 * sec, mmp.CaseDelayOnly},
		{"delay only, floor 1 s", ub(0, -1, -1, -1), mmp.Tunables{Interval: 10 * time.Millisecond, ImportIntervals: 5}, sec, mmp.CaseDelayOnly},
		// No MMP fields: base = max(1 s, import intervals × local interval).
		{"no MMP, defaults", noMMP, mmp.Tunables{}, 20 * sec, mmp.CaseLocalTunables},
		{"no MMP, 1 interval", noMMP, mmp.Tunables{ImportIntervals: 1}, sec, mmp.CaseLocalTunables},
		{"no MMP, interval below minimum", noMMP, mmp.Tunables{Interval: time.Millisecond, ImportIntervals: 30}, 3 * sec, mmp.CaseLocalTunables},
		{"bad uberblock magic: no MMP", zfs.Uberblock{MMPMagic: zfs.MMPMagic, MMPConfig: zfsimage.MMPConfig(1000, 0, 10)}, mmp.Tunables{}, 20 * sec, mmp.CaseLocalTunables},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, rule := mmp.CheckDuration(tc.ub, tc.tun)
			if got != tc.want || rule != tc.rule {
				t.Fatalf("CheckDuration = %v %s, want %v %s", got, rule, tc.want, tc.rule)
			}
		})
	}
}

func TestWithJitter(t *testing.T) {
	for _, tc := range []struct {
		d        time.Duration
		permille uint64
		want     time.Duration
	}{
		{20 * time.Second, 0, 20 * time.Second},
		{20 * time.Second, 100, 22 * time.Second},
		{20 * time.Second, 249, 24980 * time.Millisecond},
		{20 * time.Second, 1000, 24980 * time.Millisecond}, // clamped below 25 %
		{math.MaxInt64, 100, math.MaxInt64},
	} {
		if got := mmp.WithJitter(tc.d, tc.permille); got != tc.want {
			t.Errorf("WithJitter(%v, %d) = %v, want %v", tc.d, tc.permille, got, tc.want)
		}
	}
}

func TestCheckRequired(t *testing.T) {
	const me, other = 0x11111111, 0x22222222
	on := ub(1000, 1000, 0, 10)
	off := ub(0, 1000, 0, 10) // magic valid, mmp_delay 0: multihost off
	legacy := zfs.Uberblock{Magic: zfs.UberblockMagic, TXG: 3}
	label := func(state, hostid uint64) *zfs.LabelConfig {
		return &zfs.LabelConfig{State: state, HasState: true, HostID: hostid, HasHostID: hostid != 0}
	}
	noState := &zfs.LabelConfig{HostID: me, HasHostID: true}
	for _, tc := range []struct {
		name     string
		ub       zfs.Uberblock
		label    *zfs.LabelConfig
		local    uint32
		required bool
		code     string
	}{
		{"legacy pool without MMP magic", legacy, label(zfs.StateActive, other), me, false, mmp.CodeMMPOff},
		{"multihost off", off, label(zfs.StateActive, other), me, false, mmp.CodeMMPOff},
		{"multihost off, no local hostid", off, label(zfs.StateActive, other), 0, false, mmp.CodeMMPOff},
		{"exported by this host", on, label(zfs.StateExported, me), me, false, mmp.CodeExportedByThisHost},
		{"exported by another host", on, label(zfs.StateExported, other), me, true, ""},
		{"exported without hostid, local 0", on, label(zfs.StateExported, 0), 0, true, ""},
		{"exported, label without hostid", on, label(zfs.StateExported, 0), me, true, ""},
		{"active, last used by this host (crash)", on, label(zfs.StateActive, me), me, true, ""},
		{"active on another host", on, label(zfs.StateActive, other), me, true, ""},
		{"potentially active", on, label(zfs.StatePotentiallyActive, other), me, true, ""},
		{"destroyed by another host", on, label(zfs.StateDestroyed, other), me, false, mmp.CodePoolDestroyed},
		{"destroyed, local 0", on, label(zfs.StateDestroyed, other), 0, false, mmp.CodePoolDestroyed},
		{"no label config", on, nil, me, true, ""},
		{"label without state counts as active", on, noState, me, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := mmp.CheckRequired(tc.ub, tc.label, tc.local)
			if r.Required != tc.required || r.Code != tc.code || r.Message == "" {
				t.Fatalf("CheckRequired = %+v, want required %v code %q", r, tc.required, tc.code)
			}
		})
	}
}
