package main

import (
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/cairn-io/cairn"
	"github.com/cairn-io/cairn/storage/mmp"
	"github.com/cairn-io/cairn/storage/zfs"
	"github.com/spf13/cobra"
)

// watchLine is one line of `cairn mmp watch --json`.
type watchLine struct {
	Verdict string    `json:"verdict"` // ok, foreign_activity, stopped
	Code    string    `json:"code"`
	At      time.Time `json:"at"`
	Poll    int       `json:"poll"`
	mmp.Observation
}

func mmpWatchCmd() *cobra.Command {
	var (
		hostidFlag string
		asJSON     bool
		forDur     time.Duration
		pollEvery  time.Duration
	)
	watch := &cobra.Command{
		Use:   "watch --hostid HEX [--for DURATION] [--poll DURATION] [--json] VDEV...",
		Short: "Watch a pool's leaf vdevs for a writer other than the host with this hostid",
		Long: `The agent's watcher as an operator command. It reads the leaves once as the baseline,
as an agent does right after importing the pool with --hostid, then polls them and applies
the watcher's rules (docs/mmp.md, "The watcher"): writes by the host with --hostid are
expected; a second writer is foreign activity. Nothing is written.

With --json it prints one object per poll: verdict (ok or foreign_activity), code (quiet,
own_writes, foreign_hostid, txg_fork, sync_slot_rewound, config_behind), and the evidence.

Exit status: 0 when --for elapsed (or SIGINT/SIGTERM) with no foreign activity, 1 at the
first foreign activity, 2 on usage errors or leaves that cannot be read at the start.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if hostidFlag == "" {
				return cairn.InvalidField("hostid", "--hostid is required: the hostid of the host expected to write the pool")
			}
			hostid, err := parseHostID(hostidFlag)
			if err != nil {
				return err
			}
			if hostid == 0 {
				return cairn.InvalidField("hostid", "--hostid must not be 0: MMP cannot tell a host without a hostid from another")
			}
			if forDur < 0 {
				return cairn.InvalidField("for", "--for must not be negative, got %s", forDur)
			}
			if pollEvery < 0 {
				return cairn.InvalidField("poll", "--poll must not be negative, got %s", pollEvery)
			}
			log := newLogger()
			devs, closeDevs, err := zfs.OpenDevices(args)
			defer closeDevs()
			if err != nil {
				return exitWith(2, "%v", err)
			}
			w, err := mmp.NewWatcher(devs, hostid, mmp.WatchOptions{SelfWriting: true, Log: log.With().Str("component", "watch").Logger()})
			if err != nil {
				if code := mmp.ErrorCode(err); code != "" {
					return exitWith(2, "%s: %v", code, err)
				}
				return exitWith(2, "%v", err)
			}
			every := pollEvery
			if every == 0 {
				every = w.PollEvery()
			}
			every = max(every, mmp.MinInterval)
			start := time.Now()
			enc := json.NewEncoder(os.Stdout)
			if !asJSON {
				fmt.Printf("watching %d leaf vdev(s) for writers other than hostid %s, every %s%s\n", len(devs), mmp.HostID(hostid), every, forText(forDur))
			}
			ctx := cmd.Context()
			for poll := 1; ; poll++ {
				if err := mmp.RealClock.Sleep(ctx, every); err != nil {
					return finishWatch(asJSON, enc, poll-1, start, "stopped")
				}
				obs, err := w.Poll()
				line := watchLine{Verdict: "ok", At: time.Now().UTC(), Poll: poll, Observation: obs}
				line.Code = obs.Code
				if err != nil {
					line.Code, line.Message = "unreadable", err.Error()
				}
				if obs.Foreign {
					line.Verdict = "foreign_activity"
				}
				switch {
				case asJSON:
					_ = enc.Encode(line)
				case obs.Foreign:
					fmt.Printf("FOREIGN ACTIVITY [%s] after %s (poll %d): %s\n", obs.Code, time.Since(start).Round(time.Millisecond), poll, obs.Message)
				case err != nil:
					fmt.Printf("poll %d: %v\n", poll, err)
				}
				if obs.Foreign {
					return exitError{code: 1}
				}
				if forDur > 0 && time.Since(start) >= forDur {
					return finishWatch(asJSON, enc, poll, start, "elapsed")
				}
			}
		},
	}
	watch.Flags().StringVar(&hostidFlag, "hostid", "", "hostid (hex) of the host expected to write the pool (required)")
	watch.Flags().BoolVar(&asJSON, "json", false, "print one JSON object per poll")
	watch.Flags().DurationVar(&forDur, "for", 0, "stop after this long with exit 0 (0: until interrupted)")
	watch.Flags().DurationVar(&pollEvery, "poll", 0, "poll period (0: the pool's MMP interval, 100ms-1s)")
	return watch
}

func forText(d time.Duration) string {
	if d == 0 {
		return " until interrupted"
	}
	return " for " + d.String()
}

// finishWatch reports a watch that ended without foreign activity: exit 0.
func finishWatch(asJSON bool, enc *json.Encoder, polls int, start time.Time, why string) error {
	took := time.Since(start).Round(time.Millisecond)
	if asJSON {
		_ = enc.Encode(watchLine{Verdict: "ok", Code: why, At: time.Now().UTC(), Poll: polls,
			Observation: mmp.Observation{Code: why, Message: fmt.Sprintf("no foreign activity in %d polls over %s", polls, took)}})
	} else {
		fmt.Printf("no foreign activity in %d polls over %s (%s)\n", polls, took, why)
	}
	return nil
}
