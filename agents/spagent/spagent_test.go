package spagent

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/cairn-io/cairn/agents/execx"
	"github.com/cairn-io/cairn/events"
	"github.com/cairn-io/cairn/storage/backing"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
)

type pubs struct {
	mu  sync.Mutex
	got map[string][]backing.PoolReport
	raw map[string][][]byte
}

func (p *pubs) Publish(subject string, data []byte) error {
	var r backing.PoolReport
	if err := json.Unmarshal(data, &r); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.got == nil {
		p.got = map[string][]backing.PoolReport{}
	}
	if p.raw == nil {
		p.raw = map[string][][]byte{}
	}
	p.got[subject] = append(p.got[subject], r)
	p.raw[subject] = append(p.raw[subject], data)
	return nil
}

func (p *pubs) count(subject string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.got[subject])
}

// A pool given to the node is measured (the real statfs of its directory) and reported
// at once and then every interval; one the control plane takes away is no longer
// reported; a pool it cannot measure is reported with the error; a message for another
// node changes nothing.
func TestReporter(t *testing.T) {
	root := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(root, "pools/a"), 0o755))
	p := &pubs{got: map[string][]backing.PoolReport{}}
	names := events.NewNames("")
	r := New(Config{Node: "n1", Names: names, Root: root, Pub: p, Log: zerolog.Nop(), Interval: 50 * time.Millisecond})
	spec := func(name, dir string) []byte {
		b, _ := json.Marshal(backing.PoolSpec{Node: "n1", Name: name, Provider: "file_thin", Pool: dir, Revision: 3})
		return b
	}
	ctx := context.Background()
	require.NoError(t, r.Reconcile(ctx, names.Node("n1", Kind, "a"), spec("a", "/pools/a")))
	subject := names.Status("n1", Kind, "a")
	require.Equal(t, 1, p.count(subject))
	rep := p.got[subject][0]
	require.Equal(t, "a", rep.Name)
	require.Empty(t, rep.Error)
	require.NotZero(t, rep.TotalKiB)
	require.LessOrEqual(t, rep.FreeKiB, rep.TotalKiB)

	require.NoError(t, r.Reconcile(ctx, names.Node("n1", Kind, "b"), spec("b", "/pools/missing")))
	require.Contains(t, p.got[names.Status("n1", Kind, "b")][0].Error, "storage pool directory")

	require.Error(t, r.Reconcile(ctx, names.Node("n2", Kind, "a"), spec("a", "/pools/a")))
	require.Error(t, r.Reconcile(ctx, names.Node("n1", Kind, "c"), spec("a", "/pools/a")), "a body naming another pool")

	runCtx, cancel := context.WithCancel(ctx)
	go r.Run(runCtx)
	require.Eventually(t, func() bool { return p.count(subject) >= 3 }, 5*time.Second, 10*time.Millisecond, "not reported every interval")
	bSubject := names.Status("n1", Kind, "b")
	nb := p.count(bSubject)
	require.NoError(t, r.Reconcile(ctx, names.Node("n1", Kind, "a"), nil))
	// A tick already running may still report a; the second report of b after the
	// removal comes from a tick that began after it.
	require.Eventually(t, func() bool { return p.count(bSubject) >= nb+2 }, 5*time.Second, 10*time.Millisecond)
	n := p.count(subject)
	require.Eventually(t, func() bool { return p.count(bSubject) >= nb+4 }, 5*time.Second, 10*time.Millisecond)
	require.Equal(t, n, p.count(subject), "a pool taken away is still reported")
	cancel()
}

// A pool given with devices is made on them before it is measured (the LVM tools are
// recorded: they need a kernel), once; a device carrying a signature is reported as the
// pool's error and nothing is made.
func TestReporterMakesThePoolOnItsDevices(t *testing.T) {
	names := events.NewNames("")
	spec := func(name, pool string, devs ...string) []byte {
		b, _ := json.Marshal(backing.PoolSpec{Node: "n1", Name: name, Provider: "lvm_thin", Pool: pool, Revision: 1, Devices: devs})
		return b
	}
	rec := &execx.Recorder{}
	rec.On("vgs", "--noheadings", "-o").Fail(5, "not found").Times(1)
	rec.On("lvs", "--noheadings", "-o", "lv_name").Fail(5, "not found").Times(1)
	rec.On("blkid", "-p", "-o", "export", "/dev/sdx").Fail(2, "")
	rec.On("blkid", "-p", "-o", "export", "/dev/sdy").Stdout("TYPE=xfs\n")
	rec.On("lvs", "--noheadings", "--nosuffix").Stdout("  10737418240 12.50\n")
	p := &pubs{}
	r := New(Config{Node: "n1", Names: names, Exec: rec, Pub: p, Log: zerolog.Nop(), Interval: time.Hour})
	ctx := context.Background()
	require.NoError(t, r.Reconcile(ctx, names.Node("n1", Kind, "data"), spec("data", "linstor_data/data", "/dev/sdx")))
	require.NoError(t, r.Reconcile(ctx, names.Node("n1", Kind, "data"), spec("data", "linstor_data/data", "/dev/sdx")))
	got := p.got[names.Status("n1", Kind, "data")]
	require.Len(t, got, 2)
	require.Empty(t, got[1].Error)
	require.Equal(t, uint64(10485760), got[1].TotalKiB)
	require.Equal(t, []string{
		"vgs --noheadings -o vg_name linstor_data", "blkid -p -o export /dev/sdx", "vgcreate --yes linstor_data /dev/sdx",
		"lvs --noheadings -o lv_name linstor_data/data", "lvcreate --yes --extents 100%FREE --thinpool data linstor_data",
		"lvs --noheadings --nosuffix --units b -o lv_size,data_percent linstor_data/data",
		"vgs --noheadings -o vg_name linstor_data", "lvs --noheadings -o lv_name linstor_data/data",
		"lvs --noheadings --nosuffix --units b -o lv_size,data_percent linstor_data/data",
	}, rec.Commands(), "made once; the second report finds it made")

	rec2 := &execx.Recorder{}
	rec2.On("vgs").Fail(5, "not found")
	rec2.On("blkid").Stdout("PTTYPE=gpt\n")
	r2 := New(Config{Node: "n1", Names: names, Exec: rec2, Pub: p, Log: zerolog.Nop(), Interval: time.Hour})
	require.NoError(t, r2.Reconcile(ctx, names.Node("n1", Kind, "used"), spec("used", "vg2/tp", "/dev/sdy")))
	bad := p.got[names.Status("n1", Kind, "used")]
	require.Len(t, bad, 1)
	require.Contains(t, bad[0].Error, "device /dev/sdy carries a signature (PTTYPE=gpt)")
	for _, c := range rec2.Commands() {
		require.NotContains(t, c, "create", "nothing is made over a signature")
	}
}
