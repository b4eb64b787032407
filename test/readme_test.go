package test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-io/cairn/agents/zpoolagent/zpoolfake"
	"github.com/cairn-io/cairn/test/testtools"
	"github.com/stretchr/testify/require"
)

// A shell block of a Markdown file and how to run it: the HTML comment on the line
// before its ```sh fence says
//
//	<!-- readme-test: fresh -->            a fresh `cairn serve` (new data directory)
//	<!-- readme-test: fresh: --auth -->    the same, with these serve flags
//	<!-- readme-test: continue -->         the previous block's serve, files and agents
//	<!-- readme-test: stopped -->          the previous block's directory, serve stopped
//	<!-- readme-test: skip: REASON -->     not run (REASON says why)
//
// A block without the comment fails the test: every block is either run or skipped
// for a stated reason.
type shellBlock struct {
	file  string
	line  int // of the first command
	mode  string
	arg   string
	lines []string
}

var (
	markerRE = regexp.MustCompile(`^<!-- readme-test: (fresh|continue|stopped|skip)(?:: (.*?))? -->$`)
	// exitRE is a README line's "# exit N" comment: the command must exit with N.
	exitRE = regexp.MustCompile(`^(.*?\S)\s+#\s*exit (\d+)\b.*$`)
)

// shellBlocks returns the ```sh blocks of a Markdown text with their markers.
func shellBlocks(file, text string) ([]shellBlock, error) {
	var out []shellBlock
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) != "```sh" {
			continue
		}
		b := shellBlock{file: file, line: i + 2}
		if i == 0 {
			return nil, fmt.Errorf("%s:%d: a shell block without a readme-test comment before it", file, i+1)
		}
		m := markerRE.FindStringSubmatch(strings.TrimSpace(lines[i-1]))
		if m == nil {
			return nil, fmt.Errorf("%s:%d: a shell block without a readme-test comment before it", file, i+1)
		}
		b.mode, b.arg = m[1], m[2]
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != "```"; i++ {
			b.lines = append(b.lines, lines[i])
		}
		out = append(out, b)
	}
	return out, nil
}

// script turns a block into a bash script with one line per README line: every command
// must succeed, but a line with "# exit N" must exit with N; the first failure names
// its README line.
func (b shellBlock) script() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "set -e -o pipefail; trap 'echo \"readme: %s:$((LINENO+%d)): failed: $BASH_COMMAND\" >&2' ERR\n", b.file, b.line-2)
	for i, l := range b.lines {
		if m := exitRE.FindStringSubmatch(l); m != nil {
			l = fmt.Sprintf(`if %s; then rc=0; else rc=$?; fi; [ "$rc" = %s ] || { echo "readme: %s:%d: exit $rc, the README says %s" >&2; exit 99; }`,
				m[1], m[2], b.file, b.line+i, m[2])
		}
		sb.WriteString(l + "\n")
	}
	return sb.String()
}

// readmeSession is one serve and its working directory, shared by consecutive blocks.
type readmeSession struct {
	t         *testing.T
	dir, work string
	serve     *serve // nil once stopped
	httpAddr  string // serve's, for the blocks' localhost:3370 (also once stopped)
	pgids     []int  // process groups of the blocks run (their background jobs)
	env       []string
	device    string // the OpenZFS leaf image standing in for the README's device
}

// readmeDevice is the shared pool's leaf vdev in the README; the test puts a real
// OpenZFS-written image there (substituted in the text).
const readmeDevice = "/dev/disk/by-id/wwn-0x5000c500a1b2c3d4-part1"

