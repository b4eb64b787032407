package drbdutils

import (
	"strings"
	"testing"

	"github.com/cairn-io/cairn/drbd"
)

func TestCommandBuilders(t *testing.T) {
	const disk = "/dev/zvol/tank/r1_00000"
	tests := []struct {
		got  []string
		want string
	}{
		{CreateMD(1000, disk, 7), "drbdmeta --force 1000 v09 /dev/zvol/tank/r1_00000 internal create-md 7"},
		{GetGI(1000, disk, 3), "drbdmeta --force --node-id 3 1000 v09 /dev/zvol/tank/r1_00000 internal get-gi"},
		{GetGIOfFile(disk, 3), "drbdmeta --force --node-id 3 - v09 /dev/zvol/tank/r1_00000 internal get-gi"},
		{SetGI(1000, disk, 0, "ABCDEF0123456780:1234567890ABCDE0:::1:1"),
			"drbdmeta --force --node-id 0 1000 v09 /dev/zvol/tank/r1_00000 internal set-gi ABCDEF0123456780:1234567890ABCDE0:::1:1"},
		{SeedArgv(1001, disk, drbd.Seed{Volume: 1, NodeID: 4, GI: ":1234567890ABCDE0::::"}),
			"drbdmeta --force --node-id 4 1001 v09 /dev/zvol/tank/r1_00000 internal set-gi :1234567890ABCDE0::::"},
		{WipeMD(1000, disk), "drbdmeta --force 1000 v09 /dev/zvol/tank/r1_00000 internal wipe-md"},
		{CheckResize(1000, disk), "drbdmeta --force 1000 v09 /dev/zvol/tank/r1_00000 internal check-resize"},
		{Adm{Config: "/etc/cairn/drbd.conf"}.Resize("r1", 2), "drbdadm -c /etc/cairn/drbd.conf resize r1/2"},
		{Dstate(1000, disk), "drbdmeta --force 1000 v09 /dev/zvol/tank/r1_00000 internal dstate"},
		{DumpMD(1000, disk), "drbdmeta --force 1000 v09 /dev/zvol/tank/r1_00000 internal dump-md"},
		{DrbdsetupGetGI("r1", 2, 0), "drbdsetup get-gi r1 2 0"},
		{DelPeer("r1", 2), "drbdsetup del-peer r1 2"},
		{SuspendIO(1000), "drbdsetup suspend-io 1000"},
		{ResumeIO(1000), "drbdsetup resume-io 1000"},
		{ForgetPeer("r1", 2), "drbdsetup forget-peer r1 2"},
		{Adm{}.Adjust("r1"), "drbdadm adjust r1"},
		{Adm{Config: "/etc/cairn/drbd.conf", DryRun: true}.Adjust("r1"), "drbdadm -c /etc/cairn/drbd.conf -d adjust r1"},
		{Adm{Config: "/etc/cairn/drbd.conf"}.Down("r1"), "drbdadm -c /etc/cairn/drbd.conf down r1"},
		{Adm{Config: "/etc/cairn/drbd.conf"}.ShNop(), "drbdadm -c /etc/cairn/drbd.conf sh-nop"},
		{Adm{Config: "/etc/drbd.conf"}.CheckNew("/run/cairn/r1.res", "/etc/drbd.d/r1.res"),
			"drbdadm -c /etc/drbd.conf -t /run/cairn/r1.res -E /etc/drbd.d/r1.res sh-nop"},
		{Adm{Config: "/etc/drbd.conf"}.CheckNew("/run/cairn/r2.res", ""), "drbdadm -c /etc/drbd.conf -t /run/cairn/r2.res sh-nop"},
	}
	for _, tt := range tests {
		if got := strings.Join(tt.got, " "); got != tt.want {
			t.Errorf("argv\n got %s\nwant %s", got, tt.want)
		}
	}
	// A path with a blank stays one argument.
	if argv := CreateMD(1, "/tmp/a b/disk.img", 7); argv[4] != "/tmp/a b/disk.img" || len(argv) != 8 {
		t.Errorf("CreateMD split the path: %q", argv)
	}
}

func TestParseDstate(t *testing.T) {
	for _, tt := range []struct{ out, want, err string }{
		{"Consistent\n", "Consistent", ""},
		{"ioctl(md_fd, BLKSSZGET) returned -1, assuming hard_sect_size is 512 Byte\nInconsistent\n", "Inconsistent", ""},
		{"", "", "printed nothing"},
		{"No valid meta data found\n", "", "no valid DRBD metadata"},
		{"something else entirely\n", "", "not a disk state"},
	} {
		got, err := ParseDstate([]byte(tt.out))
		if got != tt.want || (err == nil) != (tt.err == "") || (err != nil && !strings.Contains(err.Error(), tt.err)) {
			t.Errorf("ParseDstate(%q) = %q, %v; want %q, %q", tt.out, got, err, tt.want, tt.err)
		}
	}
}
