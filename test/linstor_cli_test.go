package test

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cairn-io/cairn/test/testtools"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// linstorCLI returns a runner of the unmodified LINBIT linstor CLI (shared/tools/
// linstor-client) against controller (a URL) with the global options given: stdout,
// stderr and exit code. It needs Debian's python3 with python3-natsort; without them the
// test skips, or fails under CAIRN_REQUIRE_TOOLS=1.
func linstorCLI(t *testing.T, controller string, global ...string) func(args ...string) (string, string, int) {
	t.Helper()
	run := linstorCLIFed(t, controller, global...)
	return func(args ...string) (string, string, int) {
		t.Helper()
		return run("", args...)
	}
}

// linstorCLIFed is linstorCLI whose runs read stdin from a string (the CLI's `file
// modify` reads the content there).
func linstorCLIFed(t *testing.T, controller string, global ...string) func(stdin string, args ...string) (string, string, int) {
	t.Helper()
	client := sharedFile(t, "tools/linstor-client/linstor")
	python := os.Getenv("LINSTOR_PYTHON")
	if python == "" {
		python = "/usr/bin/python3"
	}
	if err := exec.Command(python, "-c", "import natsort").Run(); err != nil {
		if os.Getenv(testtools.RequireEnv) == "1" {
			t.Fatalf("%s with natsort (python3-natsort) is needed by the linstor CLI, and %s=1 requires it: %v", python, testtools.RequireEnv, err)
		}
		t.Skipf("%s with natsort (python3-natsort) is needed by the linstor CLI: %v", python, err)
	}
	return func(stdin string, args ...string) (string, string, int) {
		t.Helper()
		all := append(append([]string{"--no-color", "--disable-config", "--controllers", controller}, global...), args...)
		cmd := exec.Command(client, all...)
		cmd.Env = append(os.Environ(), "LINSTOR_PYTHON="+python, "HOME="+t.TempDir())
		cmd.Stdin = strings.NewReader(stdin)
		var out, errb strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("linstor %s: %v", strings.Join(args, " "), err)
		}
		assert.NotContains(t, out.String()+errb.String(), "Traceback", "linstor %s crashed", strings.Join(args, " "))
		return out.String(), errb.String(), code
	}
}

// linstorOK runs the CLI (a linstorCLI runner) and requires exit code 0: stdout.
func linstorOK(t *testing.T, linstor func(args ...string) (string, string, int)) func(args ...string) string {
	return func(args ...string) string {
		t.Helper()
		out, errb, code := linstor(args...)
		require.Equal(t, 0, code, "linstor %s: %s%s", strings.Join(args, " "), out, errb)
		return out
	}
}

// fakeLsblk writes an lsblk that shows one free 10 GiB rotating disk, /dev/sdx, and a
// mounted one, and returns its directory. It stands in for lsblk, which reads the
// kernel's view of the host's devices.
func fakeLsblk(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	script := "#!/bin/sh\ncat <<'JSON'\n" +
		`{"blockdevices":[
 {"name":"sdx","path":"/dev/sdx","size":10737418240,"rota":true,"type":"disk","ro":false,"fstype":null,"mountpoint":null,"model":"Cairn Test","serial":"CAIRN-SDX","wwn":"0x5000c500a1b2c3d4"},
 {"name":"sdy","path":"/dev/sdy","size":10737418240,"rota":true,"type":"disk","ro":false,"fstype":"ext4","mountpoint":"/data"}
]}` + "\nJSON\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "lsblk"), []byte(script), 0o755))
	return dir
}

