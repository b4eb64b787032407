// Package test holds end-to-end tests that run the real cairn binary against real
// embedded NATS JetStream and Pebble, as an operator would.
package test

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var cairnBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "cairn-e2e-bin")
	if err != nil {
		panic(err)
	}
	cairnBin = filepath.Join(dir, "cairn")
	build := exec.Command("go", "build", "-o", cairnBin, "../cmd/cairn")
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build cairn:", err)
		os.Exit(2)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// serve is a running `cairn serve` process.
type serve struct {
	t        *testing.T
	data     string
	natsAddr string
	httpAddr string
	cmd      *exec.Cmd
	log      *syncBuffer
	args     []string
	bin      string // the cairn binary; "" is this commit's (cairnBin)
}

func startServe(t *testing.T, data string, extra ...string) *serve {
	t.Helper()
	s := &serve{t: t, data: data, natsAddr: freeAddr(t), httpAddr: freeAddr(t)}
	s.args = append([]string{"serve", "--data", data, "--nats-listen", s.natsAddr, "--http", s.httpAddr}, extra...)
	if !slices.Contains(extra, "--drbd-minors") {
		s.args = append(s.args, "--drbd-minors", testMinors())
	}
	return s.run("")
}

// testMinors is a DRBD minor range of 1,000 for one serve of this test process:
// drbdmeta locks /var/lock/drbd-147-<minor> machine-wide, so test packages running side
// by side, and any sim agent on the host, must not take the same minors (issue 32).
// Ranges follow one another per serve from a start drawn per process, in 5000-49999.
func testMinors() string {
	n := minorRanges.Add(1)
	base := 5000 + (minorStart+int(n)*1000)%45000
	return fmt.Sprintf("%d-%d", base, base+999)
}

var (
	minorRanges atomic.Int64
	minorStart  = rand.IntN(45) * 1000
)

// run starts the serve and has it killed when the test ends, its log (or the tail of
// it, with a label) printed when the test failed.
func (s *serve) run(label string) *serve {
	s.t.Helper()
	s.start()
	s.t.Cleanup(func() {
		if s.cmd != nil && s.cmd.ProcessState == nil {
			_ = s.cmd.Process.Kill()
			_ = s.cmd.Wait()
		}
		if !s.t.Failed() {
			return
		}
		if label == "" {
			s.t.Logf("serve log:\n%s", s.log.String())
		} else {
			s.t.Logf("serve %s log (tail):\n%s", label, tailText(s.log.String(), 40))
		}
	})
	return s
}

// storedCommands reads the whole event history with `cairn audit --json` (args select
// the deployment) and returns the sequences of every command id; no record may be
// invalid.
func storedCommands(t *testing.T, args ...string) map[string][]uint64 {
	t.Helper()
	out, code := run(t, append([]string{"audit", "--json"}, args...)...)
	require.Equal(t, 0, code)
	stored := map[string][]uint64{}
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var rec struct {
			Seq       uint64 `json:"seq"`
			CommandID string `json:"command_id"`
			Invalid   string `json:"invalid"`
		}
		require.NoError(t, json.Unmarshal(sc.Bytes(), &rec))
		require.Empty(t, rec.Invalid)
		stored[rec.CommandID] = append(stored[rec.CommandID], rec.Seq)
	}
	return stored
}

func (s *serve) start() {
	s.t.Helper()
	rebinds := 0
launch:
	s.log = &syncBuffer{}
	bin := s.bin
	if bin == "" {
		bin = cairnBin
	}
	s.cmd = exec.Command(bin, s.args...)
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	if err := s.cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	// Readiness only: with --tls-cert the probe speaks HTTPS without checking the
	// certificate (the tests that use TLS check it themselves).
	probe, readyz := &http.Client{Timeout: time.Second}, s.url("/readyz")
	if slices.Contains(s.args, "--tls-cert") {
		probe = &http.Client{Timeout: time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
		readyz = "https://" + s.httpAddr + "/readyz"
	}
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		// A port freeAddr handed out can be taken by another process before the serve
		// binds it (parallel test packages): take new ones and start again.
		if rebinds < 3 && strings.Contains(s.log.String(), "address already in use") {
			_ = s.cmd.Process.Kill()
			_ = s.cmd.Wait()
			rebinds++
			s.rebind()
			goto launch
		}
		resp, err := probe.Get(readyz)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.t.Fatalf("serve not ready within 60s:\n%s", s.log.String())
}

func (s *serve) url(path string) string { return "http://" + s.httpAddr + path }

// rebind gives the serve new HTTP and NATS listen addresses (in its arguments too).
func (s *serve) rebind() {
	for _, addr := range []*string{&s.httpAddr, &s.natsAddr} {
		if *addr == "" {
			continue
		}
		next := freeAddr(s.t)
		for i, a := range s.args {
			s.args[i] = strings.ReplaceAll(a, *addr, next)
		}
		*addr = next
	}
}

// stayedOnline waits for the watchdog to complete six more liveness checks (it checks
// every timeout/4, so they span more than a heartbeat timeout: a node whose heartbeats
// stopped would be offline by then) and requires node still online.
func stayedOnline(t *testing.T, s *serve, node string) {
	t.Helper()
	checks := func() int {
		_, metrics := httpJSON(t, "GET", s.url("/metrics"), "")
		m := regexp.MustCompile(`(?m)^cairn_watchdog_checks_total (\d+)`).FindStringSubmatch(metrics)
		if m == nil {
			return 0
		}
		n, _ := strconv.Atoi(m[1])
		return n
	}
	from := checks()
	require.Eventually(t, func() bool { return checks() >= from+6 }, 10*time.Second, 20*time.Millisecond, "the watchdog stopped checking")
	require.Equal(t, "online", nodeState(t, s, node), "heartbeats keep %s online past the timeout", node)
}

// nodeState is a node's state (online, offline) as GET /cairn/v1/nodes/<node> answers.
func nodeState(t *testing.T, s *serve, node string) string {
	t.Helper()
	status, body := httpJSON(t, "GET", s.url("/cairn/v1/nodes/"+node), "")
	require.Equal(t, 200, status, body)
	return decode[struct {
		Status struct {
			State string `json:"state"`
		} `json:"status"`
	}](t, body).Status.State
}
func (s *serve) natsURL() string { return "nats://" + s.natsAddr }

// kill9 kills the process without any chance to clean up.
func (s *serve) kill9() {
	s.t.Helper()
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	_ = s.cmd.Wait()
}

// stop shuts the process down with SIGTERM and waits for it.
func (s *serve) stop() {
	s.t.Helper()
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- s.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			s.t.Fatalf("serve exited with %v:\n%s", err, s.log.String())
		}
	case <-time.After(30 * time.Second):
		s.t.Fatal("serve did not stop within 30s")
	}
}

