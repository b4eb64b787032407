package drbdagent

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/cairn-io/cairn/agents/execx"
	"github.com/cairn-io/cairn/drbd"
	"github.com/cairn-io/cairn/drbd/drbdutils"
	"github.com/cairn-io/cairn/events"
	"github.com/cairn-io/cairn/test/testtools"
	"github.com/rs/zerolog"
)

// kernelMux sends what needs the kernel (drbdsetup, losetup, a real drbdadm adjust) to
// a Recorder — the fake — and everything else (drbdadm checks, drbdmeta) to the real
// programs.
type kernelMux struct {
	real execx.Executor
	fake *execx.Recorder
}

func (m kernelMux) Run(ctx context.Context, argv []string, opts execx.Options) ([]byte, error) {
	name := execx.Name(argv)
	if name == "drbdsetup" || name == "losetup" || name == "drbdadm" && argv[len(argv)-2] == "adjust" {
		return m.fake.Run(ctx, argv, opts)
	}
	return m.real.Run(ctx, argv, opts)
}

// The real kernel's commands for one replica's life: the file volume behind a loop
// device named in the resource file, `drbdadm adjust`, and on removal drbdsetup down,
// wipe-md, losetup --detach and the volume removed.
func TestRealKernelCommands(t *testing.T) {
	testtools.Need(t, drbdutils.Drbdadm, drbdutils.Drbdmeta)
	root := t.TempDir()
	if err := os.MkdirAll(root+"/var/lib/cairn/thin", 0o755); err != nil {
		t.Fatal(err)
	}
	fake := &execx.Recorder{Strict: true}
	fake.On("losetup", "--find").Stdout("/dev/loop7\n")
	fake.On("losetup", "--associated").Stdout("/dev/loop7: [2049]:1835 (" + root + "/var/lib/cairn/thin/r1_00000.img)\n")
	fake.On("losetup", "--detach")
	fake.On("drbdadm")
	fake.On("drbdsetup", "down")
	ex := kernelMux{real: newCountingExec(t), fake: fake}
	paths := NewPaths(root)
	pub := &capture{}
	rec, err := New(Config{Node: "n1", Names: events.NewNames(""), Paths: paths, Exec: ex, Pub: pub, Log: zerolog.Nop(),
		Kernel: &Real{Exec: ex, Adm: drbdutils.Adm{Config: paths.MainConf}}, LoopDevices: true, PretendHost: true, StatusInterval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	d := oneReplica(1000)
	body := []byte(js(d))
	subject := events.NewNames("").Node("n1", "drbd", "r1")
	if err := rec.Reconcile(t.Context(), subject, body); err != nil {
		t.Fatal(err)
	}
	file, _ := os.ReadFile(paths.ResFile("r1"))
	if !strings.Contains(string(file), `disk "/dev/loop7";`) {
		t.Fatalf("resource file does not name the loop device:\n%s", file)
	}
	img := root + "/var/lib/cairn/thin/r1_00000.img"
	want := []string{
		"losetup --find --show --nooverlap " + img,
		"drbdadm -c " + paths.MainConf + " adjust r1",
	}
	if got := fake.Commands(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("kernel commands:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	fake.Reset()
	if err := rec.Reconcile(t.Context(), subject, nil); err != nil {
		t.Fatal(err)
	}
	want = []string{"drbdsetup down r1", "losetup --associated " + img, "losetup --detach /dev/loop7"}
	if got := fake.Commands(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("removal kernel commands:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if _, err := os.Stat(img); err == nil {
		t.Fatal("backing file still there")
	}
	if st, _ := pub.get(events.NewNames("").Status("n1", "drbd", "r1")); st.Phase != drbd.PhaseRemoved {
		t.Fatalf("status %s", js(st))
	}
}
