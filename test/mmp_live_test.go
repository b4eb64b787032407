package test

import (
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairn-io/cairn/storage/zfs/zfsimage"
	"github.com/cairn-io/cairn/test/testtools"
	"github.com/stretchr/testify/require"
)

// mmpVerdict is the part of `cairn mmp check --json` the live test reads.
type mmpVerdict struct {
	Importable bool   `json:"importable"`
	Active     bool   `json:"active"`
	Code       string `json:"code"`
	Message    string `json:"message"`
	LastHost   *struct {
		HostID   string `json:"hostid"`
		Hostname string `json:"hostname"`
	} `json:"last_host"`
	DurationMS int64 `json:"duration_ms"`
	Reads      int   `json:"reads"`
	ElapsedMS  int64 `json:"elapsed_ms"`
}

func mmpCheck(t *testing.T, args ...string) (mmpVerdict, int, time.Duration) {
	t.Helper()
	start := time.Now()
	cmd := exec.Command(cairnBin, append([]string{"mmp", "check", "--json"}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("cairn mmp check: %v", err)
	}
	var v mmpVerdict
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("cairn mmp check output %q: %v (stderr %s)", out, err, stderr.String())
	}
	return v, code, time.Since(start)
}

// TestMMPLiveWriter runs a real OpenZFS writer (userspace libzpool, no kernel module)
// holding a multihost pool on a file with a 100 ms MMP interval, and the real cairn
// binary as another host. It needs the OpenZFS 2.1.11 packages extracted by
// test/zfsimages/fetch-zfs.sh into $CAIRN_ZFS_TOOLS (.ci/run does that) and gcc.
func TestMMPLiveWriter(t *testing.T) {
	dir, gen := liveMMPGen(t, "live MMP")
	vdevs := filepath.Join(dir, "vdevs")
	if err := os.Mkdir(vdevs, 0o700); err != nil {
		t.Fatal(err)
	}
	vdev := newVdev(t, filepath.Join(vdevs, "vdev0.img"))
	writer := startWriter(t, gen, dir, vdev, "livepool", "0xaaaa0001", "writer-a")

	// Another host sees the live writer within the first re-reads.
	v, code, took := mmpCheck(t, "--hostid", "0xbbbb0002", vdev)
	if code != 1 || !v.Active || v.Code != "activity_detected" {
		t.Fatalf("check against a live writer: exit %d, %+v", code, v)
	}
	if v.Reads > 3 || took > 5*time.Second {
		t.Fatalf("activity seen only after %d re-reads (%s)", v.Reads, took)
	}
	if v.LastHost == nil || v.LastHost.Hostname != "writer-a" || v.LastHost.HostID != "0xaaaa0001" {
		t.Fatalf("last host %+v", v.LastHost)
	}
	t.Logf("live writer: exit %d after %d re-reads in %s: %s", code, v.Reads, took.Round(time.Millisecond), v.Message)
	// The same through a block device (a loop device on the writer's file; read with
	// O_DIRECT), where the machine allows it.
	if loop := attachLoop(t, vdev); loop != "" {
		if v, code, _ := mmpCheck(t, "--hostid", "0xbbbb0002", loop); code != 1 || v.Code != "activity_detected" {
			t.Fatalf("check through %s: exit %d, %+v", loop, code, v)
		}
	}
	// OpenZFS's own import (libzpool, same hostid as ours) agrees: refused with EREMOTEIO.
	if code, out := zfsImport(t, gen, vdevs, "0xbbbb0002"); code != 3 {
		t.Fatalf("libzpool import of the live pool: exit %d, want 3 (EREMOTEIO)\n%s", code, out)
	}

	// The writer dies without exporting: the pool stays "active" on disk, but after the
	// computed duration (fail 10 × 100 ms × 2 = 2 s, plus 0-25 %) it is importable.
	if err := writer.Process.Signal(os.Kill); err != nil {
		t.Fatal(err)
	}
	_ = writer.Wait()
	v, code, took = mmpCheck(t, "--hostid", "0xbbbb0002", vdev)
	if code != 0 || !v.Importable || v.Code != "no_activity" {
		t.Fatalf("check after kill -9: exit %d, %+v", code, v)
	}
	if v.DurationMS < 2000 || v.DurationMS >= 2500 || v.ElapsedMS < v.DurationMS || took < 2*time.Second {
		t.Fatalf("duration %d ms, elapsed %d ms, took %s: want 2000-2500 ms and the whole of it", v.DurationMS, v.ElapsedMS, took)
	}
	t.Logf("after kill -9: exit %d after %d re-reads, duration %d ms, took %s", code, v.Reads, v.DurationMS, took.Round(time.Millisecond))

	// The same host that crashed must check too (2.3.6+ rule), and without a hostid it
	// is refused.
	if v, code, _ := mmpCheck(t, "--hostid", "0", vdev); code != 2 || v.Code != "no_hostid" {
		t.Fatalf("check with hostid 0: exit %d, %+v", code, v)
	}
	// And OpenZFS's own import now succeeds too (it imports and exports the pool: last).
	if code, out := zfsImport(t, gen, vdevs, "0xbbbb0002"); code != 0 {
		t.Fatalf("libzpool import after kill -9: exit %d, want 0\n%s", code, out)
	}
	if v, code, _ := mmpCheck(t, "--hostid", "0xbbbb0002", vdev); code != 0 || v.Code != "exported_by_this_host" {
		t.Fatalf("check after our own export: exit %d, %+v", code, v)
	}
}

