package execx

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
)

// Recorder is the Executor for tests of code that drives programs which cannot run on
// a test machine: drbdsetup and a real `drbdadm adjust` need the DRBD kernel module,
// zpool/zfs need /dev/zfs, lvcreate needs a real volume group. It runs nothing: it
// records every call and answers from a script, so a test asserts the exact argv the
// code under test sent and feeds it the output or failure to react to. Failures it
// scripts are *Error values like the Runner's, so ExitCode and errors.Is work the same.
//
// The zero value is ready: every call succeeds with empty output unless a Response
// matches it (or Strict is set). Safe for concurrent use.
type Recorder struct {
	// Strict makes a call that no Response matches fail with exit 127 and the stderr
	// "execx.Recorder: no scripted response", instead of succeeding with empty output.
	Strict bool

	mu        sync.Mutex
	calls     []Call
	responses []*Response
}

var _ Executor = (*Recorder)(nil)

// Call is one recorded call.
type Call struct {
	Argv    []string
	Options Options
}

// String is the argv as Format renders it.
func (c Call) String() string { return Format(c.Argv) }

// Response is a scripted answer to the calls whose argv starts with its prefix.
// Build it with Recorder.On and the chained setters; a zero Response succeeds with
// empty output every time.
type Response struct {
	prefix   []string
	stdout   []byte
	stderr   string
	exitCode int
	err      error
	times    int // 0: unlimited
	used     int
}

// On adds a Response for calls whose argv begins with argvPrefix (element by element;
// an empty prefix matches every call) and returns it for the setters. A call takes the
// first Response, in the order they were added, that matches and is not used up.
func (r *Recorder) On(argvPrefix ...string) *Response {
	p := &Response{prefix: append([]string(nil), argvPrefix...)}
	r.mu.Lock()
	r.responses = append(r.responses, p)
	r.mu.Unlock()
	return p
}

// Stdout makes the call print out and succeed (unless Fail or Err is also set).
func (p *Response) Stdout(out string) *Response { p.stdout = []byte(out); return p }

// Fail makes the call exit with code (non-zero) after printing stderr.
func (p *Response) Fail(code int, stderr string) *Response {
	p.exitCode, p.stderr = code, stderr
	return p
}

// Err makes the call fail with cause err, as a Runner reports a call that could not
// start (exec.ErrNotFound) or ran into its timeout (ErrTimeout); exit code -1.
func (p *Response) Err(err error) *Response { p.err = err; return p }

// Times limits the Response to the next n matching calls; later calls fall through
// to the Responses added after it.
func (p *Response) Times(n int) *Response { p.times = n; return p }

// Run records the call and answers it from the script. A context that has already
// ended fails the call as a Runner would (cause: the context's error).
func (r *Recorder) Run(ctx context.Context, argv []string, opts Options) ([]byte, error) {
	if len(argv) == 0 {
		return nil, errors.New("execx: argv is empty")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	opts.Env = slices.Clone(opts.Env)
	opts.Stdin = slices.Clone(opts.Stdin)
	r.calls = append(r.calls, Call{Argv: slices.Clone(argv), Options: opts})
	fail := func(code int, stderr string, cause error) error {
		return &Error{Argv: slices.Clone(argv), ExitCode: code, Stderr: strings.TrimSpace(stderr), Err: cause}
	}
	if err := ctx.Err(); err != nil {
		return nil, fail(-1, "", err)
	}
	for _, p := range r.responses {
		if (p.times > 0 && p.used >= p.times) || len(argv) < len(p.prefix) || !slices.Equal(argv[:len(p.prefix)], p.prefix) {
			continue
		}
		p.used++
		out := slices.Clone(p.stdout)
		switch {
		case p.err != nil:
			e := fail(-1, p.stderr, p.err).(*Error)
			if errors.Is(p.err, ErrTimeout) {
				e.Timeout = opts.Timeout
			}
			return out, e
		case p.exitCode != 0:
			return out, fail(p.exitCode, p.stderr, nil)
		}
		return out, nil
	}
	if r.Strict {
		return nil, fail(127, "execx.Recorder: no scripted response", nil)
	}
	return nil, nil
}

// Calls returns the calls recorded so far, oldest first.
func (r *Recorder) Calls() []Call {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls)
}

// Commands returns the recorded calls' argv, each rendered by Format: handy to compare
// a whole sequence in one assertion.
func (r *Recorder) Commands() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, len(r.calls))
	for i, c := range r.calls {
		out[i] = c.String()
	}
	return out
}

// Reset forgets the recorded calls (the script stays).
func (r *Recorder) Reset() {
	r.mu.Lock()
	r.calls = nil
	r.mu.Unlock()
}
