package drbdutils

// Tests against the real drbdadm (drbd-utils 9.22): no kernel module is needed for
// sh-nop and for adjust -d with FAKE_DRBDSETUP_SHOW. They skip when drbdadm is not on
// PATH.

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-io/cairn/drbd"

	"github.com/cairn-io/cairn/test/testtools"
)

// result is the outcome of one external command.
type result struct {
	stdout, stderr string
	rc             int
}

// run executes argv (argv[0] resolved with needTool) with env added to the
// environment drbdadm needs without a kernel module: DRBD_DRIVER_VERSION_OVERRIDE
// silences the modinfo probe, __DRBD_NODE__ makes drbdadm pretend to be host.
func run(t *testing.T, host string, env []string, argv []string) result {
	t.Helper()
	cmd := exec.Command(testtools.Path(t, argv[0]), argv[1:]...)
	cmd.Env = append(os.Environ(), "DRBD_DRIVER_VERSION_OVERRIDE=9.2.0", "__DRBD_NODE__="+host, "LC_ALL=C")
	cmd.Env = append(cmd.Env, env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	rc := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		rc = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%v: %v", argv, err)
	}
	return result{out.String(), errb.String(), rc}
}

func writeFile(t *testing.T, path string, data []byte) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func mustRender(t *testing.T, d drbd.Desired, disks map[int]string) []byte {
	t.Helper()
	b, err := Render(d, disks)
	if err != nil {
		t.Fatalf("Render: %v", err)
	}
	return b
}

// hostOf returns the host of d's local replica.
func hostOf(d drbd.Desired) string {
	for _, r := range d.Replicas {
		if r.Node == d.Node {
			return r.Host
		}
	}
	return ""
}

func withOptions(d drbd.Desired) drbd.Desired {
	d.Options = drbd.Resolve(
		drbd.QuorumPolicy(drbd.Voters(d.Replicas)),
		drbd.Options{Protocol: drbd.Ptr("C"), AutoPromote: drbd.Ptr(false), MaxBuffers: drbd.Ptr(8000), ALExtents: drbd.Ptr(6007), OnIOError: drbd.Ptr("detach"),
			AllowTwoPrimaries: drbd.Ptr(false),
			Extra: map[string]string{
				"DrbdOptions/Net/ping-timeout":                   "10",
				"DrbdOptions/Net/verify-alg":                     "crc32c",
				"DrbdOptions/Disk/disk-flushes":                  "no",
				"DrbdOptions/PeerDevice/c-max-rate":              "4096M",
				"DrbdOptions/PeerDevice/resync-rate":             "100M",
				"DrbdOptions/Resource/quorum-minimum-redundancy": "1",
				"DrbdOptions/Options/twopc-timeout":              "300",
			}},
	)
	return d
}

// Every layout Cairn renders, seen from every one of its nodes, with and without
// options, passes drbdadm's own checks.
func TestRenderedFilesPassDrbdadmShNop(t *testing.T) {
	testtools.Path(t, Drbdadm)
	layouts := []struct{ name, kinds string }{
		{"one diskful", "d"},
		{"two diskful", "dd"},
		{"three diskful", "ddd"},
		{"two diskful and a tiebreaker", "ddt"},
		{"four diskful", "dddd"},
		{"three diskful and a client", "dddc"},
	}
	for _, l := range layouts {
		for local := range len(l.kinds) {
			for _, opts := range []bool{false, true} {
				name := fmt.Sprintf("%s/from n%d/options=%v", l.name, local, opts)
				t.Run(name, func(t *testing.T) {
					d := layout("r1", local, l.kinds, 2)
					if opts {
						d = withOptions(d)
					}
					file := writeFile(t, filepath.Join(t.TempDir(), "r1.res"), mustRender(t, d, disksFor("r1", 2)))
					res := run(t, hostOf(d), nil, Adm{Config: file}.ShNop())
					if res.rc != 0 {
						b, _ := os.ReadFile(file)
						t.Fatalf("drbdadm sh-nop rc %d: %s\n%s", res.rc, res.stderr, b)
					}
				})
			}
		}
	}
}

