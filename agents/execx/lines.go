package execx

import (
	"bufio"
	"context"
	"errors"
	"io"
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
	c, cancel := r.prepare(ctx, argv, opts, opts.Timeout)
	defer cancel()
	// opts.Stdin is not fed to a stream: it reads /dev/null.
	out, err := c.cmd.StdoutPipe()
	if err == nil {
		err = c.cmd.Start()
	}
	if err != nil {
		// Counted as not started whatever the cause (a context that already ended
		// included), without a duration or a log line.
		metricCalls.WithLabelValues(Name(argv), OutcomeStart).Inc()
		e := c.newError()
		e.Err = err
		return e
	}
	start := time.Now()
	c.deliver(out, fn)
	err = c.cmd.Wait()
	elapsed := time.Since(start)

	end := c.classify(err)
	c.record(end, elapsed).Msg("exec stream")
	return end.err
}

// deliver hands each line read from out to fn, without its newline, until out ends
// or fails (a read error other than EOF is logged at debug level). A line longer than
// the 64 KiB buffer is delivered in pieces.
func (c *call) deliver(out io.Reader, fn func(line string)) {
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
				c.log.Debug().Err(rerr).Str("argv", Format(c.argv)).Msg("reading stream")
			}
			return
		}
	}
}
