package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/cairn-io/cairn"
	"github.com/cairn-io/cairn/storage/mmp"
	"github.com/cairn-io/cairn/storage/zfs"
	"github.com/spf13/cobra"
)

func mmpCmd() *cobra.Command {
	c := &cobra.Command{Use: "mmp", Short: "ZFS multihost (MMP) safety checks on leaf vdevs"}
	var (
		hostidFlag      string
		asJSON          bool
		importIntervals uint64
		interval        time.Duration
	)
	check := &cobra.Command{
		Use:   "check [--hostid HEX] [--json] [--import-intervals N] VDEV...",
		Short: "Run the MMP activity check on the leaf vdevs of one pool: may this host import it?",
		Long: `Read the labels and uberblocks of every leaf vdev given (files or block devices, read
only), decide as zpool import does whether an activity check is needed, and if so watch the
best uberblock for the computed duration (plus a random 0-25 %), re-reading every second.
Nothing is imported or written. See docs/mmp.md.

Exit status: 0 the pool may be imported by this host, 1 another host is active on it,
2 the check refused (no hostid while a check is needed, unreadable or non-ZFS vdev,
leaves of different pools, interrupted).`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var hostid uint32
			if cmd.Flags().Changed("hostid") {
				h, err := parseHostID(hostidFlag)
				if err != nil {
					return err
				}
				hostid = h
			} else {
				hostid = mmp.SystemHostID()
			}
			log := newLogger()
			var v mmp.Verdict
			devs, closeDevs, err := zfs.OpenDevices(args)
			defer closeDevs()
			if err != nil {
				v = mmp.Verdict{Code: mmp.CodeUnreadableVdev, LocalHostID: mmp.HostID(hostid), Message: err.Error()}
			} else {
				checker := mmp.Checker{
					Tunables: mmp.Tunables{Interval: interval, ImportIntervals: importIntervals},
					Log:      log.With().Str("component", "mmp").Logger(),
				}
				v = checker.Check(cmd.Context(), devs, hostid, mmp.RealClock)
			}
			if asJSON {
				printJSON(v)
			} else {
				printVerdict(os.Stdout, v)
			}
			return exitError{code: v.ExitCode()}
		},
	}
	check.Flags().StringVar(&hostidFlag, "hostid", "", "this host's hostid in hex (default: the SPL module's, else /etc/hostid, else 0)")
	check.Flags().BoolVar(&asJSON, "json", false, "print the verdict as JSON")
	check.Flags().Uint64Var(&importIntervals, "import-intervals", mmp.DefaultImportIntervals, "zfs_multihost_import_intervals of this host (1 or more)")
	check.Flags().DurationVar(&interval, "interval", mmp.DefaultInterval, "zfs_multihost_interval of this host (minimum 100ms)")
	check.PreRunE = func(cmd *cobra.Command, args []string) error {
		if importIntervals < 1 {
			return cairn.InvalidField("import-intervals", "--import-intervals must be at least 1, got %d", importIntervals)
		}
		if interval <= 0 {
			return cairn.InvalidField("interval", "--interval must be positive, got %s", interval)
		}
		return nil
	}
	c.AddCommand(check, mmpWatchCmd())
	return c
}

// parseHostID parses a hostid in hex, with or without 0x, up to 32 bits.
func parseHostID(s string) (uint32, error) {
	v, err := mmp.ParseHostID(s)
	if err != nil {
		return 0, cairn.InvalidField("hostid", "--hostid %q is not a 32-bit hex number (e.g. 0x1a2b3c4d)", s)
	}
	return v, nil
}

// printVerdict writes the human form of a verdict.
func printVerdict(w io.Writer, v mmp.Verdict) {
	outcome := "REFUSED"
	switch {
	case v.Importable:
		outcome = "IMPORTABLE"
	case v.Active:
		outcome = "ACTIVE ON ANOTHER HOST"
	}
	pool := "pool ?"
	if v.Pool != "" {
		pool = fmt.Sprintf("pool %s (guid %d, %s)", v.Pool, v.PoolGUID, v.State)
	}
	fmt.Fprintf(w, "%s: %s [%s]\n", pool, outcome, v.Code)
	fmt.Fprintf(w, "  %s\n", v.Message)
	fmt.Fprintf(w, "  this host: hostid %s\n", v.LocalHostID)
	if v.LastHost != nil {
		name := v.LastHost.Hostname
		if name == "" {
			name = "?"
		}
		fmt.Fprintf(w, "  last host in the label: %s (hostid %s)\n", name, v.LastHost.HostID)
	}
	for _, s := range []struct {
		what string
		u    *mmp.Seen
	}{{"best uberblock", v.Uberblock}, {"changed to", v.Changed}} {
		if s.u == nil {
			continue
		}
		fmt.Fprintf(w, "  %s: txg %d, timestamp %d (%s)%s, on %s label %d slot %d\n", s.what, s.u.TXG, s.u.Timestamp,
			time.Unix(int64(s.u.Timestamp), 0).UTC().Format(time.RFC3339), optSeq(s.u.Seq), s.u.Leaf, s.u.Label, s.u.Slot)
		if s.u.MMPValid && s.what == "best uberblock" {
			fmt.Fprintf(w, "  mmp: delay %s%s%s\n", time.Duration(s.u.MMPDelayNS).Round(time.Microsecond),
				optField(", interval %d ms", s.u.IntervalMS), optField(", fail intervals %d", s.u.FailIntervals))
		}
	}
	if v.CheckRequired && v.Duration > 0 {
		fmt.Fprintf(w, "  check: %s (%s, jitter +%.1f %%), %d re-reads, took %s\n", v.Duration.Round(time.Millisecond),
			v.DurationCase, v.JitterPct, v.Reads, v.Elapsed.Round(time.Millisecond))
	}
}

func optSeq(p *uint64) string {
	if p == nil {
		return ""
	}
	return fmt.Sprintf(", seq %d", *p)
}

func optField(format string, p *uint64) string {
	if p == nil {
		return ""
	}
	return fmt.Sprintf(format, *p)
}