func newReadmeSession(t *testing.T, serveFlags []string, shared, fakeZpool string) *readmeSession {
	s := &readmeSession{t: t, dir: t.TempDir()}
	s.work = filepath.Join(s.dir, "work")
	require.NoError(t, os.MkdirAll(filepath.Join(s.work, "bin"), 0o755))
	// The blocks' `--data data` is this serve's data directory.
	s.serve = startServe(t, filepath.Join(s.work, "data"), serveFlags...)
	s.httpAddr = s.serve.httpAddr
	require.NoError(t, os.Symlink(cairnBin, filepath.Join(s.work, "bin", "cairn")))
	require.NoError(t, os.Symlink(shared, filepath.Join(s.dir, "shared"))) // ../shared from work
	s.device = filepath.Join(s.dir, "disk0.img")                           // made by run for the blocks that name readmeDevice
	s.env = append(os.Environ(),
		"CAIRN_NATS="+s.serve.natsURL(), "NATS_URL="+s.serve.natsURL(), "CAIRN_HTTP="+s.serve.url(""),
		"PATH="+filepath.Dir(testtools.Path(t, "nats"))+string(os.PathListSeparator)+os.Getenv("PATH"),
		// FAKE zpool (the real one needs the ZFS kernel module); it works on the real image.
		"CAIRN_ZPOOL_BIN="+fakeZpool, "ZPOOL_FAKE_STATE="+filepath.Join(s.dir, "zpool-state.json"),
		// The fake imports as the README's agent: its --hostid.
		"ZPOOL_FAKE_HOSTID=0x5e11b0b7", "ZPOOL_FAKE_HOSTNAME=h1", "ZPOOL_FAKE_LOG="+filepath.Join(s.dir, "zpool.log"))
	return s
}

// run runs one block in the session's working directory (its own process group, whose
// background jobs stay until stop) and reports a failure with the block's output.
func (s *readmeSession) run(b shellBlock) {
	if strings.Contains(strings.Join(b.lines, "\n"), readmeDevice) {
		if _, err := os.Stat(s.device); os.IsNotExist(err) {
			// A real OpenZFS leaf (left active by another host, 100 ms MMP), named tank.
			gunzipFixtureTo(s.t, "single-fast", "disk0", s.device)
			require.NoError(s.t, zpoolfake.Relabel([]string{s.device}, map[string]any{"name": "tank"}))
		}
	}
	text := strings.NewReplacer("localhost:3370", s.httpAddr, "127.0.0.1:3370", s.httpAddr, readmeDevice, s.device).Replace(b.script())
	script := filepath.Join(s.dir, fmt.Sprintf("block-%d.sh", b.line))
	out := script + ".out"
	require.NoError(s.t, os.WriteFile(script, []byte(text), 0o644))
	f, err := os.Create(out)
	require.NoError(s.t, err)
	defer f.Close()
	cmd := exec.Command("bash", script)
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = s.work, s.env, f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(s.t, cmd.Start())
	s.pgids = append(s.pgids, cmd.Process.Pid)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(3 * time.Minute):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		err = fmt.Errorf("still running after 3 minutes")
		<-done
	}
	if err != nil {
		serveLog := ""
		if s.serve != nil {
			serveLog = tailText(s.serve.log.String(), 20)
		}
		s.t.Errorf("%s:%d: the block failed (%v):\n%s\n--- serve log:\n%s", b.file, b.line, err, tailFile(out, 60), serveLog)
		return
	}
	s.t.Logf("%s:%d: output (go test -v shows it):\n%s", b.file, b.line, tailFile(out, 200))
}

// stop ends the blocks' background jobs, then serve.
func (s *readmeSession) stop() {
	for _, pg := range s.pgids {
		_ = syscall.Kill(-pg, syscall.SIGTERM)
	}
	time.Sleep(200 * time.Millisecond)
	for _, pg := range s.pgids {
		_ = syscall.Kill(-pg, syscall.SIGKILL)
	}
	s.pgids = nil
	if s.serve != nil {
		s.serve.stop() // graceful, as Ctrl-C
		s.serve = nil
	}
}

// tailFile returns the last n lines of a file.
func tailFile(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}

func gunzipFixtureTo(t *testing.T, image, leaf, dst string) {
	t.Helper()
	src := gunzipFixture(t, filepath.Dir(dst), image, leaf)
	require.NoError(t, os.Rename(src, dst))
}

