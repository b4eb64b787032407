package execx

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
)

func TestRunnerResults(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name     string
		argv     []string
		opts     Options
		runEnv   []string
		stdout   string
		exitCode int // want an *Error with this code when != 0
		signal   syscall.Signal
		message  string // exact error message when != ""
		cause    error  // errors.Is(err, cause) when != nil
	}{
		{name: "stdout", argv: []string{"sh", "-c", "printf 'hello\\nworld'"}, stdout: "hello\nworld"},
		{name: "exit code and trimmed stderr", argv: []string{"sh", "-c", "printf partial; echo '  oops: no such resource  ' >&2; exit 10"},
			stdout: "partial", exitCode: 10, message: `sh -c "printf partial; echo '  oops: no such resource  ' >&2; exit 10": exit 10: oops: no such resource`},
		{name: "exit without stderr", argv: []string{"false"}, exitCode: 1, message: "false: exit 1"},
		{name: "env added", argv: []string{"sh", "-c", `printf '%s' "$CAIRN_A"`}, opts: Options{Env: []string{"CAIRN_A=call"}}, stdout: "call"},
		{name: "call env overrides runner env", argv: []string{"sh", "-c", `printf '%s %s' "$CAIRN_A" "$CAIRN_B"`},
			runEnv: []string{"CAIRN_A=runner", "CAIRN_B=runner"}, opts: Options{Env: []string{"CAIRN_B=call"}}, stdout: "runner call"},
		{name: "process env kept", argv: []string{"sh", "-c", `printf '%s' "$PATH"`}, opts: Options{Env: []string{"CAIRN_A=1"}}, stdout: os.Getenv("PATH")},
		{name: "stdin", argv: []string{"cat"}, opts: Options{Stdin: []byte("resource r1 {}\n")}, stdout: "resource r1 {}\n"},
		{name: "no stdin reads EOF", argv: []string{"sh", "-c", "cat; printf end"}, stdout: "end"},
		{name: "dir", argv: []string{"pwd"}, opts: Options{Dir: dir}, stdout: dir + "\n"},
		{name: "killed by signal", argv: []string{"sh", "-c", "kill -TERM $$"}, exitCode: -1, signal: syscall.SIGTERM,
			message: `sh -c "kill -TERM $$": killed by signal 15 (terminated)`},
		{name: "not in PATH", argv: []string{"cairn-no-such-program"}, exitCode: -1, cause: exec.ErrNotFound},
		{name: "no such file", argv: []string{dir + "/missing"}, exitCode: -1, cause: fs.ErrNotExist},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := New(zerolog.Nop())
			r.Env = tt.runEnv
			out, err := r.Run(context.Background(), tt.argv, tt.opts)
			require.Equal(t, tt.stdout, string(out))
			if tt.exitCode == 0 && tt.cause == nil {
				require.NoError(t, err)
				return
			}
			var e *Error
			require.ErrorAs(t, err, &e)
			require.Equal(t, tt.argv, e.Argv)
			require.Equal(t, tt.exitCode, e.ExitCode)
			require.Equal(t, tt.exitCode, ExitCode(err))
			require.Equal(t, tt.signal, e.Signal)
			if tt.message != "" {
				require.Equal(t, tt.message, err.Error())
			}
			if tt.cause != nil {
				require.ErrorIs(t, err, tt.cause)
				require.True(t, strings.HasPrefix(err.Error(), Format(tt.argv)+": "), err.Error())
			}
		})
	}
}

func TestRunnerEmptyArgv(t *testing.T) {
	_, err := New(zerolog.Nop()).Run(context.Background(), nil, Options{})
	require.EqualError(t, err, "execx: argv is empty")
}

// alive reports whether pid is still a running (not zombie) process.
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// pid (comm) STATE ...
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// A timeout or a cancel kills the program and what it started (its process group)
// and says which of the two it was.
func TestRunnerKillsProcessGroup(t *testing.T) {
	// The shell starts a grandchild that would outlive it, prints its pid, and waits.
	argv := []string{"sh", "-c", "sleep 30 & echo $!; wait"}
	tests := []struct {
		name    string
		timeout time.Duration
		cancel  bool
		cause   error
		outcome string
	}{
		{name: "timeout", timeout: 200 * time.Millisecond, cause: ErrTimeout, outcome: OutcomeTimeout},
		{name: "cancel", timeout: time.Minute, cancel: true, cause: context.Canceled, outcome: OutcomeCanceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := counterValue(metricCalls.WithLabelValues("sh", tt.outcome))
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tt.cancel {
				time.AfterFunc(200*time.Millisecond, cancel)
			}
			start := time.Now()
			out, err := New(zerolog.Nop()).Run(ctx, argv, Options{Timeout: tt.timeout})
			require.Less(t, time.Since(start), 5*time.Second, "not killed")
			require.ErrorIs(t, err, tt.cause)
			require.Equal(t, -1, ExitCode(err))
			if tt.cause == ErrTimeout {
				require.Equal(t, `sh -c "sleep 30 & echo $!; wait": timed out after 200ms`, err.Error())
				require.NotErrorIs(t, err, context.DeadlineExceeded)
			} else {
				require.Equal(t, `sh -c "sleep 30 & echo $!; wait": context canceled`, err.Error())
			}
			pid, perr := strconv.Atoi(strings.TrimSpace(string(out)))
			require.NoError(t, perr, "grandchild pid in stdout %q", out)
			require.Eventually(t, func() bool { return !alive(pid) }, 5*time.Second, 20*time.Millisecond, "grandchild %d survived", pid)
			require.Equal(t, before+1, counterValue(metricCalls.WithLabelValues("sh", tt.outcome)))
		})
	}
}

