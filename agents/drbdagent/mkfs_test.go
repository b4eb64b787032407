package drbdagent

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-io/cairn/agents/execx"
	"github.com/cairn-io/cairn/drbd"
	"github.com/cairn-io/cairn/test/testtools"
)

// TestMkfsAndTheSignatureGuard makes each filesystem type Cairn knows with the real
// tools in an image of a volume's size, and checks the guard on what blkid then finds:
// the same type counts as made, another is refused, nothing is made over it.
func TestMkfsAndTheSignatureGuard(t *testing.T) {
	testtools.Need(t, "mkfs.ext4", "mkfs.xfs", "blkid")
	ctx := context.Background()
	ex := &execx.Runner{Log: zerolog.Nop()}
	const sizeKiB = 320 << 10 // mkfs.xfs wants 300 MiB at least
	for _, typ := range []string{drbd.FilesystemExt4, drbd.FilesystemXFS} {
		t.Run(typ, func(t *testing.T) {
			o := drbd.FilesystemOrder{Volume: 0, Type: typ, Params: "-L vol0"}
			img, err := mkfsImage(ctx, ex, t.TempDir(), o, sizeKiB)
			require.NoError(t, err)
			defer os.Remove(img)
			sig, err := probeSignature(ctx, ex, img, sizeKiB*1024)
			require.NoError(t, err)
			assert.Equal(t, typ, sig)
			out, err := ex.Run(ctx, []string{"blkid", "-o", "value", "-s", "LABEL", img}, execx.Options{})
			require.NoError(t, err)
			assert.Equal(t, "vol0\n", string(out), "MkfsParams reach mkfs")

			mk, err := checkSignature(sig, o)
			assert.NoError(t, err)
			assert.False(t, mk, "the same type: made before, not made again")
			other := drbd.FilesystemOrder{Type: drbd.FilesystemXFS}
			if typ == drbd.FilesystemXFS {
				other.Type = drbd.FilesystemExt4
			}
			mk, err = checkSignature(sig, other)
			assert.False(t, mk)
			assert.ErrorContains(t, err, "never makes a filesystem ("+other.Type+") over data")
		})
	}
	empty, err := os.CreateTemp(t.TempDir(), "empty")
	require.NoError(t, err)
	require.NoError(t, empty.Truncate(sizeKiB*1024))
	require.NoError(t, empty.Close())
	sig, err := probeSignature(ctx, ex, empty.Name(), sizeKiB*1024)
	require.NoError(t, err)
	assert.Empty(t, sig)

	_, err = mkfsArgv(drbd.FilesystemOrder{Type: drbd.FilesystemXFS, User: "root"}, "/dev/null")
	assert.ErrorContains(t, err, "ext4 only")
	argv, err := mkfsArgv(drbd.FilesystemOrder{Type: drbd.FilesystemExt4, User: "0", Group: "0", Params: "-m 0"}, "/dev/drbd1000")
	require.NoError(t, err)
	assert.Equal(t, []string{"mkfs.ext4", "-q", "-F", "-E", "nodiscard,root_owner=0:0", "-m", "0", "/dev/drbd1000"}, argv)
}

// TestRealMakesTheFilesystemWhilePrimary: on a real host the filesystem is made on the
// DRBD device while the resource is Primary, which it is again not afterwards, also when
// the device carries another signature (then nothing is made). drbdsetup, blkid and mkfs
// answer through a recorder: the device needs the DRBD kernel module.
func TestRealMakesTheFilesystemWhilePrimary(t *testing.T) {
	d := drbd.Desired{Resource: "r1", Node: "n1", Local: &drbd.Local{NodeID: 0},
		Replicas: []drbd.Replica{{Node: "n1", NodeID: 0, Minors: map[int]int{0: 1000}}},
		Volumes:  []drbd.Volume{{Number: 0, SizeKiB: 8192}}}
	o := drbd.FilesystemOrder{Volume: 0, Type: drbd.FilesystemExt4}
	calls := func(rec *execx.Recorder) []string {
		var out []string
		for _, c := range rec.Calls() {
			out = append(out, c.String())
		}
		return out
	}

	rec := &execx.Recorder{Strict: true}
	rec.On("drbdsetup")
	rec.On("blkid").Fail(2, "")
	rec.On("mkfs.ext4")
	require.NoError(t, (&Real{Exec: rec}).MakeFilesystem(context.Background(), Resource{Desired: d}, o))
	assert.Equal(t, []string{
		"drbdsetup primary r1",
		"blkid -p -o value -s TYPE --size 8388608 /dev/drbd1000",
		"mkfs.ext4 -q -F -E nodiscard /dev/drbd1000",
		"drbdsetup secondary r1",
	}, calls(rec))

	rec = &execx.Recorder{Strict: true}
	rec.On("drbdsetup")
	rec.On("blkid").Stdout("xfs\n")
	err := (&Real{Exec: rec}).MakeFilesystem(context.Background(), Resource{Desired: d}, o)
	assert.ErrorContains(t, err, "carries a xfs signature")
	assert.Equal(t, []string{
		"drbdsetup primary r1",
		"blkid -p -o value -s TYPE --size 8388608 /dev/drbd1000",
		"drbdsetup secondary r1",
	}, calls(rec))
}

// The sim's mkfs on a node whose I/O a snapshot holds suspended gives up after a bounded
// wait (the reconcile fails and is tried again) instead of waiting for ever: only a later
// reconcile of the same resource resumes that I/O, so an unbounded wait deadlocked the
// node's reconcile (seen under load in csi-sanity: a clone's snapshot aborted every 8 s
// for ten minutes while n1 waited in mkfs).
func TestSimMkfsDoesNotWaitForeverOnSuspendedIO(t *testing.T) {
	s, _, nodes := threeNodes(t)
	submit(t, s, "rg.create", `{"name":"rg3","place_count":3,"storage_pool":"thin"}`)
	submit(t, s, "rg.spawn", `{"resource_group":"rg3","name":"r1","size_kib":4096}`)
	waitApplied(t, s, "r1", map[string][]string{"n1": {"n2", "n3"}, "n2": {"n1", "n3"}, "n3": {"n1", "n2"}})
	n1 := nodes["n1"]
	disk, _ := diskOf(t, n1, "r1")
	n1.rec.mu.Lock()
	d := *n1.rec.res["r1"].desired
	n1.rec.mu.Unlock()
	setSuspended := func(on bool) {
		_, me, err := simNodeOf(n1.sim.Dir, n1.sim.Root, "r1")
		require.NoError(t, err)
		me.Suspended = on
		require.NoError(t, saveReg(n1.sim.Dir, me))
	}
	setSuspended(true)
	defer setSuspended(false)
	old := simMkfsSuspendedWait
	simMkfsSuspendedWait = 300 * time.Millisecond
	defer func() { simMkfsSuspendedWait = old }()
	done := make(chan error, 1)
	go func() {
		done <- n1.sim.MakeFilesystem(context.Background(), Resource{Desired: d, Disks: map[int]string{0: disk}}, drbd.FilesystemOrder{Volume: 0, Type: drbd.FilesystemExt4})
	}()
	select {
	case err := <-done:
		require.Error(t, err)
		assert.Contains(t, err.Error(), "I/O suspended")
	case <-time.After(10 * time.Second):
		t.Fatal("mkfs waits for ever on I/O suspended on its own node")
	}
}
