// Package drbdutils is how the agent speaks to drbd-utils for the drbd model: argv
// builders for drbdmeta, drbdadm and drbdsetup (Adm wraps drbdadm's checks), the
// resource file renderer (Render), the get-gi output parser and the drbdsetup events2
// parser. It builds and
// parses; it runs nothing (agents/execx runs the argv).
package drbdutils

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/cairn-io/cairn/drbd"
)

// Command builders: each returns a plain argv (argv[0] is the program name, resolved
// through PATH by the executor) and runs nothing. Cairn's volumes use internal
// metadata in the v09 format, so the drbdmeta builders take the volume's minor and
// backing disk.
//
// Every drbdmeta builder passes --force. Without it drbdmeta asks for confirmation on
// a terminal and, with no terminal, set-gi prints "Operation canceled." and exits 0
// WITHOUT writing; it also refuses plain files ("is not a block device!"), which file
// providers and tests use. --force only skips those questions; drbdmeta still refuses
// a device the kernel has attached.

// Programs the builders call.
const (
	Drbdmeta  = "drbdmeta"
	Drbdadm   = "drbdadm"
	Drbdsetup = "drbdsetup"
)

func drbdmeta(minor int, disk string, nodeID *int, cmd ...string) []string {
	argv := []string{Drbdmeta, "--force"}
	if nodeID != nil {
		argv = append(argv, "--node-id", strconv.Itoa(*nodeID))
	}
	argv = append(argv, strconv.Itoa(minor), "v09", disk, "internal")
	return append(argv, cmd...)
}

// CreateMD returns `drbdmeta --force <minor> v09 <disk> internal create-md <maxPeers>`:
// fresh metadata (current UUID 4, bitmap all zero) with maxPeers bitmap slots (see
// MaxPeers). It overwrites any metadata on disk; call it once per incarnation.
func CreateMD(minor int, disk string, maxPeers int) []string {
	return drbdmeta(minor, disk, nil, "create-md", strconv.Itoa(maxPeers))
}

// GetGI returns `drbdmeta --force --node-id <nodeID> <minor> v09 <disk> internal get-gi`,
// which prints the GI as seen for peer nodeID (parse it with ParseGetGI). Works only
// while the disk is not attached; while the resource is up use DrbdsetupGetGI.
func GetGI(minor int, disk string, nodeID int) []string {
	return drbdmeta(minor, disk, &nodeID, "get-gi")
}

// GetGIOfFile returns `drbdmeta --force --node-id <nodeID> - v09 <disk> internal get-gi`:
// GetGI without a minor, so drbdmeta neither asks the kernel whether the minor is
// attached (`drbdsetup <minor> dstate`, which runs `modprobe drbd` where the module is
// not loaded: ~45 ms) nor takes the minor's lock (/var/lock/drbd-147-<minor>). Only for
// metadata no kernel can have attached: the simulated kernel's, which keeps an
// "attached" disk's metadata in its file and serialises access with its own lock.
func GetGIOfFile(disk string, nodeID int) []string {
	return []string{Drbdmeta, "--force", "--node-id", strconv.Itoa(nodeID), "-", "v09", disk, "internal", "get-gi"}
}

// SetGI returns `drbdmeta --force --node-id <nodeID> <minor> v09 <disk> internal set-gi <gi>`:
// every non-empty field of gi replaces the stored one (see Metadata.SetGI).
func SetGI(minor int, disk string, nodeID int, gi string) []string {
	return drbdmeta(minor, disk, &nodeID, "set-gi", gi)
}

// SeedArgv returns the SetGI argv that carries out seed s on the volume's disk.
func SeedArgv(minor int, disk string, s drbd.Seed) []string {
	return SetGI(minor, disk, s.NodeID, s.GI)
}

// DumpMD returns `drbdmeta --force <minor> v09 <disk> internal dump-md`: the whole
// metadata as text (for diagnosis; the layout lines start with "# md_size_sect").
func DumpMD(minor int, disk string) []string {
	return drbdmeta(minor, disk, nil, "dump-md")
}

// WipeMD returns `drbdmeta --force <minor> v09 <disk> internal wipe-md`, which destroys
// the metadata (the disk is then no DRBD disk; dstate says "No valid meta data found").
func WipeMD(minor int, disk string) []string {
	return drbdmeta(minor, disk, nil, "wipe-md")
}

// CheckResize returns `drbdmeta --force <minor> v09 <disk> internal check-resize`: after
// the backing device of a DETACHED volume grew, it moves the internal metadata from the
// old end of the device to the new one (without it the metadata is not found there and
// the disk no longer attaches). A device whose size did not change is left alone. While
// attached, DRBD's own resize (Adm.Resize) moves it.
func CheckResize(minor int, disk string) []string {
	return drbdmeta(minor, disk, nil, "check-resize")
}

