package test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-io/cairn/commands/gateway"
	"github.com/cairn-io/cairn/drbd"
	"github.com/cairn-io/cairn/projections"
	"github.com/cairn-io/cairn/storage/backup"
	"github.com/cairn-io/cairn/test/testtools"
)

// waitBackup waits until backup id of rd is no longer uploading and returns it.
func (c *simCluster) waitBackup(rd, remote, id string, timeout time.Duration) projections.RDBackup {
	c.t.Helper()
	return c.waitBackupUntil(rd, remote, id, timeout, "still uploading", func(b projections.RDBackup) bool {
		return b.Phase != projections.BackupUploading
	})
}

// waitBackupUntil waits until backup id of rd on remote exists and done says so, and
// returns it; the failure names what it waited for (still) and the backup last seen.
func (c *simCluster) waitBackupUntil(rd, remote, id string, timeout time.Duration, still string, done func(projections.RDBackup) bool) projections.RDBackup {
	c.t.Helper()
	var b projections.RDBackup
	require.Eventually(c.t, func() bool {
		rv := c.resource(rd)
		got, ok := rv.Backup(remote, id)
		if ok {
			b = *got
		}
		return ok && done(*got)
	}, timeout, 100*time.Millisecond, "backup %s of %s %s: %+v", id, rd, still, b)
	return b
}

// snapshotTaken takes snapshot name of rd and waits until it is taken.
func (c *simCluster) snapshotTaken(rd, name string) {
	c.t.Helper()
	c.cmd("rd.snapshot", fmt.Sprintf(`{"resource":%q,"name":%q}`, rd, name))
	require.Eventually(c.t, func() bool {
		code, body := httpJSON(c.t, "GET", c.s.url("/cairn/v1/resources/"+rd+"/snapshots/"+name), "")
		return code == 200 && strings.Contains(body, `"phase":"taken"`)
	}, 30*time.Second, 100*time.Millisecond, "snapshot %s of %s was not taken", name, rd)
}

// snapshotData is the data area of volume 0 of snapshot snap of rd on node (its first
// sizeKiB: the internal metadata after it left out).
func (c *simCluster) snapshotData(rd, snap, node string, sizeKiB uint64) []byte {
	c.t.Helper()
	return readData(c.t, filepath.Join(c.root(node), "var/lib/cairn/thin", rd+"_00000."+snap+".snap"), sizeKiB)
}

// diskData is the data area of volume 0 of rd's disk on node.
func (c *simCluster) diskData(rd, node string, sizeKiB uint64) []byte {
	c.t.Helper()
	return readData(c.t, filepath.Join(c.root(node), "var/lib/cairn/thin", rd+"_00000.img"), sizeKiB)
}

func readData(t *testing.T, path string, sizeKiB uint64) []byte {
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	buf := make([]byte, sizeKiB*1024)
	_, err = f.ReadAt(buf, 0)
	require.NoError(t, err)
	return buf
}

