package test

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// watchOut is one line of `cairn mmp watch --json`.
type watchOut struct {
	Verdict string    `json:"verdict"`
	Code    string    `json:"code"`
	At      time.Time `json:"at"`
	Poll    int       `json:"poll"`
	Foreign bool      `json:"foreign"`
	Message string    `json:"message"`
	Writes  int       `json:"writes"`
	Newest  *struct {
		TXG uint64 `json:"txg"`
	} `json:"newest"`
	Writer *struct {
		HostID   string `json:"hostid"`
		Hostname string `json:"hostname"`
	} `json:"writer"`
}

// liveMirror makes n 64 MiB file leaves in dir/vdevs for a mirror pool.
func liveMirror(t *testing.T, dir string, n int) []string {
	t.Helper()
	vdevs := filepath.Join(dir, "vdevs")
	require.NoError(t, os.Mkdir(vdevs, 0o700))
	var out []string
	for i := range n {
		out = append(out, newVdev(t, filepath.Join(vdevs, "leaf"+string(rune('0'+i))+".img")))
	}
	return out
}

// watchProc runs `cairn mmp watch --json` and collects its lines.
type watchProc struct {
	cmd   *exec.Cmd
	mu    sync.Mutex
	lines []watchOut
	done  chan struct{}
	err   error
}

func startWatch(t *testing.T, args ...string) *watchProc {
	t.Helper()
	cmd := exec.Command(cairnBin, append([]string{"mmp", "watch", "--json", "--log-level", "warn"}, args...)...)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	w := &watchProc{cmd: cmd, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var l watchOut
			if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
				w.mu.Lock()
				w.err = err
				w.mu.Unlock()
				continue
			}
			w.mu.Lock()
			w.lines = append(w.lines, l)
			w.mu.Unlock()
		}
		_ = cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-w.done
		if t.Failed() {
			t.Logf("cairn mmp watch stderr:\n%s", stderr.String())
		}
	})
	return w
}

func (w *watchProc) snapshot() []watchOut {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]watchOut(nil), w.lines...)
}

// TestMMPWatchLiveOwnWriter (issue 12, test a): a pool held by a real OpenZFS multihost
// writer (libzpool) on a 3-way mirror of file leaves, MMP every 100 ms and a txg sync
// every 0.5 s, watched by its own hostid for 30 s, is never flagged. The old watcher
// flagged such a pool as foreign in 6 of 6 watches of 40 s.
func TestMMPWatchLiveOwnWriter(t *testing.T) {
	dir, gen := liveMMPGen(t, "live MMP watch")
	leaves := liveMirror(t, dir, 3)
	startMMPGen(t, gen, "0xaaaa0001", "writer-a", append([]string{"-m", "-M", "-i", "100", "-t", "500", "-n", "writer-a",
		"-c", filepath.Join(dir, "a.cache"), "-x", "hold", "livepool"}, leaves...)...)

	start := time.Now()
	w := startWatch(t, append([]string{"--hostid", "0xaaaa0001", "--for", "30s"}, leaves...)...)
	<-w.done
	lines := w.snapshot()
	require.NoError(t, w.err)
	require.Equal(t, 0, w.cmd.ProcessState.ExitCode(), "cairn mmp watch exit status; last lines %+v", tail(lines, 3))
	require.GreaterOrEqual(t, time.Since(start), 30*time.Second)
	writes, first, last := 0, uint64(0), uint64(0)
	for _, l := range lines {
		require.False(t, l.Foreign, "the writer's own pool flagged: %+v", l)
		writes += l.Writes
		if l.Newest != nil {
			if first == 0 {
				first = l.Newest.TXG
			}
			last = l.Newest.TXG
		}
	}
	// The watch saw a live writer: many polls, MMP writes, and txgs synced all along.
	require.Greater(t, len(lines), 200, "polls")
	require.Greater(t, writes, 500, "slot writes seen")
	require.Greater(t, last, first+30, "txgs synced during the watch (first %d, last %d)", first, last)
	t.Logf("30 s watch of a live writer: %d polls, %d slot writes, txg %d -> %d, no alarm", len(lines), writes, first, last)
}

