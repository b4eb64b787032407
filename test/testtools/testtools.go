// Package testtools finds the external programs that tests drive for real (drbdadm,
// drbdmeta, the nats CLI). Without one, a test skips on a developer's machine; with
// CAIRN_REQUIRE_TOOLS=1 (which .ci/run sets, after installing them) it fails instead,
// so a broken install step cannot turn the real-tool tests into silent skips. It also
// sets how many cases a rapid property test runs (RapidChecks) and starts a bare
// JetStream server (JetStream).
package testtools

import (
	"flag"
	"os"
	"os/exec"
	"strconv"
	"testing"
)

// RequireEnv names the environment variable that turns a missing tool into a failure.
const RequireEnv = "CAIRN_REQUIRE_TOOLS"

// Path returns where the program name is: on PATH, or in /usr/sbin (where drbd-utils
// installs, often not on a user's PATH). A missing program skips the test, or fails it
// under CAIRN_REQUIRE_TOOLS=1.
func Path(tb testing.TB, name string) string {
	tb.Helper()
	p, ok := lookup(name)
	if !ok {
		missing(tb, name)
	}
	return p
}

// Need checks every program as Path does.
func Need(tb testing.TB, names ...string) {
	tb.Helper()
	for _, n := range names {
		Path(tb, n)
	}
}

// Have reports whether the program is there, for a test that checks more when it is:
// false (and a log line) on a developer's machine without it, a failure under
// CAIRN_REQUIRE_TOOLS=1.
func Have(tb testing.TB, name string) bool {
	tb.Helper()
	if _, ok := lookup(name); ok {
		return true
	}
	if required() {
		tb.Fatalf("%s is not installed, and %s=1 requires it", name, RequireEnv)
		return false
	}
	tb.Logf("%s is not installed: its checks are left out", name)
	return false
}

func lookup(name string) (string, bool) {
	if p, err := exec.LookPath(name); err == nil {
		return p, true
	}
	if p := "/usr/sbin/" + name; isFile(p) {
		return p, true
	}
	return "", false
}

func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

func required() bool { return os.Getenv(RequireEnv) == "1" }

func missing(tb testing.TB, name string) {
	tb.Helper()
	if required() {
		tb.Fatalf("%s is not installed, and %s=1 requires it (.ci/run installs it)", name, RequireEnv)
		return
	}
	tb.Skipf("%s is not installed (.ci/run installs it); set %s=1 to fail instead", name, RequireEnv)
}

// Unavailable ends a test whose prerequisite (not a program on PATH: a fetched tool
// set, a compiler) is missing: it skips on a developer's machine and fails under
// CAIRN_REQUIRE_TOOLS=1, where .ci/run has provided it.
func Unavailable(tb testing.TB, format string, args ...any) {
	tb.Helper()
	if required() {
		tb.Fatalf(format+" (and %s=1 requires it)", append(args, RequireEnv)...)
		return
	}
	tb.Skipf(format, args...)
}

// RapidChecks makes the rapid property test t run n cases, unless -rapid.checks was
// given on the command line (that count wins); the default is restored afterwards.
func RapidChecks(t testing.TB, n int) {
	f := flag.Lookup("rapid.checks")
	if f == nil || f.Value.String() != f.DefValue {
		return
	}
	if err := f.Value.Set(strconv.Itoa(n)); err != nil {
		t.Fatalf("rapid.checks: %v", err)
	}
	t.Cleanup(func() { _ = f.Value.Set(f.DefValue) })
}