func TestShellBlocksParse(t *testing.T) {
	blocks, err := shellBlocks("X.md", "a\n<!-- readme-test: fresh: --auth -->\n```sh\necho 1\nfalse   # exit 1: refused\n```\n\n<!-- readme-test: skip: needs a host -->\n```sh\nmake run\n```\n")
	require.NoError(t, err)
	require.Len(t, blocks, 2)
	require.Equal(t, "fresh", blocks[0].mode)
	require.Equal(t, "--auth", blocks[0].arg)
	require.Equal(t, 4, blocks[0].line)
	require.Equal(t, "skip", blocks[1].mode)
	require.Contains(t, blocks[0].script(), `if false; then rc=0; else rc=$?; fi; [ "$rc" = 1 ]`)
	_, err = shellBlocks("X.md", "text\n```sh\necho unmarked\n```\n")
	require.ErrorContains(t, err, "X.md:2: a shell block without a readme-test comment")

	// The generated script fails on a failing line and on a wrong exit code, and names
	// the README line; it passes an expected one.
	for _, c := range []struct {
		lines []string
		fail  string
	}{
		{[]string{"true", "false", "true"}, "readme: X.md:11: failed: false"},
		{[]string{"true", "true   # exit 3: refused"}, "readme: X.md:11: exit 0, the README says 3"},
		{[]string{"(exit 3)   # exit 3: refused", "true"}, ""},
	} {
		b := shellBlock{file: "X.md", line: 10, lines: c.lines}
		out, err := exec.Command("bash", "-c", b.script()).CombinedOutput()
		if c.fail == "" {
			require.NoError(t, err, "%s", out)
			continue
		}
		require.Error(t, err)
		require.Contains(t, string(out), c.fail)
	}
}

// TestReadmeShellBlocks runs every shell block of the README and of docs/, as pasted,
// against the real binary: fresh serves, agents (with the simulated DRBD kernel and the
// FAKE zpool on a real OpenZFS image where the README's host has the kernel), the nats
// CLI and the unmodified LINSTOR CLI. A block that fails names its file and line; a block
// without a readme-test comment fails the test.
func TestReadmeShellBlocks(t *testing.T) {
	testtools.Need(t, "nats", "drbdadm", "drbdmeta", "weed")
	linstor := sharedFile(t, "tools/linstor-client/linstor")
	shared := filepath.Dir(filepath.Dir(filepath.Dir(linstor)))
	fake := buildFakeZpool(t, t.TempDir())
	docs, err := filepath.Glob("../docs/*.md")
	require.NoError(t, err)
	total := 0
	for _, path := range append([]string{"../README.md"}, docs...) {
		name := strings.TrimPrefix(path, "../")
		text, err := os.ReadFile(path)
		require.NoError(t, err)
		blocks, err := shellBlocks(name, string(text))
		require.NoError(t, err)
		total += len(blocks)
		t.Run(strings.ReplaceAll(name, "/", "_"), func(t *testing.T) { runShellBlocks(t, blocks, shared, fake) })
	}
	require.GreaterOrEqual(t, total, 15, "the shell blocks of README.md and docs/")
}

// runShellBlocks runs one file's blocks in order, each a subtest named by its line.
func runShellBlocks(t *testing.T, blocks []shellBlock, shared, fake string) {
	var s *readmeSession
	defer func() {
		if s != nil {
			s.stop()
		}
	}()
	for _, b := range blocks {
		switch b.mode {
		case "skip":
			require.NotEmpty(t, b.arg, "%s:%d: a skipped block says why", b.file, b.line)
			t.Logf("%s:%d: skipped: %s", b.file, b.line, b.arg)
			continue
		case "fresh":
			if s != nil {
				s.stop()
			}
			s = newReadmeSession(t, strings.Fields(b.arg), shared, fake)
		case "continue", "stopped":
			require.NotNil(t, s, "%s:%d: %s needs a block before it", b.file, b.line, b.mode)
			if b.mode == "stopped" {
				s.stop()
			}
		}
		t.Run("line"+strconv.Itoa(b.line), func(t *testing.T) {
			s.t = t
			s.run(b)
		})
		s.t = t
	}
}