// Dstate returns `drbdmeta --force <minor> v09 <disk> internal dstate`, which prints the
// disk state the metadata implies ("Inconsistent", "Consistent", "Outdated", …) and
// exits 1 with "No valid meta data found" when there is none.
func Dstate(minor int, disk string) []string {
	return drbdmeta(minor, disk, nil, "dstate")
}

// DrbdsetupGetGI returns `drbdsetup get-gi <resource> <peerNodeID> <volume>`: the GI of
// an attached volume as seen for one peer (needs the kernel module).
func DrbdsetupGetGI(resource string, peerNodeID, volume int) []string {
	return []string{Drbdsetup, "get-gi", resource, strconv.Itoa(peerNodeID), strconv.Itoa(volume)}
}

// SuspendIO returns `drbdsetup suspend-io <minor>`: the device holds new I/O (queued,
// not failed) until ResumeIO, so the backing volume can be snapshotted consistently.
func SuspendIO(minor int) []string { return []string{Drbdsetup, "suspend-io", strconv.Itoa(minor)} }

// ResumeIO returns `drbdsetup resume-io <minor>`.
func ResumeIO(minor int) []string { return []string{Drbdsetup, "resume-io", strconv.Itoa(minor)} }

// DelPeer returns `drbdsetup del-peer <resource> <peerNodeID>`, which drops the
// connection to a removed replica. drbdsetup addresses the peer by node id, so it
// works after the peer is gone from the resource file.
func DelPeer(resource string, peerNodeID int) []string {
	return []string{Drbdsetup, "del-peer", resource, strconv.Itoa(peerNodeID)}
}

// ForgetPeer returns `drbdsetup forget-peer <resource> <peerNodeID>` (after DelPeer):
// the kernel frees the removed peer's bitmap slot and resets it to day 0, so the slot
// can serve a later replica (see MaxPeers) and a replica re-added under the same node
// id still gets a bitmap resync.
func ForgetPeer(resource string, peerNodeID int) []string {
	return []string{Drbdsetup, "forget-peer", resource, strconv.Itoa(peerNodeID)}
}

// Adm holds drbdadm's global options.
type Adm struct {
	// Config is the main configuration file (-c); empty means drbdadm's default
	// (/etc/drbd.conf).
	Config string
	// DryRun (-d) prints the drbdsetup/drbdmeta calls instead of running them.
	DryRun bool
}

func (a Adm) argv(cmd ...string) []string {
	argv := []string{Drbdadm}
	if a.Config != "" {
		argv = append(argv, "-c", a.Config)
	}
	if a.DryRun {
		argv = append(argv, "-d")
	}
	return append(argv, cmd...)
}

// Adjust returns `drbdadm [-c CONFIG] [-d] adjust <resource>`: bring the kernel's
// state of the resource to what the file says (up, attach, connect, options).
func (a Adm) Adjust(resource string) []string { return a.argv("adjust", resource) }

// Resize returns `drbdadm [-c CONFIG] [-d] resize <resource>/<volume>`: DRBD grows the
// device to the smallest backing size of all its diskful replicas (moving the internal
// metadata to the new end of the local disk) and marks the new area for resync. DRBD
// refuses it while a diskful peer is not connected (without --assume-peer-has-space,
// which Cairn never passes): the replica that grows its disk last, connected to all,
// grows the device everywhere.
func (a Adm) Resize(resource string, volume int) []string {
	return a.argv("resize", resource+"/"+strconv.Itoa(volume))
}

// Down returns `drbdadm [-c CONFIG] [-d] down <resource>`.
func (a Adm) Down(resource string) []string { return a.argv("down", resource) }

// ShNop returns `drbdadm [-c CONFIG] sh-nop`, which parses the configuration and checks
// it (duplicate minors, node ids, addresses; unknown keywords; bad values): exit 0 when
// valid, 10 with "file:line: message" on stderr when not.
func (a Adm) ShNop() []string { return a.argv("sh-nop") }

// CheckNew returns `drbdadm -c CONFIG -t <newFile> [-E <excludeFile>] sh-nop`: check a
// resource file that is not installed yet against the installed configuration. When it
// replaces an installed file, pass that file as excludeFile so the new version is not
// compared with the old one.
func (a Adm) CheckNew(newFile, excludeFile string) []string {
	cmd := []string{"-t", newFile}
	if excludeFile != "" {
		cmd = append(cmd, "-E", excludeFile)
	}
	return a.argv(append(cmd, "sh-nop")...)
}

// ParseDstate reads the output of Dstate: the last non-empty line, e.g. "Consistent".
// Returns an error for empty output or drbdmeta's "No valid meta data found".
func ParseDstate(out []byte) (string, error) {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	last := strings.TrimSpace(lines[len(lines)-1])
	switch {
	case last == "":
		return "", fmt.Errorf("dstate printed nothing")
	case strings.Contains(last, "No valid meta data found"):
		return "", fmt.Errorf("dstate: no valid DRBD metadata on the disk")
	case strings.ContainsAny(last, " \t"):
		return "", fmt.Errorf("dstate output %q is not a disk state", clip(last, 100))
	}
	return last, nil
}