func TestRenderedIPv6PassesDrbdadm(t *testing.T) {
	testtools.Path(t, Drbdadm)
	d := layout("r1", 0, "ddt", 1)
	for i := range d.Replicas {
		d.Replicas[i].Address = fmt.Sprintf("fd00::%d", i+1)
	}
	file := writeFile(t, filepath.Join(t.TempDir(), "r1.res"), mustRender(t, d, disksFor("r1", 1)))
	if res := run(t, "h0", nil, Adm{Config: file}.ShNop()); res.rc != 0 {
		t.Fatalf("drbdadm sh-nop rc %d: %s", res.rc, res.stderr)
	}
	empty := writeFile(t, filepath.Join(t.TempDir(), "empty.txt"), nil)
	res := run(t, "h0", []string{"FAKE_DRBDSETUP_SHOW=" + empty}, Adm{Config: file, DryRun: true}.Adjust("r1"))
	if want := `drbdsetup new-path r1 1 ipv6:\[fd00::1\]:7000 ipv6:\[fd00::2\]:7000`; !strings.Contains(strings.Join(planLines(res.stdout), "\n"), want) {
		t.Fatalf("adjust -d lacks %s:\n%s", want, res.stdout)
	}
}

// The options actually reach drbdsetup: adjust -d from nothing shows them as
// new-resource / new-peer / attach arguments.
func TestRenderedOptionsReachDrbdsetup(t *testing.T) {
	testtools.Path(t, Drbdadm)
	dir := t.TempDir()
	d := withOptions(layout("r1", 0, "ddt", 1))
	file := writeFile(t, filepath.Join(dir, "r1.res"), mustRender(t, d, disksFor("r1", 1)))
	empty := writeFile(t, filepath.Join(dir, "empty.txt"), nil)
	res := run(t, "h0", []string{"FAKE_DRBDSETUP_SHOW=" + empty}, Adm{Config: file, DryRun: true}.Adjust("r1"))
	if res.rc != 0 {
		t.Fatalf("adjust -d rc %d: %s", res.rc, res.stderr)
	}
	plan := strings.Join(planLines(res.stdout), "\n")
	for _, want := range []string{
		"drbdsetup new-resource r1 0 --auto-promote=no --quorum=majority --on-no-quorum=io-error",
		"--quorum-minimum-redundancy=1", "--twopc-timeout=300",
		"drbdsetup new-peer r1 1 --_name=h1", "--protocol=C", "--max-buffers=8000", "--ping-timeout=10", "--verify-alg=crc32c",
		"--allow-two-primaries=no",
		// the tiebreaker takes no bitmap slot; peer-device options go to every peer
		"drbdsetup peer-device-options r1 2 0 --set-defaults --c-max-rate=4096M --resync-rate=100M --bitmap=no",
		"drbdsetup peer-device-options r1 1 0 --set-defaults --c-max-rate=4096M --resync-rate=100M\n",
		"drbdsetup attach 1000 /dev/zvol/tank/r1_00000 /dev/zvol/tank/r1_00000 internal",
		"--on-io-error=detach", "--al-extents=6007", "--disk-flushes=no",
	} {
		if !strings.Contains(plan, want) {
			t.Errorf("adjust -d output lacks %q:\n%s", want, plan)
		}
	}
}

// node is one host's /etc/drbd.d: main.conf includes every installed *.res; new files
// are staged elsewhere and checked with drbdadm -t/-E before they are installed.
type node struct {
	t              *testing.T
	host           string
	main, dir, stg string
}

