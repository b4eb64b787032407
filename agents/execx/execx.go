// Package execx is the one way the node agent runs external programs (drbdadm,
// drbdsetup, drbdmeta, zfs, zpool, lvcreate, losetup, …). Every call has a timeout,
// ends with its context, runs in its own process group (so a timeout or a cancel kills
// the program and everything it started, except what moved to a session of its own,
// like a daemon), is logged at debug level and counted in
// Prometheus, and fails with an *Error that names the command, its exit code and what
// it printed on stderr.
//
// Code that drives programs which need the kernel (drbdsetup, zpool, lvcreate on a real
// volume group) takes an Executor, so tests can hand it a Recorder instead of a Runner.
package execx

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/rs/zerolog"
)

// DefaultTimeout bounds a call whose Options and Runner set no timeout.
const DefaultTimeout = 2 * time.Minute

// MaxStderr is how much of a failed call's stderr an Error keeps (the start of it).
const MaxStderr = 4096

// waitDelay is how long Run waits, after the program exited or was killed, for
// programs it left behind to close stdout and stderr before it closes them itself.
const waitDelay = 2 * time.Second

// Outcomes, the values of the outcome label of cairn_exec_commands_total.
const (
	OutcomeOK       = "ok"       // exit status 0
	OutcomeExit     = "exit"     // ran and exited non-zero (or was killed by a signal)
	OutcomeTimeout  = "timeout"  // killed at the per-call timeout
	OutcomeCanceled = "canceled" // killed because the caller's context ended
	OutcomeStart    = "start"    // could not be started (not found, not executable)
)

var (
	metricCalls = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "cairn_exec_commands_total",
		Help: "External commands run by the agent, by command name (argv[0] base name) and outcome (ok, exit, timeout, canceled, start).",
	}, []string{"command", "outcome"})
	metricDuration = promauto.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "cairn_exec_duration_seconds",
		Help:    "Wall time of external commands run by the agent, by command name.",
		Buckets: prometheus.ExponentialBuckets(0.001, 4, 10), // 1 ms … ~4.4 min
	}, []string{"command"})
)

// ErrTimeout is the cause of an *Error for a call killed at its timeout:
// errors.Is(err, ErrTimeout). A call killed because the caller's context ended wraps
// that context's error instead (context.Canceled or context.DeadlineExceeded).
var ErrTimeout = errors.New("timed out")

// Options are per-call settings. The zero value runs argv with the Runner's
// environment, no stdin, in the current directory, with the Runner's timeout.
type Options struct {
	// Timeout bounds this call; 0 takes the Runner's Timeout (DefaultTimeout if unset).
	// At the timeout the whole process group is killed with SIGKILL.
	Timeout time.Duration
	// Env holds KEY=VALUE pairs added to the environment; they override the process
	// environment and the Runner's Env for the same key.
	Env []string
	// Stdin is fed to the program's standard input (nil: /dev/null).
	Stdin []byte
	// Dir is the working directory ("": the agent's).
	Dir string
}

// Executor runs one external program to completion and returns its standard output.
//
// Run returns an error if argv is empty, if the program cannot be started, exits
// non-zero, is killed by a signal, runs past its timeout or outlives ctx; every error
// but the empty argv is an *Error. On an *Error the returned stdout holds whatever
// the program printed before it failed.
type Executor interface {
	Run(ctx context.Context, argv []string, opts Options) (stdout []byte, err error)
}

// Error is a failed call: argv, how it ended, and its trimmed stderr.
// Its message reads `drbdadm adjust r1: exit 10: <stderr>`.
type Error struct {
	Argv []string
	// ExitCode is the program's exit status, or -1 if it did not exit on its own
	// (killed by a signal, timed out, canceled, never started).
	ExitCode int
	// Signal is the signal that killed it (0 if none).
	Signal syscall.Signal
	// Stderr is what the program wrote to stderr, trimmed of surrounding white space
	// and cut to MaxStderr bytes.
	Stderr string
	// Timeout is the limit the call ran into, when Err is ErrTimeout.
	Timeout time.Duration
	// Err is the cause: ErrTimeout, the caller's context error, the error of starting
	// the program (exec.ErrNotFound, fs.ErrPermission…), or nil for a plain non-zero exit.
	Err error
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(Format(e.Argv))
	b.WriteString(": ")
	switch {
	case errors.Is(e.Err, ErrTimeout):
		fmt.Fprintf(&b, "timed out after %s", e.Timeout)
	case e.Err != nil:
		b.WriteString(e.Err.Error())
	case e.Signal != 0:
		fmt.Fprintf(&b, "killed by signal %d (%s)", int(e.Signal), e.Signal)
	default:
		fmt.Fprintf(&b, "exit %d", e.ExitCode)
	}
	if e.Stderr != "" {
		b.WriteString(": ")
		b.WriteString(e.Stderr)
	}
	return b.String()
}

