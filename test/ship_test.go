package test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-io/cairn/projections"
	"github.com/cairn-io/cairn/storage/backup"
	"github.com/cairn-io/cairn/storage/backup/httpstore"
)

// waitShip waits until shipped backup id of rd is neither uploading nor waiting for its
// target's answer, and returns it.
func (c *simCluster) waitShip(rd, remote, id string, timeout time.Duration) projections.RDBackup {
	c.t.Helper()
	return c.waitBackupUntil(rd, remote, id, timeout, "not finished shipping", func(b projections.RDBackup) bool {
		return b.Ship != nil && b.Ship.Phase != projections.ShipWaiting && b.Ship.Phase != projections.ShipRestoring
	})
}

// A definition shipped to another cluster (backup ship between two serves): the other
// cluster restores it into a new definition whose disks hold the snapshot's data byte
// for byte (compared on the disk files); a second ship after one chunk changed sends
// that chunk only and lands on one node the target picks; a ship to a definition the
// target already has fails with the target's reason, and the data the first ship
// restored stays as it was.
func TestShipToAnotherCluster(t *testing.T) {
	a := startSimCluster(t, 2)
	b := startSimCluster(t, 2)
	const size = 16384 // KiB: 16 chunks
	a.cmd("rg.create", `{"name":"rg2","place_count":2,"storage_pool":"thin"}`)
	a.cmd("rg.spawn", fmt.Sprintf(`{"resource_group":"rg2","name":"r1","size_kib":%d}`, size))
	a.waitUpToDate("r1", 2, 60*time.Second)
	require.NoError(t, a.write("r1", "n1", 1000)) // 4,000 KiB: chunks 0-3
	a.snapshotTaken("r1", "s1")

	// A cluster remote is refused with S3's fields, or an endpoint with a path.
	out, code := run(t, "cmd", "remote.create", fmt.Sprintf(`{"name":"b","kind":"cairn","endpoint":%q,"bucket":"x"}`, b.s.url("")), "--nats", a.s.natsURL())
	require.NotEqual(t, 0, code)
	assert.Contains(t, out, "bucket")
	out, code = run(t, "cmd", "remote.create", fmt.Sprintf(`{"name":"b","kind":"cairn","endpoint":%q}`, b.s.url("/cairn")), "--nats", a.s.natsURL())
	require.NotEqual(t, 0, code)
	assert.Contains(t, out, "endpoint")
	a.cmd("remote.create", fmt.Sprintf(`{"name":"b","kind":"cairn","endpoint":%q}`, b.s.url("")))
	out, code = run(t, "cmd", "remote.create", `{"name":"received","kind":"cairn","endpoint":"http://127.0.0.1:1"}`, "--nats", a.s.natsURL())
	require.NotEqual(t, 0, code)
	assert.Contains(t, out, "received")

	a.cmd("backup.ship", `{"resource":"r1","remote":"b","snapshot":"s1","target":"r1copy","target_nodes":["n1","n2"],"target_storage_pool":"thin"}`)
	s1 := a.waitShip("r1", "b", "s1", 90*time.Second)
	require.Equal(t, projections.BackupDone, s1.Phase, s1.Error)
	require.Equal(t, projections.ShipDone, s1.Ship.Phase, s1.Ship.Error)
	assert.Equal(t, int64(4*backup.ChunkSize), s1.BytesSent, "4 chunks hold data, 12 are zeros (not sent)")

	b.waitUpToDate("r1copy", 2, 60*time.Second)
	want := a.snapshotData("r1", "s1", "n1", size)
	for _, n := range []string{"n1", "n2"} {
		if !bytes.Equal(want, b.diskData("r1copy", n, size)) {
			t.Fatalf("r1copy on the target's %s differs from snapshot s1", n)
		}
	}
	rv := b.resource("r1copy")
	require.NotNil(t, rv.RestoredFromBackup)
	assert.Equal(t, "received", rv.RestoredFromBackup.Remote)
	assert.Equal(t, s1.ManifestSHA256, rv.RestoredFromBackup.ManifestSHA256)
	// The target lists what was shipped to it; the source lists it on its remote.
	code, body := httpJSON(t, "GET", b.s.url("/cairn/v1/remotes/received/backups"), "")
	require.Equal(t, 200, code, body)
	assert.Contains(t, body, `"id":"s1"`)
	code, body = httpJSON(t, "GET", a.s.url("/cairn/v1/remotes/b/backups?resource=r1"), "")
	require.Equal(t, 200, code, body)
	assert.Contains(t, body, s1.ManifestSHA256)
	code, body = httpJSON(t, "POST", b.s.url("/cairn/v1/remotes/received/backups/r1/s1/verify"), "")
	require.Equal(t, 200, code, body)
	assert.Contains(t, body, `"ok":true`)

	// Asked again (its first answer lost), the target answers done: r1copy says it was
	// restored from this backup. Another backup into r1copy is refused.
	target, err := httpstore.New(httpstore.Config{URL: b.s.url("")}, nil)
	require.NoError(t, err)
	answered, err := target.Restore(context.Background(), "r1", "s1", httpstore.RestoreRequest{Target: "r1copy", Nodes: []string{"n1", "n2"}})
	assert.True(t, answered)
	assert.NoError(t, err, "the same restore asked again")

	// The received store takes an object only with its SHA-256, and only when it matches.
	key := b.s.url("/cairn/v1/received/objects/cairn/chunks/00/x")
	code, body = httpJSON(t, "PUT", key, "data")
	assert.Equal(t, 400, code, body)
	assert.Contains(t, body, "X-Cairn-Sha256")
	code, body = httpJSON(t, "PUT", key, "data", "X-Cairn-Sha256", strings.Repeat("ab", 32))
	assert.Equal(t, 400, code, body)
	assert.Contains(t, body, "nothing stored")
	code, body = httpJSON(t, "GET", key, "")
	assert.Equal(t, 404, code, body)
	sum := sha256.Sum256([]byte("data"))
	code, body = httpJSON(t, "PUT", key, "data", "X-Cairn-Sha256", hex.EncodeToString(sum[:]))
	assert.Equal(t, 200, code, body)
	code, body = httpJSON(t, "GET", key, "")
	assert.Equal(t, 200, code, body)
	assert.Equal(t, "data", body)
	code, body = httpJSON(t, "DELETE", key, "")
	assert.Equal(t, 200, code, body)

	// Incremental: one more block lands in chunk 3; only that chunk travels. No target
	// nodes: the target places one disk.
	require.NoError(t, a.write("r1", "n1", 1))
	a.snapshotTaken("r1", "s2")
	a.cmd("backup.ship", `{"resource":"r1","remote":"b","snapshot":"s2","target":"r1copy2"}`)
	s2 := a.waitShip("r1", "b", "s2", 90*time.Second)
	require.Equal(t, projections.ShipDone, s2.Ship.Phase, s2.Ship.Error)
	assert.Equal(t, "s1", s2.Base)
	assert.Equal(t, int64(1), s2.ChunksSent, "one chunk changed, one sent")
	rv2 := b.waitUpToDate("r1copy2", 1, 60*time.Second)
	node := diskfulNodes(rv2)[0]
	if !bytes.Equal(a.snapshotData("r1", "s2", "n1", size), b.diskData("r1copy2", node, size)) {
		t.Fatalf("r1copy2 differs from snapshot s2")
	}

	// The target deletes what was shipped to it like any backup: listed no more.
	code, body = httpJSON(t, "DELETE", b.s.url("/cairn/v1/remotes/received/backups/r1/s2"), "")
	require.Equal(t, 200, code, body)
	code, body = httpJSON(t, "GET", b.s.url("/cairn/v1/remotes/received/backups"), "")
	require.Equal(t, 200, code, body)
	assert.NotContains(t, body, `"id":"s2"`)
	assert.Contains(t, body, `"id":"s1"`)

	// A ship into a definition the target has fails with the target's reason.
	a.snapshotTaken("r1", "s3")
	a.cmd("backup.ship", `{"resource":"r1","remote":"b","snapshot":"s3","target":"r1copy"}`)
	s3 := a.waitShip("r1", "b", "s3", 90*time.Second)
	require.Equal(t, projections.BackupDone, s3.Phase, "the upload itself completed")
	require.Equal(t, projections.ShipFailed, s3.Ship.Phase)
	assert.Contains(t, s3.Ship.Error, "already exists")
	if !bytes.Equal(want, b.diskData("r1copy", "n1", size)) {
		t.Fatal("a refused ship changed the target's data")
	}
	// backup.ship to an S3-kind or unknown remote is refused naming the remote.
	out, code = run(t, "cmd", "backup.ship", `{"resource":"r1","remote":"nope","snapshot":"s3","target":"x"}`, "--nats", a.s.natsURL())
	require.NotEqual(t, 0, code)
	assert.True(t, strings.Contains(out, "remote nope does not exist"), out)
}

