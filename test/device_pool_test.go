package test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeLVM writes stand-ins for blkid, vgs, vgcreate, lvs and lvcreate, which need a
// kernel with block devices and the device mapper: they keep the volume groups and
// thin pools they make as files in their directory, log every call to calls.log, and
// blkid finds an ext4 signature on /dev/sdy and nothing on any other device. Returns
// the directory.
func fakeLVM(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	scripts := map[string]string{
		"blkid":    `case "$4" in /dev/sdy) printf 'DEVNAME=/dev/sdy\nTYPE=ext4\n';; *) exit 2;; esac`,
		"vgs":      `for a; do vg="$a"; done; [ -e "$D/vg_$vg" ] || { echo "  Volume group \"$vg\" not found" >&2; exit 5; }; echo "  $vg"`,
		"vgcreate": `shift; vg="$1"; touch "$D/vg_$vg"`,
		"lvs": `for a; do lv="$a"; done; f="$D/lv_$(echo "$lv" | tr / _)"; [ -e "$f" ] || { echo "  Failed to find logical volume \"$lv\"" >&2; exit 5; }
case "$*" in *lv_size*) echo "  10737418240 0.00";; *) echo "  $lv";; esac`,
		"lvcreate": `for a; do vg="$a"; done; while [ $# -gt 0 ]; do [ "$1" = --thinpool ] && tp="$2"; shift; done; touch "$D/lv_${vg}_$tp"`,
	}
	for name, body := range scripts {
		script := fmt.Sprintf("#!/bin/sh\nD=%q\necho \"%s $*\" >> \"$D/calls.log\"\n%s\n", dir, name, body)
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(script), 0o755))
	}
	return dir
}

// LINSTOR's physical-storage create-device-pool through the unmodified CLI (what
// piraeus-operator's hostDevices sends): n1's agent makes the volume group and its thin
// pool on the blank device and reports the pool's capacity, which the CLI lists; a
// device carrying a filesystem is refused by the agent, nothing is made on it, and the
// pool's state says why; a device another pool holds and a file pool with devices are
// refused at admission naming the field. The LVM tools are stand-ins (fakeLVM).
func TestLinstorCLIDevicePool(t *testing.T) {
	s := startServe(t, t.TempDir())
	linstor := linstorCLI(t, "http://"+s.httpAddr)
	ok := linstorOK(t, linstor)
	_, code := run(t, "cmd", "cluster.create", `{"name":"c1","failure_domains":false,"data_chunks":1,"parity_chunks":1}`, "--nats", s.natsURL())
	require.Equal(t, 0, code)
	ok("node", "create", "n1", "10.0.0.1")
	tools := fakeLVM(t)
	startAgent(t, s, agentOpts{node: "n1", root: t.TempDir(), kernel: "sim",
		extra: []string{"--heartbeat-interval", "300ms"}, env: []string{"PATH=" + tools + ":" + os.Getenv("PATH")}})

	out := ok("physical-storage", "create-device-pool", "--pool-name", "data", "--storage-pool", "data", "lvmthin", "n1", "/dev/sdx")
	assert.Contains(t, out, "SUCCESS")
	require.Eventually(t, func() bool {
		list := ok("storage-pool", "list", "-n", "n1")
		return strings.Contains(list, "linstor_data/data") && strings.Contains(list, " 10 GiB |") && strings.Contains(list, "| Ok ")
	}, 30*time.Second, 200*time.Millisecond, "the pool made on /dev/sdx is never listed with its capacity")
	calls, err := os.ReadFile(filepath.Join(tools, "calls.log"))
	require.NoError(t, err)
	assert.Contains(t, string(calls), "blkid -p -o export /dev/sdx\nvgcreate --yes linstor_data /dev/sdx\n")
	assert.Contains(t, string(calls), "lvcreate --yes --extents 100%FREE --thinpool data linstor_data\n")
	assert.Equal(t, 1, strings.Count(string(calls), "vgcreate"), "made once, whatever the reports since")

	ok("physical-storage", "create-device-pool", "--pool-name", "other", "--storage-pool", "other", "lvm", "n1", "/dev/sdy")
	require.Eventually(t, func() bool {
		return strings.Contains(ok("storage-pool", "list", "-n", "n1"), "carries a signature (TYPE=ext4)")
	}, 30*time.Second, 200*time.Millisecond, "the refusal is not shown")
	calls, _ = os.ReadFile(filepath.Join(tools, "calls.log"))
	assert.NotContains(t, string(calls), "/dev/sdy\nvgcreate", "nothing is made over a signature")
	assert.NotContains(t, string(calls), "vgcreate --yes other")

	out, _, code = linstor("physical-storage", "create-device-pool", "--pool-name", "again", "--storage-pool", "again", "zfs", "n1", "/dev/sdx")
	assert.NotEqual(t, 0, code)
	assert.Contains(t, out, "/dev/sdx holds storage pool data of node n1")
	out, _, code = linstor("physical-storage", "create-device-pool", "--pool-name", "x", "lvm", "n1", "/dev/sdz")
	assert.NotEqual(t, 0, code)
	assert.Contains(t, out, "with_storage_pool")
	_, code = run(t, "cmd", "sp.create", `{"node":"n1","name":"f","provider":"file_thin","pool":"/var/lib/cairn/f","devices":["/dev/sdz"]}`, "--nats", s.natsURL())
	assert.NotEqual(t, 0, code)
}
