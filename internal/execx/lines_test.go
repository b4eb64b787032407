package execx

import (
	"context"
	"errors"
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