// agentOpts is what differs between the `cairn agent` processes of the tests; an empty
// field passes no flag (the agent's default).
type agentOpts struct {
	node   string   // --node; "n1" when empty
	root   string   // --root
	kernel string   // --kernel: real or sim
	simDir string   // --sim-dir
	nats   string   // --nats (default: the serve's)
	extra  []string // more agent flags
	env    []string // added to the test's environment
	bin    string   // the cairn binary; "" is this commit's (cairnBin)
}

// startAgent runs `cairn agent` against s until the test ends (or the test kills it),
// printing its log when the test failed.
func startAgent(t *testing.T, s *serve, o agentOpts) *exec.Cmd {
	t.Helper()
	if o.node == "" {
		o.node = "n1"
	}
	if o.nats == "" {
		o.nats = s.natsURL()
	}
	args := []string{"agent", "--node", o.node, "--nats", o.nats}
	if o.root == "" { // the default root is /: keep the revision marks in the test's own directory
		args = append(args, "--revision-dir", t.TempDir())
	}
	for _, f := range [][2]string{{"--root", o.root}, {"--kernel", o.kernel}, {"--sim-dir", o.simDir}} {
		if f[1] != "" {
			args = append(args, f[0], f[1])
		}
	}
	bin := o.bin
	if bin == "" {
		bin = cairnBin
	}
	a := exec.Command(bin, append(args, o.extra...)...)
	if len(o.env) > 0 {
		a.Env = append(os.Environ(), o.env...)
	}
	log := &bytes.Buffer{}
	a.Stdout, a.Stderr = log, log
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = a.Process.Kill()
		_ = a.Wait()
		if t.Failed() {
			t.Logf("agent %s log:\n%s", o.node, log.String())
		}
	})
	return a
}

// run runs the cairn binary and returns stdout and the exit code.
func run(t *testing.T, args ...string) (string, int) {
	t.Helper()
	out, errb, code := runAll(t, args...)
	if code == 2 {
		t.Logf("cairn %s: stderr: %s", strings.Join(args, " "), errb)
	}
	return out, code
}

// runAll runs the cairn binary and returns stdout, stderr and the exit code.
func runAll(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(cairnBin, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("cairn %s: %v", strings.Join(args, " "), err)
	}
	return out.String(), errb.String(), code
}

// reply is a command reply as the CLI and gateway print it.
type reply struct {
	OK        bool   `json:"ok"`
	CommandID string `json:"command_id"`
	Events    []struct {
		Seq     uint64 `json:"seq"`
		Type    string `json:"type"`
		Subject string `json:"subject"`
	} `json:"events"`
	Warnings []string `json:"warnings"`
	Error    *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Field   string `json:"field"`
	} `json:"error"`
}

func decode[T any](t *testing.T, s string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("decode %q: %v", s, err)
	}
	return v
}

func httpJSON(t *testing.T, method, url, body string, headers ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// syncBuffer is a bytes.Buffer a process writes into while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func (s *syncBuffer) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.b.Reset()
}

// The harness survives a port taken between freeAddr and the serve's bind (another
// test package's process took it): the serve starts on new ones.
func TestServeStartRebindsATakenPort(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	taken := l.Addr().String()
	data := t.TempDir()
	s := &serve{t: t, data: data, natsAddr: freeAddr(t), httpAddr: taken}
	s.args = []string{"serve", "--data", data, "--nats-listen", s.natsAddr, "--http", s.httpAddr}
	s.run("")
	assert.NotEqual(t, taken, s.httpAddr)
	status, _ := httpJSON(t, "GET", s.url("/readyz"), "")
	assert.Equal(t, 200, status)
}
