package testtools

import (
	"context"
	"fmt"
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
	port := func() int {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatal(err)
		}
		defer l.Close()
		return l.Addr().(*net.TCPAddr).Port
	}
	s3Port := port()
	s.args = []string{"mini", "-dir=" + filepath.Join(dir, "data"), "-ip=127.0.0.1", "-ip.bind=127.0.0.1", "-s3.config=" + filepath.Join(dir, "s3.json"),
		fmt.Sprintf("-s3.port=%d", s3Port),
		"-admin.port.legacy=0", "-s3.port.iceberg=0", "-s3.port.lance=0", "-webdav=false", "-admin.ui=false", "-master.telemetry=false"}
	for _, f := range []string{"master.port", "master.port.grpc", "volume.port", "volume.port.grpc", "filer.port", "filer.port.grpc", "s3.port.grpc", "admin.port", "admin.port.grpc"} {
		s.args = append(s.args, fmt.Sprintf("-%s=%d", f, port()))
	}
	s.Endpoint = fmt.Sprintf("http://127.0.0.1:%d", s3Port)
	s.Start()
	tb.Cleanup(func() {
		s.Stop()
		if tb.Failed() {
			tb.Logf("weed log (end):\n%s", s.log.tail(4096))
		}
	})
	if err := s.Client().MakeBucket(context.Background(), s.Bucket, minio.MakeBucketOptions{}); err != nil {
		tb.Fatalf("make bucket: %v", err)
	}
	return s
}

// Start runs weed and waits until S3 answers.
func (s *S3Server) Start() {
	s.tb.Helper()
	s.cmd = exec.Command(s.bin, s.args...)
	s.cmd.Dir = s.dir
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	if err := s.cmd.Start(); err != nil {
		s.tb.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get(s.Endpoint + "/")
		if err == nil {
			resp.Body.Close()
			if _, err := s.Client().BucketExists(context.Background(), "probe"); err == nil {
				return
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	s.tb.Fatalf("SeaweedFS S3 did not answer on %s within 60 s:\n%s", s.Endpoint, s.log.tail(4096))
}

// Stop ends weed with TERM and waits for it.
func (s *S3Server) Stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(done) }()
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
