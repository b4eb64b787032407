package drbdagent

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/cairn-io/cairn/agents/fsx"
)

// Paths are the host paths the agent uses, all under one root ("/" on a real host; a
// per-node directory when several simulated nodes share a machine).
type Paths struct {
	Root string
	// ConfDir holds the installed resource files (<ConfDir>/<rd>.res).
	ConfDir string
	// MainConf is drbdadm's -c file; it includes <ConfDir>/*.res.
	MainConf string
	// StateDir holds the per-resource state files (<StateDir>/<rd>.json).
	StateDir string
	// StagedDir holds resource files being checked, outside the include glob.
	StagedDir string
}

// NewPaths returns the paths under root (made absolute; "" means "/"): <root>/etc/drbd.conf,
// <root>/etc/drbd.d, <root>/var/lib/cairn/agent and <root>/var/lib/cairn/agent/staged.
func NewPaths(root string) Paths {
	if root == "" {
		root = "/"
	}
	if abs, err := filepath.Abs(root); err == nil {
		root = abs
	}
	return Paths{
		Root:      root,
		ConfDir:   filepath.Join(root, "etc", "drbd.d"),
		MainConf:  filepath.Join(root, "etc", "drbd.conf"),
		StateDir:  filepath.Join(root, "var", "lib", "cairn", "agent"),
		StagedDir: filepath.Join(root, "var", "lib", "cairn", "agent", "staged"),
	}
}

// ResFile is the installed resource file of rd.
func (p Paths) ResFile(rd string) string { return filepath.Join(p.ConfDir, rd+".res") }

// StateFile is the state file of rd.
func (p Paths) StateFile(rd string) string { return filepath.Join(p.StateDir, rd+".json") }

// Prepare creates the directories and, when there is none, a main configuration that
// includes every installed resource file. An existing main configuration (a
// distribution's /etc/drbd.conf) is left alone: it must include <ConfDir>/*.res.
func (p Paths) Prepare() error {
	for _, d := range []string{p.ConfDir, p.StateDir, p.StagedDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("agent directories: %w", err)
		}
	}
	if _, err := os.Stat(p.MainConf); err == nil {
		return nil
	}
	body := fmt.Sprintf("# Written by the Cairn agent.\ninclude %q;\n", filepath.Join(p.ConfDir, "*.res"))
	return fsx.WriteAtomic(p.MainConf, []byte(body), 0o644)
}