// A definition backed up to a real S3 server (SeaweedFS) and restored into a fresh
// cluster that never saw it: the restored disks hold the snapshot's data byte for byte
// (compared on the disk files, not on GIs), on both nodes, and start in sync. An
// incremental backup after one chunk changed sends that chunk only; the remote's secret
// key appears nowhere in the history; verify reads every chunk back.
func TestBackupToS3AndRestoreIntoAFreshCluster(t *testing.T) {
	s3 := testtools.StartS3(t)
	c := startSimCluster(t, 2)
	const size = 16384 // KiB: 16 chunks
	c.cmd("rg.create", `{"name":"rg2","place_count":2,"storage_pool":"thin"}`)
	c.cmd("rg.spawn", fmt.Sprintf(`{"resource_group":"rg2","name":"r1","size_kib":%d}`, size))
	c.waitUpToDate("r1", 2, 60*time.Second)
	require.NoError(t, c.write("r1", "n1", 1000)) // 4,000 KiB from offset 0: chunks 0-3
	c.snapshotTaken("r1", "s1")

	c.cmd("remote.create", s3.RemoteBody("s3"))
	out, code := run(t, "cmd", "remote.create", s3.RemoteBody("s3"), "--nats", c.s.natsURL())
	require.NotEqual(t, 0, code)
	assert.Contains(t, out, "already_exists")
	audit, _ := run(t, "audit", "--json", "--nats", c.s.natsURL())
	assert.NotContains(t, audit, s3.SecretKey, "the secret key is in the history in clear")
	assert.Contains(t, audit, "remote.created")
	_, body := httpJSON(t, "GET", c.s.url("/cairn/v1/remotes"), "")
	assert.NotContains(t, body, s3.SecretKey)
	assert.Contains(t, body, `"secret_key_sealed_with"`)

	c.cmd("backup.create", `{"resource":"r1","remote":"s3","snapshot":"s1"}`)
	b1 := c.waitBackup("r1", "s3", "s1", 60*time.Second)
	require.Equal(t, projections.BackupDone, b1.Phase, "backup failed: %s", b1.Error)
	assert.Equal(t, int64(size*1024), b1.BytesTotal)
	assert.Equal(t, int64(4*backup.ChunkSize), b1.BytesSent, "4 chunks hold data, 12 are zeros (not sent)")
	assert.Empty(t, b1.Base, "the first backup is full")

	// What is on the bucket: one manifest, the chunks it names (zeros not stored).
	objs := s3.Objects("cairn/")
	require.Contains(t, objs, backup.ManifestKey("r1", "s1"))
	var stored int64
	for k, n := range objs {
		if strings.HasPrefix(k, "cairn/chunks/") {
			stored += n
		}
	}
	assert.Equal(t, b1.BytesSent, stored, "what the backup says it sent is what the bucket holds")

	code, body = httpJSON(t, "GET", c.s.url("/cairn/v1/remotes/s3/backups"), "")
	require.Equal(t, 200, code, body)
	list := decode[struct{ Backups []gateway.BackupSummary }](t, body)
	require.Len(t, list.Backups, 1)
	assert.Equal(t, b1.ManifestSHA256, list.Backups[0].SHA256)
	code, body = httpJSON(t, "POST", c.s.url("/cairn/v1/remotes/s3/backups/r1/s1/verify"), "")
	require.Equal(t, 200, code, body)
	assert.Contains(t, body, `"ok":true`)

	// An incremental: one block written after the first 1,000 lands in chunk 3; that
	// chunk alone is sent.
	rdData := c.diskData("r1", "n1", size)
	n1Snap := c.snapshotData("r1", "s1", "n1", size)
	require.Equal(t, rdData, n1Snap, "nothing written since s1")
	require.NoError(t, c.write("r1", "n1", 1))
	c.snapshotTaken("r1", "s2")
	c.cmd("backup.create", `{"resource":"r1","remote":"s3","snapshot":"s2"}`)
	b2 := c.waitBackup("r1", "s3", "s2", 60*time.Second)
	require.Equal(t, projections.BackupDone, b2.Phase, b2.Error)
	assert.Equal(t, "s1", b2.Base)
	assert.Equal(t, int64(1), b2.ChunksSent, "one chunk changed, one sent")
	assert.Equal(t, int64(backup.ChunkSize), b2.BytesSent)

	// A fresh cluster restores s1 (not the latest) from the bucket alone, after s2 was
	// deleted (its manifest at once; its one chunk is younger than the grace and stays).
	code, body = httpJSON(t, "DELETE", c.s.url("/cairn/v1/remotes/s3/backups/r1/s2"), "")
	require.Equal(t, 200, code, body)
	assert.NotContains(t, s3.Objects("cairn/backups/"), backup.ManifestKey("r1", "s2"))
	assert.Contains(t, s3.Objects("cairn/backups/"), backup.ManifestKey("r1", "s1"))
	rv1 := c.resource("r1")
	b2gone, _ := rv1.Backup("s3", "s2")
	assert.Equal(t, projections.BackupDeleted, b2gone.Phase)
	c2 := startSimCluster(t, 2)
	c2.cmd("remote.create", s3.RemoteBody("offsite"))
	code, body = httpJSON(t, "POST", c2.s.url("/cairn/v1/remotes/offsite/backups/r1/s1/restore"), `{"target":"r1-restored","nodes":["n1","n2"],"storage_pool":"thin"}`)
	require.Equal(t, 200, code, body)
	c2.waitUpToDate("r1-restored", 2, 60*time.Second)
	for _, n := range []string{"n1", "n2"} {
		got := c2.diskData("r1-restored", n, size)
		if !bytes.Equal(n1Snap, got) {
			t.Fatalf("the restored disk on %s differs from snapshot s1", n)
		}
	}
	rv := c2.resource("r1-restored")
	require.NotNil(t, rv.RestoredFromBackup)
	assert.Equal(t, b1.ManifestSHA256, rv.RestoredFromBackup.ManifestSHA256)
	var events []map[string]any
	out, _ = run(t, "audit", "--json", "--type", "replica.added", "--nats", c2.s.natsURL())
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var ev map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &ev), line)
		events = append(events, ev)
	}
	require.Len(t, events, 2)
	for _, ev := range events {
		data, _ := json.Marshal(ev)
		assert.Contains(t, string(data), `"restore_backup"`)
		assert.NotContains(t, string(data), `"full_sync":true`, "restored disks start in sync")
	}
}

// attemptAfterFirst matches an upload's error from its second attempt on.
var attemptAfterFirst = regexp.MustCompile(`^attempt ([2-9]|[1-9][0-9]+): `)

