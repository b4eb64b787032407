package execx

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/rs/zerolog"
)

// call is one run of argv by a Runner, shared by Run and Lines: the command, set up
// by prepare but not started, and what classify needs to tell how it ended.
type call struct {
	argv    []string
	cmd     *exec.Cmd
	ctx     context.Context // the caller's context
	cctx    context.Context // the call's: ends at the timeout or with ctx
	timeout time.Duration   // the limit of cctx; 0 for none
	stderr  *capped
	log     zerolog.Logger
}

// ended is how a call ended, as classify found it.
type ended struct {
	// outcome is one of the Outcome constants.
	outcome string
	// info is always set: argv, the exit code (0 on success, -1 when the program did
	// not exit on its own), the signal, the trimmed stderr and the cause.
	info *Error
	// err is what the call returns: nil on success, else info.
	err error
	// leftBehind is set when the program exited 0 but left a process holding its
	// output; that process group has been killed and the call counts as a success.
	leftBehind bool
}

// runTimeout is the limit of a Run call: opts.Timeout, else r.Timeout, else
// DefaultTimeout.
func (r *Runner) runTimeout(opts Options) time.Duration {
	if opts.Timeout > 0 {
		return opts.Timeout
	}
	if r.Timeout > 0 {
		return r.Timeout
	}
	return DefaultTimeout
}

// prepare sets up argv (non-empty) under ctx without starting it: argv[0] looked up
// in PATH unless it holds a slash, the environment (the process's, then r.Env, then
// opts.Env), opts.Dir, stderr kept up to MaxStderr, a process group of its own that is
// killed whole (SIGKILL) when the call's context ends, and waitDelay for leftovers
// holding its output. timeout > 0 bounds the call, with ErrTimeout as the cause;
// timeout 0 leaves it bounded by ctx alone. Stdin and stdout are the caller's to set
// (unset: /dev/null). The caller must call the returned cancel when the call is over.
func (r *Runner) prepare(ctx context.Context, argv []string, opts Options, timeout time.Duration) (*call, context.CancelFunc) {
	var cctx context.Context
	var cancel context.CancelFunc
	if timeout > 0 {
		cctx, cancel = context.WithTimeoutCause(ctx, timeout, ErrTimeout)
	} else {
		cctx, cancel = context.WithCancel(ctx)
	}
	cmd := exec.CommandContext(cctx, argv[0], argv[1:]...)
	cmd.Dir = opts.Dir
	if len(r.Env) > 0 || len(opts.Env) > 0 {
		// exec dedupes the environment keeping the last value of a key.
		cmd.Env = append(append(os.Environ(), r.Env...), opts.Env...)
	}
	c := &call{argv: argv, cmd: cmd, ctx: ctx, cctx: cctx, timeout: timeout,
		stderr: &capped{max: MaxStderr}, log: r.Log}
	cmd.Stderr = c.stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return killGroup(cmd) }
	cmd.WaitDelay = waitDelay
	return c, cancel
}

// newError returns the *Error of the call before anything is known: a copy of argv
// and exit code -1.
func (c *call) newError() *Error {
	return &Error{Argv: append([]string(nil), c.argv...), ExitCode: -1}
}

// classify tells how the call ended from err, the result of c.cmd.Run or c.cmd.Wait:
//   - nil: OutcomeOK, with the exit code (0);
//   - the call's context ended (whether or not it started): OutcomeTimeout with
//     ErrTimeout and the timeout when the timeout ran out while ctx was live, else
//     OutcomeCanceled with ctx's error;
//   - never started: OutcomeStart with the error of starting it;
//   - exited 0 but left a process holding its output: OutcomeOK and leftBehind, after
//     killing its process group;
//   - otherwise OutcomeExit, with the exit code, the signal that killed it, or (an
//     error that is not an exit) that error as the cause.
//
// The stderr seen so far is put in the *Error in every case.
func (c *call) classify(err error) ended {
	e := c.newError()
	end := ended{outcome: OutcomeOK, info: e, err: e}
	switch {
	case err == nil:
	case c.cctx.Err() != nil: // killed by us (or not started): our timeout or the caller's context
		if cause := context.Cause(c.cctx); errors.Is(cause, ErrTimeout) && c.ctx.Err() == nil {
			end.outcome, e.Err, e.Timeout = OutcomeTimeout, ErrTimeout, c.timeout
		} else {
			end.outcome, e.Err = OutcomeCanceled, c.ctx.Err()
		}
	case c.cmd.Process == nil: // never started
		end.outcome, e.Err = OutcomeStart, err
	case errors.Is(err, exec.ErrWaitDelay):
		// It exited 0 but left something running that holds stdout or stderr open:
		// kill that too; the call itself succeeded.
		_ = killGroup(c.cmd)
		end.leftBehind = true
		err = nil
	default:
		end.outcome = OutcomeExit
		var xe *exec.ExitError
		if errors.As(err, &xe) {
			if ws, ok := xe.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				e.Signal = ws.Signal()
			} else {
				e.ExitCode = xe.ExitCode()
			}
		} else {
			e.Err = err
		}
	}
	if err == nil {
		end.err = nil
		if c.cmd.ProcessState != nil {
			e.ExitCode = c.cmd.ProcessState.ExitCode()
		}
	}
	e.Stderr = c.stderr.String()
	return end
}

// record counts the ended call in cairn_exec_commands_total and
// cairn_exec_duration_seconds and returns its debug log event with argv, duration,
// outcome and exit_code set (nil when debug is off); the caller adds its own fields
// and sends it.
func (c *call) record(end ended, elapsed time.Duration) *zerolog.Event {
	name := Name(c.argv)
	metricCalls.WithLabelValues(name, end.outcome).Inc()
	metricDuration.WithLabelValues(name).Observe(elapsed.Seconds())
	return c.log.Debug().Str("argv", Format(c.argv)).Dur("duration_ms", elapsed).Str("outcome", end.outcome).
		Int("exit_code", end.info.ExitCode)
}