// attachLoop attaches file to a free loop device read-only and returns its path, or ""
// (logged) when losetup is missing or not allowed here. The device is detached at cleanup.
func attachLoop(t *testing.T, file string) string {
	t.Helper()
	out, err := exec.Command("losetup", "-f", "--show", "-r", file).Output()
	if err != nil {
		t.Logf("no loop device (%v): block device leg skipped", err)
		return ""
	}
	dev := strings.TrimSpace(string(out))
	t.Cleanup(func() { _ = exec.Command("losetup", "-d", dev).Run() })
	return dev
}

// zfsImport imports pool livepool from dir with libzpool (mmpgen -x import) as hostid:
// exit 0 imported (and exported again), 3 refused by the activity check.
func zfsImport(t *testing.T, gen, dir, hostid string) (int, string) {
	t.Helper()
	cmd := exec.Command(gen, "-c", filepath.Join(filepath.Dir(dir), "import-cache"), "-x", "import", "livepool", dir)
	cmd.Env = append(os.Environ(), "ZFS_HOSTID="+hostid)
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), string(out)
	} else if err != nil {
		t.Fatal(err)
	}
	return 0, string(out)
}

// startWriter runs an OpenZFS userspace writer (mmpgen -x hold) that creates pool on
// vdev as hostid/hostname with a 100 ms MMP interval and keeps it imported; it returns
// once the writer printed "ready" (and a few MMP writes later).
func startWriter(t *testing.T, gen, dir, vdev, pool, hostid, hostname string) *exec.Cmd {
	t.Helper()
	return startMMPGen(t, gen, hostid, hostname, "-m", "-i", "100", "-n", hostname, "-c", filepath.Join(dir, hostname+".cache"), "-x", "hold", pool, vdev)
}

// startMMPGen runs mmpgen with args as hostid and returns once it printed "ready" (and a
// few MMP writes later); it is killed at cleanup.
func startMMPGen(t *testing.T, gen, hostid, hostname string, args ...string) *exec.Cmd {
	t.Helper()
	w := exec.Command(gen, args...)
	w.Env = append(os.Environ(), "ZFS_HOSTID="+hostid)
	var werr syncBuffer
	w.Stderr = &werr
	stdout, err := w.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, w.Start())
	t.Cleanup(func() {
		if w.ProcessState == nil {
			_ = w.Process.Kill()
			_ = w.Wait()
		}
	})
	ready := make(chan bool, 1)
	go func() {
		buf := make([]byte, 64)
		var got strings.Builder
		for {
			n, err := stdout.Read(buf)
			got.Write(buf[:n])
			if strings.Contains(got.String(), "ready") {
				ready <- true
				_, _ = io.Copy(io.Discard, stdout)
				return
			}
			if err != nil {
				ready <- false
				return
			}
		}
	}()
	select {
	case ok := <-ready:
		require.True(t, ok, "writer %s exited before it was ready: %s", hostname, werr.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("writer %s not ready after 60 s: %s", hostname, werr.String())
	}
	time.Sleep(300 * time.Millisecond) // a few MMP writes
	return w
}

// newVdev creates an empty 64 MiB (sparse) file leaf at path.
func newVdev(t *testing.T, path string) string {
	t.Helper()
	require.NoError(t, os.WriteFile(path, nil, 0o600))
	require.NoError(t, os.Truncate(path, 64<<20))
	return path
}