// uploadStatus is the upload of backup id as rd's node reports it (ok false before the
// first report of it).
func (c *simCluster) uploadStatus(rd, node, id string) (drbd.BackupStatus, bool) {
	for _, r := range c.resource(rd).Replicas {
		if r.Node != node || r.Observed == nil {
			continue
		}
		for _, b := range r.Observed.Backups {
			if b.ID == id {
				return b, true
			}
		}
	}
	return drbd.BackupStatus{}, false
}

// An upload interrupted twice, once by its agent killed (SIGKILL) and once by the S3
// server stopped for a while, finishes later without an operator, sending what it had
// not sent before; meanwhile no backup is listed on the remote (no manifest), and the
// backup restores byte for byte. The agents upload at 4 MiB/s (--backup-bandwidth), so
// the 24 MiB of data take about 6 s: time to interrupt it.
func TestBackupResumesAfterAnAgentKillAndAnS3Outage(t *testing.T) {
	s3 := testtools.StartS3(t)
	c := startSimClusterWith(t, 2, []string{"--backup-bandwidth", "4"})
	const size = 32768
	c.cmd("rg.create", `{"name":"rg2","place_count":2,"storage_pool":"thin"}`)
	c.cmd("rg.spawn", fmt.Sprintf(`{"resource_group":"rg2","name":"r1","size_kib":%d}`, size))
	c.waitUpToDate("r1", 2, 60*time.Second)
	require.NoError(t, c.write("r1", "n1", 6144)) // 24 MiB: chunks 0-23
	c.snapshotTaken("r1", "s1")
	c.cmd("remote.create", s3.RemoteBody("s3"))
	c.cmd("backup.create", `{"resource":"r1","remote":"s3","snapshot":"s1","node":"n2"}`)
	listed := func() int {
		_, body := httpJSON(t, "GET", c.s.url("/cairn/v1/remotes/s3/backups"), "")
		return len(decode[struct{ Backups []gateway.BackupSummary }](t, body).Backups)
	}
	sentAtLeast := func(n int64) func() bool {
		return func() bool { b, ok := c.uploadStatus("r1", "n2", "s1"); return ok && b.ChunksSent >= n }
	}

	require.Eventually(t, sentAtLeast(4), 30*time.Second, 50*time.Millisecond, "the upload did not start")
	c.kill("n2")
	assert.Zero(t, listed(), "a backup is listed while its upload is cut off")
	assert.NotContains(t, s3.Objects("cairn/backups/"), backup.ManifestKey("r1", "s1"))
	firstRun := len(s3.Objects("cairn/chunks/"))
	require.Positive(t, firstRun)
	c.startAgent("n2")

	require.Eventually(t, sentAtLeast(4), 30*time.Second, 50*time.Millisecond, "the upload did not resume")
	s3.Stop()
	require.Eventually(t, func() bool {
		b, ok := c.uploadStatus("r1", "n2", "s1")
		return ok && strings.Contains(b.Error, "trying again")
	}, 60*time.Second, 100*time.Millisecond, "the outage is not reported")
	b := c.resource("r1")
	rb, _ := b.Backup("s3", "s1")
	assert.Equal(t, projections.BackupUploading, rb.Phase, "an outage does not fail the backup")
	require.Eventually(t, func() bool { // the outage lasts: retries go on meanwhile
		b, ok := c.uploadStatus("r1", "n2", "s1")
		return ok && attemptAfterFirst.MatchString(b.Error) // the 2nd, or a later one when the views lag (a loaded machine)
	}, 60*time.Second, 100*time.Millisecond, "no second attempt during the outage")
	s3.Start()

	done := c.waitBackup("r1", "s3", "s1", 120*time.Second)
	require.Equal(t, projections.BackupDone, done.Phase, done.Error)
	assert.Less(t, done.ChunksSent, int64(24), "the last run sent only what the runs before had not")
	assert.Equal(t, 1, listed())
	code, body := httpJSON(t, "POST", c.s.url("/cairn/v1/remotes/s3/backups/r1/s1/verify"), "")
	require.Equal(t, 200, code, body)
	assert.Contains(t, body, `"ok":true`)

	code, body = httpJSON(t, "POST", c.s.url("/cairn/v1/remotes/s3/backups/r1/s1/restore"), `{"target":"r1b","nodes":["n1"],"storage_pool":"thin"}`)
	require.Equal(t, 200, code, body)
	c.waitUpToDate("r1b", 1, 60*time.Second)
	require.True(t, bytes.Equal(c.snapshotData("r1", "s1", "n2", size), c.diskData("r1b", "n1", size)), "the restored disk differs from the snapshot")
}

