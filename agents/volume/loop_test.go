package volume

// Loop devices need root and the loop module: these tests assert losetup's argv and
// the parsing of its answers with execx.Recorder.

import (
	"context"
	"os"
	"testing"

	"github.com/cairn-io/cairn/agents/execx"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
)

func TestLoop(t *testing.T) {
	ctx := context.Background()
	const img = "/var/lib/cairn/volumes/r1_00000.img"

	rec := &execx.Recorder{Strict: true}
	rec.On("losetup", "--find").Stdout("/dev/loop3\n")
	dev, err := Loop{Exec: rec}.Attach(ctx, img)
	require.NoError(t, err)
	require.Equal(t, "/dev/loop3", dev)
	require.Equal(t, []string{"losetup --find --show --nooverlap " + img}, rec.Commands())

	rec = &execx.Recorder{Strict: true}
	rec.On("losetup", "--find").Fail(1, "losetup: cannot find an unused loop device")
	_, err = Loop{Exec: rec}.Attach(ctx, img)
	require.EqualError(t, err, "loop device for "+img+": losetup --find --show --nooverlap "+img+": exit 1: losetup: cannot find an unused loop device")

	rec = &execx.Recorder{Strict: true}
	rec.On("losetup", "--find").Stdout("")
	_, err = Loop{Exec: rec}.Attach(ctx, img)
	require.ErrorContains(t, err, "unexpected losetup output")

	rec = &execx.Recorder{Strict: true}
	rec.On("losetup", "--associated").Stdout("/dev/loop3: [2049]:1835 (" + img + ")\n/dev/loop7: [2049]:1835 (" + img + ")\n")
	rec.On("losetup", "--detach")
	require.NoError(t, Loop{Exec: rec}.Detach(ctx, img))
	require.Equal(t, []string{"losetup --associated " + img, "losetup --detach /dev/loop3", "losetup --detach /dev/loop7"}, rec.Commands())

	rec = &execx.Recorder{Strict: true}
	rec.On("losetup", "--associated").Stdout("")
	require.NoError(t, Loop{Exec: rec}.Detach(ctx, img), "nothing attached")
	require.Equal(t, []string{"losetup --associated " + img}, rec.Commands())

	rec = &execx.Recorder{Strict: true}
	rec.On("losetup", "--associated").Stdout("/dev/loop3: [2049]:1835 (" + img + ")\n")
	rec.On("losetup", "--detach").Fail(1, "losetup: /dev/loop3: detach failed: Device or resource busy")
	require.ErrorContains(t, Loop{Exec: rec}.Detach(ctx, img), "detach /dev/loop3 ("+img+"): losetup --detach /dev/loop3: exit 1")
}

// On a host that allows loop devices (root, /dev/loop-control) the same calls run for
// real; elsewhere the test is skipped.
func TestLoopReal(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("loop devices need root")
	}
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		t.Skip("no /dev/loop-control")
	}
	ctx := context.Background()
	f := &File{Dir: t.TempDir(), Thin: true}
	img, err := f.Create(ctx, "r1_00000", 4096)
	require.NoError(t, err)
	l := Loop{Exec: execx.New(zerolog.Nop())}
	dev, err := l.Attach(ctx, img)
	if err != nil {
		t.Skipf("losetup refused here: %v", err)
	}
	t.Cleanup(func() { _ = l.Detach(context.Background(), img) })
	again, err := l.Attach(ctx, img)
	require.NoError(t, err)
	require.Equal(t, dev, again, "a second Attach reuses the device")
	fi, err := os.Stat(dev)
	require.NoError(t, err)
	require.NotZero(t, fi.Mode()&os.ModeDevice, "%s is not a device", dev)
	devs, err := l.Devices(ctx, img)
	require.NoError(t, err)
	require.Equal(t, []string{dev}, devs)
	require.NoError(t, l.Detach(ctx, img))
	devs, err = l.Devices(ctx, img)
	require.NoError(t, err)
	require.Empty(t, devs)
	require.NoError(t, f.Remove(ctx, "r1_00000"))
}