// The unmodified LINSTOR CLI ships to another cluster that requires tokens: `remote
// create linstor` (its --passphrase is the target's API token), `remote list` (no
// token shown), `backup ship` with --target-node; a viewer's token is refused by the
// target and fails the backup at once, naming the role it needs.
func TestLinstorCLIShip(t *testing.T) {
	a := startSimCluster(t, 2)
	b := startSimCluster(t, 2, "--http-auth")
	mint := func(name, role string) string {
		out, errb, code := runAll(t, "auth", "token", "create", name, "--role", role, "--nats", b.s.natsURL())
		require.Equal(t, 0, code, errb)
		return strings.TrimSpace(out)
	}
	operator, viewer := mint("shipper", "operator"), mint("looker", "viewer")
	b.token = operator
	linstor := linstorCLI(t, "http://"+a.s.httpAddr)
	a.cmd("rg.create", `{"name":"rg2","place_count":2,"storage_pool":"thin"}`)
	a.cmd("rg.spawn", `{"resource_group":"rg2","name":"r1","size_kib":8192}`)
	a.waitUpToDate("r1", 2, 60*time.Second)
	require.NoError(t, a.write("r1", "n1", 700))

	out, errOut, code := linstor("remote", "create", "linstor", "--passphrase", viewer, "b", b.s.url(""))
	require.Equal(t, 0, code, out+errOut)
	out, _, code = linstor("remote", "list")
	require.Equal(t, 0, code)
	assert.Contains(t, out, b.s.url(""))
	assert.NotContains(t, out, viewer)
	out, errOut, code = linstor("backup", "ship", "--source-snapshot", "v1", "b", "r1", "r1copy")
	require.Equal(t, 0, code, out+errOut)
	failed := a.waitShip("r1", "b", "v1", 60*time.Second)
	assert.Equal(t, projections.BackupFailed, failed.Phase)
	assert.Contains(t, failed.Error, "operator role")
	assert.Equal(t, projections.ShipFailed, failed.Ship.Phase)

	out, errOut, code = linstor("remote", "modify", "linstor", "--passphrase", operator, "b")
	require.Equal(t, 0, code, out+errOut)
	out, errOut, code = linstor("backup", "ship", "--source-snapshot", "o1", "--target-node", "n2", "--target-storage-pool", "thin", "b", "r1", "r1copy")
	require.Equal(t, 0, code, out+errOut)
	shipped := a.waitShip("r1", "b", "o1", 60*time.Second)
	require.Equal(t, projections.ShipDone, shipped.Ship.Phase, "%s %s", shipped.Error, shipped.Ship.Error)
	rv := b.waitUpToDate("r1copy", 1, 60*time.Second)
	assert.Equal(t, []string{"n2"}, diskfulNodes(rv))
	if !bytes.Equal(a.snapshotData("r1", "o1", "n1", 8192), b.diskData("r1copy", "n2", 8192)) {
		t.Fatal("r1copy on the target differs from snapshot o1")
	}
	audit, _ := run(t, "audit", "--json", "--nats", a.s.natsURL())
	assert.Contains(t, audit, "remote.modified")
	assert.NotContains(t, audit, operator, "the token is in the history in clear")
	assert.NotContains(t, audit, viewer, "the token is in the history in clear")
	_, body := httpJSON(t, "GET", a.s.url("/cairn/v1/remotes"), "")
	assert.NotContains(t, body, operator)
	assert.Contains(t, body, `"kind":"cairn"`)
	out, _, code = linstor("backup", "list", "b")
	require.Equal(t, 0, code)
	assert.Regexp(t, `r1\s+\|\s+o1\s+\|.*Success`, out, "the shipped backup is listed on the remote, complete")
}
