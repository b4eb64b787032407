package zpoolagent

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/cairn-io/cairn/agents/fsx"
)

// The contested latch: the grant under which another host wrote the pool, kept in the
// state directory across restarts.

// The contested latch: <StateDir>/<pool>.contested holds the grant and the other host.
type latch struct {
	GrantSeq      uint64    `json:"grant_seq"`
	ForeignHostID string    `json:"foreign_hostid,omitempty"`
	ForeignHost   string    `json:"foreign_host,omitempty"`
	At            time.Time `json:"at"`
}

func (w *worker) latchPath() string {
	if w.r.opts.StateDir == "" {
		return ""
	}
	return filepath.Join(w.r.opts.StateDir, w.pool+".contested")
}

// readLatch reads the contested latch: the grant and the other host, or why the file
// exists but cannot be used (the agent then imports under no grant: fail closed).
func (w *worker) readLatch() (uint64, [2]string, string) {
	p := w.latchPath()
	if p == "" {
		return 0, [2]string{}, ""
	}
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, [2]string{}, ""
	}
	if err != nil {
		w.log.Error().Err(err).Str("file", p).Msg("contested latch unreadable: no import under any grant")
		return 0, [2]string{}, err.Error()
	}
	var l latch
	if err := json.Unmarshal(b, &l); err != nil || l.GrantSeq == 0 {
		why := fmt.Sprintf("%s is not a latch (%v)", p, err)
		w.log.Error().Str("file", p).Msg("contested latch damaged: no import under any grant")
		return 0, [2]string{}, why
	}
	w.log.Warn().Uint64("grant", l.GrantSeq).Msg("contested latch found: no import under grant " + strconv.FormatUint(l.GrantSeq, 10))
	return l.GrantSeq, [2]string{l.ForeignHostID, l.ForeignHost}, ""
}

func (w *worker) writeLatch(grant uint64) error {
	p := w.latchPath()
	if p == "" {
		return nil
	}
	b, _ := json.Marshal(latch{GrantSeq: grant, ForeignHostID: w.lastForgn[0], ForeignHost: w.lastForgn[1], At: w.now().UTC()})
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return fsx.WriteAtomic(p, b, 0o644)
}
