package mmp

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// Where the system hostid lives, in the order OpenZFS's get_system_hostid reads them: the
// SPL module's hostid when it is loaded and set, else the first 4 bytes of /etc/hostid.
const (
	SPLHostIDPath = "/proc/sys/kernel/spl/hostid"
	EtcHostIDPath = "/etc/hostid"
)

// SystemHostID returns the hostid OpenZFS uses on this host (see ReadHostID with the
// standard paths); 0 when none is set.
func SystemHostID() uint32 { return ReadHostID(SPLHostIDPath, EtcHostIDPath) }

// ReadHostID returns the hostid OpenZFS would use: the SPL module's (hex text at
// splPath) when non-zero, else the first 4 bytes of the hostid file at etcPath,
// little-endian as gethostid(3) stores it on this architecture; 0 when neither is there
// or readable.
func ReadHostID(splPath, etcPath string) uint32 {
	if b, err := os.ReadFile(splPath); err == nil {
		if v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 16, 32); err == nil && v != 0 {
			return uint32(v)
		}
	}
	f, err := os.Open(etcPath)
	if err != nil {
		return 0
	}
	defer f.Close()
	var b [4]byte
	if _, err := io.ReadFull(f, b[:]); err != nil {
		return 0
	}
	return binary.LittleEndian.Uint32(b[:])
}

// ParseHostID parses a hostid in hex, with or without 0x, up to 32 bits. The error names
// the text; callers wrap it into their own field error.
func ParseHostID(s string) (uint32, error) {
	t := strings.TrimPrefix(strings.TrimPrefix(strings.TrimSpace(s), "0x"), "0X")
	v, err := strconv.ParseUint(t, 16, 32)
	if err != nil || t == "" {
		return 0, fmt.Errorf("%q is not a 32-bit hex number (e.g. 0x1a2b3c4d)", s)
	}
	return uint32(v), nil
}

// KernelHostID returns the hostid the SPL module holds (hex text at splPath) when it is
// loaded and set; ok is false otherwise (no module, unreadable, 0).
func KernelHostID(splPath string) (uint32, bool) {
	b, err := os.ReadFile(splPath)
	if err != nil {
		return 0, false
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 16, 32)
	if err != nil || v == 0 {
		return 0, false
	}
	return uint32(v), true
}

// CheckHostIDMatchesKernel refuses a hostid given to an agent that differs from the
// kernel's (splPath): the kernel's MMP thread writes the pool with its own hostid, so the
// agent's watcher would take every import of its own for another host's and fence it.
// nil when they match or the kernel has none.
func CheckHostIDMatchesKernel(hostid uint32, splPath string) error {
	k, ok := KernelHostID(splPath)
	if !ok || k == hostid {
		return nil
	}
	return fmt.Errorf("--hostid %s differs from the kernel's hostid %s (%s): the kernel writes the pool's labels with its own, "+
		"so every import would look foreign; drop --hostid or give the kernel's", HostID(hostid), HostID(k), splPath)
}
