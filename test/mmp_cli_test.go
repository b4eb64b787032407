package test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairn-io/cairn/storage/zfs/zfsimage"
)

// gunzipFixture writes a committed OpenZFS fixture leaf to a file under dir.
func gunzipFixture(t *testing.T, dir, image, leaf string) string {
	t.Helper()
	p := filepath.Join(dir, image+"-"+leaf+".img")
	zfsimage.GunzipTo(t, zfsimage.FixturePath(image, leaf), p)
	return p
}

// TestMMPCheckCLIOnFixtures runs the real binary on pools written by OpenZFS 2.1.11 and
// checks every exit code path that does not need a live writer.
func TestMMPCheckCLIOnFixtures(t *testing.T) {
	dir := t.TempDir()
	exported := gunzipFixture(t, dir, "single-exported", "disk0")
	fast := gunzipFixture(t, dir, "single-fast", "disk0")
	off := gunzipFixture(t, dir, "single-off", "disk0")
	m0 := gunzipFixture(t, dir, "mirror-exported", "disk0")
	m1 := gunzipFixture(t, dir, "mirror-exported", "disk1")
	notZFS := filepath.Join(dir, "zeros.img")
	if err := os.WriteFile(notZFS, make([]byte, 2<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		exit int
		code string
	}{
		{"exported by this host", []string{"--hostid", "0x11111111", exported}, 0, "exported_by_this_host"},
		{"mirror exported by this host", []string{"--hostid", "0x11111111", m0, m1}, 0, "exported_by_this_host"},
		{"multihost off", []string{"--hostid", "0", off}, 0, "mmp_off"},
		{"no hostid", []string{"--hostid", "0", fast}, 2, "no_hostid"},
		{"crashed writer, 100 ms interval: 2 s check", []string{"--hostid", "0x44444444", fast}, 0, "no_activity"},
		{"not zfs", []string{"--hostid", "1", notZFS}, 2, "unreadable_vdev"},
		{"missing", []string{"--hostid", "1", filepath.Join(dir, "nope")}, 2, "unreadable_vdev"},
		{"leaves of two pools", []string{"--hostid", "1", exported, fast}, 2, "mixed_pools"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, code, took := mmpCheck(t, tc.args...)
			if code != tc.exit || v.Code != tc.code {
				t.Fatalf("exit %d code %s, want %d %s: %s", code, v.Code, tc.exit, tc.code, v.Message)
			}
			if tc.code == "no_activity" && (took < 2*time.Second || v.DurationMS < 2000 || v.DurationMS >= 2500) {
				t.Fatalf("no_activity after %s (duration %d ms)", took, v.DurationMS)
			}
		})
	}
	// Human output.
	out, code := run(t, "mmp", "check", "--hostid", "0x11111111", exported)
	if code != 0 || !strings.Contains(out, "IMPORTABLE [exported_by_this_host]") || !strings.Contains(out, "last host in the label: host-a (hostid 0x11111111)") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	if _, code := run(t, "mmp", "check", "--hostid", "xyz", exported); code != 2 {
		t.Fatalf("bad --hostid: exit %d", code)
	}
}
