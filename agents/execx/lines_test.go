package execx

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

func TestLinesDeliversEachLineAndTheExit(t *testing.T) {
	r := New(zerolog.Nop())
	var got []string
	err := r.Lines(context.Background(), []string{"sh", "-c", "echo one; echo two; printf three; echo oops >&2; exit 3"}, Options{}, func(l string) { got = append(got, l) })
	if len(got) != 3 || got[0] != "one" || got[1] != "two" || got[2] != "three" {
		t.Fatalf("lines %q", got)
	}
	var e *Error
	if !errors.As(err, &e) || e.ExitCode != 3 || e.Stderr != "oops" {
		t.Fatalf("err %v, want exit 3 with stderr oops", err)
	}
	if err := r.Lines(context.Background(), []string{"true"}, Options{}, func(string) {}); err != nil {
		t.Fatalf("true: %v", err)
	}
}

func TestLinesEndsWithTheContext(t *testing.T) {
	r := New(zerolog.Nop())
	ctx, cancel := context.WithCancel(context.Background())
	lines := make(chan string, 10)
	done := make(chan error, 1)
	go func() {
		done <- r.Lines(ctx, []string{"sh", "-c", "echo up; sleep 60"}, Options{}, func(l string) { lines <- l })
	}()
	if l := <-lines; l != "up" {
		t.Fatalf("line %q", l)
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Lines did not end with its context")
	}
}

// Lines shares Run's setup: the Runner's and the call's environment and the directory.
func TestLinesEnvAndDir(t *testing.T) {
	dir := t.TempDir()
	r := New(zerolog.Nop())
	r.Env = []string{"CAIRN_A=runner", "CAIRN_B=runner"}
	var got []string
	err := r.Lines(context.Background(), []string{"sh", "-c", `echo "$CAIRN_A $CAIRN_B"; pwd`},
		Options{Env: []string{"CAIRN_B=call"}, Dir: dir}, func(l string) { got = append(got, l) })
	if err != nil || len(got) != 2 || got[0] != "runner call" || got[1] != dir {
		t.Fatalf("lines %q, err %v", got, err)
	}
}

// opts.Timeout bounds a stream, and the *Error says so like Run's; the process group
// is killed.
func TestLinesTimeout(t *testing.T) {
	before := counterValue(metricCalls.WithLabelValues("sh", OutcomeTimeout))
	start := time.Now()
	err := New(zerolog.Nop()).Lines(context.Background(), []string{"sh", "-c", "sleep 30 & wait"},
		Options{Timeout: 200 * time.Millisecond}, func(string) {})
	if time.Since(start) > 5*time.Second {
		t.Fatal("not killed")
	}
	var e *Error
	if !errors.As(err, &e) || !errors.Is(err, ErrTimeout) || e.Timeout != 200*time.Millisecond || e.ExitCode != -1 {
		t.Fatalf("err %v, want a timeout after 200ms", err)
	}
	if got := counterValue(metricCalls.WithLabelValues("sh", OutcomeTimeout)); got != before+1 {
		t.Fatalf("timeout count %v, want %v", got, before+1)
	}
}

// A program that cannot be started is an *Error with the cause, counted as "start",
// and logs no exec line.
func TestLinesNotStarted(t *testing.T) {
	var logs bytes.Buffer
	r := New(zerolog.New(&logs).Level(zerolog.DebugLevel))
	before := counterValue(metricCalls.WithLabelValues("cairn-no-such-program", OutcomeStart))
	err := r.Lines(context.Background(), []string{"cairn-no-such-program"}, Options{}, func(string) {})
	var e *Error
	if !errors.As(err, &e) || !errors.Is(err, exec.ErrNotFound) || e.ExitCode != -1 {
		t.Fatalf("err %v, want not found", err)
	}
	if got := counterValue(metricCalls.WithLabelValues("cairn-no-such-program", OutcomeStart)); got != before+1 {
		t.Fatalf("start count %v, want %v", got, before+1)
	}
	if logs.Len() != 0 {
		t.Fatalf("logged %q", logs.String())
	}
}

// One debug line per stream that ran, with its outcome and exit code.
func TestLinesLog(t *testing.T) {
	var logs bytes.Buffer
	r := New(zerolog.New(&logs).Level(zerolog.DebugLevel))
	_ = r.Lines(context.Background(), []string{"sh", "-c", "exit 4"}, Options{}, func(string) {})
	l := strings.TrimSpace(logs.String())
	for _, want := range []string{`"message":"exec stream"`, `"outcome":"exit"`, `"exit_code":4`, `"argv":"sh -c \"exit 4\""`} {
		if !strings.Contains(l, want) {
			t.Fatalf("log %q lacks %s", l, want)
		}
	}
}
