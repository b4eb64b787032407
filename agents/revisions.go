package agents

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/cairn-io/cairn/agents/fsx"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

var (
	metricStale = promauto.NewCounter(prometheus.CounterOpts{Name: "cairn_agent_stale_desired_total",
		Help: "Desired-state messages dropped because their revision was older than one already seen for the subject."})
	metricFenced = promauto.NewCounter(prometheus.CounterOpts{Name: "cairn_agent_fenced_desired_total",
		Help: "Desired-state messages dropped because their lease token (Cairn-Lease) was older than the newest one seen on any of the node's subjects: sent by a deposed leader."})
)

// revisions keeps the highest revision seen per desired-state subject, and the body that
// came with it, so that the agent never goes back to an older desired state: one that a
// serve whose views lag publishes after a newer one, or one the stream hands back as
// the subject's latest after a restart. With a directory, each subject's mark is a file
// (<dir>/<subject>: the revision, a newline, the body), written durably before the
// message is acted on; removals keep theirs (a tombstone), so the mark survives both a
// restart and the removal of whatever the subject described. Marks of removed subjects
// stay: one small file per subject the node ever held.
//
// The lease fence: the newest lease token (events.LeaseHeader) seen on any of the node's
// subjects. A message with an older token comes from a serve that lost the side-effect
// lease (a deposed leader whose publish landed late) and is dropped whatever its
// revision; the first message of a newer token moves the fence. The fence is kept in
// <dir>/lease, written durably before the message is acted on.
type revisions struct {
	dir string // "" = in memory only

	mu    sync.Mutex
	epoch string // the epoch the marks count in (events.EpochHeader); "" = none yet
	lease uint64 // the newest lease token seen; 0 = none yet
	marks map[string]mark
}

// epochFile holds the epoch of the marks in dir, leaseFile the lease fence; neither is
// a subject (no dots).
const (
	epochFile = "epoch"
	leaseFile = "lease"
)

type mark struct {
	rev  uint64
	body []byte
}

// openRevisions loads the marks in dir (created when missing); "" keeps them in memory.
func openRevisions(dir string) (*revisions, error) {
	r := &revisions{dir: dir, marks: map[string]mark{}}
	if dir == "" {
		return r, nil
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, err
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	for _, e := range ents {
		if !e.Type().IsRegular() || filepath.Ext(e.Name()) == ".tmp" {
			continue
		}
		if e.Name() == leaseFile {
			b, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err != nil {
				return nil, fmt.Errorf("lease fence: %w", err)
			}
			if r.lease, err = strconv.ParseUint(string(bytes.TrimSpace(b)), 10, 64); err != nil {
				return nil, fmt.Errorf("lease fence %s is damaged (%q): fix or remove it", filepath.Join(dir, e.Name()), b)
			}
			continue
		}
		if e.Name() == epochFile {
			b, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err != nil {
				return nil, fmt.Errorf("revision epoch: %w", err)
			}
			r.epoch = string(bytes.TrimSpace(b))
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("revision mark %s: %w", e.Name(), err)
		}
		head, body, _ := bytes.Cut(b, []byte("\n"))
		rev, err := strconv.ParseUint(string(head), 10, 64)
		if err != nil {
			// Fail closed: an unreadable mark could let an older desired state in.
			return nil, fmt.Errorf("revision mark %s is damaged (%q): fix or remove it after checking the subject's desired state", e.Name(), head)
		}
		r.marks[e.Name()] = mark{rev, body}
	}
	return r, nil
}

// verdict is what admit decided for one message.
type verdict int

const (
	accept  verdict = iota // newer or equal: act on it
	stale                  // older than the mark: drop it
	restore                // older, but the agent holds nothing for the subject: act on the mark's body
	fenced                 // sent under an older lease token than one already seen: drop it
)

// admit decides on a message of subject with revision rev and lease token in epoch (0
// and "": the message carries none, from a serve older than revisions or without a
// lease) and records a newer mark, and a newer lease fence, durably before it returns
// accept. A message with a token older than the fence is fenced (or restore, when the
// agent holds nothing for a subject that has a mark). A message without a revision is
// accepted only while the subject has no mark. A message of another epoch (the control
// plane was set up anew, with a new event stream and lease) clears every mark and the
// fence first.
func (r *revisions) admit(subject, epoch string, token, rev uint64, body []byte, holding bool) (verdict, mark, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if epoch != "" && epoch != r.epoch {
		if err := r.reset(epoch); err != nil {
			return stale, mark{}, err
		}
	}
	m, ok := r.marks[subject]
	switch {
	case token != 0 && token < r.lease && ok && !holding:
		return restore, m, nil
	case token != 0 && token < r.lease:
		return fenced, m, nil
	case token > r.lease:
		if r.dir != "" {
			if err := fsx.WriteAtomic(filepath.Join(r.dir, leaseFile), []byte(strconv.FormatUint(token, 10)+"\n"), 0o640); err != nil {
				return stale, m, fmt.Errorf("record lease fence %d: %w", token, err)
			}
		}
		r.lease = token
	}
	switch {
	case !ok && rev == 0:
		return accept, mark{}, nil
	case ok && (rev < m.rev || rev == 0):
		if !holding {
			return restore, m, nil
		}
		return stale, m, nil
	case ok && rev == m.rev:
		return accept, m, nil
	}
	nm := mark{rev, append([]byte(nil), body...)}
	if r.dir != "" {
		if err := fsx.WriteAtomic(filepath.Join(r.dir, subject), append([]byte(strconv.FormatUint(rev, 10)+"\n"), body...), 0o640); err != nil {
			return stale, m, fmt.Errorf("record revision %d of %s: %w", rev, subject, err)
		}
	}
	r.marks[subject] = nm
	return accept, nm, nil
}

// reset forgets every mark and records epoch (callers hold mu).
func (r *revisions) reset(epoch string) error {
	if r.dir != "" {
		for s := range r.marks {
			if err := os.Remove(filepath.Join(r.dir, s)); err != nil && !os.IsNotExist(err) {
				return fmt.Errorf("forget revision marks of epoch %s: %w", r.epoch, err)
			}
		}
		if err := os.Remove(filepath.Join(r.dir, leaseFile)); err != nil && !os.IsNotExist(err) {
			return fmt.Errorf("forget the lease fence of epoch %s: %w", r.epoch, err)
		}
		if err := fsx.WriteAtomic(filepath.Join(r.dir, epochFile), []byte(epoch+"\n"), 0o640); err != nil {
			return fmt.Errorf("record revision epoch: %w", err)
		}
	}
	clear(r.marks)
	r.epoch, r.lease = epoch, 0
	return nil
}

func parseRevision(v string) (uint64, error) {
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("not a revision: %q", v)
	}
	return n, nil
}
