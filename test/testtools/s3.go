package testtools

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// S3Server is a real S3 server for the backup tests and benchmarks: SeaweedFS (`weed
// mini`, built by .ci/run from the Go module proxy) on private ports, with one identity
// and a bucket. Without `weed` the caller skips, or fails under CAIRN_REQUIRE_TOOLS=1.
type S3Server struct {
	tb        testing.TB
	bin, dir  string
	args      []string
	cmd       *exec.Cmd
	exited    chan struct{} // closed when cmd has exited
	log       *lockedBuffer
	Endpoint  string // http://127.0.0.1:PORT
	AccessKey string
	SecretKey string
	Bucket    string
}

// StartS3 starts SeaweedFS serving S3 with a bucket "backups"; it stops when the test
// ends (TERM: a KILL leaves socket files behind).
func StartS3(tb testing.TB) *S3Server {
	tb.Helper()
	return StartS3On(tb, "")
}

// StartS3On is StartS3 keeping the server's data in dataDir ("" : a directory of its
// own), such as a small filesystem a test fills.
func StartS3On(tb testing.TB, dataDir string) *S3Server {
	tb.Helper()
	s := newS3(tb)
	if dataDir != "" {
		for i, a := range s.args {
			if strings.HasPrefix(a, "-dir=") {
				s.args[i] = "-dir=" + dataDir
			}
		}
	}
	s.startOnFreePorts()
	if err := s.Client().MakeBucket(context.Background(), s.Bucket, minio.MakeBucketOptions{}); err != nil {
		tb.Fatalf("make bucket: %v", err)
	}
	return s
}

// newS3 prepares a server's directory, configuration and ports without starting it.
func newS3(tb testing.TB) *S3Server {
	tb.Helper()
	bin := Path(tb, "weed")
	dir := tb.TempDir()
	s := &S3Server{tb: tb, bin: bin, dir: dir, AccessKey: "AKCAIRNTEST", SecretKey: "sk-cairn-test-secret", Bucket: "backups", log: &lockedBuffer{}}
	cfg := fmt.Sprintf(`{"identities":[{"name":"cairn","credentials":[{"accessKey":%q,"secretKey":%q}],"actions":["Admin","Read","Write","List","Tagging"]}]}`, s.AccessKey, s.SecretKey)
	if err := os.WriteFile(filepath.Join(dir, "s3.json"), []byte(cfg), 0o600); err != nil {
		tb.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
		tb.Fatal(err)
	}
	s.pickPorts()
	tb.Cleanup(func() {
		s.Stop()
		if tb.Failed() {
			tb.Logf("weed log (end):\n%s", s.log.tail(4096))
		}
	})
	return s
}

// startOnFreePorts starts weed. A port picked free can be taken before weed binds it;
// weed then exits at once naming the address or the port, and it starts again on other ports (three
// attempts).
func (s *S3Server) startOnFreePorts() {
	s.tb.Helper()
	for attempt := 1; ; attempt++ {
		err := s.start()
		if err == nil {
			return
		}
		log := s.log.tail(1 << 20)
		if attempt == 3 || !(strings.Contains(log, "address already in use") || strings.Contains(log, "is not available")) {
			s.tb.Fatal(err)
		}
		s.Stop()
		s.tb.Logf("weed attempt %d: a port was taken; again on other ports", attempt)
		s.log = &lockedBuffer{}
		s.pickPorts()
	}
}

// pickPorts chooses weed's ports and endpoint: free ports below the kernel's ephemeral
// range (32768-60999 by default), so the outgoing connections of this and every other
// process, which take ephemeral ports, cannot take them before weed binds them.
func (s *S3Server) pickPorts() {
	used := map[int]bool{}
	port := func() int {
		for {
			p := 20000 + rand.IntN(12000)
			if used[p] {
				continue
			}
			l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
			if err != nil {
				continue
			}
			l.Close()
			used[p] = true
			return p
		}
	}
	s3Port := port()
	s.args = []string{"mini", "-dir=" + filepath.Join(s.dir, "data"), "-ip=127.0.0.1", "-ip.bind=127.0.0.1", "-s3.config=" + filepath.Join(s.dir, "s3.json"),
		fmt.Sprintf("-s3.port=%d", s3Port),
		"-admin.port.legacy=0", "-s3.port.iceberg=0", "-s3.port.lance=0", "-webdav=false", "-admin.ui=false", "-master.telemetry=false"}
	for _, f := range []string{"master.port", "master.port.grpc", "volume.port", "volume.port.grpc", "filer.port", "filer.port.grpc", "s3.port.grpc", "admin.port", "admin.port.grpc"} {
		s.args = append(s.args, fmt.Sprintf("-%s=%d", f, port()))
	}
	s.Endpoint = fmt.Sprintf("http://127.0.0.1:%d", s3Port)
}

// Start runs weed again on the same ports (after Stop) and waits until S3 answers.
func (s *S3Server) Start() {
	s.tb.Helper()
	if err := s.start(); err != nil {
		s.tb.Fatal(err)
	}
}

// start runs weed and waits until S3 answers, or weed exits, or 60 s pass.
func (s *S3Server) start() error {
	s.cmd = exec.Command(s.bin, s.args...)
	s.cmd.Dir = s.dir
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	if err := s.cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	cmd := s.cmd
	go func() { _ = cmd.Wait(); close(exited) }()
	s.exited = exited
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			s.cmd = nil
			return fmt.Errorf("weed exited before S3 answered on %s (%s):\n%s", s.Endpoint, cmd.ProcessState, s.log.tail(4096))
		default:
		}
		resp, err := http.Get(s.Endpoint + "/")
		if err == nil {
			resp.Body.Close()
			if _, err := s.Client().BucketExists(context.Background(), "probe"); err == nil {
				return nil
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("SeaweedFS S3 did not answer on %s within 60 s:\n%s", s.Endpoint, s.log.tail(4096))
}

// Stop ends weed with TERM and waits for it.
func (s *S3Server) Stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	done := s.exited
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		_ = s.cmd.Process.Kill()
		<-done
	}
	s.cmd = nil
}

// Client is an S3 client of the server (the test's own view of the bucket).
func (s *S3Server) Client() *minio.Client {
	c, err := minio.New(strings.TrimPrefix(s.Endpoint, "http://"), &minio.Options{Creds: credentials.NewStaticV4(s.AccessKey, s.SecretKey, ""),
		BucketLookup: minio.BucketLookupPath})
	if err != nil {
		s.tb.Fatal(err)
	}
	return c
}

// Objects lists the keys under prefix with their sizes.
func (s *S3Server) Objects(prefix string) map[string]int64 {
	out := map[string]int64{}
	for o := range s.Client().ListObjects(context.Background(), s.Bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if o.Err != nil {
			s.tb.Fatal(o.Err)
		}
		out[o.Key] = o.Size
	}
	return out
}

// RemoteBody is remote.create of this server as name.
func (s *S3Server) RemoteBody(name string) string {
	return fmt.Sprintf(`{"name":%q,"kind":"s3","endpoint":%q,"bucket":%q,"region":"us-east-1","path_style":true,"access_key":%q,"secret_key":%q}`,
		name, s.Endpoint, s.Bucket, s.AccessKey, s.SecretKey)
}

type lockedBuffer struct {
	mu sync.Mutex
	b  []byte
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b = append(l.b, p...)
	return len(p), nil
}

func (l *lockedBuffer) tail(n int) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.b) > n {
		return string(l.b[len(l.b)-n:])
	}
	return string(l.b)
}