// The caller's own deadline is reported as the caller's, not as the call's timeout.
func TestRunnerCallerDeadline(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := New(zerolog.Nop()).Run(ctx, []string{"sleep", "10"}, Options{Timeout: time.Minute})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.NotErrorIs(t, err, ErrTimeout)
}

func TestRunnerAlreadyCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := New(zerolog.Nop()).Run(ctx, []string{"true"}, Options{})
	require.ErrorIs(t, err, context.Canceled)
}

// A program that exits but leaves a process holding stdout does not hang the call.
func TestRunnerLeftoverProcess(t *testing.T) {
	start := time.Now()
	out, err := New(zerolog.Nop()).Run(context.Background(), []string{"sh", "-c", "printf done; sleep 30 &"}, Options{})
	require.NoError(t, err)
	require.Equal(t, "done", string(out))
	require.Less(t, time.Since(start), waitDelay+3*time.Second)
}

func TestRunnerStderrCapped(t *testing.T) {
	_, err := New(zerolog.Nop()).Run(context.Background(),
		[]string{"sh", "-c", "head -c 100000 /dev/zero | tr '\\0' x >&2; exit 3"}, Options{})
	var e *Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, 3, e.ExitCode)
	require.Equal(t, strings.Repeat("x", MaxStderr)+" …", e.Stderr)
}

func TestRunnerMetricsAndLog(t *testing.T) {
	var logs bytes.Buffer
	r := New(zerolog.New(&logs).Level(zerolog.DebugLevel))
	okBefore := counterValue(metricCalls.WithLabelValues("true", OutcomeOK))
	exitBefore := counterValue(metricCalls.WithLabelValues("false", OutcomeExit))
	startBefore := counterValue(metricCalls.WithLabelValues("cairn-no-such-program", OutcomeStart))
	_, _ = r.Run(context.Background(), []string{"/bin/true", "a b"}, Options{})
	_, _ = r.Run(context.Background(), []string{"false"}, Options{})
	_, _ = r.Run(context.Background(), []string{"cairn-no-such-program"}, Options{})
	require.Equal(t, okBefore+1, counterValue(metricCalls.WithLabelValues("true", OutcomeOK)))
	require.Equal(t, exitBefore+1, counterValue(metricCalls.WithLabelValues("false", OutcomeExit)))
	require.Equal(t, startBefore+1, counterValue(metricCalls.WithLabelValues("cairn-no-such-program", OutcomeStart)))
	require.GreaterOrEqual(t, histogramCount(metricDuration.WithLabelValues("true")), uint64(1))

	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	require.Len(t, lines, 3)
	require.Contains(t, lines[0], `"argv":"/bin/true \"a b\""`)
	require.Contains(t, lines[0], `"outcome":"ok"`)
	require.Contains(t, lines[0], `"exit_code":0`)
	require.Contains(t, lines[1], `"outcome":"exit"`)
	require.Contains(t, lines[1], `"exit_code":1`)
	require.Contains(t, lines[2], `"outcome":"start"`)
	for _, l := range lines {
		require.Contains(t, l, `"message":"exec"`)
	}
}

func TestFormat(t *testing.T) {
	tests := []struct {
		argv []string
		want string
	}{
		{[]string{"drbdadm", "adjust", "r1"}, "drbdadm adjust r1"},
		{[]string{"sh", "-c", "a b"}, `sh -c "a b"`},
		{[]string{"x", ""}, `x ""`},
		{[]string{"x", `it's`}, `x "it's"`},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, Format(tt.argv))
	}
}

func TestErrorMessage(t *testing.T) {
	e := &Error{Argv: []string{"drbdadm", "adjust", "r1"}, ExitCode: 10, Stderr: "r1: no such resource"}
	require.EqualError(t, e, "drbdadm adjust r1: exit 10: r1: no such resource")
	require.Equal(t, 10, ExitCode(fmtWrap(e)))
	require.Equal(t, 0, ExitCode(nil))
	require.Equal(t, -1, ExitCode(errors.New("other")))
}

func fmtWrap(err error) error { return errors.Join(errors.New("reconcile r1"), err) }

func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		panic(err)
	}
	return m.GetCounter().GetValue()
}

func histogramCount(o prometheus.Observer) uint64 {
	var m dto.Metric
	if err := o.(prometheus.Metric).Write(&m); err != nil {
		panic(err)
	}
	return m.GetHistogram().GetSampleCount()
}