func newNode(t *testing.T, host string) *node {
	root := t.TempDir()
	n := &node{t: t, host: host, dir: filepath.Join(root, "drbd.d"), stg: filepath.Join(root, "staging")}
	n.main = writeFile(t, filepath.Join(root, "drbd.conf"), fmt.Appendf(nil, "include %q;\n", filepath.Join(n.dir, "*.res")))
	if err := os.MkdirAll(n.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return n
}

func (n *node) install(name string, b []byte) string {
	return writeFile(n.t, filepath.Join(n.dir, name+".res"), b)
}

// check stages b as the new version of resource name and runs drbdadm -t/-E against
// the installed files (excluding the installed version of name, if any).
func (n *node) check(name string, b []byte) result {
	staged := writeFile(n.t, filepath.Join(n.stg, name+".res"), b)
	exclude := filepath.Join(n.dir, name+".res")
	if _, err := os.Stat(exclude); err != nil {
		exclude = ""
	}
	return run(n.t, n.host, nil, Adm{Config: n.main}.CheckNew(staged, exclude))
}

// otherResource is a second resource on the same hosts with its own port and minors.
func otherResource() drbd.Desired {
	d := layout("r2", 0, "dd", 1)
	d.Port = 7001
	for i := range d.Replicas {
		d.Replicas[i].Minors = map[int]int{0: 1010}
	}
	return d
}

func TestNewFileCheckedAgainstInstalledOnes(t *testing.T) {
	testtools.Path(t, Drbdadm)
	n := newNode(t, "h0")
	r1 := layout("r1", 0, "dd", 2)
	n.install("r1", mustRender(t, r1, disksFor("r1", 2)))
	n.install("r2", mustRender(t, otherResource(), disksFor("r2", 1)))
	if res := run(t, "h0", nil, Adm{Config: n.main}.ShNop()); res.rc != 0 {
		t.Fatalf("installed configuration refused: rc %d %s", res.rc, res.stderr)
	}

	t.Run("third replica added to r1", func(t *testing.T) {
		r1 := layout("r1", 0, "ddd", 2)
		if res := n.check("r1", mustRender(t, r1, disksFor("r1", 2))); res.rc != 0 {
			t.Fatalf("new r1 refused: rc %d %s", res.rc, res.stderr)
		}
	})
	t.Run("a new resource with its own port and minors", func(t *testing.T) {
		r3 := layout("r3", 0, "ddt", 1)
		r3.Port = 7002
		for i := range r3.Replicas {
			r3.Replicas[i].Minors = map[int]int{0: 1020}
		}
		if res := n.check("r3", mustRender(t, r3, disksFor("r3", 1))); res.rc != 0 {
			t.Fatalf("new r3 refused: rc %d %s", res.rc, res.stderr)
		}
	})
	t.Run("without -E the new version of r1 collides with the installed one", func(t *testing.T) {
		staged := writeFile(t, filepath.Join(n.stg, "r1.res"), mustRender(t, layout("r1", 0, "ddd", 2), disksFor("r1", 2)))
		res := run(t, "h0", nil, Adm{Config: n.main}.CheckNew(staged, ""))
		if res.rc == 0 {
			t.Fatal("drbdadm accepted a second definition of r1")
		}
	})

	refusals := []struct {
		name   string
		render func(t *testing.T) []byte
		msg    []string
	}{
		{
			name: "minor already used by r2 on this node",
			render: func(t *testing.T) []byte {
				r3 := layout("r3", 0, "dd", 1)
				r3.Port = 7002
				for i := range r3.Replicas {
					r3.Replicas[i].Minors = map[int]int{0: 1010}
				}
				return mustRender(t, r3, disksFor("r3", 1))
			},
			msg: []string{"conflicting use of device-minor 'device-minor:h0:1010'", "first used here"},
		},
		{
			name: "port already used by r2",
			render: func(t *testing.T) []byte {
				r3 := layout("r3", 0, "dd", 1)
				r3.Port = 7001
				for i := range r3.Replicas {
					r3.Replicas[i].Minors = map[int]int{0: 1020}
				}
				return mustRender(t, r3, disksFor("r3", 1))
			},
			msg: []string{"in resource r3", "ipv4:10.0.0.1:7001 is also used", "(resource r2)"},
		},
		{
			// Render itself refuses a duplicate node id (see TestRenderRefusesImpossibleInput);
			// a file broken after rendering is refused by drbdadm too.
			name: "duplicate node id",
			render: func(t *testing.T) []byte {
				b := mustRender(t, layout("r1", 0, "ddd", 2), disksFor("r1", 2))
				return bytes.Replace(b, []byte("node-id 2;"), []byte("node-id 1;"), 1)
			},
			msg: []string{"conflicting use of node-id 'r1:1'", "node-id 'r1:1' first used here"},
		},
	}
	for _, tt := range refusals {
		t.Run(tt.name, func(t *testing.T) {
			name := "r3"
			if strings.Contains(tt.name, "node id") {
				name = "r1"
			}
			res := n.check(name, tt.render(t))
			if res.rc != 10 {
				t.Fatalf("drbdadm rc %d, want 10 (refused); stderr %s", res.rc, res.stderr)
			}
			for _, m := range tt.msg {
				if !strings.Contains(res.stderr, m) {
					t.Errorf("drbdadm said %q; want it to say %q", res.stderr, m)
				}
			}
		})
	}
}

// adjustPlan runs drbdadm -d adjust r1 for d against the running state in show and
// returns the drbdsetup/drbdmeta lines it would run.
func adjustPlan(t *testing.T, d drbd.Desired, show string) []string {
	t.Helper()
	dir := t.TempDir()
	file := writeFile(t, filepath.Join(dir, d.Resource+".res"), mustRender(t, d, disksFor(d.Resource, len(d.Volumes))))
	show, err := filepath.Abs(show)
	if err != nil {
		t.Fatal(err)
	}
	res := run(t, hostOf(d), []string{"FAKE_DRBDSETUP_SHOW=" + show}, Adm{Config: file, DryRun: true}.Adjust(d.Resource))
	if res.rc != 0 {
		t.Fatalf("adjust -d rc %d: %s", res.rc, res.stderr)
	}
	return planLines(res.stdout)
}

// planLines splits adjust -d output into lines, with the program of each line reduced
// to its base name (drbdadm prints /usr/sbin/drbdsetup when it finds it there).
func planLines(out string) []string {
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if l == "" {
			continue
		}
		prog, rest, _ := strings.Cut(l, " ")
		lines = append(lines, filepath.Base(prog)+" "+rest)
	}
	return lines
}