// Wrong credentials and a bucket that does not exist fail the backup at once with the
// store's reason, before anything is sent (the bucket stays empty); the remote's
// listing says the same; a later backup to a good remote works.
func TestBackupToAWrongRemoteFailsClearly(t *testing.T) {
	s3 := testtools.StartS3(t)
	c := startSimCluster(t, 2)
	c.cmd("rg.create", `{"name":"rg2","place_count":2,"storage_pool":"thin"}`)
	c.cmd("rg.spawn", `{"resource_group":"rg2","name":"r1","size_kib":4096}`)
	c.waitUpToDate("r1", 2, 60*time.Second)
	require.NoError(t, c.write("r1", "n1", 10))
	c.snapshotTaken("r1", "s1")

	wrongKey := strings.Replace(s3.RemoteBody("wrongkey"), s3.SecretKey, "not-the-secret", 1)
	noBucket := strings.Replace(s3.RemoteBody("nobucket"), `"bucket":"backups"`, `"bucket":"no-such-bucket"`, 1)
	c.cmd("remote.create", wrongKey)
	c.cmd("remote.create", noBucket)
	// SeaweedFS answers a bucket check with wrong credentials AccessDenied, a listing
	// SignatureDoesNotMatch: either is a refusal of the credentials.
	creds := regexp.MustCompile(`AccessDenied|SignatureDoesNotMatch|InvalidAccessKeyId`)
	for remote, want := range map[string]*regexp.Regexp{"wrongkey": creds, "nobucket": regexp.MustCompile("no-such-bucket does not exist")} {
		c.cmd("backup.create", fmt.Sprintf(`{"resource":"r1","remote":%q,"snapshot":"s1"}`, remote))
		b := c.waitBackup("r1", remote, "s1", 30*time.Second)
		assert.Equal(t, projections.BackupFailed, b.Phase, remote)
		assert.Regexp(t, want, b.Error, remote)
		code, body := httpJSON(t, "GET", c.s.url("/cairn/v1/remotes/"+remote+"/backups"), "")
		assert.Equal(t, 422, code, body)
		assert.Regexp(t, want, body)
	}
	assert.Empty(t, s3.Objects(""), "nothing was sent")

	c.cmd("remote.create", s3.RemoteBody("good"))
	c.cmd("backup.create", `{"resource":"r1","remote":"good","snapshot":"s1"}`)
	b := c.waitBackup("r1", "good", "s1", 30*time.Second)
	assert.Equal(t, projections.BackupDone, b.Phase, b.Error)
}

