package drbdagent

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"strings"

	"github.com/cairn-io/cairn/agents/execx"
	"github.com/cairn-io/cairn/drbd"
	"github.com/cairn-io/cairn/drbd/drbdutils"
)

// Resource is what a Kernel learns of a resource when it is adjusted: the Desired the
// installed file was rendered from, the local backing disks by volume number, and
// whether the file changed in this reconcile.
type Resource struct {
	Desired       drbd.Desired
	Disks         map[int]string
	ConfigChanged bool
}

// Kernel is everything of DRBD that needs the kernel module. Real drives it with
// drbdadm and drbdsetup; Sim simulates it on one machine. Every method is idempotent.
type Kernel interface {
	// Adjust brings the resource in line with its installed resource file (up,
	// attach, connect, options). Returns the tool's error (an *execx.Error).
	Adjust(ctx context.Context, r Resource) error
	// Down takes the resource down (disconnect, detach, remove); a resource that is
	// not up is not an error.
	Down(ctx context.Context, resource string) error
	// DelPeer drops the connection to node id peer; ForgetPeer then frees that node
	// id's bitmap slot (see drbdutils.ForgetPeer).
	DelPeer(ctx context.Context, resource string, peer int) error
	ForgetPeer(ctx context.Context, resource string, peer int) error
	// Resize grows volume's device to the smallest backing size of the resource's
	// diskful replicas, the local backing having grown to hold r's volume size first
	// (DRBD moves the internal metadata to the new end). It fails while a diskful peer
	// is not connected (DRBD's rule without --assume-peer-has-space); then the replica
	// that grows its disk last, connected to all, grows the device everywhere.
	Resize(ctx context.Context, r Resource, volume int) error
	// SuspendIO suspends I/O on every local device of the resource (minors); ResumeIO
	// resumes it. Both only while the resource is up.
	SuspendIO(ctx context.Context, resource string, minors []int) error
	ResumeIO(ctx context.Context, resource string, minors []int) error
	// GetGI returns the GI of an attached volume as seen for node id peer
	// (drbdsetup get-gi). Only for resources that are up.
	GetGI(ctx context.Context, resource string, volume, peer int) (drbd.GI, error)
	// Events runs one `drbdsetup events2` stream (initial dump, `exists -`, then
	// changes), handing every line to fn, until the stream ends (an error, or nil if it
	// ended on its own) or ctx ends.
	Events(ctx context.Context, fn func(line string)) error
}

// Real is the Kernel of a host with the DRBD module: drbdadm adjust with the agent's
// main configuration, drbdsetup for everything else, all through one executor.
type Real struct {
	Exec execx.Executor
	// Lines runs the events2 stream (the same Runner as Exec in production).
	Lines execx.LineRunner
	Adm   drbdutils.Adm
	// Drbdsetup is the drbdsetup program ("" = drbdsetup from PATH); tests point it
	// at a fake script.
	Drbdsetup string
	// ProcDRBD is the file the DRBD kernel module provides while it is loaded ("" =
	// /proc/drbd); tests point it elsewhere.
	ProcDRBD string
}

// ProcDRBD is the file the DRBD kernel module provides while it is loaded.
const ProcDRBD = "/proc/drbd"

// missingReporter is a Kernel that can tell a failed events2 stream from DRBD not being
// on the host (Real); the Follower then logs the failure once instead of at every
// restart.
type missingReporter interface {
	Missing(err error) string
}

var _ missingReporter = (*Real)(nil)

var _ Kernel = (*Real)(nil)

func (k *Real) setup(argv []string) []string {
	if k.Drbdsetup != "" {
		argv[0] = k.Drbdsetup
	}
	return argv
}

// Adjust runs `drbdadm -c <main> adjust <resource>`.
func (k *Real) Adjust(ctx context.Context, r Resource) error {
	_, err := k.Exec.Run(ctx, k.Adm.Adjust(r.Desired.Resource), execx.Options{})
	return err
}