// Unwrap returns the cause (nil for a plain non-zero exit).
func (e *Error) Unwrap() error { return e.Err }

// ExitCode returns the exit status carried by err (an *Error anywhere in its chain):
// 0 for a nil error, -1 when the program did not exit on its own or err is not from an
// Executor. Callers use it for commands whose status has a meaning.
func ExitCode(err error) int {
	if err == nil {
		return 0
	}
	var e *Error
	if errors.As(err, &e) {
		return e.ExitCode
	}
	return -1
}

// Format renders argv as one line for messages and logs: arguments joined by spaces,
// each one that is empty or holds white space or quotes quoted Go-style.
func Format(argv []string) string {
	parts := make([]string, len(argv))
	for i, a := range argv {
		if a == "" || strings.ContainsAny(a, " \t\n\"'\\") {
			a = strconv.Quote(a)
		}
		parts[i] = a
	}
	return strings.Join(parts, " ")
}

// Name is the command label of argv: the base name of argv[0].
func Name(argv []string) string {
	if len(argv) == 0 {
		return ""
	}
	return filepath.Base(argv[0])
}

// Runner is the Executor that runs real processes.
type Runner struct {
	// Timeout is the default per-call timeout (DefaultTimeout if 0).
	Timeout time.Duration
	// Env holds KEY=VALUE pairs added to every call's environment (before Options.Env),
	// e.g. DRBD_DRIVER_VERSION_OVERRIDE=9.2.0 on a host without the DRBD module.
	Env []string
	// Log receives one debug line per call.
	Log zerolog.Logger
}

var _ Executor = (*Runner)(nil)

// New returns a Runner with DefaultTimeout that logs to log.
func New(log zerolog.Logger) *Runner { return &Runner{Timeout: DefaultTimeout, Log: log} }

// Run runs argv (argv[0] looked up in PATH unless it holds a slash) and waits for it.
// See Executor for the errors.
func (r *Runner) Run(ctx context.Context, argv []string, opts Options) ([]byte, error) {
	if len(argv) == 0 {
		return nil, errors.New("execx: argv is empty")
	}
	c, cancel := r.prepare(ctx, argv, opts, r.runTimeout(opts))
	defer cancel()
	if opts.Stdin != nil {
		c.cmd.Stdin = bytes.NewReader(opts.Stdin)
	}
	var stdout bytes.Buffer
	c.cmd.Stdout = &stdout

	start := time.Now()
	err := c.cmd.Run()
	elapsed := time.Since(start)

	end := c.classify(err)
	if end.leftBehind {
		r.Log.Warn().Str("argv", Format(argv)).Msg("command exited but left a process holding its output; killed its process group")
	}
	ev := c.record(end, elapsed).Int("stdout_bytes", stdout.Len())
	if end.info.Stderr != "" {
		ev = ev.Str("stderr", end.info.Stderr)
	}
	ev.Msg("exec")
	return stdout.Bytes(), end.err
}

// killGroup sends SIGKILL to the process group the command leads.
func killGroup(cmd *exec.Cmd) error {
	if cmd.Process == nil {
		return nil
	}
	err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	if errors.Is(err, syscall.ESRCH) {
		return os.ErrProcessDone
	}
	return err
}

// capped keeps the first max bytes written to it and discards the rest (so a program
// that floods stderr cannot grow the agent), remembering that it cut.
type capped struct {
	buf bytes.Buffer
	max int
	cut bool
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.max - c.buf.Len(); room > 0 {
		if len(p) > room {
			c.buf.Write(p[:room])
			c.cut = true
		} else {
			c.buf.Write(p)
		}
	} else if len(p) > 0 {
		c.cut = true
	}
	return len(p), nil
}

func (c *capped) String() string {
	s := strings.TrimSpace(c.buf.String())
	if c.cut {
		s += " …"
	}
	return s
}