// liveMMPGen skips the test unless the OpenZFS userspace tools (CAIRN_ZFS_TOOLS, from
// test/zfsimages/fetch-zfs.sh) and gcc are there, then builds the libzpool writer in a
// fresh temporary directory and returns both.
func liveMMPGen(t *testing.T, what string) (dir, gen string) {
	t.Helper()
	tools := os.Getenv("CAIRN_ZFS_TOOLS")
	if tools == "" {
		testtools.Unavailable(t, "CAIRN_ZFS_TOOLS is not set: run test/zfsimages/fetch-zfs.sh DIR and set CAIRN_ZFS_TOOLS=DIR for the %s test", what)
	}
	if _, err := os.Stat(filepath.Join(tools, "usr/include/libzfs/sys/spa.h")); err != nil {
		testtools.Unavailable(t, "CAIRN_ZFS_TOOLS=%s holds no OpenZFS headers (%v): the %s test needs fetch-zfs.sh to have succeeded", tools, err, what)
	}
	if _, err := exec.LookPath("gcc"); err != nil {
		testtools.Unavailable(t, "gcc not found: the %s test compiles its writer", what)
	}
	dir = t.TempDir()
	gen = filepath.Join(dir, "mmpgen")
	if out, err := exec.Command("bash", "zfsimages/build-mmpgen.sh", tools, gen).CombinedOutput(); err != nil {
		t.Fatalf("build mmpgen: %v\n%s", err, out)
	}
	return dir, gen
}

// TestMMPWatchCLI: cairn mmp watch on real OpenZFS fixtures (no writer): the labels of
// mirror-active name host-b (hostid 0x22222222).
func TestMMPWatchCLI(t *testing.T) {
	dir := t.TempDir()
	var leaves []string
	for _, l := range []string{"disk0", "disk1"} {
		p := filepath.Join(dir, l+".img")
		zfsimage.GunzipTo(t, zfsimage.FixturePath("mirror-active", l), p)
		leaves = append(leaves, p)
	}
	run := func(args ...string) (int, string, string) {
		out, errb, code := runAll(t, append([]string{"mmp", "watch"}, args...)...)
		return code, out, errb
	}
	code, out, _ := run(append([]string{"--hostid", "0x22222222", "--for", "300ms", "--poll", "100ms"}, leaves...)...)
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "no foreign activity")
	code, out, _ = run(append([]string{"--hostid", "0x33333333", "--for", "5s", "--json", "--log-level", "error"}, leaves...)...)
	require.Equal(t, 1, code, out)
	var l struct {
		Verdict, Code string
		Writer        struct{ HostID string }
	}
	require.NoError(t, json.Unmarshal([]byte(strings.TrimSpace(out)), &l))
	require.Equal(t, "foreign_activity", l.Verdict)
	require.Equal(t, "foreign_hostid", l.Code)
	require.Equal(t, "0x22222222", l.Writer.HostID)
	// Usage errors and unreadable leaves: exit 2, naming what is wrong.
	code, _, stderr := run(leaves...)
	require.Equal(t, 2, code)
	require.Contains(t, stderr, "--hostid is required")
	code, _, stderr = run("--hostid", "0x1", filepath.Join(dir, "missing.img"))
	require.Equal(t, 2, code)
	require.Contains(t, stderr, "missing.img")
	code, _, stderr = run("--hostid", "0x1", leaves[0], leaves[0])
	require.Equal(t, 2, code)
	require.Contains(t, stderr, "duplicate_leaf")
}

// TestAgentRefusesAHostIDOtherThanTheKernels: cairn agent --hostid that differs from the
// SPL module's hostid refuses to start (every import would look foreign to its watcher).
func TestAgentRefusesAHostIDOtherThanTheKernels(t *testing.T) {
	spl := filepath.Join(t.TempDir(), "hostid")
	require.NoError(t, os.WriteFile(spl, []byte("5e11b0b7\n"), 0o644))
	out, err := exec.Command(cairnBin, "agent", "--node", "n1", "--hostid", "0x1", "--spl-hostid-path", spl, "--nats", "nats://127.0.0.1:1").CombinedOutput()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	require.Equal(t, 2, ee.ExitCode())
	require.Contains(t, string(out), "--hostid 0x00000001 differs from the kernel's hostid 0x5e11b0b7")
}
