package drbdagent

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
)

// The simulated kernel's model of a dead host. A real DRBD peer whose host is gone
// stops answering: its peers show the connection lost (Connecting, peer disk DUnknown),
// writes no longer reach its disk, and when it returns the two resync what changed
// meanwhile. In the sim a node is its agent process: `cairn agent --kernel sim` holds
// an exclusive flock on <Dir>/.alive/<node> for as long as it runs (Hold), and the
// kernel releases it however the process ends, SIGKILL included. A node whose file
// exists and is not locked is dead; a node without the file (a sim driven from Go tests
// without Hold) counts as alive, as before this model existed.

// Hold marks this node alive until release is called or the process ends.
func (s *Sim) Hold() (release func(), err error) {
	dir := filepath.Join(s.Dir, ".alive")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(dir, s.Node), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, errors.New("sim: another agent of node " + s.Node + " is running on this simulation directory")
		}
		return nil, err
	}
	return func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
}

// simDead reports whether node's agent is gone: its liveness file exists and nobody
// holds its lock.
func simDead(dir, node string) bool {
	f, err := os.OpenFile(filepath.Join(dir, ".alive", node), os.O_RDWR, 0)
	if err != nil {
		return false // no file: a node that never said (see above), or unreadable
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return false // held: alive
	}
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return true
}
