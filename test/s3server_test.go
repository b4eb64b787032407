package test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/stretchr/testify/require"

	"github.com/cairn-io/cairn/test/testtools"
)

// s3Server is a real S3 server for the backup tests: SeaweedFS (`weed mini`, built by
// .ci/run from the Go module proxy), on private ports, with one identity and a bucket.
type s3Server struct {
	t          *testing.T
	bin, dir   string
	args       []string
	cmd        *exec.Cmd
	log        *syncBuffer
	Endpoint   string // http://127.0.0.1:PORT
	AccessKey  string
	SecretKey  string
	Bucket     string
	s3Port     int
	stoppedErr error
}

// startS3 starts SeaweedFS serving S3 with a bucket "backups"; it stops when the test
// ends (TERM: a KILL leaves socket files behind).
func startS3(t *testing.T) *s3Server {
	t.Helper()
	bin := testtools.Path(t, "weed")
	dir := t.TempDir()
	s := &s3Server{t: t, bin: bin, dir: dir, AccessKey: "AKCAIRNTEST", SecretKey: "sk-cairn-test-secret", Bucket: "backups"}
	cfg := fmt.Sprintf(`{"identities":[{"name":"cairn","credentials":[{"accessKey":%q,"secretKey":%q}],"actions":["Admin","Read","Write","List","Tagging"]}]}`, s.AccessKey, s.SecretKey)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "s3.json"), []byte(cfg), 0o600))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "data"), 0o755))
	port := func() int {
		_, p, _ := net.SplitHostPort(freeAddr(t))
		var n int
		fmt.Sscan(p, &n)
		return n
	}
	s.s3Port = port()
	s.args = []string{"mini", "-dir=" + filepath.Join(dir, "data"), "-ip=127.0.0.1", "-ip.bind=127.0.0.1", "-s3.config=" + filepath.Join(dir, "s3.json"),
		fmt.Sprintf("-s3.port=%d", s.s3Port),
		"-admin.port.legacy=0", "-s3.port.iceberg=0", "-s3.port.lance=0", "-webdav=false", "-admin.ui=false", "-master.telemetry=false"}
	for _, f := range []string{"master.port", "master.port.grpc", "volume.port", "volume.port.grpc", "filer.port", "filer.port.grpc", "s3.port.grpc", "admin.port", "admin.port.grpc"} {
		s.args = append(s.args, fmt.Sprintf("-%s=%d", f, port()))
	}
	s.Endpoint = fmt.Sprintf("http://127.0.0.1:%d", s.s3Port)
	s.start()
	t.Cleanup(func() {
		s.stop()
		if t.Failed() {
			t.Logf("weed log (last 4 KiB):\n%s", tailText(s.log.String(), 40))
		}
	})
	c := s.client()
	require.NoError(t, c.MakeBucket(context.Background(), s.Bucket, minio.MakeBucketOptions{}))
	return s
}

// start runs weed and waits until S3 answers (any HTTP answer).
func (s *s3Server) start() {
	s.t.Helper()
	s.cmd = exec.Command(s.bin, s.args...)
	s.cmd.Dir = s.dir
	if s.log == nil {
		s.log = &syncBuffer{}
	}
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	require.NoError(s.t, s.cmd.Start())
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get(s.Endpoint + "/")
		if err == nil {
			resp.Body.Close()
			if ok, err := s.client().BucketExists(context.Background(), "probe"); err == nil || ok {
				return
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	s.t.Fatalf("SeaweedFS S3 did not answer on %s within 60 s:\n%s", s.Endpoint, tailText(s.log.String(), 40))
}

// stop ends weed with TERM and waits for it.
func (s *s3Server) stop() {
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

// client is an S3 client of the server (the test's own view of the bucket).
func (s *s3Server) client() *minio.Client {
	c, err := minio.New(s.Endpoint[len("http://"):], &minio.Options{Creds: credentials.NewStaticV4(s.AccessKey, s.SecretKey, ""),
		BucketLookup: minio.BucketLookupPath})
	require.NoError(s.t, err)
	return c
}

// objects lists the keys under prefix with their sizes.
func (s *s3Server) objects(prefix string) map[string]int64 {
	out := map[string]int64{}
	for o := range s.client().ListObjects(context.Background(), s.Bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		require.NoError(s.t, o.Err)
		out[o.Key] = o.Size
	}
	return out
}

// remoteBody is remote.create of this server as name.
func (s *s3Server) remoteBody(name string) string {
	return fmt.Sprintf(`{"name":%q,"kind":"s3","endpoint":%q,"bucket":%q,"region":"us-east-1","path_style":true,"access_key":%q,"secret_key":%q}`,
		name, s.Endpoint, s.Bucket, s.AccessKey, s.SecretKey)
}