// TestLinstorCLISession drives a whole session through the unmodified LINSTOR CLI
// against `cairn serve` with three `cairn agent --kernel sim` (real drbdadm and
// drbdmeta): version, nodes, storage pools, a group spawning a definition whose
// replicas come up UpToDate, lists as tables and as JSON, autoplace of one more disk,
// deletes, the duplicate and not-found errors with their exit code and ret_code, and a
// call Cairn does not serve (501, no traceback).
func TestLinstorCLISession(t *testing.T) {
	testtools.Need(t, "drbdadm", "drbdmeta")
	s := startServe(t, t.TempDir())
	linstor := linstorCLI(t, "http://"+s.httpAddr)
	ok := linstorOK(t, linstor)
	failed := func(args ...string) string {
		t.Helper()
		out, errb, code := linstor(args...)
		require.Equal(t, 10, code, "linstor %s must fail with an API error: %s%s", strings.Join(args, " "), out, errb)
		return out + errb
	}
	machine := func(into any, args ...string) {
		t.Helper()
		out := ok(append([]string{"-m"}, args...)...)
		require.NoError(t, json.Unmarshal([]byte(out), into), out)
	}

	assert.Contains(t, ok("controller", "version"), "linstor controller")
	_, code := run(t, "cmd", "cluster.create", `{"name":"c1","failure_domains":false,"data_chunks":1,"parity_chunks":1}`, "--nats", s.natsURL())
	require.Equal(t, 0, code)

	// The third node has a DNS name (a NATS subject token only as n3~rack2~example~com):
	// its agent attaches, reports and carries out its replica like the others.
	const fqdn = "n3.rack2.example.com"
	base := t.TempDir()
	for i := 1; i <= 3; i++ {
		n := fmt.Sprintf("n%d", i)
		if i == 3 {
			n = fqdn
		}
		assert.Contains(t, ok("node", "create", n, fmt.Sprintf("10.0.0.%d", i)), "SUCCESS")
		root := filepath.Join(base, n)
		require.NoError(t, os.MkdirAll(filepath.Join(root, "var/lib/cairn/thin"), 0o755))
		o := agentOpts{node: n, root: root, kernel: "sim", extra: []string{"--heartbeat-interval", "500ms", "--allow-ext-files", "/etc/drbd-reactor.d"}}
		if i == 1 { // lsblk stands in for a kernel with a free disk on n1 (the others run the real one)
			o.env = []string{"PATH=" + fakeLsblk(t) + ":" + os.Getenv("PATH")}
		}
		startAgent(t, s, o)
		_, code := run(t, "cmd", "sp.create", fmt.Sprintf(`{"node":%q,"name":"thin","provider":"file_thin","pool":"/var/lib/cairn/thin","capacity_kib":10485760}`, n), "--nats", s.natsURL())
		require.Equal(t, 0, code)
	}
	nodes := ok("node", "list")
	for _, n := range []string{"n1", "n2", fqdn} {
		assert.Contains(t, nodes, n)
	}
	assert.Contains(t, nodes, "Online")
	var fq [][]struct {
		Name string `json:"name"`
	}
	machine(&fq, "node", "list", "-n", fqdn)
	require.Len(t, fq, 1)
	require.Len(t, fq[0], 1)
	assert.Equal(t, fqdn, fq[0][0].Name, "the name comes back exactly as given")

	// Physical storage (`linstor physical-storage list`): the free disks the agents'
	// lsblk shows, by size and kind; this machine's own disks are in use and not listed.
	require.Eventually(t, func() bool {
		return strings.Contains(ok("physical-storage", "list"), "n1[/dev/sdx(CAIRN-SDX,0x5000c500a1b2c3d4)]")
	}, 30*time.Second, 200*time.Millisecond, "n1's free disk is never listed")
	var phys [][]struct {
		Size       uint64                         `json:"size"`
		Rotational bool                           `json:"rotational"`
		Nodes      map[string][]map[string]string `json:"nodes"`
	}
	machine(&phys, "physical-storage", "list")
	require.Len(t, phys, 1, "%+v", phys)
	require.Len(t, phys[0], 1, "%+v", phys)
	assert.Equal(t, uint64(10737418240), phys[0][0].Size)
	assert.True(t, phys[0][0].Rotational)
	assert.Equal(t, []string{"n1"}, slices.Collect(maps.Keys(phys[0][0].Nodes)))

	ok("node", "set-property", "n1", "Aux/site", "fra1")
	assert.Contains(t, ok("node", "list-properties", "n1"), "fra1")
	ok("node", "set-property", "n1", "Aux/site")
	assert.NotContains(t, ok("node", "list-properties", "n1"), "fra1")

	// The CLI cannot say a pool's capacity at creation: Cairn warns, set-property gives it.
	assert.Contains(t, ok("storage-pool", "create", "filethin", "n1", "more", "/var/lib/cairn/more"), "no capacity yet")
	ok("storage-pool", "set-property", "n1", "more", "Cairn/CapacityKiB", "2097152")
	assert.Contains(t, ok("storage-pool", "list", "-s", "more"), "2 GiB")
	ok("storage-pool", "delete", "n1", "more")
	pools := ok("storage-pool", "list")
	assert.Contains(t, pools, "FILE_THIN")
	assert.Contains(t, pools, "/var/lib/cairn/thin")
	assert.Equal(t, 3, strings.Count(pools, "| thin "), pools)

	ok("resource-group", "create", "rg2", "--place-count", "2", "--storage-pool", "thin")
	assert.Contains(t, ok("resource-group", "list"), "PlaceCount: 2")
	ok("resource-group", "spawn", "rg2", "r1", "4M")
	assert.Contains(t, ok("resource-definition", "list"), "rg2")
	assert.Contains(t, ok("volume-definition", "list"), "4 MiB")

	type volume struct {
		State struct {
			DiskState string `json:"disk_state"`
		} `json:"state"`
	}
	type resource struct {
		Name        string   `json:"name"`
		Node        string   `json:"node_name"`
		Flags       []string `json:"flags"`
		Volumes     []volume `json:"volumes"`
		LayerObject struct {
			Drbd struct {
				PromotionScore int  `json:"promotion_score"`
				MayPromote     bool `json:"may_promote"`
			} `json:"drbd"`
		} `json:"layer_object"`
	}
	// upToDateOf waits until definition rd has disks UpToDate replicas with a disk, and
	// returns them all; upToDate is r1's.
	upToDateOf := func(rd string, disks int) []resource {
		t.Helper()
		var rs []resource
		require.Eventually(t, func() bool {
			var out [][]resource
			machine(&out, "resource", "list", "-r", rd)
			rs = out[0]
			n := 0
			for _, r := range rs {
				if !contains(r.Flags, "DRBD_DISKLESS") && len(r.Volumes) == 1 && r.Volumes[0].State.DiskState == "UpToDate" {
					n++
				}
			}
			return n == disks
		}, 60*time.Second, 250*time.Millisecond, "%s never had %d disks UpToDate: %+v", rd, disks, rs)
		return rs
	}
	upToDate := func(disks int) []resource { t.Helper(); return upToDateOf("r1", disks) }
	rs := upToDate(2)
	require.Len(t, rs, 3, "two disks and a tiebreaker")
	table := ok("resource", "list")
	assert.Contains(t, table, "UpToDate")
	assert.Contains(t, table, time.Now().UTC().Format("2006-01-02"), "CreatedOn")
	assert.Contains(t, table, "TieBreaker")

	ok("resource", "create", "r1", "--auto-place", "+1")
	rs = upToDate(3)
	require.Len(t, rs, 3, "the third disk took the tiebreaker's place")
	for _, r := range rs {
		assert.NotContains(t, r.Flags, "TIE_BREAKER")
	}
	// DRBD's promotion score and may_promote, as the agents report them: every healthy
	// replica may promote (linstor-csi reports a replica with score 0 as one with issues;
	// golinstor reads layer_object.drbd.promotion_score).
	require.Eventually(t, func() bool {
		var out [][]resource
		machine(&out, "resource", "list", "-r", "r1")
		healthy := 0
		for _, r := range out[0] {
			if r.LayerObject.Drbd.MayPromote && r.LayerObject.Drbd.PromotionScore > 10000 {
				healthy++
			}
		}
		return healthy == 3
	}, 30*time.Second, 250*time.Millisecond, "not every UpToDate replica reports a promotion score")

	// A group's DRBD option reaches every node's resource file (rg.modify, dispatched
	// again, adjusted by each agent with the real drbdadm).
	ok("resource-group", "set-property", "rg2", "DrbdOptions/Net/max-buffers", "8000")
	for _, n := range []string{"n1", "n2", fqdn} {
		res := filepath.Join(base, n, "etc", "drbd.d", "r1.res")
		require.Eventually(t, func() bool {
			b, err := os.ReadFile(res)
			return err == nil && strings.Contains(string(b), "max-buffers 8000")
		}, 30*time.Second, 100*time.Millisecond, "%s never got the group's option", res)
	}

	// LINSTOR's DrbdOptions/auto-quorum, as piraeus-operator sets it on the controller:
	// suspend-io makes a partitioned minority freeze I/O instead of failing it; on a
	// definition, disabled leaves quorum to explicit options; a bad value is refused
	// naming the key; unset, the default (io-error) is back.
	resFiles := func(what string, want bool) {
		t.Helper()
		for _, n := range []string{"n1", "n2", fqdn} {
			res := filepath.Join(base, n, "etc", "drbd.d", "r1.res")
			require.Eventually(t, func() bool {
				b, err := os.ReadFile(res)
				return err == nil && strings.Contains(string(b), what) == want
			}, 30*time.Second, 100*time.Millisecond, "%s: %q present %v wanted", res, what, want)
		}
	}
	resFiles("on-no-quorum io-error", true)
	ok("controller", "set-property", "DrbdOptions/auto-quorum", "suspend-io")
	resFiles("on-no-quorum suspend-io", true)
	assert.Contains(t, failed("controller", "set-property", "DrbdOptions/auto-quorum", "sometimes"), "DrbdOptions/auto-quorum")
	ok("resource-definition", "set-property", "r1", "DrbdOptions/auto-quorum", "disabled")
	resFiles("quorum majority", false)
	ok("resource-definition", "set-property", "r1", "DrbdOptions/auto-quorum")
	ok("controller", "set-property", "DrbdOptions/auto-quorum")
	resFiles("on-no-quorum io-error", true)

	// One replica's own properties and DRBD options (`linstor resource set-property`,
	// replica.modify): the option reaches that node's resource file only; both are listed
	// with the resource; unset, they are gone.
	resFileOf := func(node, what string, want bool) {
		t.Helper()
		res := filepath.Join(base, node, "etc", "drbd.d", "r1.res")
		require.Eventually(t, func() bool {
			b, err := os.ReadFile(res)
			return err == nil && strings.Contains(string(b), what) == want
		}, 30*time.Second, 100*time.Millisecond, "%s: %q present %v wanted", res, what, want)
	}
	ok("resource", "set-property", "n2", "r1", "DrbdOptions/Disk/al-extents", "6007")
	ok("resource", "set-property", "n2", "r1", "Aux/rack", "r7")
	rprops := ok("resource", "list-properties", "n2", "r1")
	assert.Contains(t, rprops, "r7")
	assert.Contains(t, rprops, "6007")
	assert.NotContains(t, ok("resource", "list-properties", "n1", "r1"), "r7")
	resFileOf("n2", "al-extents 6007", true)
	resFileOf("n1", "al-extents 6007", false)
	assert.Contains(t, failed("resource", "set-property", "n2", "r1", "DrbdOptions/Disk/al-extents", "many"), "al-extents")
	ok("resource", "set-property", "n2", "r1", "DrbdOptions/Disk/al-extents")
	ok("resource", "set-property", "n2", "r1", "Aux/rack")
	resFileOf("n2", "al-extents 6007", false)
	assert.NotContains(t, ok("resource", "list-properties", "n2", "r1"), "r7")

	// External files (LINSTOR's /v1/files, what linstor-gateway writes its drbd-reactor
	// configuration with): registered from stdin, deployed with r1, written by the agent
	// of every node holding a replica (under its root); new content follows; undeployed or
	// deleted, the file is gone from every node; a path outside the agents'
	// --allow-ext-files is written nowhere and the failure says which setting allows it.
	feed := linstorCLIFed(t, "http://"+s.httpAddr)
	fileOn := func(path, want string) {
		t.Helper()
		for _, n := range []string{"n1", "n2", fqdn} {
			host := filepath.Join(base, n, path)
			require.Eventually(t, func() bool {
				b, err := os.ReadFile(host)
				if want == "" {
					return os.IsNotExist(err)
				}
				return err == nil && string(b) == want
			}, 30*time.Second, 100*time.Millisecond, "%s: want %q", host, want)
		}
	}
	const conf = "/etc/drbd-reactor.d/linstor-gateway-nfs-r1.toml"
	out, errb, code := feed("[[promoter]]\nid = \"r1\"\n", "file", "modify", conf)
	require.Equal(t, 0, code, "%s%s", out, errb)
	assert.Contains(t, ok("file", "list"), conf)
	assert.Equal(t, "[[promoter]]\nid = \"r1\"\n", ok("file", "show", conf))
	// Whether a node's agent would write a path (golinstor's CheckExternalFile), from
	// the --allow-ext-files its heartbeats announce.
	checkOn := func(path, node string) bool {
		t.Helper()
		code, body := httpJSON(t, "GET", "http://"+s.httpAddr+"/v1/files/"+url.QueryEscape(path)+"/check/"+node, "")
		require.Equal(t, 200, code, body)
		var c struct {
			Allowed bool `json:"allowed"`
		}
		require.NoError(t, json.Unmarshal([]byte(body), &c))
		return c.Allowed
	}
	assert.True(t, checkOn(conf, "n1"))
	assert.False(t, checkOn("/etc/systemd/system/x.service", "n1"))
	ok("file", "deploy", conf, "r1")
	fileOn(conf, "[[promoter]]\nid = \"r1\"\n")
	// What each agent found of it when it last wrote one (golinstor's file status):
	// there, with the registered content.
	for _, n := range []string{"n1", "n2", fqdn} {
		require.Eventually(t, func() bool {
			code, body := httpJSON(t, "GET", "http://"+s.httpAddr+"/v1/files/"+url.QueryEscape(conf)+"/status/"+n, "")
			return code == 200 && strings.Contains(body, `"actual_path":"`+conf+`","content_match":true`)
		}, 10*time.Second, 100*time.Millisecond, "%s does not report %s written", n, conf)
	}
	out, errb, code = feed("[[promoter]]\nid = \"r1-v2\"\n", "file", "modify", conf)
	require.Equal(t, 0, code, "%s%s", out, errb)
	fileOn(conf, "[[promoter]]\nid = \"r1-v2\"\n")
	ok("file", "undeploy", conf, "r1")
	fileOn(conf, "")
	ok("file", "deploy", conf, "r1")
	fileOn(conf, "[[promoter]]\nid = \"r1-v2\"\n")
	ok("file", "delete", conf)
	fileOn(conf, "")
	assert.NotContains(t, ok("file", "list"), conf)
	// The CLI's file commands print an API error but exit 0 (file_cmds.py drops
	// handle_replies' result): the output is what tells.
	refusedFile := func(args ...string) string {
		t.Helper()
		out, errb, _ := linstor(args...)
		assert.Contains(t, out+errb, "ERROR", "linstor %s", strings.Join(args, " "))
		return out + errb
	}
	assert.Contains(t, refusedFile("file", "deploy", conf, "r1"), "does not exist")
	assert.Contains(t, refusedFile("file", "deploy", "/etc/drbd-reactor.d/../passwd", "r1"), "clean")
	const unit = "/etc/systemd/system/cairn-test.service"
	out, errb, code = feed("[Unit]\n", "file", "modify", unit)
	require.Equal(t, 0, code, "%s%s", out, errb)
	ok("file", "deploy", unit, "r1")
	reports := func() string { // the CLI's list asks without the reports' text
		_, body := httpJSON(t, "GET", "http://"+s.httpAddr+"/v1/error-reports", "")
		return body
	}
	require.Eventually(t, func() bool {
		return strings.Count(reports(), "--allow-ext-files /etc/systemd/system") == 3
	}, 30*time.Second, 200*time.Millisecond, "every node reports the file it may not write")
	fileOn(unit, "")
	ok("file", "delete", unit)
	require.Eventually(t, func() bool {
		return !strings.Contains(reports(), "--allow-ext-files")
	}, 30*time.Second, 200*time.Millisecond, "the failures clear once the file is gone")

	// Grow the volume: every replica's usable size (what its agent reports DRBD made of
	// it) follows; a shrink is refused naming the field.
	ok("volume-definition", "set-size", "r1", "0", "8M")
	assert.Contains(t, ok("volume-definition", "list"), "8 MiB")
	require.Eventually(t, func() bool {
		var out [][]struct {
			Node    string `json:"node_name"`
			Volumes []struct {
				Usable uint64 `json:"usable_size_kib"`
			} `json:"volumes"`
		}
		machine(&out, "resource", "list", "-r", "r1")
		grown := 0
		for _, r := range out[0] {
			if len(r.Volumes) == 1 && r.Volumes[0].Usable == 8192 {
				grown++
			}
		}
		return grown == 3
	}, 60*time.Second, 250*time.Millisecond, "not every replica reports 8 MiB")
	assert.Contains(t, failed("volume-definition", "set-size", "r1", "0", "4M"), "volumes only grow")

	// A volume definition's properties (vd.modify): set, listed, removed; a DRBD option
	// among them is refused naming the key.
	ok("volume-definition", "set-property", "r1", "0", "FileSystem/Type", "ext4")
	assert.Contains(t, ok("volume-definition", "list-properties", "r1", "0"), "ext4")
	ok("volume-definition", "set-property", "r1", "0", "FileSystem/Type")
	assert.NotContains(t, ok("volume-definition", "list-properties", "r1", "0"), "ext4")
	assert.Contains(t, failed("volume-definition", "set-property", "r1", "0", "DrbdOptions/Disk/on-io-error", "detach"), "DrbdOptions/Disk/on-io-error")

	// A filesystem on first creation (LINSTOR's FileSystem/Type, as linstor-gateway's NFS
	// asks for it): the group's type is in force when fs1's first replica is placed, so the
	// node of its first disk makes it, once, through DRBD: every disk holds the same clean
	// ext4 with the label MkfsParams gave (e2fsck and blkid, the oracle, read each disk's
	// data); r1, whose volume got the type after it existed, gets none; a type Cairn does
	// not make is refused naming the key.
	assert.Contains(t, failed("resource-group", "set-property", "rg2", "FileSystem/Type", "btrfs"), "FileSystem/Type")
	ok("resource-definition", "set-property", "r1", "FileSystem/Type", "ext4")
	ok("resource-group", "create", "rgfs", "--place-count", "2", "--storage-pool", "thin")
	ok("resource-group", "set-property", "rgfs", "FileSystem/Type", "ext4")
	ok("resource-group", "set-property", "rgfs", "FileSystem/MkfsParams", "-L cairnfs")
	ok("resource-group", "spawn", "rgfs", "fs1", "8M")
	upToDateOf("fs1", 2)
	require.Eventually(t, func() bool {
		out, _ := run(t, "audit", "--nats", s.natsURL(), "--type", "vd.filesystem-made", "--json")
		return strings.Contains(out, `"resource":"fs1"`)
	}, 60*time.Second, 250*time.Millisecond, "fs1's filesystem is never recorded")
	dataOf := func(disk string) string { // the volume's data: the disk file's first 8 MiB
		t.Helper()
		b, err := os.ReadFile(disk)
		require.NoError(t, err)
		img := filepath.Join(t.TempDir(), "data.img")
		require.NoError(t, os.WriteFile(img, b[:8<<20], 0o600))
		return img
	}
	disks, err := filepath.Glob(filepath.Join(base, "*", "var/lib/cairn/thin", "fs1_00000.img"))
	require.NoError(t, err)
	require.Len(t, disks, 2)
	require.Eventually(t, func() bool { // the second disk gets it by replication or a resync
		for _, d := range disks {
			if out, err := exec.Command("e2fsck", "-n", "-f", dataOf(d)).CombinedOutput(); err != nil {
				t.Logf("%s: %v: %s", d, err, out)
				return false
			}
		}
		return true
	}, 30*time.Second, 500*time.Millisecond, "a disk of fs1 holds no clean ext4")
	for _, d := range disks {
		out, err := exec.Command("blkid", "-o", "value", "-s", "LABEL", dataOf(d)).Output()
		require.NoError(t, err, d)
		assert.Equal(t, "cairnfs", strings.TrimSpace(string(out)), d)
	}
	r1Disks, err := filepath.Glob(filepath.Join(base, "*", "var/lib/cairn/thin", "r1_00000.img"))
	require.NoError(t, err)
	require.NotEmpty(t, r1Disks)
	for _, d := range r1Disks {
		out, _ := exec.Command("blkid", "-p", "-o", "value", "-s", "TYPE", dataOf(d)).Output()
		assert.NotContains(t, string(out), "ext4", "%s: a type set on a definition with data made a filesystem", d)
	}
	ok("resource-definition", "set-property", "r1", "FileSystem/Type")
	ok("resource-definition", "delete", "fs1")
	ok("resource-group", "delete", "rgfs")

	// Errors: exit code 10 in a table, the ret_code with -m.
	assert.Contains(t, failed("node", "create", "n1", "10.0.0.1"), "already exists")
	var rcs []apiCallRc
	machine(&rcs, "node", "create", "n1", "10.0.0.1")
	assert.Equal(t, retCode(lsError, lsCreate, lsNode, 500), rcs[0].RetCode, "FAIL_EXISTS_NODE")
	assert.Contains(t, failed("resource-definition", "delete", "ghost"), "does not exist")
	machine(&rcs, "resource-definition", "delete", "ghost")
	assert.Equal(t, retCode(lsError, lsDelete, lsRscDfn, 301), rcs[0].RetCode, "FAIL_NOT_FOUND_RSC_DFN")
	assert.Contains(t, failed("backup", "list", "remote1"), "remote remote1 does not exist")
	machine(&rcs, "backup", "list", "remote1")
	assert.Equal(t, retCode(lsError, 0x040000, 321), rcs[0].RetCode, "FAIL_NOT_FOUND_REMOTE")
	remotes := ok("remote", "list") // no remotes: an empty table, no error
	assert.Contains(t, remotes, "Name")
	assert.NotContains(t, remotes, "Error")

	// Snapshots: every disk of r1 suspends, snapshots its file and resumes; the CLI's
	// create answers once it is taken.
	assert.Contains(t, ok("snapshot", "create", "r1", "s1"), "SUCCESS")
	snaps := ok("snapshot", "list")
	assert.Contains(t, snaps, "s1")
	assert.Contains(t, snaps, "Successful")
	for _, n := range []string{"n1", "n2", fqdn} {
		_, err := os.Stat(filepath.Join(base, n, "var/lib/cairn/thin", "r1_00000.s1.snap"))
		assert.NoError(t, err, "%s has no snapshot file", n)
	}
	// The native API shows the snapshot with each node's report of it.
	var snap struct {
		Phase    string `json:"phase"`
		Observed map[string]struct {
			Phase       string  `json:"phase"`
			SuspendedMs float64 `json:"suspended_ms"`
		} `json:"observed"`
	}
	code, body := httpJSON(t, "GET", s.url("/cairn/v1/resources/r1/snapshots/s1"), "")
	require.Equal(t, 200, code, body)
	require.NoError(t, json.Unmarshal([]byte(body), &snap))
	assert.Equal(t, "taken", snap.Phase)
	require.Len(t, snap.Observed, 3, body)
	for n, o := range snap.Observed {
		assert.True(t, o.Phase == "taken" && o.SuspendedMs > 0, "%s: %+v", n, o)
	}
	code, _ = httpJSON(t, "GET", s.url("/cairn/v1/resources/r1/snapshots/nope"), "")
	assert.Equal(t, 404, code)
	// linstor-csi's only way to take a snapshot, replayed as golinstor sends it
	// (client/resource.go ResourceService.CreateSnapshots): one definition is taken as
	// the CLI's create is; several at one moment as a group snapshot (rd.snapshot-multi),
	// all or none.
	code, body = httpJSON(t, "POST", s.url("/v1/actions/snapshot/multi"), `{"snapshots":[{"name":"m1","resource_name":"r1"}]}`)
	require.Equal(t, 201, code, body)
	assert.Contains(t, body, "successfully created")
	assert.Contains(t, ok("snapshot", "list"), "m1")
	ok("snapshot", "delete", "r1", "m1")
	code, body = httpJSON(t, "POST", s.url("/v1/actions/snapshot/multi"), `{"snapshots":[{"name":"m2","resource_name":"r1"},{"name":"m2","resource_name":"r9"}]}`)
	assert.Equal(t, 404, code, body)
	assert.NotContains(t, ok("snapshot", "list"), "m2", "a refused group snapshot started one of its members")
	ok("resource-group", "spawn", "rg2", "g2", "4M")
	upToDateOf("g2", 2)
	code, body = httpJSON(t, "POST", s.url("/v1/actions/snapshot/multi"), `{"snapshots":[{"name":"m2","resource_name":"r1"},{"name":"m2","resource_name":"g2"}]}`)
	require.Equal(t, 201, code, body)
	assert.Contains(t, body, "New snapshot 'm2' of resource 'r1' successfully created.")
	assert.Contains(t, body, "New snapshot 'm2' of resource 'g2' successfully created.")
	code, body = httpJSON(t, "GET", s.url("/cairn/v1/resources/g2/snapshots/m2"), "")
	require.Equal(t, 200, code, body)
	var member struct {
		Phase string              `json:"phase"`
		Group []map[string]string `json:"group"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &member))
	assert.Equal(t, "taken", member.Phase)
	assert.Equal(t, []map[string]string{{"resource": "r1", "name": "m2"}, {"resource": "g2", "name": "m2"}}, member.Group)
	ok("snapshot", "delete", "r1", "m2")
	ok("snapshot", "delete", "g2", "m2")
	ok("resource-definition", "delete", "g2")
	assert.Contains(t, failed("snapshot", "create", "r1", "s1"), "already has a snapshot s1")
	assert.Contains(t, failed("resource-definition", "delete", "r1"), "has snapshots (s1)")

	// Roll back (deactivated everywhere first) and clone (the CLI waits for COMPLETE).
	assert.Contains(t, failed("snapshot", "rollback", "r1", "s1"), "deactivate it everywhere first")
	for _, n := range []string{"n1", "n2", fqdn} {
		ok("resource", "deactivate", n, "r1")
	}
	assert.Contains(t, ok("snapshot", "rollback", "r1", "s1"), "SUCCESS")
	for _, n := range []string{"n1", "n2", fqdn} {
		ok("resource", "activate", n, "r1")
	}
	rs = upToDate(3)
	assert.Contains(t, ok("resource-definition", "clone", "r1", "r1c"), "r1c")
	upToDateOf("r1c", 3)
	ok("resource-definition", "delete", "r1c")
	require.Eventually(t, func() bool { return !strings.Contains(ok("snapshot", "list"), "clone-r1c") }, 30*time.Second, 250*time.Millisecond,
		"the clone's snapshot was left behind")
	// LINSTOR's three-step restore, as linstor-csi does it (pkg/client/linstor.go
	// VolFromSnap): the client creates the target, restores its volume definitions, then
	// the resource on one node, and autoplaces the rest (a full sync from that one).
	ok("resource-definition", "create", "r1r")
	assert.Contains(t, ok("snapshot", "volume-definition", "restore", "--from-resource", "r1", "--from-snapshot", "s1", "--to-resource", "r1r"), "SUCCESS")
	assert.Contains(t, ok("volume-definition", "list", "-r", "r1r"), "8 MiB")
	var again []apiCallRc
	machine(&again, "snapshot", "volume-definition", "restore", "--from-resource", "r1", "--from-snapshot", "s1", "--to-resource", "r1r")
	require.NotEmpty(t, again)
	assert.Equal(t, retCode(lsError, lsCreate, lsVlmDfn, 503), again[0].RetCode, "FAIL_EXISTS_VLM_DFN, which linstor-csi takes for done: %+v", again)
	assert.Contains(t, failed("snapshot", "resource", "restore", "n9", "--from-resource", "r1", "--from-snapshot", "s1", "--to-resource", "r1r"), "holds no copy")
	assert.Contains(t, ok("snapshot", "resource", "restore", "n1", "--from-resource", "r1", "--from-snapshot", "s1", "--to-resource", "r1r"), "SUCCESS")
	machine(&again, "snapshot", "resource", "restore", "n2", "--from-resource", "r1", "--from-snapshot", "s1", "--to-resource", "r1r")
	require.NotEmpty(t, again)
	assert.Equal(t, retCode(lsError, lsCreate, lsRsc, 502), again[0].RetCode, "FAIL_EXISTS_RSC, which linstor-csi takes for done: %+v", again)
	ok("resource", "create", "r1r", "--auto-place", "2")
	upToDateOf("r1r", 2) // the restored disk, and the autoplaced one synced in full from it
	ok("resource-definition", "delete", "r1r")
	// Deleting a snapshot that is not there warns, as LINSTOR does: no error.
	assert.Contains(t, ok("snapshot", "delete", "r1", "clone-r1c"), "not found")
	ok("snapshot", "delete", "r1", "s1")
	assert.NotContains(t, ok("snapshot", "list"), "s1")

	ok("resource", "delete", fqdn, "r1")
	ok("resource-definition", "delete", "r1")
	require.Eventually(t, func() bool {
		var out [][]resource
		machine(&out, "resource", "list")
		return len(out) == 1 && len(out[0]) == 0
	}, 10*time.Second, 100*time.Millisecond)
	ok("error-reports", "list")
}

// TestLinstorCLIOverHTTPSWithToken: the unmodified CLI reaches a `cairn serve
// --http-auth` over HTTPS (--cafile) with a token as its password (--user is the
// token's name); without credentials it gets LINSTOR's sign-in error, and its commands
// carry the token's name as their actor.
func TestLinstorCLIOverHTTPSWithToken(t *testing.T) {
	caPath, certPath, keyPath := testCA(t, t.TempDir())
	s := startServe(t, t.TempDir(), "--http-auth", "--tls-cert", certPath, "--tls-key", keyPath)
	out, errb, code := runAll(t, "auth", "token", "create", "csi", "--role", "operator", "--nats", s.natsURL())
	require.Equal(t, 0, code, errb)
	token := strings.TrimSpace(out)
	_, code = run(t, "cmd", "cluster.create", `{"name":"c1","failure_domains":false,"data_chunks":1,"parity_chunks":1}`, "--nats", s.natsURL())
	require.Equal(t, 0, code)

	anonymous := linstorCLI(t, "https://"+s.httpAddr, "--cafile", caPath)
	out, errb, code = anonymous("node", "list")
	assert.NotEqual(t, 0, code, "no credentials: %s%s", out, errb)
	assert.Contains(t, out+errb, "needs a token")

	csi := linstorCLI(t, "https://"+s.httpAddr, "--cafile", caPath, "--user", "csi", "--password", token)
	out, errb, code = csi("node", "create", "n1", "10.0.0.1")
	require.Equal(t, 0, code, out+errb)
	out, _, code = csi("node", "list")
	require.Equal(t, 0, code)
	assert.Contains(t, out, "n1")
	audit, code := run(t, "audit", "--nats", s.natsURL(), "--type", "node.added", "--json")
	require.Equal(t, 0, code)
	assert.Contains(t, audit, `"actor":"token:csi"`)
}

// `linstor error-reports list` shows ids that `linstor error-reports show` finds: the CLI
// takes the id from LINSTOR's file name (ErrorReport-<id>.log), so a report named
// otherwise listed an id nothing answered to.
func TestLinstorCLIErrorReportsShow(t *testing.T) {
	s := startServe(t, t.TempDir())
	out, code := run(t, "cmd", "node.add", `{"name":"n1","host":"h1","address":"10.0.0.1"}`, "--nats", s.natsURL())
	require.Equal(t, 1, code, out) // refused: no cluster yet
	linstor := linstorCLI(t, "http://"+s.httpAddr)
	list, errb, code := linstor("-m", "error-reports", "list")
	require.Equal(t, 0, code, list+errb)
	var reports []struct {
		Filename string `json:"filename"`
	}
	require.NoError(t, json.Unmarshal([]byte(list), &reports), list)
	require.NotEmpty(t, reports)
	id := strings.TrimSuffix(strings.TrimPrefix(reports[0].Filename, "ErrorReport-"), ".log")
	table, _, code := linstor("error-reports", "list")
	require.Equal(t, 0, code)
	assert.Contains(t, table, id, "the table shows the whole id")
	shown, errb, code := linstor("error-reports", "show", id)
	require.Equal(t, 0, code, shown+errb)
	assert.Contains(t, shown, "no cluster yet")
}