// TestMMPWatchLiveForeignImport (issue 12, test b): the writer of hostid A is killed and
// the pool imported by hostid B with OpenZFS's own activity check (libzpool); A's
// watcher reports foreign activity within two polls of the import, and `cairn mmp check`
// by A then says the pool is active.
func TestMMPWatchLiveForeignImport(t *testing.T) {
	dir, gen := liveMMPGen(t, "live MMP watch")
	leaves := liveMirror(t, dir, 3)
	a := startMMPGen(t, gen, "0xaaaa0001", "writer-a", append([]string{"-m", "-M", "-i", "100", "-t", "500", "-n", "writer-a",
		"-c", filepath.Join(dir, "a.cache"), "-x", "hold", "livepool"}, leaves...)...)
	w := startWatch(t, append([]string{"--hostid", "0xaaaa0001", "--poll", "100ms"}, leaves...)...)
	require.Eventually(t, func() bool { return len(w.snapshot()) >= 5 }, 10*time.Second, 50*time.Millisecond)

	require.NoError(t, a.Process.Kill())
	_ = a.Wait()
	// B imports with the real activity check (10 fail intervals × 100 ms × 2 = 2 s, plus
	// jitter) and holds the pool.
	b := exec.Command(gen, "-i", "100", "-n", "writer-b", "-c", filepath.Join(dir, "b.cache"), "-x", "importhold", "livepool", filepath.Dir(leaves[0]))
	b.Env = append(os.Environ(), "ZFS_HOSTID=0xbbbb0002")
	bout, err := b.StdoutPipe()
	require.NoError(t, err)
	var berr syncBuffer
	b.Stderr = &berr
	require.NoError(t, b.Start())
	t.Cleanup(func() { _ = b.Process.Kill(); _ = b.Wait() })
	imported := make(chan time.Time, 1)
	go func() {
		sc := bufio.NewScanner(bout)
		for sc.Scan() {
			if sc.Text() == "imported" {
				imported <- time.Now()
				return
			}
		}
	}()
	var at time.Time
	select {
	case at = <-imported:
	case <-time.After(60 * time.Second):
		t.Fatalf("writer-b did not import: %s", berr.String())
	}
	select {
	case <-w.done:
	case <-time.After(10 * time.Second):
		t.Fatalf("the watcher of hostid A saw nothing 10 s after B imported; lines %+v", tail(w.snapshot(), 3))
	}
	lines := w.snapshot()
	require.Equal(t, 1, w.cmd.ProcessState.ExitCode(), "watch exit status")
	last := lines[len(lines)-1]
	require.True(t, last.Foreign, "%+v", last)
	require.Equal(t, "foreign_activity", last.Verdict)
	require.Equal(t, "foreign_hostid", last.Code, last.Message)
	require.NotNil(t, last.Writer)
	require.Equal(t, "0xbbbb0002", last.Writer.HostID)
	before := 0 // the last poll that ended before zpool's import returned
	for _, l := range lines {
		require.True(t, l == last || !l.Foreign, "an alarm before the import: %+v", l)
		if l.At.Before(at) {
			before = l.Poll
		}
	}
	require.LessOrEqual(t, last.Poll, before+2, "foreign activity seen at poll %d, the import returned after poll %d", last.Poll, before)
	t.Logf("B's import seen by A's watcher at poll %d (%s after the import returned; the last poll before it was %d)", last.Poll, last.At.Sub(at).Round(time.Millisecond), before)

	v, code, _ := mmpCheck(t, append([]string{"--hostid", "0xaaaa0001", "--interval", "100ms"}, leaves...)...)
	require.Equal(t, 1, code, "cairn mmp check by A while B holds the pool: %+v", v)
	require.True(t, v.Active)
	require.Equal(t, "activity_detected", v.Code)
}

func tail(l []watchOut, n int) []watchOut {
	if len(l) <= n {
		return l
	}
	return l[len(l)-n:]
}
