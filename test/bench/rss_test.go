package bench

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// BenchmarkServeRSSWithBigHistory: peak RSS (VmHWM) of the real `cairn serve` binary on
// a data directory holding the big history and no views, so it projects all of it at
// start, then answers 1,000 commands. It must stay bounded by the views, not the log.
func BenchmarkServeRSSWithBigHistory(b *testing.B) {
	bin := os.Getenv("CAIRN_BIN")
	if bin == "" {
		bin = filepath.Join(b.TempDir(), "cairn")
		if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/cairn").CombinedOutput(); err != nil {
			b.Fatalf("build: %v\n%s", err, out)
		}
	}
	sizes := []int{historySize() / 10, historySize()}
	for _, size := range sizes {
		b.Run(fmt.Sprintf("events=%d", size), func(b *testing.B) { serveRSS(b, bin, size) })
	}
}

func serveRSS(b *testing.B, bin string, size int) {
	src := cachedHistory(b, size)
	for range b.N {
		data := b.TempDir()
		if out, err := exec.Command("cp", "-a", filepath.Join(src, "jetstream"), data).CombinedOutput(); err != nil {
			b.Fatalf("copy history: %v\n%s", err, out)
		}
		serve := startServeAt(b, bin, data, freePort(b), freePort(b))
		ready := serve.ready
		nc, err := nats.Connect(serve.nats)
		if err != nil {
			b.Fatal(err)
		}
		for i := range 1000 {
			request(b, nc, "node.add", fmt.Sprintf(`{"name":"rss-%d","host":"h","address":"10.0.0.1"}`, i))
		}
		nc.Close()
		hwm, rss := procStatus(b, serve.cmd.Process.Pid, "VmHWM"), procStatus(b, serve.cmd.Process.Pid, "VmRSS")
		b.ReportMetric(float64(hwm)/1024, "peak_rss_MiB")
		b.ReportMetric(float64(rss)/1024, "rss_MiB")
		b.ReportMetric(ready.Seconds(), "catch_up_s")
		b.Logf("%d events: ready after %s (%.0f events/s), peak RSS %d MiB, RSS now %d MiB", size, ready.Round(time.Millisecond),
			float64(size)/ready.Seconds(), hwm/1024, rss/1024)
		serve.stop()
	}
}

func freePort(tb testing.TB) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// procStatus returns a kB field of /proc/PID/status.
func procStatus(tb testing.TB, pid int, field string) int {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			kb, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			return kb
		}
	}
	tb.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}
