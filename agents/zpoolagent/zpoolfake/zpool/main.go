// Command zpool is a FAKE zpool(8) for the agent's end-to-end tests and benchmarks: the
// real one needs the ZFS kernel module. See package zpoolfake for what it does. The
// environment configures it:
//
//	ZPOOL_FAKE_STATE        state file of this host's imports (required)
//	ZPOOL_FAKE_HOSTID       this host's hostid in hex (default: the system's, as OpenZFS reads it)
//	ZPOOL_FAKE_HOSTNAME     this host's name in the labels (default: os.Hostname)
//	ZPOOL_FAKE_FAIL_IMPORT  make every import fail with this stderr (exit 1)
//	ZPOOL_FAKE_FAIL_EXPORT  make every export without -f fail with this stderr
//	ZPOOL_FAKE_LOG          append every call's arguments, one line each, to this file
package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/cairn-io/cairn/agents/zpoolagent/zpoolfake"
)

func main() {
	state := os.Getenv("ZPOOL_FAKE_STATE")
	if state == "" {
		fmt.Fprintln(os.Stderr, "fake zpool: ZPOOL_FAKE_STATE is not set")
		os.Exit(2)
	}
	hostid, err := zpoolfake.HostIDFromEnv(os.Getenv("ZPOOL_FAKE_HOSTID"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "fake zpool: ZPOOL_FAKE_HOSTID:", err)
		os.Exit(2)
	}
	name := os.Getenv("ZPOOL_FAKE_HOSTNAME")
	if name == "" {
		name, _ = os.Hostname()
	}
	if lp := os.Getenv("ZPOOL_FAKE_LOG"); lp != "" {
		if f, err := os.OpenFile(lp, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644); err == nil {
			fmt.Fprintln(f, strings.Join(os.Args[1:], " "))
			f.Close()
		}
	}
	f := &zpoolfake.Fake{StateFile: state, HostID: hostid, Hostname: name,
		FailImport: os.Getenv("ZPOOL_FAKE_FAIL_IMPORT"), FailExport: os.Getenv("ZPOOL_FAKE_FAIL_EXPORT")}
	os.Exit(f.Main(os.Args[1:], os.Stdout, os.Stderr))
}
