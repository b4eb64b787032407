package drbdagent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cairn-io/cairn/agents/execx"
	"github.com/cairn-io/cairn/drbd/drbdutils"
)

// userSuspender is a Kernel that can list the resources whose I/O is suspended by the
// user (drbdsetup suspend-io), with their local minors.
type userSuspender interface {
	SuspendedByUser(ctx context.Context) (map[string][]int, error)
}

// Recover runs once when the agent starts, before any desired state is carried out:
// I/O a snapshot holds suspended (its state file says so) is resumed at once when the
// snapshot's bound has passed, else a timer resumes it at the bound; and every resource
// the kernel reports suspended by the user without a held snapshot inside its bound is
// resumed (a suspension no snapshot of this agent explains). Resumes run under no
// caller's context; one that fails is retried by a timer. The error lists what could
// not be read or resumed; the caller logs it and goes on.
func (r *Reconciler) Recover(ctx context.Context) error {
	var errs []string
	inBound := map[string]bool{} // resources with a held snapshot still inside its bound
	entries, err := os.ReadDir(r.cfg.Paths.StateDir)
	if err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("recover: %w", err)
	}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".json") {
			continue
		}
		rd := strings.TrimSuffix(name, ".json")
		st, err := LoadState(filepath.Join(r.cfg.Paths.StateDir, name))
		if err != nil || st == nil {
			if err != nil {
				errs = append(errs, err.Error())
			}
			continue
		}
		expired := false
		for snap, ss := range st.Snapshots {
			if !ss.held() {
				continue
			}
			if left := r.cfg.SuspendBound - time.Since(ss.SuspendedAt); left > 0 {
				inBound[rd] = true
				r.armResume(rd, snap, left)
			} else {
				expired = true
			}
		}
		if expired {
			r.expire(rd, "") // resumes now; a failure is retried by its timer
		}
	}
	if k, ok := r.cfg.Kernel.(userSuspender); ok {
		susp, err := k.SuspendedByUser(ctx)
		if err != nil {
			errs = append(errs, fmt.Sprintf("suspended devices: %v", err))
		}
		for _, rd := range slices.Sorted(func(yield func(string) bool) {
			for rd := range susp {
				if !yield(rd) {
					return
				}
			}
		}) {
			if inBound[rd] {
				continue
			}
			if st, _ := LoadState(r.cfg.Paths.StateFile(rd)); st != nil && heldAny(st) {
				continue // expire above resumes it (or retries)
			}
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), resumeTimeout)
			err := r.cfg.Kernel.ResumeIO(rctx, rd, susp[rd])
			cancel()
			if err != nil {
				metricResumeFailures.Inc()
				errs = append(errs, fmt.Sprintf("resume-io %s: %v", rd, err))
				continue
			}
			metricSteps.WithLabelValues("resume-io").Inc()
			r.cfg.Log.Warn().Str("resource", rd).Msg("I/O was suspended with no snapshot holding it: resumed at start")
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("recover: %s", strings.Join(errs, "; "))
	}
	return nil
}

func heldAny(st *State) bool {
	for _, ss := range st.Snapshots {
		if ss.held() {
			return true
		}
	}
	return false
}

// SuspendedByUser lists the resources `drbdsetup events2 --now all` reports with
// suspended:user (alone or with other reasons) and their minors.
func (k *Real) SuspendedByUser(ctx context.Context) (map[string][]int, error) {
	if k.Lines == nil {
		return nil, fmt.Errorf("kernel: no line runner for events2")
	}
	susp := map[string]bool{}
	minors := map[string][]int{}
	var perr error
	argv := k.setup([]string{drbdutils.Drbdsetup, "events2", "--now", "all"})
	err := k.Lines.Lines(ctx, argv, execx.Options{}, func(line string) {
		ev, err := drbdutils.ParseEvents2Line(line)
		if err != nil {
			perr = err
			return
		}
		var name, suspended, minor string
		for _, f := range ev.Fields {
			switch f.Key {
			case "name":
				name = f.Value
			case "suspended":
				suspended = f.Value
			case "minor":
				minor = f.Value
			}
		}
		switch ev.Object {
		case drbdutils.ObjectResource:
			if slices.Contains(strings.Split(suspended, ","), "user") {
				susp[name] = true
			}
		case drbdutils.ObjectDevice:
			if m, err := strconv.Atoi(minor); err == nil {
				minors[name] = append(minors[name], m)
			}
		}
	})
	if err == nil {
		err = perr
	}
	out := map[string][]int{}
	for rd := range susp {
		out[rd] = minors[rd]
	}
	return out, err
}

// SuspendedByUser lists this node's simulated resources that are up and suspended.
func (s *Sim) SuspendedByUser(ctx context.Context) (map[string][]int, error) {
	entries, err := os.ReadDir(s.Dir)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	out := map[string][]int{}
	for _, e := range entries {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		reg, err := loadReg(s.regPath(e.Name(), s.Node))
		if err != nil || reg == nil || !reg.Up || !reg.Suspended {
			continue
		}
		var ms []int
		for _, v := range reg.Volumes {
			ms = append(ms, v.Minor)
		}
		slices.Sort(ms)
		out[e.Name()] = ms
	}
	return out, nil
}