// Down runs `drbdsetup down <resource>` (it needs no configuration file, so it also
// works after the file is gone).
func (k *Real) Down(ctx context.Context, resource string) error {
	_, err := k.Exec.Run(ctx, k.setup([]string{drbdutils.Drbdsetup, "down", resource}), execx.Options{})
	return err
}

// Resize runs `drbdadm -c <main> resize <resource>/<volume>`.
func (k *Real) Resize(ctx context.Context, r Resource, volume int) error {
	_, err := k.Exec.Run(ctx, k.Adm.Resize(r.Desired.Resource, volume), execx.Options{})
	return err
}

// SuspendIO runs drbdsetup suspend-io for every minor.
func (k *Real) SuspendIO(ctx context.Context, resource string, minors []int) error {
	for _, m := range minors {
		if _, err := k.Exec.Run(ctx, k.setup(drbdutils.SuspendIO(m)), execx.Options{}); err != nil {
			return err
		}
	}
	return nil
}

// ResumeIO runs drbdsetup resume-io for every minor.
func (k *Real) ResumeIO(ctx context.Context, resource string, minors []int) error {
	for _, m := range minors {
		if _, err := k.Exec.Run(ctx, k.setup(drbdutils.ResumeIO(m)), execx.Options{}); err != nil {
			return err
		}
	}
	return nil
}

// DelPeer runs drbdsetup del-peer.
func (k *Real) DelPeer(ctx context.Context, resource string, peer int) error {
	_, err := k.Exec.Run(ctx, k.setup(drbdutils.DelPeer(resource, peer)), execx.Options{})
	return err
}

// ForgetPeer runs drbdsetup forget-peer.
func (k *Real) ForgetPeer(ctx context.Context, resource string, peer int) error {
	_, err := k.Exec.Run(ctx, k.setup(drbdutils.ForgetPeer(resource, peer)), execx.Options{})
	return err
}

// GetGI runs drbdsetup get-gi and parses it.
func (k *Real) GetGI(ctx context.Context, resource string, volume, peer int) (drbd.GI, error) {
	out, err := k.Exec.Run(ctx, k.setup(drbdutils.DrbdsetupGetGI(resource, peer, volume)), execx.Options{})
	if err != nil {
		return drbd.GI{}, err
	}
	return drbdutils.ParseGetGI(out)
}

// EventsArgv is the events2 stream the agent follows: every resource, with
// statistics (out-of-sync, sizes). Without --now it prints the same initial dump as
// `drbdsetup events2 --now --statistics all` and then follows the changes.
func EventsArgv(drbdsetup string) []string {
	if drbdsetup == "" {
		drbdsetup = drbdutils.Drbdsetup
	}
	return []string{drbdsetup, "events2", "--statistics", "all"}
}

// Missing tells whether err, the end of an events2 stream that printed no line, means
// DRBD is not on this host, and names what is missing: drbdsetup, when it could not be
// started because it was not found (exec.ErrNotFound from the PATH lookup, or no such
// file for a path), and the DRBD kernel module, when ProcDRBD does not exist (checked
// whatever err is). Both are listed when both are missing. Returns "" when neither is:
// the stream failed for another reason.
func (k *Real) Missing(err error) string {
	var missing []string
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
		missing = append(missing, fmt.Sprintf("drbdsetup (%q not found)", EventsArgv(k.Drbdsetup)[0]))
	}
	proc := k.ProcDRBD
	if proc == "" {
		proc = ProcDRBD
	}
	if _, serr := os.Stat(proc); errors.Is(serr, fs.ErrNotExist) {
		missing = append(missing, "the DRBD kernel module (no "+proc+")")
	}
	return strings.Join(missing, ", ")
}

// Events runs `drbdsetup events2 --statistics all` until it exits or ctx ends.
func (k *Real) Events(ctx context.Context, fn func(line string)) error {
	if k.Lines == nil {
		return fmt.Errorf("kernel: no line runner for events2")
	}
	return k.Lines.Lines(ctx, EventsArgv(k.Drbdsetup), execx.Options{}, fn)
}