// The unmodified LINSTOR CLI drives backups: `remote create s3`, `remote list` (no
// secret), `backup create` (a snapshot taken, then the upload), `backup list` (Shipping,
// then Success, with LINSTOR's ids), `backup info`, `backup restore` into a new
// definition on a node (the data byte-equal to the snapshot's), and `backup delete id`.
func TestLinstorCLIBackups(t *testing.T) {
	s3 := testtools.StartS3(t)
	c := startSimCluster(t, 2)
	linstor := linstorCLI(t, "http://"+c.s.httpAddr)
	c.cmd("rg.create", `{"name":"rg2","place_count":2,"storage_pool":"thin"}`)
	c.cmd("rg.spawn", `{"resource_group":"rg2","name":"r1","size_kib":8192}`)
	c.waitUpToDate("r1", 2, 60*time.Second)
	require.NoError(t, c.write("r1", "n1", 700))

	out, errOut, code := linstor("remote", "create", "s3", "--use-path-style", "offsite", s3.Endpoint, s3.Bucket, "us-east-1", s3.AccessKey, s3.SecretKey)
	require.Equal(t, 0, code, out+errOut)
	out, _, code = linstor("remote", "list")
	require.Equal(t, 0, code)
	assert.Contains(t, out, "offsite")
	assert.Contains(t, out, s3.Bucket)
	assert.NotContains(t, out, s3.SecretKey)
	_, _, code = linstor("remote", "create", "s3", "offsite", s3.Endpoint, s3.Bucket, "us-east-1", s3.AccessKey, s3.SecretKey)
	assert.NotEqual(t, 0, code, "a second remote of the same name")
	// A wrong secret key, then the right one again with remote modify: the backup below
	// works with what the remote has last.
	out, errOut, code = linstor("remote", "modify", "s3", "--secret_key", "wrong-secret", "offsite")
	require.Equal(t, 0, code, out+errOut)
	code, body := httpJSON(t, "GET", c.s.url("/cairn/v1/remotes/offsite/backups"), "")
	assert.Equal(t, 422, code, body)
	out, errOut, code = linstor("remote", "modify", "s3", "--secret_key", s3.SecretKey, "offsite")
	require.Equal(t, 0, code, out+errOut)

	out, errOut, code = linstor("backup", "create", "--snapshot", "nightly1", "offsite", "r1")
	require.Equal(t, 0, code, out+errOut)
	b := c.waitBackup("r1", "offsite", "nightly1", 60*time.Second)
	require.Equal(t, projections.BackupDone, b.Phase, b.Error)
	require.NoError(t, c.write("r1", "n1", 1))
	out, errOut, code = linstor("backup", "create", "--snapshot", "nightly2", "offsite", "r1")
	require.Equal(t, 0, code, out+errOut)
	b2 := c.waitBackup("r1", "offsite", "nightly2", 60*time.Second)
	require.Equal(t, projections.BackupDone, b2.Phase, b2.Error)
	assert.Equal(t, "nightly1", b2.Base, "incremental by default, as LINSTOR's")
	out, errOut, code = linstor("backup", "create", "--full", "--snapshot", "nightly3", "offsite", "r1")
	require.Equal(t, 0, code, out+errOut)
	b3 := c.waitBackup("r1", "offsite", "nightly3", 60*time.Second)
	assert.Empty(t, b3.Base, "--full")

	out, errOut, code = linstor("--machine-readable", "backup", "list", "offsite")
	require.Equal(t, 0, code, out+errOut)
	var list struct {
		Linstor map[string]struct {
			ID         string `json:"id"`
			OriginRsc  string `json:"origin_rsc"`
			OriginSnap string `json:"origin_snap"`
			Restorable bool   `json:"restorable"`
			BasedOnID  string `json:"based_on_id"`
		} `json:"linstor"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &list), out) // machine-readable raw: the object as served
	require.Len(t, list.Linstor, 3)
	assert.True(t, list.Linstor["r1_nightly1"].Restorable)
	assert.Equal(t, "r1_nightly1.meta", list.Linstor["r1_nightly2"].BasedOnID)
	out, _, code = linstor("backup", "list", "--show-id", "offsite")
	require.Equal(t, 0, code)
	assert.Contains(t, out, "nightly1")
	assert.Contains(t, out, "Success")

	out, errOut, code = linstor("backup", "info", "--id", "r1_nightly2", "offsite")
	require.Equal(t, 0, code, out+errOut)
	assert.Contains(t, out, "r1_nightly1", "its full backup")

	out, errOut, code = linstor("backup", "restore", "--id", "r1_nightly1", "offsite", "n2", "r1-back")
	require.Equal(t, 0, code, out+errOut)
	c.waitUpToDate("r1-back", 1, 60*time.Second)
	require.True(t, bytes.Equal(c.snapshotData("r1", "nightly1", "n1", 8192), c.diskData("r1-back", "n2", 8192)), "the restored disk differs from the snapshot")
	_, _, code = linstor("backup", "restore", "--id", "r1_nosuch", "offsite", "n2", "r1-none")
	assert.NotEqual(t, 0, code)
	out, errOut, code = linstor("backup", "restore", "--resource", "r1", "offsite", "n1", "r1-latest") // the latest: nightly3
	require.Equal(t, 0, code, out+errOut)
	c.waitUpToDate("r1-latest", 1, 60*time.Second)
	require.True(t, bytes.Equal(c.snapshotData("r1", "nightly3", "n1", 8192), c.diskData("r1-latest", "n1", 8192)), "the latest backup restored")
	out, errOut, code = linstor("backup", "abort", "offsite", "r1")
	require.Equal(t, 0, code, out+errOut)
	assert.Contains(t, out, "is shipping to remote", "nothing to abort: a warning")

	out, errOut, code = linstor("backup", "delete", "id", "offsite", "r1_nightly3")
	require.Equal(t, 0, code, out+errOut)
	out, _, _ = linstor("--machine-readable", "backup", "list", "offsite")
	assert.NotContains(t, out, "r1_nightly3")
	assert.Contains(t, out, "r1_nightly2")
	out, errOut, code = linstor("backup", "delete", "all", "offsite")
	require.Equal(t, 0, code, out+errOut)
	assert.Empty(t, s3.Objects("cairn/backups/"), "every manifest deleted")
	_, _, code = linstor("remote", "delete", "offsite")
	assert.Equal(t, 0, code)
	out, _, _ = linstor("remote", "list")
	assert.NotContains(t, out, "offsite")
}

// scheduledRuns are rd's backups that are runs of schedule, as the audit records their
// starts: id -> the run's missed count.
func scheduledRuns(t *testing.T, s *serve, schedule string) map[string]int {
	out, code := run(t, "audit", "--json", "--type", "rd.backup-started", "--nats", s.natsURL())
	require.Equal(t, 0, code, out)
	runs := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		var ev struct {
			Actor string   `json:"actor"`
			Data  struct { // the envelope's payload
				ID       string `json:"id"`
				Schedule string `json:"schedule"`
				Missed   int    `json:"missed"`
			} `json:"payload"`
		}
		require.NoError(t, json.Unmarshal([]byte(line), &ev), line)
		if ev.Data.Schedule == schedule {
			assert.Equal(t, "serve:schedule:"+schedule, ev.Actor)
			runs[ev.Data.ID] = ev.Data.Missed
		}
	}
	return runs
}

// A backup schedule set up with the unmodified LINSTOR CLI (`schedule create`, `backup
// schedule enable --rd`) runs by itself: full backups every 4 s and incremental ones
// every 2 s in between, each run in the audit under the schedule's name; retention
// keeps the 2 newest of its snapshots and, on the remote, the newest full backup with
// what follows it; a serve down across due times runs once when back and records how
// many it missed; after `backup schedule disable` no run starts.
func TestBackupScheduleRunsByItself(t *testing.T) {
	s3 := testtools.StartS3(t)
	c := startSimCluster(t, 2, "--schedule-interval", "200ms")
	linstor := linstorCLI(t, "http://"+c.s.httpAddr)
	c.cmd("rg.create", `{"name":"rg2","place_count":2,"storage_pool":"thin"}`)
	c.cmd("rg.spawn", `{"resource_group":"rg2","name":"r1","size_kib":4096}`)
	c.waitUpToDate("r1", 2, 60*time.Second)
	require.NoError(t, c.write("r1", "n1", 10))
	out, errOut, code := linstor("remote", "create", "s3", "--use-path-style", "offsite", s3.Endpoint, s3.Bucket, "us-east-1", s3.AccessKey, s3.SecretKey)
	require.Equal(t, 0, code, out+errOut)
	out, errOut, code = linstor("schedule", "create", "--incremental-cron", "@every 2s", "--keep-local", "2", "--keep-remote", "1", "fast", "@every 4s")
	require.Equal(t, 0, code, out+errOut)
	out, _, code = linstor("schedule", "list")
	require.Equal(t, 0, code)
	assert.Contains(t, out, "@every 4s")
	out, errOut, code = linstor("backup", "schedule", "enable", "--rd", "r1", "offsite", "fast")
	require.Equal(t, 0, code, out+errOut)

	// Runs happen: fulls and incrementals.
	require.Eventually(t, func() bool {
		rv := c.resource("r1")
		fulls, incs := 0, 0
		for _, b := range rv.Backups {
			if b.Schedule == "fast" && (b.Phase == projections.BackupDone || b.Phase == projections.BackupDeleted) {
				if b.Base == "" {
					fulls++
				} else {
					incs++
				}
			}
		}
		return fulls >= 2 && incs >= 1
	}, 60*time.Second, 200*time.Millisecond, "the schedule did not run full and incremental backups")

	// Retention: at most 2 of the schedule's snapshots stay; on the remote, nothing
	// before the newest complete full backup.
	require.Eventually(t, func() bool {
		rv := c.resource("r1")
		snaps := 0
		for _, s := range rv.Snapshots {
			if strings.HasPrefix(s.Name, "fast-") && s.Phase == projections.SnapshotTaken {
				snaps++
			}
		}
		var newestFull uint64
		for _, b := range rv.Backups {
			if b.Base == "" && b.Phase == projections.BackupDone && b.StartedSeq > newestFull {
				newestFull = b.StartedSeq
			}
		}
		_, body := httpJSON(t, "GET", c.s.url("/cairn/v1/remotes/offsite/backups"), "")
		listed := decode[struct{ Backups []gateway.BackupSummary }](t, body).Backups
		for _, l := range listed {
			b, ok := rv.Backup("offsite", l.ID)
			if !ok || b.StartedSeq < newestFull {
				return false
			}
		}
		return snaps <= 2 && len(listed) >= 1
	}, 30*time.Second, 200*time.Millisecond, "retention did not keep to keep_local 2 / keep_remote 1")

	// Down across due times: one run when back, with the misses recorded.
	before := scheduledRuns(t, c.s, "fast")
	require.NotEmpty(t, before)
	c.s.stop()
	time.Sleep(9 * time.Second) // two full and four incremental due times pass
	c.s.start()
	require.Eventually(t, func() bool {
		for id, missed := range scheduledRuns(t, c.s, "fast") {
			if _, old := before[id]; !old && missed >= 1 {
				return true
			}
		}
		return false
	}, 30*time.Second, 200*time.Millisecond, "no run after the serve came back records its misses")

	// `schedule modify` changes what it names and keeps the rest; a bad cron or an
	// unknown schedule is refused (exit 10) naming it, nothing changed.
	out, errOut, code = linstor("schedule", "modify", "--keep-local", "3", "--on-failure", "retry", "--max-retries", "2", "fast")
	require.Equal(t, 0, code, out+errOut)
	var scheds struct {
		Data []struct {
			Name       string `json:"schedule_name"`
			FullCron   string `json:"full_cron"`
			IncCron    string `json:"inc_cron"`
			KeepLocal  int    `json:"keep_local"`
			KeepRemote int    `json:"keep_remote"`
			OnFailure  string `json:"on_failure"`
			MaxRetries int    `json:"max_retries"`
		} `json:"data"`
	}
	out, _, code = linstor("-m", "schedule", "list")
	require.Equal(t, 0, code)
	require.NoError(t, json.Unmarshal([]byte(out), &scheds), out)
	require.Len(t, scheds.Data, 1, out)
	got := scheds.Data[0]
	assert.Equal(t, "@every 4s", got.FullCron)
	assert.Equal(t, "@every 2s", got.IncCron)
	assert.Equal(t, 3, got.KeepLocal)
	assert.Equal(t, 1, got.KeepRemote)
	assert.Equal(t, "RETRY", got.OnFailure)
	assert.Equal(t, 2, got.MaxRetries)
	out, errOut, code = linstor("schedule", "modify", "--full-cron", "61 * * * *", "fast")
	assert.Equal(t, 10, code, out+errOut)
	assert.Contains(t, out+errOut, "full_cron")
	out, errOut, code = linstor("schedule", "modify", "--keep-local", "1", "ghost")
	assert.Equal(t, 10, code, out+errOut)
	assert.Contains(t, out+errOut, "ghost")

	out, errOut, code = linstor("backup", "schedule", "disable", "--rd", "r1", "offsite", "fast")
	require.Equal(t, 0, code, out+errOut)
	require.Eventually(t, func() bool { // a run started just before may still finish
		for _, b := range c.resource("r1").Backups {
			if b.Phase == projections.BackupUploading {
				return false
			}
		}
		return true
	}, 30*time.Second, 100*time.Millisecond)
	settled := len(scheduledRuns(t, c.s, "fast"))
	time.Sleep(5 * time.Second) // two full and two incremental due times
	assert.Equal(t, settled, len(scheduledRuns(t, c.s, "fast")), "a run started after the schedule was disabled")
	_, _, code = linstor("schedule", "delete", "fast")
	assert.Equal(t, 0, code)
}

// A remote with an encryption passphrase (and the agents' uploads paced): the agents
// encrypt every chunk before it leaves the node (the bucket holds neither the data nor its plain hashes, and the
// passphrase is nowhere in the history); a fresh cluster restores it with the same
// passphrase, byte for byte; with another one, verify and the restore fail saying so.
func TestEncryptedBackupRestoresOnlyWithItsPassphrase(t *testing.T) {
	s3 := testtools.StartS3(t)
	// Paced at 1 MiB/s: an encrypted chunk is a little more than a chunk, and the
	// limiter must let it through (its burst once held exactly one plain chunk).
	c := startSimClusterWith(t, 2, []string{"--backup-bandwidth", "1"})
	c.cmd("rg.create", `{"name":"rg2","place_count":2,"storage_pool":"thin"}`)
	c.cmd("rg.spawn", `{"resource_group":"rg2","name":"r1","size_kib":4096}`)
	c.waitUpToDate("r1", 2, 60*time.Second)
	require.NoError(t, c.write("r1", "n1", 300))
	c.snapshotTaken("r1", "s1")
	withPass := func(name, pass string) string {
		return strings.TrimSuffix(s3.RemoteBody(name), "}") + fmt.Sprintf(`,"encryption_passphrase":%q}`, pass)
	}
	c.cmd("remote.create", withPass("vault", "the right passphrase"))
	c.cmd("backup.create", `{"resource":"r1","remote":"vault","snapshot":"s1"}`)
	b := c.waitBackup("r1", "vault", "s1", 60*time.Second)
	require.Equal(t, projections.BackupDone, b.Phase, b.Error)

	snap := c.snapshotData("r1", "s1", "n1", 4096)
	plain := sha256.Sum256(snap[:backup.ChunkSize])
	objs := s3.Objects("cairn/chunks/")
	require.NotEmpty(t, objs)
	assert.NotContains(t, objs, backup.ChunkKey(hex.EncodeToString(plain[:])), "a chunk named by its plain SHA-256")
	for key := range objs {
		o, err := s3.Client().GetObject(context.Background(), s3.Bucket, key, minio.GetObjectOptions{})
		require.NoError(t, err)
		data, err := io.ReadAll(o)
		o.Close()
		require.NoError(t, err)
		assert.False(t, bytes.Contains(data, snap[:4096]), "chunk %s holds the data in clear", key)
	}
	audit, _ := run(t, "audit", "--json", "--nats", c.s.natsURL())
	assert.NotContains(t, audit, "the right passphrase")
	_, body := httpJSON(t, "GET", c.s.url("/cairn/v1/remotes"), "")
	assert.Contains(t, body, `"encrypted":true`)

	c2 := startSimCluster(t, 2)
	c2.cmd("remote.create", withPass("good", "the right passphrase"))
	c2.cmd("remote.create", withPass("wrong", "not the passphrase"))
	code, body := httpJSON(t, "POST", c2.s.url("/cairn/v1/remotes/wrong/backups/r1/s1/verify"), "")
	assert.Equal(t, 422, code, body)
	assert.Contains(t, body, "another passphrase")
	code, body = httpJSON(t, "POST", c2.s.url("/cairn/v1/remotes/good/backups/r1/s1/verify"), "")
	require.Equal(t, 200, code, body)
	assert.Contains(t, body, `"ok":true`)
	code, body = httpJSON(t, "POST", c2.s.url("/cairn/v1/remotes/wrong/backups/r1/s1/restore"), `{"target":"bad","nodes":["n1"]}`)
	require.Equal(t, 200, code, body) // admitted: the agent finds out
	require.Eventually(t, func() bool {
		for _, r := range c2.resource("bad").Replicas {
			if r.Observed != nil && strings.Contains(r.Observed.Error, "another passphrase") {
				return true
			}
		}
		return false
	}, 30*time.Second, 100*time.Millisecond, "the agent did not say the passphrase is wrong")
	code, body = httpJSON(t, "POST", c2.s.url("/cairn/v1/remotes/good/backups/r1/s1/restore"), `{"target":"r1b","nodes":["n1","n2"]}`)
	require.Equal(t, 200, code, body)
	c2.waitUpToDate("r1b", 2, 60*time.Second)
	for _, n := range []string{"n1", "n2"} {
		require.True(t, bytes.Equal(snap, c2.diskData("r1b", n, 4096)), "the restored disk on %s differs", n)
	}
}

// smallDisk mounts a tmpfs of sizeMiB at a new directory for the test (the machine's
// disks are far from full); grow remounts it larger.
func smallDisk(t *testing.T, sizeMiB int) (dir string, grow func(sizeMiB int)) {
	t.Helper()
	dir = t.TempDir()
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%dm", sizeMiB), "tmpfs", dir).CombinedOutput()
	require.NoError(t, err, "mount a small tmpfs (the test runs as root, as CI does): %s", out)
	t.Cleanup(func() { _ = exec.Command("umount", "-l", dir).Run() })
	return dir, func(sizeMiB int) {
		out, err := exec.Command("mount", "-o", fmt.Sprintf("remount,size=%dm", sizeMiB), dir).CombinedOutput()
		require.NoError(t, err, "grow the tmpfs: %s", out)
	}
}

// The S3 server's disk fills up in the middle of an upload: the backup waits with the
// server's answer in its status (it does not fail: space may come back), no half
// backup is ever listed, and once the disk has room again it finishes without an
// operator, complete (verify reads every chunk back).
func TestBackupToAFullS3DiskWaitsForSpace(t *testing.T) {
	disk, grow := smallDisk(t, 16)
	s3 := testtools.StartS3On(t, disk)
	c := startSimCluster(t, 2)
	const size = 32768
	c.cmd("rg.create", `{"name":"rg2","place_count":2,"storage_pool":"thin"}`)
	c.cmd("rg.spawn", fmt.Sprintf(`{"resource_group":"rg2","name":"r1","size_kib":%d}`, size))
	c.waitUpToDate("r1", 2, 60*time.Second)
	require.NoError(t, c.write("r1", "n1", 6144)) // 24 MiB of chunks: more than the 16 MiB disk
	c.snapshotTaken("r1", "s1")
	c.cmd("remote.create", s3.RemoteBody("s3"))
	c.cmd("backup.create", `{"resource":"r1","remote":"s3","snapshot":"s1"}`)

	var st drbd.BackupStatus
	require.Eventually(t, func() bool {
		var ok bool
		st, ok = c.uploadStatus("r1", "n1", "s1")
		return ok && strings.Contains(st.Error, "trying again")
	}, 60*time.Second, 100*time.Millisecond, "the full disk is not reported: %+v", st)
	assert.Contains(t, st.Error, "internal error", "the server's answer, as it gave it")
	assert.Less(t, st.ChunksSent, int64(24))
	rv := c.resource("r1")
	b, _ := rv.Backup("s3", "s1")
	assert.Equal(t, projections.BackupUploading, b.Phase, "a full disk does not fail the backup")
	_, body := httpJSON(t, "GET", c.s.url("/cairn/v1/remotes/s3/backups"), "")
	assert.Empty(t, decode[struct{ Backups []gateway.BackupSummary }](t, body).Backups, "a half backup is listed")
	assert.NotContains(t, s3.Objects("cairn/backups/"), backup.ManifestKey("r1", "s1"))

	grow(96)
	done := c.waitBackup("r1", "s3", "s1", 120*time.Second)
	require.Equal(t, projections.BackupDone, done.Phase, done.Error)
	code, body := httpJSON(t, "POST", c.s.url("/cairn/v1/remotes/s3/backups/r1/s1/verify"), "")
	require.Equal(t, 200, code, body)
	assert.Contains(t, body, `"ok":true`)
}