// With the two-replica resource running (testdata/show_r1_two_replicas.txt is what
// drbdsetup show prints for it, in the format of drbd-utils'
// tests/v9/drbdsetup_show_*.txt), adding a third replica makes adjust add exactly that
// peer and change nothing else.
func TestAdjustAddsOnlyTheNewPeer(t *testing.T) {
	testtools.Path(t, Drbdadm)
	show := filepath.Join("testdata", "show_r1_two_replicas.txt")
	opts := drbd.Options{Quorum: drbd.Ptr("majority"), OnNoQuorum: drbd.Ptr("io-error")}

	two := layout("r1", 0, "dd", 2)
	two.Options = opts
	if plan := adjustPlan(t, two, show); len(plan) != 0 {
		t.Fatalf("the running state does not match the two-replica render; adjust would run:\n%s", strings.Join(plan, "\n"))
	}

	tests := []struct {
		name  string
		kinds string
		want  []string
	}{
		{"third diskful replica", "ddd", []string{
			"drbdsetup new-peer r1 2 --_name=h2",
			"drbdsetup new-path r1 2 ipv4:10.0.0.1:7000 ipv4:10.0.0.3:7000",
			"drbdsetup connect r1 2",
		}},
		{"tiebreaker", "ddt", []string{
			"drbdsetup new-peer r1 2 --_name=h2",
			"drbdsetup new-path r1 2 ipv4:10.0.0.1:7000 ipv4:10.0.0.3:7000",
			"drbdsetup peer-device-options r1 2 0 --set-defaults --bitmap=no",
			"drbdsetup peer-device-options r1 2 1 --set-defaults --bitmap=no",
			"drbdsetup connect r1 2",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := layout("r1", 0, tt.kinds, 2)
			d.Options = opts
			got := adjustPlan(t, d, show)
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Fatalf("adjust -d plan:\n%s\nwant exactly:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}

	t.Run("an option change is seen too", func(t *testing.T) {
		d := layout("r1", 0, "dd", 2)
		d.Options = drbd.Options{Quorum: drbd.Ptr("off"), OnNoQuorum: drbd.Ptr("io-error")}
		got := adjustPlan(t, d, show)
		if len(got) != 1 || got[0] != "drbdsetup resource-options r1 --set-defaults --quorum=off --on-no-quorum=io-error" {
			t.Fatalf("adjust -d plan %q, want one resource-options call setting quorum off", got)
		}
	})
}
