package execx

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// LineRunner runs a long-lived program that reports on stdout line by line, such as
// `drbdsetup events2`: each line is handed to fn as it arrives, and Lines returns when
// the program exits or ctx ends (the process group is then killed).
//
// Lines returns nil when the program exited 0, and otherwise the same *Error as Run
// (exit code, stderr, ErrTimeout, the context's error); the lines printed before the
// failure have been delivered. fn runs on one goroutine, in order; a slow fn slows the
// reading (the pipe buffers in between).
type LineRunner interface {
	Lines(ctx context.Context, argv []string, opts Options, fn func(line string)) error
}

var _ LineRunner = (*Runner)(nil)

// Lines runs argv like Run, without the Runner's default timeout (a stream runs until
// it ends; opts.Timeout > 0 still bounds it), delivering stdout line by line (without
// the newline). See LineRunner.
func (r *Runner) Lines(ctx context.Context, argv []string, opts Options, fn func(line string)) error {
	if len(argv) == 0 {
		return errors.New("execx: argv is empty")
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if opts.Timeout > 0 {
		var c2 context.CancelFunc
		cctx, c2 = context.WithTimeoutCause(cctx, opts.Timeout, ErrTimeout)
		defer c2()
	}
	cmd := exec.CommandContext(cctx, argv[0], argv[1:]...)
	cmd.Dir = opts.Dir
	if len(r.Env) > 0 || len(opts.Env) > 0 {
		cmd.Env = append(append(os.Environ(), r.Env...), opts.Env...)
	}
	stderr := &capped{max: MaxStderr}
	cmd.Stderr = stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return killGroup(cmd) }
	cmd.WaitDelay = waitDelay
	out, err := cmd.StdoutPipe()
	e := &Error{Argv: append([]string(nil), argv...), ExitCode: -1}
	name := Name(argv)
	if err == nil {
		err = cmd.Start()
	}
	if err != nil {
		metricCalls.WithLabelValues(name, OutcomeStart).Inc()
		e.Err = err
		return e
	}
	start := time.Now()
	br := bufio.NewReaderSize(out, 64<<10)
	for {
		line, rerr := br.ReadSlice('\n')
		if len(line) > 0 {
			s := string(line)
			if n := len(s); s[n-1] == '\n' {
				s = s[:n-1]
			}
			fn(s)
		}
		if rerr == bufio.ErrBufferFull {
			// An overlong line: deliver it in pieces (the parser rejects the pieces).
			continue
		}
		if rerr != nil {
			if rerr != io.EOF {
				r.Log.Debug().Err(rerr).Str("argv", Format(argv)).Msg("reading stream")
			}
			break
		}
	}
	err = cmd.Wait()
	elapsed := time.Since(start)
	outcome := OutcomeOK
	switch {
	case err == nil:
		e.ExitCode = 0
	case cctx.Err() != nil:
		if cause := context.Cause(cctx); errors.Is(cause, ErrTimeout) && ctx.Err() == nil {
			outcome, e.Err, e.Timeout = OutcomeTimeout, ErrTimeout, opts.Timeout
		} else {
			outcome, e.Err = OutcomeCanceled, ctx.Err()
		}
	case errors.Is(err, exec.ErrWaitDelay):
		_ = killGroup(cmd)
		err = nil
	default:
		outcome = OutcomeExit
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
	e.Stderr = stderr.String()
	metricCalls.WithLabelValues(name, outcome).Inc()
	metricDuration.WithLabelValues(name).Observe(elapsed.Seconds())
	r.Log.Debug().Str("argv", Format(argv)).Dur("duration", elapsed).Str("outcome", outcome).Int("exit_code", e.ExitCode).Msg("exec stream")
	if err != nil {
		return e
	}
	return nil
}
